"""What a server's message says before it is parsed: how many values it holds, and whether and how it is addressed.

The transports (`tool_tree.stdio`, `tool_tree.http_client`) decide on a message's bytes what they can, in
C-speed passes, before the SDK's parser builds it (a million values cost the parser up to about 1.1 s):

- `count_values`: how many JSON values parsing it would build, as far as a limit needs to know;
- `unaddressed`: no ``"id"`` anywhere, so a notification (or not JSON-RPC at all), never a request or a response;
- `peek`: the kind and id of a message that opens with its id (``{"jsonrpc":"2.0","id":7,"result":…``, as the
  MCP SDKs write every message), read from its first bytes; `tail_id`: the id of one that closes with it.

`count_values` is the count of ``sandbox/_supervisor/wire.py``'s (it blanks strings by splitting at quotes a
window at a time instead of with a regular expression: three times faster on a message of short strings):
the container's supervisor keeps its own copy because it must be standard-library only and run standalone,
and tool_tree never imports sandbox.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import mcp_types as types

# The SDK is imported only to read an id (`_request_id`): `count_values` also bounds the snapshots a tree's readers
# load (`tool_tree.tree`), which do not import the SDK.

_WINDOW = 1 << 20
"""Bytes blanked at a time by `_outside_strings`: what the pieces of one split may hold."""


def _structure(data: bytes | bytearray) -> int:
    """1 + commas + openings of non-empty objects and arrays: the values of compact JSON without strings."""
    opened = data.count(b"[") + data.count(b"{")
    return 1 + data.count(b",") + opened - data.count(b"[]") - data.count(b"{}")


def _outside_strings(body: bytes | bytearray, limit: int) -> int:
    """`_structure` of ``body`` with every string blanked to ``""``, a window of `_WINDOW` bytes at a time.

    Escaped backslashes and quotes are dropped first (``\\\\`` pairs, then ``\\"``: as the parser pairs them,
    from the left), so every quote left opens or closes a string. A body of more than ``2 * limit + 2``
    strings holds more than ``limit`` values (each value is at most one string and one key's), and is not
    split; any other has each window split at its quotes and the pieces outside strings joined with ``""``.
    A window's ``[]`` or ``{}`` cut by the window's edge counts as one value more; a backslash outside a
    string (where the parser stops) may miscount what follows it, which is never parsed.
    """
    cleaned = bytes(body).replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = cleaned.count(b'"') // 2
    if strings > 2 * limit + 2:
        return strings // 2
    values, inside = 1, False
    for start in range(0, len(cleaned), _WINDOW):
        pieces = cleaned[start : start + _WINDOW].split(b'"')
        values += _structure(b'""'.join(pieces[1::2] if inside else pieces[::2])) - 1
        inside ^= len(pieces) % 2 == 0
    return values


def count_values(body: bytes | bytearray, limit: int, *, exact: bool = False) -> int:
    """How many values parsing ``body`` as JSON would build (keys not counted), as far as ``limit`` needs to know.

    At most ``limit`` means a parser builds at most that many, whatever the bytes (valid JSON or not): every
    value but the first follows a comma, the ``[`` of a non-empty array or the ``{`` of a non-empty object,
    outside strings. Counted first with the strings in (their ``,[{`` counted too: an upper bound, in C
    passes over the bytes); only a body over ``limit`` that way has its strings blanked and is counted
    again (`_outside_strings`: about 0.2 s for 30 MB at most). Over ``limit`` means the body holds more
    if it is compact, valid JSON; a server's message need not be compact (``[ ]`` with a space counts as
    an array holding one value), so the count stays an upper bound.

    ``exact`` skips the first count, for counts that are added up: up to ``limit``, the count of valid JSON as
    `json.dumps` writes it is then its values (the first count of ``[{},{}]`` is 5, not 3), exactly but for one more
    for each empty ``[]`` or ``{}`` the edge of a window cuts (one each MiB at most).
    """
    values = 1 + len(body) - len(body.translate(None, b",[{"))
    if values <= limit and not exact:
        return values
    return _outside_strings(body, limit)


def unaddressed(message: bytes) -> bool:
    """Whether a message's bytes cannot be a request or a response: no ``"id"`` in them, and no backslash to
    write one with escapes (so a notification, or not JSON-RPC at all)."""
    return b'"id"' not in message and b"\\" not in message


_VERSION = rb'(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?'
_ID = rb'(-?[0-9]{1,15}|"[^"\\]{0,200}")'
_HEAD = re.compile(
    rb"\s*\{\s*" + _VERSION + rb'"id"\s*:\s*' + _ID + rb"\s*,\s*" + _VERSION + rb'"(result|error|method)"\s*:'
)
"""An object whose first member is its id (after ``jsonrpc``, if that comes first) and whose next is the result,
the error or the method: the id is a top-level member (nothing before it opens an object or an array)."""
_TAIL = re.compile(rb',\s*"id"\s*:\s*' + _ID + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
"""An object whose last member is its id (before ``jsonrpc``, if that comes last): the ``}`` that ends the
message closes the object the id is a member of."""
_LOOKED_AT = 512
"""Bytes at either end of a message that `peek` and `tail_id` look at."""


def _request_id(raw: bytes) -> types.RequestId:
    """An id as the SDK correlates it (``"7"`` and ``7`` are one id)."""
    from mcp.shared.dispatcher import coerce_request_id

    if raw.startswith(b'"'):
        return coerce_request_id(raw[1:-1].decode("utf-8", "replace"))
    return int(raw)


def peek(message: bytes) -> tuple[Literal["request", "response"], types.RequestId] | None:
    """The kind and id of a message that opens with its id, from its first bytes, unparsed; None for any other
    (its id further on, written with escapes, or not there).

    Read as the parser would read a valid message; one that is not valid (a duplicate ``id`` further on, a
    number with leading zeros) may be judged otherwise than the parser would judge it, which costs only its
    sender: a message judged on its peek is dropped or refused, never taken for another.
    """
    found = _HEAD.match(message, 0, _LOOKED_AT)
    if found is None:
        return None
    return ("request" if found[2] == b"method" else "response"), _request_id(found[1])


def tail_id(message: bytes) -> types.RequestId | None:
    """The id of a message that closes with it, from its last bytes, unparsed; None for any other."""
    found = _TAIL.search(message, max(0, len(message) - _LOOKED_AT))
    return None if found is None else _request_id(found[1])
