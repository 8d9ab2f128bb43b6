"""What `tooltree agent` prints: the live view, the summary lines, the comparison and dry-run tables.

Everything in them that the model, a server or the API wrote is cleaned of escape sequences and control
characters and cut (`tooltree_cli.output.terminal_label`, `terminal_text`) before it reaches the terminal;
``--json`` output is escaped where a terminal would act on it (`tooltree_cli.output.print_json`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tool_tree.text import size
from tooltree_cli.output import print_json, table, terminal_label, terminal_text

if TYPE_CHECKING:
    from agent import Agent, ModelAPIError, RunResult
    from agent.events import Event

LABEL_CHARS = 80
"""The most characters of a tool name or a stop reason the live view prints."""
NOTE_CHARS = 120
"""The most characters of a tool call's note the live view prints."""
REASON_CHARS = 500
"""The most characters of a reason the summary quotes (why the pre-filter failed open, or did not save)."""


def run_json(result: RunResult | None) -> dict[str, object]:
    """A run's summary as ``--json`` prints it (empty when the run never started)."""
    if result is None:
        return {}
    return {**result.summary.to_json(), "transcript": str(result.transcript) if result.transcript else None}


def live_view(event: Event) -> None:
    """One line per model reply and per tool call, on stderr; what the model, a server or the API wrote
    in it is cleaned and cut (`terminal_label`)."""
    from agent.events import ModelReplied, ToolFinished

    if isinstance(event, ModelReplied):
        u = event.usage
        stop = terminal_label(event.stop_reason, LABEL_CHARS)
        print(
            f"[turn {event.turn}] {stop} · in {u.sent:,} (cache read {u.cache_read_input_tokens:,}, "
            f"write {u.cache_creation_input_tokens:,}) · out {u.output_tokens:,} · total {event.total.total:,} "
            f"· {event.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    elif isinstance(event, ToolFinished):
        status = "error" if event.is_error else "ok"
        name, note = terminal_label(event.name, LABEL_CHARS), terminal_label(event.note, NOTE_CHARS)
        note = f" {note}" if note else ""
        print(
            f"  {name}{note} [{status}] · {size(event.model_bytes)} to the model · {event.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )


def print_first_requests(agents: list[Agent], task: str, *, as_json: bool) -> None:
    """What each mode sends before any tool runs: system prompt, tools and the task, in tokens."""
    from agent.tokens import APPROXIMATION, request_tokens, system_tokens, tools_tokens

    keys = ("tools", "deferred", "system_tokens", "tools_tokens", "first_request_tokens")
    counts: dict[str, dict[str, int]] = {}
    for agent in agents:
        request = agent.first_request(task)
        tools = request["tools"]
        values = (len(tools), sum(1 for t in tools if t.get("defer_loading")), system_tokens(request["system"]),
                  tools_tokens(tools), request_tokens(request))  # fmt: skip
        counts[agent.mode] = dict(zip(keys, values, strict=True))
    if as_json:
        print_json({"token_count": APPROXIMATION, "modes": [{"mode": m, **c} for m, c in counts.items()]})
        return
    direct = counts.get("direct", {}).get("first_request_tokens")
    rows = [
        [mode, *(f"{c[k]:,}" for k in keys), f"{100 * c['first_request_tokens'] / direct:.1f} %" if direct else "-"]
        for mode, c in counts.items()
    ]
    print(table(rows, ["mode", "tools", "deferred", "system", "tools tokens", "first request", "of direct"]))
    print(f"\ntokens: {APPROXIMATION}")


def summary_line(result: RunResult) -> str:
    """The run in a few lines for stderr: each reason it quotes on one line, cleaned and cut (`terminal_label`)."""
    s = result.summary
    refused = f" ({s.refused_tool_calls} more not run: too many in one reply)" if s.refused_tool_calls else ""
    stop = terminal_label(result.stop_reason, LABEL_CHARS)
    line = (
        f"tooltree: {stop} after {s.turns} turn(s) · {s.usage.sent:,} tokens sent, "
        f"{s.usage.output_tokens:,} received · {s.tool_calls} tool call(s){refused}, {s.script_tool_calls} from "
        f"scripts · {size(s.sandbox_bytes)} stayed in the sandbox, {size(s.model_bytes)} reached the model"
    )
    p = s.prefilter
    if p is not None:
        line += (
            f"\ntooltree: pre-filter {p.classifier}: {p.admitted} of {p.catalog} tools offered, grew {p.growths} "
            f"time(s), {s.cache_invalidations} cache invalidation(s) · asked {p.asked} time(s), "
            f"{p.seconds * 1000:.0f} ms, {p.usage.total:,} tokens"
            + (f" · the state file holds {p.saved} tool(s)" if p.saved is not None else "")
        )
        for reason in p.fail_open:
            line += f"\ntooltree: pre-filter failed open (every tool sent): {terminal_label(reason, REASON_CHARS)}"
        for reason in p.state_errors:
            line += f"\ntooltree: pre-filter state not saved: {terminal_label(reason, REASON_CHARS)}"
    return terminal_text(line)


def transcript_warning(result: RunResult) -> None:
    """Say on stderr that the run's transcript stopped before the run did, and why."""
    reason = terminal_label(result.summary.transcript_error, REASON_CHARS)
    print(f"tooltree: warning: transcript incomplete: {reason}", file=sys.stderr, flush=True)


def print_comparison(results: list[RunResult], *, as_json: bool) -> None:
    """The runs of one task side by side: tokens, and each as a share of ``direct`` when it ran (the
    pre-filter's tokens counted: a filtered run's ``claude`` classifier is paid for too)."""
    direct = next((r.summary.spent for r in results if r.summary.mode == "direct"), None)
    if as_json:
        runs = [run_json(r) for r in results]
        print_json({"runs": runs})
        return
    header = ["mode", "stop", "turns", "sent", "received", "pre-filter", "total", "of direct", "tool calls", "kept",
              "to model"]  # fmt: skip
    rows = []
    for r in results:
        s, u = r.summary, r.summary.usage
        share = f"{100 * s.spent / direct:.1f} %" if direct else "-"
        prefilter = f"{s.prefilter.usage.total:,}" if s.prefilter is not None else "-"
        rows.append([
            s.mode, r.stop_reason, str(s.turns), f"{u.sent:,}", f"{u.output_tokens:,}", prefilter, f"{s.spent:,}",
            share, f"{s.tool_calls} ({s.script_tool_calls} from scripts)", size(s.sandbox_bytes), size(s.model_bytes),
        ])  # fmt: skip
    print(terminal_text(table(rows, header)))
    for r in results:
        print(f"\n[{r.summary.mode}] {terminal_text(r.answer)}")


def print_runs(
    runs: list[tuple[RunResult, ModelAPIError | None]], broken: list[tuple[str, str]], *, as_json: bool, several: bool
) -> None:
    """What stdout gets: the comparison (a failed run a row of it, its error in its answer's place), or the one
    run's answer; under ``--json`` the summaries, a failed run's with why (``error``, ``status_code``, ``advice``),
    and each mode that could not run (``broken``: its sandbox or servers failed) as ``{"mode", "error"}``."""
    from dataclasses import replace

    if as_json:
        entries = [{**run_json(r), **({"error": str(e), "status_code": e.status_code, "advice": e.advice} if e else {})}
                   for r, e in runs] + [{"mode": mode, "error": why} for mode, why in broken]  # fmt: skip
        print_json({"runs": entries} if several else entries[0])
    elif several and runs:
        print_comparison([r if e is None else replace(r, answer=f"failed: {terminal_label(e, REASON_CHARS)}")
                          for r, e in runs], as_json=False)  # fmt: skip
    elif runs:
        (result, failure) = runs[0]
        if failure is None and result.stop_reason != "interrupted" and result.answer:
            print(terminal_text(result.answer))
