"""A client's message to ``tooltree serve`` over stdio that the SDK's parser refused, answered rather than dropped.

The SDK's stdio transport hands its session an exception for a line it cannot parse, and the session drops it: a
request nested more than 200 levels deep, holding a whole number of more than 4,300 digits or a lone surrogate
(``"\\ud800"``: valid JSON, but no text), or cut off, was never answered, its client waiting for ever (a call of a
passthrough tool with such an argument, at any timeout). `unread`
answers such a request with an error saying why, naming the argument when it can (`tool_tree.sendable`), once its id is
read; `agent.serve.stdio` hands the session everything else. `id_at_ends` also finds the id of a line over the cap.
"""

from __future__ import annotations

import json
import re

import mcp_types as types
from pydantic import ValidationError

from tool_tree.sendable import MAX_INT_DIGITS, unsendable

ENDS_KEPT = 1024
"""Bytes kept from each end of a line over the cap, to find the id of the request it carried."""
_ID = rb'"id"\s*:\s*(-?\d{1,30}|"(?:[^"\\]|\\.){0,200}")'
_ID_FIRST = re.compile(rb'\A\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,200}"\s*,)*\s*' + _ID)
_ID_LAST = re.compile(_ID + rb"\s*\}\s*\Z")


def id_at_ends(head: bytes, tail: bytes) -> types.RequestId | None:
    """The id of the request whose message begins with ``head`` and ends with ``tail`` (`Overlong.request_id`)."""
    found = _ID_FIRST.match(head) or _ID_LAST.search(tail)
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


def unread(error: Exception) -> types.JSONRPCError | None:
    """The answer to a request of the client's that the SDK's parser refused (``error``: its ValidationError, which
    holds the line): nested more than 200 levels, a whole number of more than 4,300 digits, JSON cut off. It says why,
    naming the argument when it can (`tool_tree.sendable`); before, the SDK dropped the line, and the client waited for
    its answer for ever. None when ``error`` is not the parser's, or the line is no request whose id can be read."""
    if (
        not isinstance(error, ValidationError)
        or not (details := error.errors())
        or details[0]["type"] != "json_invalid"
    ):
        return None
    line = details[0].get("input")
    if not isinstance(line, str):
        return None
    try:  # Python's parser reads what pydantic's does not (deeper nesting; a long number, capped): to name the argument
        message = json.loads(line, parse_int=_capped_int)
    except (ValueError, RecursionError):
        message = None
    if isinstance(message, dict):
        request_id, params = message.get("id"), message.get("params")
        if "method" not in message or isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return None
        arguments = params.get("arguments") if isinstance(params, dict) else None
        why = unsendable(arguments) if isinstance(arguments, dict) else None
        if why is None and _holds_surrogate(message):  # before: "unexpected end of hex escape at line 1 column 118"
            why = SURROGATE
    else:
        data = line.encode("utf-8", "replace")
        if (
            b'"method"' not in data[:ENDS_KEPT]
            or (request_id := id_at_ends(data[:ENDS_KEPT], data[-ENDS_KEPT:])) is None
        ):
            return None
        why = None
    why = str(details[0]["msg"])[:200] if why is None else why.removesuffix("; nothing was sent")
    said = f"tooltree serve could not read the request: {why}; it was not run"
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=types.PARSE_ERROR, message=said))


SURROGATE = (
    "the message holds a lone surrogate (an escape such as \\ud800 with no pair, as a JavaScript client's "
    "JSON.stringify writes one), which is no character: send text (a character outside the BMP as its pair of "
    "escapes, or as UTF-8)"
)
"""Why a request holding a lone surrogate, valid JSON but no text, was not run."""
_SURROGATE = re.compile("[\ud800-\udfff]")


def _holds_surrogate(value: object) -> bool:
    """Whether a string of ``value``, a key or a value at any depth, holds a lone surrogate."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _capped_int(digits: str) -> int:
    """A whole number as Python's JSON parser reads it, one of more digits than it reads as one past them."""
    return int(digits) if len(digits.lstrip("-")) <= MAX_INT_DIGITS else 10**MAX_INT_DIGITS
