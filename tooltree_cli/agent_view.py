"""What `tooltree agent` prints: the live view, the summary lines, the comparison and dry-run tables.

Everything in them that the model, a server or the API wrote is cleaned of escape sequences and control
characters and cut (`tooltree_cli.output.terminal_label`, `terminal_text`) before it reaches the terminal;
``--json`` output is escaped where a terminal would act on it (`tooltree_cli.output.print_json`).

``--json`` prints one JSON object, of one of four shapes:

- one run (``--mode``, or the config's mode): the run's summary (`agent.summary.RunSummary.to_json`: ``mode``,
  ``stop_reason``, ``answer``, ``turns``, ``usage``, ``spent``, ``tool_calls``, ``tool_errors``, ``batches``, ...)
  and ``transcript`` (its file, or null);
- one run that failed: the same summary, its ``stop_reason`` ``api_error``, ``unreadable_reply`` or
  ``sandbox_error`` (a sandbox that could not start: its tokens so far, or none when it was found before the first
  request), and four keys more (`Failure`): ``error`` (what failed, one line), ``status_code`` (the API's HTTP
  status; null when there was none, or when the failure came inside an answer of 200: an ``error`` event in its
  stream, a stream cut short), ``error_type`` (the API's, such as ``overloaded_error``, or null) and ``advice``
  (what to do, or "");
- ``--compare``: ``{"runs": [...]}``, one entry per mode in the order given, each of the two shapes above;
- ``--dry-run`` (with ``--compare`` or not): ``{"token_count": how tokens were counted, "modes": [{"mode", "tools",
  "deferred", "system_tokens", "tools_tokens", "first_request_tokens"}, ...]}``.

A summary's ``cost_units`` (the run's, the pre-filter's included), ``usage.cost_units`` and
``prefilter.usage.cost_units`` are tokens weighed by price (`agent.summary.TokenUsage.cost_units`), as the ``--compare``
table gives them; ``prefilter.usage`` has ``sent`` and ``total`` too, as ``usage`` has.

Ctrl-C prints the shape of what ran (the interrupted run's ``stop_reason`` ``interrupted``) before the interrupt
goes on, also when it came before the run's first request (its agent being made, its sandbox checked): that run with
no turns and no tokens (before: nothing, so a caller of ``--json`` had nothing to read). Before, a mode whose
sandbox failed was a fifth shape, ``{"mode", "error"}``, without its tokens.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tool_tree.text import size
from tooltree_cli.output import print_json, table, terminal_label, terminal_text

if TYPE_CHECKING:
    from agent import Agent, ModelAPIError, RunResult
    from agent.events import Event, ToolFinished

LABEL_CHARS = 80
"""The most characters of a tool name or a stop reason the live view prints."""
NOTE_CHARS = 120
"""The most characters of a tool call's note the live view prints."""
REASON_CHARS = 500
"""The most characters of a reason the summary quotes (why the pre-filter failed open, or did not save)."""
PRICE_LABELS = {
    "input_tokens": "uncached input",
    "cache_creation_input_tokens": "cache write",
    "cache_read_input_tokens": "cache read",
    "output_tokens": "output",
}
"""How the ``--compare`` table's note names each count `agent.summary.PRICE_RATIOS` weighs."""
LIVE_LINES = threading.Lock()
"""Held while a line of the live view is printed, and while `tooltree_cli.agent_live` looks at a running script and
says what it does: a script's line can never come after its call's finished line (before, the notes' thread could
find the script running, then print after the call's line)."""


@dataclass(frozen=True)
class Failure:
    """Why a run ended before the model finished it: the Messages API failed (``kind`` ``api``), or the run's
    sandbox or servers could not start (``sandbox``).

    Attributes:
        kind: ``api`` or ``sandbox``: the exit status is `tooltree_cli.agent_cmd.EXIT_API` or ``EXIT_SANDBOX``.
        message: what failed, on one line.
        status_code: the API's HTTP status; None when there was none, or when the API answered 200 and the failure
            came inside its answer (before: ``--json`` said ``status_code: 200`` for an error).
        error_type: the API's error type (``overloaded_error``, ...), or "".
        advice: what to do, or "".
    """

    kind: str
    message: str
    status_code: int | None = None
    error_type: str = ""
    advice: str = ""

    @classmethod
    def of_api(cls, e: ModelAPIError) -> Failure:
        status = None if e.in_stream else e.status_code
        return cls("api", str(e), status, e.error_type, e.advice)

    def to_json(self) -> dict[str, Any]:
        return {"error": self.message, "status_code": self.status_code, "error_type": self.error_type or None,
                "advice": self.advice}  # fmt: skip


def run_json(result: RunResult | None) -> dict[str, object]:
    """A run's summary as ``--json`` prints it (empty when the run never started)."""
    if result is None:
        return {}
    return {**result.summary.to_json(), "transcript": str(result.transcript) if result.transcript else None}


def live_view(event: Event) -> None:
    """One line per model reply and per tool call, on stderr; what the model, a server or the API wrote
    in it is cleaned and cut (`terminal_label`). A call's status is ``[ok]`` or ``[error]``; a ``batch_tool`` call
    some of whose invocations failed says how many (`tool_status`)."""
    from agent.events import ModelReplied, ToolFinished

    if isinstance(event, ModelReplied):
        u = event.usage
        stop = terminal_label(event.stop_reason, LABEL_CHARS)
        _live_line(
            f"[turn {event.turn}] {stop} · in {u.sent:,} (cache read {u.cache_read_input_tokens:,}, "
            f"write {u.cache_creation_input_tokens:,}) · out {u.output_tokens:,} · total {event.total.total:,} "
            f"· {event.seconds:.1f} s"
        )
    elif isinstance(event, ToolFinished):
        status = tool_status(event)
        name, note = terminal_label(event.name, LABEL_CHARS), terminal_label(event.note, NOTE_CHARS)
        note = f" {note}" if note else ""
        _live_line(f"  {name}{note} [{status}] · {size(event.model_bytes)} to the model · {event.seconds:.1f} s")


def _live_line(line: str) -> None:
    """Print a line of the live view on stderr. A stderr that can no longer be written (a terminal that closed: EIO,
    in the moment before its SIGHUP arrives; a pipe whose reader left: EPIPE) ends the view, not the run: before, the
    failed write ended it as an unexpected error (exit 70)."""
    with LIVE_LINES, contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


def tool_status(event: ToolFinished) -> str:
    """The live view's status of one tool call: ``2 of 5 failed`` for a ``batch_tool`` call two of whose five
    invocations failed (as the summary counts them: each invocation a tool call, each failed one an error), else
    ``error`` or ``ok``. Before: ``ok`` for such a batch, the batch itself being no error."""
    if event.invocations is not None and event.failed:
        return f"{event.failed:,} of {event.invocations:,} failed"
    return "error" if event.is_error else "ok"


def print_first_requests(agents: list[Agent], task: str, *, as_json: bool) -> None:
    """What each mode sends before any tool runs: system prompt, tools and the task, in tokens."""
    from agent.tokens import APPROXIMATION, request_tokens, system_tokens, tools_tokens

    keys = ("tools", "deferred", "system_tokens", "tools_tokens", "first_request_tokens")
    counts: dict[str, dict[str, int]] = {}
    notes: dict[str, str] = {}  # a mode's pre-filter not asked in a dry run (`Agent.first_request_note`)
    for agent in agents:
        request = agent.first_request(task)
        if agent.first_request_note:
            notes[agent.mode] = agent.first_request_note
        tools = request.get("tools", [])  # none offered: no tools key
        values = (len(tools), sum(1 for t in tools if t.get("defer_loading")), system_tokens(request["system"]),
                  tools_tokens(tools), request_tokens(request))  # fmt: skip
        counts[agent.mode] = dict(zip(keys, values, strict=True))
    if as_json:
        modes = [{"mode": m, **c, **({"note": notes[m]} if m in notes else {})} for m, c in counts.items()]
        print_json({"token_count": APPROXIMATION, "modes": modes})
        return
    direct = counts.get("direct", {}).get("first_request_tokens")
    rows = [
        [mode, *(f"{c[k]:,}" for k in keys), f"{100 * c['first_request_tokens'] / direct:.1f} %" if direct else "-"]
        for mode, c in counts.items()
    ]
    print(table(rows, ["mode", "tools", "deferred", "system", "tools tokens", "first request", "of direct"]))
    for mode, note in notes.items():
        print(f"{mode}: {note}")
    print(f"\ntokens: {APPROXIMATION}")


def summary_line(result: RunResult, *, max_tokens: int | None = None, token_budget: int | None = None) -> str:
    """The run in a few lines for stderr: each reason it quotes on one line, cleaned and cut (`terminal_label`).

    The tool calls count each invocation of a ``batch_tool`` (before: a batch was one call, its failures none); the
    bytes of tool results the scripts received are said to be received in the sandbox, not to have stayed there
    (before: "stayed in the sandbox", though what a script printed of them reached the model too). A run a reply's
    ``max_tokens`` ended, or any other that did not finish, says why and what to do (`stop_why`).
    """
    s = result.summary
    notes = [f"{s.tool_errors} failed"] if s.tool_errors else []
    notes += [f"{s.batches} batch_tool call(s)"] if s.batches else []
    notes += [f"{s.refused_tool_calls} more not run: too many in one reply"] if s.refused_tool_calls else []
    said = f" ({'; '.join(notes)})" if notes else ""
    stop = terminal_label(result.stop_reason, LABEL_CHARS)
    line = (
        f"tooltree: {stop} after {s.turns} turn(s) · {s.usage.sent:,} tokens sent, "
        f"{s.usage.output_tokens:,} received · {s.tool_calls} tool call(s){said}, {s.script_tool_calls} from "
        f"scripts · {size(s.sandbox_bytes)} of tool results received in the sandbox, {size(s.model_bytes)} "
        "reached the model"
    )
    if why := stop_why(result, max_tokens=max_tokens, token_budget=token_budget):
        line += f"\ntooltree: {why}"
    p = s.prefilter
    if p is not None:
        line += (
            f"\ntooltree: pre-filter {p.classifier}: {p.admitted} of {p.catalog} tools offered, grew {p.growths} "
            f"time(s), {s.cache_invalidations} cache invalidation(s) · asked {p.asked} time(s), "
            f"{p.seconds * 1000:.0f} ms, {p.usage.total:,} tokens"
            + (f" · the state file holds {p.saved} tool(s)" if p.saved is not None else "")
        )
        for reason in p.fail_open:
            line += f"\ntooltree: pre-filter failed open ({_opened(s.mode)}): {terminal_label(reason, REASON_CHARS)}"
        for reason in p.state_errors:
            line += f"\ntooltree: pre-filter state not saved: {terminal_label(reason, REASON_CHARS)}"
    return terminal_text(line)


SAID_ELSEWHERE = ("interrupted", "api_error", "unreadable_reply", "sandbox_error", "on_event_error")
"""Stop reasons whose run has its own line on stderr (``tooltree: interrupted``, the error and what to do)."""


def stop_why(result: RunResult, *, max_tokens: int | None = None, token_budget: int | None = None) -> str:
    """Why a run that did not finish stopped, and what to do, in one line (after ``tooltree: ``), or "" for one that
    finished or one said elsewhere (`SAID_ELSEWHERE`). A reply's ``max_tokens`` says to raise it (``max_tokens``: the
    run's, to name it); the token budget says what it counted: the model's tokens and the pre-filter's (before: only the
    model's were said, below the budget when the ``claude`` pre-filter's made up the rest)."""
    s, stop = result.summary, result.stop_reason
    if result.completed or stop in SAID_ELSEWHERE:
        return ""
    if stop == "max_tokens":
        limit = f" ({max_tokens:,} tokens)" if max_tokens is not None else ""
        return (
            f"the model's last reply reached max_tokens{limit} and was cut there: raise --max-tokens (or "
            "agent.max_tokens in tooltree.yaml) and run the task again"
        )
    if stop == "token_budget":
        limit = f" ({token_budget:,} tokens)" if token_budget is not None else ""
        paid = s.prefilter.usage.total if s.prefilter is not None else 0
        parts = f" ({s.usage.total:,} by the model's requests, {paid:,} by the pre-filter's)" if paid else ""
        return (
            f"the run's token budget{limit} was reached: {s.spent:,} tokens spent{parts}; raise --token-budget (or "
            "agent.token_budget in tooltree.yaml) to let a run go further"
        )
    if stop == "max_turns":
        return (
            f"the run reached its turn limit ({s.turns:,} turn(s)) before the model finished: raise --max-turns (or "
            "agent.max_turns in tooltree.yaml) to let a run go further"
        )
    if stop == "refusal":
        return "the model refused to go on (stop reason refusal) and the run stopped there: rephrase the task"
    if stop == "model_context_window_exceeded":
        return (
            "the conversation filled the model's context window and the last reply was cut there: start a new "
            "conversation, or ask for less per call (a filter, a page)"
        )
    return f"the model's last reply stopped on {terminal_label(stop, LABEL_CHARS)!r} before the model finished"


def print_run_end(
    result: RunResult, *, quiet: bool, max_tokens: int | None, token_budget: int | None = None, several: bool = False
) -> None:
    """A run is over: its summary line on stderr, or with ``quiet`` only why a run that did not finish stopped
    (`stop_why`; under ``--compare``, naming its mode), as an API error or a sandbox that failed says what failed
    (before: exit 1 with nothing on stderr); and whether its transcript is whole and its pre-filter state saved (with
    ``quiet`` too: a file the user asked for)."""
    if not quiet:
        print(summary_line(result, max_tokens=max_tokens, token_budget=token_budget), file=sys.stderr)
    elif why := stop_why(result, max_tokens=max_tokens, token_budget=token_budget):
        mode = f"{result.summary.mode}: " if several else ""
        print(terminal_text(f"tooltree: {mode}{why}"), file=sys.stderr)
    if result.summary.transcript_error:  # even with --quiet: a file the user asked for is incomplete
        transcript_warning(result)
    if quiet and result.summary.prefilter is not None:  # so is one not saved (the summary says it without --quiet)
        for reason in result.summary.prefilter.state_errors:
            label = terminal_label(reason, REASON_CHARS)
            print(terminal_text(f"tooltree: warning: pre-filter state not saved: {label}"), file=sys.stderr)


def _opened(mode: str) -> str:
    """What a pre-filter that failed open in ``mode`` left the model. In code mode it inlines no signature: every
    tool stays one stub read away, none is "sent"."""
    return "no signatures inlined, every tool in the tree" if mode == "code" else "every tool sent"


def transcript_warning(result: RunResult) -> None:
    """Say on stderr that the run's transcript stopped before the run did, and why."""
    reason = terminal_label(result.summary.transcript_error, REASON_CHARS)
    print(f"tooltree: warning: transcript incomplete: {reason}", file=sys.stderr, flush=True)


def print_comparison(results: list[RunResult], *, as_json: bool) -> None:
    """The runs of one task side by side: tokens (what was sent, of it read from and written to the prompt cache),
    cost units, and each run's cost units as a share of ``direct``'s when it ran (the pre-filter's tokens counted: a
    filtered run's ``claude`` classifier is paid for too). Before, the share was of tokens, a cache read counting as
    much as an uncached input token and an output token as much as an input token: a share of 32.5 % by tokens was
    38 % by price.

    A share is shown only when both the direct run and the row's run completed (the model ended it): a run that
    failed or hit a limit spent what it spent until then, not what the task costs in its mode. A line under the
    table says which were left out and why. Before, a direct run the API failed on its second request was the
    baseline (``100.0 %``), and the modes that finished were shown as 34 % and 139 % of it.
    """
    if as_json:
        runs = [run_json(r) for r in results]
        print_json({"runs": runs})
        return
    shares, why = _shares(results)
    header = ["mode", "stop", "turns", "sent", "cache read", "cache write", "received", "pre-filter", "total",
              "cost units", "of direct", "tool calls", "errors", "in sandbox", "to model"]  # fmt: skip
    rows = []
    for r, share in zip(results, shares, strict=True):
        s, u = r.summary, r.summary.usage
        prefilter = f"{s.prefilter.usage.total:,}" if s.prefilter is not None else "-"
        rows.append([
            s.mode, r.stop_reason, str(s.turns), f"{u.sent:,}", f"{u.cache_read_input_tokens:,}",
            f"{u.cache_creation_input_tokens:,}", f"{u.output_tokens:,}", prefilter, f"{s.spent:,}",
            f"{s.cost_units:,.0f}", share, f"{s.tool_calls} ({s.script_tool_calls} from scripts)", str(s.tool_errors),
            size(s.sandbox_bytes), size(s.model_bytes),
        ])  # fmt: skip
    print(terminal_text(table(rows, header)))
    print(f"\n{cost_note()}")
    if why:
        print(terminal_text(f"of direct: {why}"))
    if any(r.summary.sandbox_bytes for r in results):
        print("\nin sandbox: tool results the scripts received there; what they printed of them is in 'to model' too")
    for r in results:  # as ``prefilter.fail_open`` in --json (before: only the summary on stderr, not with --quiet)
        for reason in r.summary.prefilter.fail_open if r.summary.prefilter is not None else []:
            print(terminal_text(f"\npre-filter failed open in {r.summary.mode} ({_opened(r.summary.mode)}): "
                                f"{terminal_label(reason, REASON_CHARS)}"))  # fmt: skip
    for r in results:
        print(f"\n[{r.summary.mode}] {terminal_text(r.answer)}")


def cost_note() -> str:
    """The lines under the ``--compare`` table that say what ``sent`` and ``cost units`` count."""
    from agent.summary import PRICE_RATIOS

    ratios = ", ".join(f"{PRICE_LABELS[count]} {ratio:g}" for count, ratio in PRICE_RATIOS.items())
    return (
        "sent: every input token, those read from and written to the prompt cache (cache read, cache write) included\n"
        "cost units: the tokens weighed by price, the pre-filter's included, at Anthropic's published ratios for "
        f"Claude models ({ratios}): input-token equivalents, not money"
    )


def _shares(results: list[RunResult]) -> tuple[list[str], str]:
    """Each run's cost units as a share of the direct run's ("-" where there is no share to give), and what the
    shares are and why some are "-" (or "" when there is no direct run)."""
    direct = next((r for r in results if r.summary.mode == "direct"), None)
    if direct is None:
        return ["-"] * len(results), ""
    if not direct.completed or not direct.summary.cost_units:
        why = (
            f"none given: the direct run did not complete ({direct.stop_reason}), so its tokens are not what the "
            "task costs in direct mode"
        )
        return ["-"] * len(results), why
    paid = direct.summary.cost_units
    shares = [f"{100 * r.summary.cost_units / paid:.1f} %" if r.completed else "-" for r in results]
    unfinished = [f"{r.summary.mode} ({r.stop_reason})" for r in results if not r.completed]
    why = "each run's cost units as a share of the direct run's, not its tokens"
    why += f"; none for {', '.join(unfinished)}: a run that did not complete is not compared" if unfinished else ""
    return shares, why


def print_runs(runs: list[tuple[RunResult, Failure | None]], *, as_json: bool, several: bool) -> None:
    """What stdout gets: the comparison (a failed run a row of it, its error in its answer's place), or the one
    run's answer; under ``--json`` the summaries, a failed run's with why (`Failure.to_json`: the shapes are in this
    module's docstring)."""
    from dataclasses import replace

    if as_json:
        entries = [{**run_json(r), **(f.to_json() if f is not None else {})} for r, f in runs]
        if several:
            print_json({"runs": entries})
        elif entries:
            print_json(entries[0])
    elif several and runs:
        print_comparison([r if f is None else replace(r, answer=f"failed: {terminal_label(f.message, REASON_CHARS)}")
                          for r, f in runs], as_json=False)  # fmt: skip
    elif runs:
        (result, failure) = runs[0]
        if failure is None and result.stop_reason != "interrupted" and result.answer:
            print(terminal_text(result.answer))
