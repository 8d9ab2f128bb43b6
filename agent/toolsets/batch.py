"""``batch_tool``: several independent tool calls in one ``tool_use``, run at the same time.

Claude can put several ``tool_use`` blocks in one reply but often calls independent tools one
per turn. This ordinary tool takes a list of calls, so grouping them is one obvious step:

    {"invocations": [{"name": "crm__create_task", "arguments": {...}}, ...]}

Each invocation goes through the toolset's own routing (the same checks as a single call), all
of them concurrently; the result lists each one in order with its tool name and its own status,
followed by that call's content blocks (an image stays an image). One failure never hides the
others, nor does one that raises: its exception becomes its error, named. ``arguments`` left out or ``null``
mean no arguments (``{}``), which the tool's input schema then accepts or refuses (naming what it requires).
A batch inside a batch is refused, as are arguments given as a JSON string.

Each invocation counts as one of the calls a reply may make (`agent.calls.MAX_TOOL_USES`, see
`batch_calls`), so a reply of several batches starts no more work than a reply of single calls.
The batch is one result: its invocations share the caps of one result (`agent.budget.ContentBudget`),
in order, and an invocation that lost text or images to them says so after its content. The status lines, which
those caps never cut, show at most `LABEL_NAME` characters of the name the model wrote (before: the whole of it, so
ten invocations named with 60,000 characters each brought 841,493 characters into the conversation, past the caps
and unsaid).

Ctrl-C while a batch runs stops waiting at once (before: the pool waited for its slowest invocation, up to its
timeout) and the ``KeyboardInterrupt`` carries the batch's outcome so far (`agent.toolsets.base.INTERRUPTED_OUTCOME`):
the invocations that had ended with their results, the others said to have maybe run (before: the whole batch was
answered "may have run", the results of those that had ended lost).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from agent.budget import ContentBudget
from agent.naming import MAX_NAME
from agent.toolsets.base import INTERRUPTED_OUTCOME, ToolOutcome, error, for_the_developer, raised

logger = logging.getLogger(__name__)

BATCH_NAME = "batch_tool"
DEFAULT_BATCH_MAX = 10
LABEL_NAME = MAX_NAME
"""The most characters of an invocation's name its status line shows: no tool's native name is longer."""


def batch_definition(max_calls: int) -> dict[str, Any]:
    """The tool definition, for batches of at most ``max_calls`` invocations."""
    return {
        "name": BATCH_NAME,
        "description": (
            "Run several independent tool calls at once (concurrently) and get every result in order. Use it only for "
            "calls that do not depend on each other's results; a call that needs another's output waits for the next "
            f"turn. At most {max_calls} invocations; batch_tool itself cannot be inside a batch."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "invocations": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": max_calls,
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "description": "the tool's name"},
                            "arguments": {"type": "object", "description": "the tool's input, as an object"},
                        },
                        "required": ["name", "arguments"],
                    },
                }
            },
            "required": ["invocations"],
        },
    }


def _one(call: Callable[[str, Mapping[str, Any]], ToolOutcome], item: Any) -> ToolOutcome:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        return error("each invocation needs a name (a string) and arguments (an object)")
    name, arguments = item["name"], item.get("arguments")
    if name == BATCH_NAME:
        return error("a batch inside a batch is refused: list the calls in one batch_tool")
    if arguments is None:  # left out or null: no arguments, as a tool without required parameters takes
        arguments = {}
    if isinstance(arguments, str):
        return error(f"arguments of {name} must be an object, not a JSON string")
    if not isinstance(arguments, Mapping):
        return error(f"arguments of {name} must be an object, not {_json_type(arguments)}")
    try:
        return call(name, arguments)
    except Exception as e:  # one invocation's boundary: its failure must not take the others' results with it
        if for_the_developer(e):  # the setup's error ends the run, as a single call's does
            raise
        logger.exception("batch_tool: the call of %s raised", name)
        return raised(name, e)


def _json_type(value: Any) -> str:
    """The JSON name of ``value``'s type (the model wrote JSON, not Python)."""
    if isinstance(value, bool):
        return "a boolean"
    return {list: "an array", int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def batch_calls(arguments: Mapping[str, Any], max_calls: int) -> int:
    """How many calls one ``batch_tool`` call with ``arguments`` makes: one per invocation when it would
    run them, else 1 (a malformed or too long batch runs none and is answered with one error)."""
    items = arguments.get("invocations")
    return len(items) if isinstance(items, list) and 1 <= len(items) <= max_calls else 1


def run_batch(
    arguments: Mapping[str, Any], call: Callable[[str, Mapping[str, Any]], ToolOutcome], max_calls: int
) -> ToolOutcome:
    """Run the invocations of one ``batch_tool`` call through ``call``, concurrently.

    The outcome is an error only when the batch itself is malformed (not a list, empty, too long);
    failed invocations are reported inside it. The results share the caps of one result, in order.
    """
    items = arguments.get("invocations")
    if isinstance(items, str):
        return _refused("invocations must be a list of {name, arguments} objects, not a JSON string")
    if not isinstance(items, list) or not items:
        return _refused("batch_tool needs invocations: a non-empty list of {name, arguments} objects")
    if len(items) > max_calls:
        return _refused(f"a batch holds at most {max_calls} invocations, got {len(items)}; split it")
    # A thread each (at most `MAX_TOOL_USES`, the most a batch may hold): before, 8 at most, so a batch of 10 calls
    # that wait for each other timed out.
    pool = ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="tooltree-batch")
    futures = [pool.submit(_one, call, item) for item in items]
    try:
        outcomes = [future.result() for future in futures]
    except KeyboardInterrupt as e:  # the invocations that ended keep their results; the others may have run
        so_far = [
            f.result() if f.done() and not f.cancelled() and not f.exception() else error(STOPPED_INVOCATION)
            for f in futures
        ]
        setattr(e, INTERRUPTED_OUTCOME, _combined(items, so_far))
        raise
    finally:  # all done; or Ctrl-C, which waits for no invocation
        pool.shutdown(wait=False, cancel_futures=True)
    return _combined(items, outcomes)


def _refused(message: str) -> ToolOutcome:
    """A batch refused whole: an error, none of its invocations run (``invocations`` 0). It is one ``batch_tool``
    call, as the run counts it: one tool call and one error (`agent.summary.RunSummary`)."""
    return replace(error(message), invocations=0)


STOPPED_INVOCATION = "stopped by the user (Ctrl-C) before its result came: it may have run in part or in whole"
"""What an invocation of a batch stopped by Ctrl-C that had not ended is answered with."""


def _label(name: object) -> str:
    """The name an invocation's status line shows: ``?`` when it has none, at most `LABEL_NAME` characters of it."""
    if not isinstance(name, str):
        return "?"
    if len(name) <= LABEL_NAME:
        return name
    return f"{name[:LABEL_NAME]}… ({len(name):,} characters)"


def _combined(items: list[Any], outcomes: list[ToolOutcome]) -> ToolOutcome:
    """One outcome listing each invocation of ``items`` with its status and content, sharing one result's caps."""
    content: list[dict[str, Any]] = []
    labels: list[int] = []
    budget = ContentBudget()
    failed = 0
    for n, (item, outcome) in enumerate(zip(items, outcomes, strict=True), 1):
        name = item.get("name") if isinstance(item, Mapping) else None
        failed += outcome.is_error
        status = "error" if outcome.is_error else "ok"
        header = {"type": "text", "text": f"[{n}] {_label(name)}: {status}"}
        labels.append(len(content))
        kept, cut = budget.take([header, *outcome.content], keep={0})
        content += kept
        if cut:
            labels.append(len(content))
            content.append(budget.cut_note(cut, "the invocations of one batch"))
    note = f"{len(items)} call(s), {failed} failed"
    return ToolOutcome(content, labels=frozenset(labels), note=note, invocations=len(items), failed=failed)
