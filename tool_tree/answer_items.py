"""The items of a server's answer that tooltree reads: at most `MAX_ANSWER_ITEMS` content blocks of a ``tools/call``
result, contents of a ``resources/read`` one and messages of a ``prompts/get`` one, cut on the message as it arrives,
before the SDK validates it (`trim`: from `tool_tree.stdio_lines` and `tool_tree.guard`, for every transport), and
over Streamable HTTP before the SDK parses it too (`cut_answer`, from `tool_tree.http_client`, when its text names
more items than the cap: the counts it cut wait for the guard in the connection's `tool_tree.ledgers.Outstanding`).

Why: the SDK validates a result against its protocol version's model, dumps it, and validates it again as its own
model, and the pool dumps it once more: about 35 µs of the host's CPU for each annotated text block, on the event loop
every server of the pool shares. One answer of 140,000 such blocks (within the caps of a message: 32 MiB, 1,000,000
JSON values) took 5.9 s of CPU to reach the caller, and a server could send one for every call. What tooltree shows a
model is the first `agent.content.MAX_BLOCKS` (1,000) items anyway; a script gets `MAX_ANSWER_ITEMS`, ten times that,
and a last text block that says how many more there were.

The count of the items left out travels in the result's ``_meta`` (`LEFT_OUT`), which the server's own ``_meta``
cannot set (`trim` removes it there first), so that what counts the items (`total`) counts them all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json

MAX_ANSWER_ITEMS = 10_000
"""Items of one list of a server's answer (`LISTS`) kept: the caller's CPU for the most a message holds, 140,000 blocks
with annotations, went from 6.7 s to 0.9 s, and for 330,000 plain text ones from 5.0 s to 0.3 s (over stdio;
``bench/answer_items.py``)."""
LISTS = ("content", "contents", "messages")
"""The lists of a result that are cut: a tool's content blocks, a resource's contents, a prompt's messages."""
LEFT_OUT = "io.tooltree/leftOut"
"""The key of a result's ``_meta`` that says how many items of each list `trim` left out (``{"content": 130000}``)."""


def cut(result: dict[str, Any]) -> dict[str, int]:
    """Cut each list of `LISTS` in ``result`` to its first `MAX_ANSWER_ITEMS` items, in place; how many each lost."""
    left: dict[str, int] = {}
    for key in LISTS:
        items = result.get(key)
        if isinstance(items, list) and len(items) > MAX_ANSWER_ITEMS:
            left[key] = len(items) - MAX_ANSWER_ITEMS
            del items[MAX_ANSWER_ITEMS:]
    return left


def trim(result: dict[str, Any], earlier: Mapping[str, int] | None = None) -> None:
    """Cut each list of `LISTS` in ``result`` (a server's answer, as parsed) to its first `MAX_ANSWER_ITEMS` items, in
    place; the count left out (with ``earlier``: what `cut_answer` left out of it before) goes in ``_meta``
    (`LEFT_OUT`), and a tool's content gets a last text block saying so. A `LEFT_OUT` the server sent is removed
    first."""
    meta = result.get("_meta")
    if isinstance(meta, dict):
        meta.pop(LEFT_OUT, None)
    left = cut(result)
    for key, count in (earlier or {}).items():
        left[key] = left.get(key, 0) + count
    if not left:
        return
    content = result.get("content")
    if "content" in left and isinstance(content, list):
        note = (
            f"[tooltree: {left['content']:,} more content blocks of this result were left out: a result keeps at "
            f"most {MAX_ANSWER_ITEMS:,}. Ask the tool for less: a filter, a page, fewer fields.]"
        )
        content.append({"type": "text", "text": note})
    if meta is None:
        result["_meta"] = meta = {}
    if isinstance(meta, dict):  # else the SDK refuses the result for its ``_meta``, whatever is done here
        meta[LEFT_OUT] = left


def cut_answer(data: bytes) -> tuple[bytes, Any, dict[str, int]] | None:
    """An answer's JSON-RPC text (a Streamable HTTP reply or event's data, which the SDK parses whole, before the
    guard's `trim`) with its lists cut (`cut`): its text again, its id and what was cut; None when nothing is cut or it
    is no answer that parses (the SDK then reads it as it was, and says what is wrong with it). The text is written
    again from what was parsed, compact: the same values (``NaN`` and the like, which the parser allows and JSON does
    not, leave it as it was)."""
    try:
        message = from_json(data)
    except ValueError:
        return None
    if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("result"), dict):
        return None
    left = cut(message["result"])
    if not left:
        return None
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return None
    return text.encode("utf-8"), message["id"], left


def left_out(result: Mapping[str, Any], key: str) -> int:
    """How many items of ``result[key]`` `trim` left out (0: none)."""
    meta = result.get("_meta")
    told = meta.get(LEFT_OUT) if isinstance(meta, Mapping) else None
    count = told.get(key) if isinstance(told, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def total(result: Mapping[str, Any], key: str) -> int:
    """How many items of ``result[key]`` the server sent: those kept (not counting `trim`'s note) and those left
    out."""
    items = result.get(key)
    kept = len(items) if isinstance(items, list) else 0
    left = left_out(result, key)
    return kept - (1 if left and key == "content" else 0) + left
