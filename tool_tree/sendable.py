"""What a call's arguments may hold to reach a server as they were given: `unsendable` says why they cannot.

The request is JSON, read by the server's parser. The MCP Python SDK's (pydantic's) reads a message nested at most 200
levels deep and whole numbers of at most 4,300 digits (Python's own ``json`` the same digits), and a server refused
more without a word: its call waited out its whole timeout ("the call timed out after 30 s"), said as a hung server.
JSON has no NaN nor infinity: the SDK writes them as ``null``, so the server was sent another value than the caller's.
Each is refused before anything is sent, naming the argument; the session goes on.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

import anyio

from tool_tree.runtime._sendable import MAX_INT_DIGITS as MAX_INT_DIGITS
from tool_tree.runtime._sendable import first_refused

MAX_REQUEST_DEPTH = 200
"""Levels the JSON parser of the MCP Python SDK reads in a message (tooltree reads answers with it too)."""
MAX_ARGUMENT_DEPTH = MAX_REQUEST_DEPTH - 2
"""Levels the arguments may nest (the arguments object is the first): the request adds two around them (the message
and its ``params``)."""


SMALL_VALUES = 2000
"""Values of arguments checked on the pool's loop (`checked`: tens of microseconds for a few values): more are
checked on a worker thread."""


class Unsendable(ValueError):
    """Arguments a server cannot be sent (`unsendable`); ``why`` says which and why. Nothing was sent."""

    def __init__(self, why: str) -> None:
        super().__init__(f"arguments: {why}")
        self.why = why


async def checked(arguments: Mapping[str, Any]) -> None:
    """`unsendable`, on a worker thread when ``arguments`` hold more than `SMALL_VALUES` values (it holds the GIL, but
    the loop runs between its turns).

    Raises:
        Unsendable: the arguments cannot be sent as they are.
    """
    why = _named(arguments) if _few(arguments) else await anyio.to_thread.run_sync(unsendable, arguments)
    if why is not None:
        raise Unsendable(why)


def _few(arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` hold at most `SMALL_VALUES` values, found out in at most that many steps."""
    count = len(arguments)
    level = [v for v in arguments.values() if isinstance(v, dict | list | tuple)] if count <= SMALL_VALUES else []
    while level and count <= SMALL_VALUES:
        container = level.pop()
        count += len(container)
        items = container.values() if isinstance(container, dict) else container
        level += [item for item in items if isinstance(item, dict | list | tuple)] if count <= SMALL_VALUES else []
    return count <= SMALL_VALUES


def unsendable(arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` cannot be sent to a server as they are (an argument nested deeper than
    `MAX_ARGUMENT_DEPTH`, a whole number of more than `MAX_INT_DIGITS` digits, a float that is NaN or infinite), naming
    the argument; None when they can.

    At most `SMALL_VALUES` values are walked value by value (`_named`): their cost is their count, not their bytes
    (before, a 1 MB string was encoded to JSON to be checked: 6.5–11 ms on a loaded machine, now about 1 µs; a
    typical call's few values take 10–20 µs either way, 1–3% of its 0.7–1.2 ms). More are checked in C where it can:
    Python's JSON encoder refuses NaN, the infinities and, at the interpreter's limit of digits, a longer number; the
    depth is measured a level at a time. Only arguments that fail there (or a process that raised its limit of digits)
    are walked, to name the argument (125,000 values on a loaded machine: 0.09–0.14 s checked, 0.19–0.31 s walked)."""
    if _few(arguments) or not _within(arguments):
        return _named(arguments)
    return None


def encoder_refuses_long_numbers() -> bool:
    """Whether Python's JSON encoder, in this process, refuses every whole number `unsendable` refuses (the
    interpreter's limit of digits is at most `MAX_INT_DIGITS`): then arguments it encodes with ``allow_nan=False``
    hold no number `unsendable` refuses (`sandbox.call_limits.measure` relies on it too)."""
    return 0 < getattr(sys, "get_int_max_str_digits", lambda: 0)() <= MAX_INT_DIGITS


def _within(arguments: Mapping[str, Any]) -> bool:
    """Whether ``arguments`` surely hold nothing `unsendable` refuses."""
    if not encoder_refuses_long_numbers():
        return False  # the process reads and writes longer numbers: the encoder does not refuse them
    try:
        json.dumps(arguments, allow_nan=False, default=repr, check_circular=False)
    except (ValueError, RecursionError):
        return False
    level = [value for value in arguments.values() if isinstance(value, dict | list | tuple)]
    depth = 2  # the arguments object is level 1
    while level:
        if depth > MAX_ARGUMENT_DEPTH:
            return False
        children: list[Any] = []
        for container in level:
            children += container.values() if isinstance(container, dict) else container
        level = [child for child in children if isinstance(child, dict | list | tuple)]
        depth += 1
    return True


def _named(arguments: Mapping[str, Any]) -> str | None:
    """`unsendable`, walked value by value (`first_refused`, the rule the sandbox follows too), naming the first
    argument that fails."""
    refused = first_refused(arguments, MAX_ARGUMENT_DEPTH, MAX_INT_DIGITS)
    if refused is None:
        return None
    name = refused.name
    if refused.too_deep:
        return (
            f"argument {name!r} nests more than {MAX_ARGUMENT_DEPTH} levels deep (the arguments' own "
            f"object the first): with the request around it, more than the {MAX_REQUEST_DEPTH} levels a "
            "server's JSON parser reads (the MCP Python SDK's); nothing was sent"
        )
    if isinstance(refused.value, int):
        return (
            f"argument {name!r} holds a whole number of more than {MAX_INT_DIGITS:,} digits, more than a "
            "server's JSON parser reads (Python's, the MCP SDK's); send it as a string; nothing was sent"
        )
    return (
        f"argument {name!r} holds {refused.value!r}, which JSON cannot carry (it would reach the server as null); "
        "nothing was sent"
    )
