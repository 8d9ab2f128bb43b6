"""The tool calls of one reply: at most `MAX_TOOL_USES` run, and their results share one budget.

A reply's ``tool_use`` blocks are the model's, and the model may be prompt-injected. Unbounded, a
reply of 200 calls, each result at its own cap, brought 100 MB into the next request (and kept it in
every later one). So:

- the blocks run while the reply's calls number at most `MAX_TOOL_USES` (at the same time when every
  one of them may overlap); a ``batch_tool`` block counts each invocation it runs
  (`agent.toolsets.base.Toolset.calls_in`), so two batches of 10 fill a reply as 20 single calls do,
  and a reply of batches cannot start 20 times the work; each later block is answered with an error
  ``tool_result`` saying it was not run (the API needs an answer to every ``tool_use``): the first with
  the reason, the others in a few words (`REFUSED_AGAIN`); the run counts them
  (``RunSummary.refused_tool_calls``);
- what the results bring into the conversation together is held to the caps of one result
  (`agent.budget.ContentBudget`: 500,000 characters of text and room for a result's notes, 8 images
  of 8 MiB together), shared in order; a result that lost text or images says so in a note. One
  result's caps are sized to what one turn can take (about 125,000 tokens of a 200,000-token context;
  images well under the API's 32 MB request): results arriving in one turn must fit the same room, and
  a larger multiple would only let one reply fill the context (two results at the cap already do).

A ``tool_use`` whose id an earlier block of the same reply, or of an earlier reply of the conversation, already has
(a model or proxy bug) is not run: the API refuses a request that repeats a ``tool_use`` id, or answers one twice, so
every later request of the run would fail. It gets a fresh id in the reply as the conversation keeps it (``<id>_2``,
...) and an error ``tool_result`` saying so; the first block of that id runs. The run counts these as refused too.
Before, an id an earlier reply had was not looked for: its call ran, and the next request was refused (400, "tool_use
ids must be unique"), ending the run, and every run going on from its messages, with an API error.

A call that raises (a toolset's bug, an error of the runtime not turned into a result where it is known) is
that block's error ``tool_result``, the exception named (`agent.toolsets.base.raised`), as a ``batch_tool``
invocation's is: the reply's other results are kept and the run goes on. An error of the setup (the sandbox
cannot start, the runtime was closed: `agent.toolsets.base.for_the_developer`) still ends the run, in a batch too:
the model cannot fix it. A `SandboxError` leaves with the run's summary so far, its stop reason ``sandbox_error``
(`agent.errors.failed_run`): before, the tokens the run had spent were reported nowhere, and the transcript's
``run_end`` said the stop reason "". It carries a ``tool_result`` for every ``tool_use`` of the reply
(`INTERRUPTED_RESULTS`), as does an `agent.errors.EventHandlerError` (``on_event`` raised on a call's
`agent.events.ToolFinished`: the calls not started yet are not run, calls running at the same time all end): the run's
``messages`` end with them. Before, the reply's calls were left unanswered: the API refused the messages as they were,
and a run going on from them told the model that calls which had run had not.

A ``batch_tool`` block counts each invocation it ran as a tool call (``RunSummary.tool_calls``, the ``tools_refused``
record's ``ran``) and each failed one as an error (``tool_errors``; a batch refused whole, which ran none, one call and
one error), and as a batch (``batches``): before, a batch of nine was one call and, its invocations failing inside
it, no error. Its `agent.events.ToolFinished` carries the same two counts, for the live
view's ``[2 of 5 failed]`` (before: ``[ok]``, the batch itself being no error).

The transcript records each call (input, seconds, bytes that reached the model, what was left out)
and one ``tools_refused`` record for the blocks that did not run; a result itself is recorded once,
as it entered the conversation, in the next ``request`` record.

Over 400 lines: one reply's calls from their checks (how many, which ids) to every answer, on each path that ends
them (done, refused, stopped, the sandbox gone).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from agent.budget import ContentBudget
from agent.content import blocks_bytes
from agent.defaults import MAX_TOOL_USES
from agent.errors import RUN_SO_FAR, EventHandlerError
from agent.events import ToolFinished
from agent.toolsets.base import INTERRUPTED_OUTCOME, ToolOutcome, Toolset, error, for_the_developer, raised
from agent.toolsets.batch import BATCH_NAME
from agent.toolsets.direct import STOPPED_NOTE
from sandbox.errors import SandboxError

if TYPE_CHECKING:
    from agent.summary import RunSummary
    from agent.transcript import Transcript
    from sandbox.host import Runtime

logger = logging.getLogger(__name__)

MAX_CONCURRENT_TOOLS = 8
"""Most tool calls of one reply run at the same time."""


def refused_text(count: int) -> str:
    """What a ``tool_use`` past `MAX_TOOL_USES` is answered with."""
    return (
        f"not run: one reply may make at most {MAX_TOOL_USES} tool calls (each invocation of a batch_tool "
        f"counts) and this one made {count:,}; make the calls still needed in your next reply"
    )


def duplicate_text(original: str, renamed: str, *, earlier_reply: bool = False) -> str:
    """What a ``tool_use`` that repeated the id of an earlier one of its reply (or of an ``earlier_reply``) is
    answered with."""
    where = "in an earlier reply" if earlier_reply else "in the same reply"
    return (
        f"not run: this call repeated the id {original!r} of an earlier call {where} (each call needs "
        f"its own id, so it was renamed {renamed!r}); make it again in your next reply if it is still needed"
    )


def used_ids(messages: list[dict[str, Any]]) -> set[str]:
    """The ids of the ``tool_use`` blocks of ``messages`` (the conversation before a reply)."""
    return {
        str(b.get("id"))
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }


def rename_duplicates(blocks: list[dict[str, Any]], earlier: Collection[str] = ()) -> dict[int, str]:
    """Give each of the ``tool_use`` ``blocks`` whose id an earlier one has, or one of the ``earlier`` replies' ids, a
    fresh id, in place (``<id>_2``, ..., unused in the reply and in ``earlier``); the indexes of those blocks and the
    ids they repeated."""
    taken = {str(b.get("id")) for b in blocks} | set(earlier)
    first: set[str] = set(earlier)
    repeated: dict[int, str] = {}
    for i, block in enumerate(blocks):
        original = str(block.get("id"))
        if original not in first:
            first.add(original)
            continue
        n = 2
        while f"{original}_{n}" in taken:
            n += 1
        block["id"] = f"{original}_{n}"
        taken.add(block["id"])
        repeated[i] = original
    return repeated


REFUSED_AGAIN = "not run: too many calls in one reply (as the first call not run was told)"
"""What each ``tool_use`` past the first one refused is answered with: a reply of thousands of blocks (a large
``max_tokens`` allows it) would otherwise bring the full reason back thousands of times, in every later request."""


def calls_in(toolset: Toolset, block: dict[str, Any]) -> int:
    """How many tool calls the ``tool_use`` ``block`` makes (a batch: one per invocation it runs)."""
    arguments = block.get("input")
    return toolset.calls_in(str(block.get("name")), arguments) if isinstance(arguments, dict) else 1


def call_one(toolset: Toolset, block: dict[str, Any], runtime: Runtime) -> tuple[ToolOutcome, float]:
    """Run one ``tool_use`` block; its outcome and seconds."""
    name, arguments = str(block.get("name")), block.get("input")
    if not isinstance(arguments, dict):  # never run a tool on arguments the model did not give
        return error(f"the input of {name} must be an object, not {type(arguments).__name__}"), 0.0
    t0 = time.monotonic()
    try:
        outcome = toolset.call(name, arguments, runtime)
    except KeyboardInterrupt as e:  # how long the call ran until Ctrl-C, for its record (`_stopped`)
        setattr(e, STOPPED_AFTER, time.monotonic() - t0)
        raise
    except Exception as e:  # one call's boundary, as in a batch: the reply's other results and the run go on
        if for_the_developer(e):
            raise
        logger.exception("the call of %s raised", name)
        outcome = raised(name, e)
    return outcome, time.monotonic() - t0


def call_all(toolset: Toolset, blocks: list[dict[str, Any]], runtime: Runtime) -> Iterator[tuple[ToolOutcome, float]]:
    """The outcomes of ``blocks``, in order, as they are ready: run at the same time when every one of
    them may overlap, else one after another (each outcome given before the next call starts)."""
    if len(blocks) > 1 and all(toolset.concurrent(str(b.get("name"))) for b in blocks):
        pool = ThreadPoolExecutor(max_workers=min(len(blocks), MAX_CONCURRENT_TOOLS))
        starts: dict[int, float] = {}

        def timed(i: int, block: dict[str, Any]) -> tuple[ToolOutcome, float]:
            starts[i] = time.monotonic()
            return call_one(toolset, block, runtime)

        futures = [pool.submit(timed, i, b) for i, b in enumerate(blocks)]
        try:
            for future in futures:
                yield future.result()
        except KeyboardInterrupt as e:  # the calls that ended meanwhile keep their results (`_stopped`)
            ended = {
                i: f.result() for i, f in enumerate(futures) if f.done() and not f.cancelled() and not f.exception()
            }
            setattr(e, FINISHED_CALLS, ended)
            now = time.monotonic()  # a call still queued behind the workers is cancelled: it never started
            running = {i: now - starts.get(i, now) for i, f in enumerate(futures) if i not in ended and not f.cancel()}
            setattr(e, RUNNING_CALLS, running)
            raise
        finally:  # all done; or Ctrl-C, which waits for no call (before: for the slowest, up to its timeout)
            pool.shutdown(wait=False, cancel_futures=True)
        return
    for block in blocks:
        yield call_one(toolset, block, runtime)


def run_tool_uses(
    toolset: Toolset,
    content: list[dict[str, Any]],
    runtime: Runtime,
    turn: int,
    summary: RunSummary,
    log: Transcript,
    emit: Callable[[ToolFinished], None],
    earlier: Collection[str] = (),
) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks answering every ``tool_use`` of the reply ``content``, in order: those
    whose calls fit in `MAX_TOOL_USES` run (their results sharing one `ContentBudget`), the rest refused, as is a
    block repeating an earlier one's id or one of ``earlier`` (the ids of the conversation's earlier replies: renamed
    in ``content``, `rename_duplicates`). Counts them in ``summary``, records them in ``log`` and reports each call
    that ran to ``emit``."""
    every = [b for b in content if b.get("type") == "tool_use"]
    repeated = rename_duplicates(every, earlier)
    blocks = [b for i, b in enumerate(every) if i not in repeated]
    made = [calls_in(toolset, b) for b in blocks]
    fit = next((i for i, total in enumerate(accumulate(made)) if total > MAX_TOOL_USES), len(blocks))
    ran, refused = blocks[:fit], blocks[fit:]
    budget = ContentBudget()
    results: list[dict[str, Any]] = []
    raised_by_handler: list[EventHandlerError] = []  # on_event raised: the reply's calls are answered, then it goes on

    def emit_until_raised(event: ToolFinished) -> None:
        if not raised_by_handler:
            try:
                emit(event)
            except EventHandlerError as e:
                raised_by_handler.append(e)

    together = len(ran) > 1 and all(toolset.concurrent(str(b.get("name"))) for b in ran)
    try:
        for block, (outcome, seconds) in zip(ran, call_all(toolset, ran, runtime), strict=True):
            results.append(_recorded(block, outcome, seconds, budget, turn, summary, log, emit_until_raised))
            if raised_by_handler and not together:  # no later call starts; calls running together all end
                break
    except KeyboardInterrupt as e:  # every tool_use still gets its answer: the conversation may go on from here
        stopped = _stopped(toolset, every, ran, results, e, budget, turn, summary, log, emit_until_raised)
        setattr(e, INTERRUPTED_RESULTS, stopped)  # Ctrl-C wins over an on_event that raised: the run was stopped
        raise
    except SandboxError as e:  # the sandbox cannot start (`for_the_developer`): the run ends, its cost so far told
        summary.stop_reason = summary.stop_reason or "sandbox_error"  # in the transcript's run_end too
        setattr(e, RUN_SO_FAR, summary)
        done = {r["tool_use_id"]: r for r in results}  # the call that raised and those after it: no result
        setattr(e, INTERRUPTED_RESULTS, [done.get(b.get("id")) or _error_result(b, NO_RESULT_SANDBOX) for b in every])
        raise
    calls_ran = sum(made[: len(results)])  # the calls of the blocks that ran, a batch's invocations each one
    results += [_error_result(b, NOT_RUN_RUN_STOPPED) for b in ran[len(results) :]]  # on_event raised before them
    if refused:
        text = refused_text(sum(made))
        for i, b in enumerate(refused):
            answer = [{"type": "text", "text": text if i == 0 else REFUSED_AGAIN}]
            results.append({"type": "tool_result", "tool_use_id": b.get("id"), "content": answer, "is_error": True})
        summary.refused_tool_calls += len(refused)
        log.write("tools_refused", turn=turn, count=len(refused), ran=calls_ran, reason=text)
    if repeated:
        answers = iter(results)
        results = [
            next(answers)
            if i not in repeated
            else {
                "type": "tool_result",
                "tool_use_id": b["id"],
                "content": [
                    {"type": "text", "text": duplicate_text(repeated[i], b["id"], earlier_reply=repeated[i] in earlier)}
                ],
                "is_error": True,
            }
            for i, b in enumerate(every)
        ]
        summary.refused_tool_calls += len(repeated)
        first = next(iter(repeated.values()))
        where = "of an earlier reply" if first in earlier else "of the reply"
        reason = f"repeated the id of an earlier tool_use {where} (the first: {first!r})"
        log.write("tools_refused", turn=turn, count=len(repeated), ran=calls_ran, reason=reason)
    if raised_by_handler:  # every tool_use answered: the run's messages can go on as the history of the next
        setattr(raised_by_handler[0], INTERRUPTED_RESULTS, results)
        raise raised_by_handler[0]
    return results


def answers_at_stop(e: BaseException, messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The ``tool_result`` blocks answering the ``tool_use`` blocks of the last reply of ``messages`` when ``e`` ended
    the run before they were sent back; None when there are none to answer.

    ``e`` out of `run_tool_uses` (``on_event`` raised on a call's `agent.events.ToolFinished`, the sandbox could not
    start): the answers it put on ``e``. ``on_event`` raised on `agent.events.ModelReplied`: none of the reply's calls
    ran. Before, they were left unanswered, and the API refused the messages as they were (as ``history`` too)."""
    last = messages[-1] if messages else {}
    content = last.get("content")
    if last.get("role") != "assistant" or not isinstance(content, list):
        return None
    if isinstance(results := getattr(e, INTERRUPTED_RESULTS, None), list):
        return results
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    return [_error_result(b, NOT_RUN_RUN_STOPPED) for b in uses] or None


def _error_result(block: dict[str, Any], text: str) -> dict[str, Any]:
    """The error ``tool_result`` answering the ``tool_use`` ``block`` with ``text``."""
    return {"type": "tool_result", "tool_use_id": block.get("id"), "content": [{"type": "text", "text": text}],
            "is_error": True}  # fmt: skip


def _recorded(
    block: dict[str, Any], outcome: ToolOutcome, seconds: float, budget: ContentBudget, turn: int,
    summary: RunSummary, log: Transcript, emit: Callable[[ToolFinished], None], interrupted: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The ``tool_result`` of one call that ran (``interrupted``: until Ctrl-C stopped it), its content taken from
    ``budget``; counted in ``summary``, recorded in ``log`` and reported to ``emit``."""
    name, arguments = str(block.get("name")), block.get("input")
    blocks_in, cut = budget.take(outcome.content, keep=outcome.labels)
    if cut:
        blocks_in.append(budget.cut_note(cut, "the results of one reply"))
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.get("id"), "content": blocks_in}
    if outcome.is_error:
        result["is_error"] = True
    model_bytes = blocks_bytes(blocks_in)
    kept = sum(c.response_bytes for c in outcome.script_calls)
    batch = outcome.invocations is not None  # each invocation a call, each failed one an error (`RunSummary`)
    summary.tool_calls += outcome.invocations or 1  # a batch refused whole ran none: one call, and an error
    summary.tool_errors += outcome.failed if outcome.invocations else outcome.is_error
    summary.batches += batch
    summary.interrupted_tool_calls += interrupted
    summary.script_tool_calls += len(outcome.script_calls)
    summary.sandbox_bytes += kept
    summary.model_bytes += model_bytes
    log.write(
        "tool",
        turn=turn,
        name=name,
        input=arguments,
        seconds=round(seconds, 3),
        is_error=outcome.is_error,
        **({"interrupted": True} if interrupted else {}),
        **({"invocations": outcome.invocations, "failed": outcome.failed} if batch else {}),
        model_bytes=model_bytes,
        **({"left_out": {"chars": cut.chars, "images": cut.images}} if cut else {}),
        script_calls=[{**c.to_json(), "bytes": c.response_bytes} for c in outcome.script_calls],
        sandbox_bytes=kept,
    )
    calls = len(outcome.script_calls)
    emit(ToolFinished(turn, name, outcome.note, outcome.is_error, seconds, calls, kept, model_bytes,
                      outcome.invocations, outcome.failed))  # fmt: skip
    return result


def _under_way(toolset: Toolset, block: dict[str, Any]) -> ToolOutcome:
    """What a call running at the same time as others, not ended at Ctrl-C, gave back: that it was stopped (a
    ``batch_tool`` block: each of its invocations, as a batch stopped alone counts them)."""
    content = [{"type": "text", "text": STOPPED_WHILE_RUNNING}]
    if str(block.get("name")) != BATCH_NAME:
        return ToolOutcome(content, is_error=True, note=STOPPED_NOTE)
    made = calls_in(toolset, block)
    return ToolOutcome(content, is_error=True, note=STOPPED_NOTE, invocations=made, failed=made)


INTERRUPTED_RESULTS = "tool_results"
"""The attribute of a ``KeyboardInterrupt`` (`_stopped`) or `EventHandlerError` out of `run_tool_uses` holding a
``tool_result`` for every ``tool_use`` of the reply."""
STOPPED_WHILE_RUNNING = (
    "stopped by the user (Ctrl-C) while it ran, before its result came: it may have run in part or in whole"
)
STOPPED_WITH_OUTPUT = "stopped by the user (Ctrl-C) while it ran: the above is what it did until then"
NOT_RUN_STOPPED = "not run: the user stopped the run (Ctrl-C) before this call"
NOT_RUN_RUN_STOPPED = "not run: the run was stopped before this call"  # on_event raised on an earlier call
NO_RESULT_SANDBOX = "no result: the run stopped here because its sandbox could not start"
STOPPED_AFTER = "stopped_after"
"""The attribute of a ``KeyboardInterrupt`` out of `call_one` holding the seconds its call ran."""
FINISHED_CALLS = "finished_calls"
"""The attribute of a ``KeyboardInterrupt`` out of `call_all` holding, by index, the outcomes of the calls running at
the same time that had ended (their outcome and seconds)."""
RUNNING_CALLS = "running_calls"
"""The attribute of a ``KeyboardInterrupt`` out of `call_all` holding, by index, the seconds each call running at the
same time that had started but not ended had run (one still queued behind the workers never started: not in it)."""


def _stopped(
    toolset: Toolset, every: list[dict[str, Any]], ran: list[dict[str, Any]], results: list[dict[str, Any]],
    interrupt: BaseException, budget: ContentBudget, turn: int, summary: RunSummary, log: Transcript,
    emit: Callable[[ToolFinished], None],
) -> list[dict[str, Any]]:  # fmt: skip
    """A ``tool_result`` for every ``tool_use`` of the reply when Ctrl-C stopped its calls: those done as they
    ran; the one running (every one started and not done, when they ran at the same time) with what it did so far
    when its toolset told it (`INTERRUPTED_OUTCOME`), else said to have maybe run; the others not run. Calls running
    at the same time that had ended keep their results (`FINISHED_CALLS`). Before: the reply's calls were left
    unanswered, and a conversation going on from it told the model none of them had run.

    A call its toolset told of (a script, a native call, a batch) and each call running at the same time that had
    started (`RUNNING_CALLS`) counts as a call made, failed and interrupted (`RunSummary.interrupted_tool_calls`),
    with a ``tool`` record saying so: it may have acted. Before, only a stopped script counted; a native call stopped
    so counted none. One still queued behind the workers never started: it is answered as not run (before: it may
    have run) and not counted."""
    done = {r["tool_use_id"]: r for r in results}
    ended: dict[int, tuple[ToolOutcome, float]] = getattr(interrupt, FINISHED_CALLS, {})
    for i, block in enumerate(ran):  # calls running at the same time that ended before Ctrl-C: their results
        if block.get("id") not in done and i in ended:
            outcome, seconds = ended[i]
            done[block.get("id")] = _recorded(block, outcome, seconds, budget, turn, summary, log, emit)
    together = len(ran) > 1 and all(toolset.concurrent(str(b.get("name"))) for b in ran)
    started: dict[int, float] | None = getattr(interrupt, RUNNING_CALLS, None) if together else None
    left = [(i, b) for i, b in enumerate(ran) if b.get("id") not in done and (started is None or i in started)]
    running = [b for _, b in (left if together else left[:1])]
    so_far = getattr(interrupt, INTERRUPTED_OUTCOME, None)
    if len(running) == 1 and not together and isinstance(so_far, ToolOutcome):
        note = {"type": "text", "text": STOPPED_WITH_OUTPUT if so_far.content else STOPPED_WHILE_RUNNING}
        stopped = replace(so_far, content=[*so_far.content, note], is_error=True)
        seconds = getattr(interrupt, STOPPED_AFTER, 0.0)
        done[running[0].get("id")] = _recorded(running[0], stopped, seconds, budget, turn, summary, log, emit, True)
    if started is not None:  # calls running at the same time: each one that started
        for i, block in left:
            outcome = _under_way(toolset, block)
            done[block.get("id")] = _recorded(block, outcome, started[i], budget, turn, summary, log, emit, True)
    answers: list[dict[str, Any]] = []
    for block in every:
        key = block.get("id")
        if key in done:
            answers.append(done[key])
            continue
        text = STOPPED_WHILE_RUNNING if any(b is block for b in running) else NOT_RUN_STOPPED
        content = [{"type": "text", "text": text}]
        answers.append({"type": "tool_result", "tool_use_id": key, "content": content, "is_error": True})
    log.write("tools_interrupted", turn=turn, done=len(results), running=len(running), results=answers)
    return answers
