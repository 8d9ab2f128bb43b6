"""`first_refused`: the one rule by which a tool call's arguments are found unsendable as JSON, and which argument.

Shared by the host (`tool_tree.sendable`: what a server's parser reads) and the sandbox (the supervisor's worker, and
the host's measure of a script's call: `sandbox._supervisor.limits.refused_argument`): the container cannot import the
host's modules, but it holds this package (the image copies ``tool_tree/runtime``), so both walk the arguments alike
and name the same argument; each words the refusal for its own reader. Standard library only.

The rule: the arguments object is level 1 and each argument is walked in the order given, depth first; the first
argument holding a container nested deeper than ``max_depth`` levels, a whole number of more than ``max_digits``
digits, or a float that is NaN or infinite is named, with the path to that value (``deep[0]['k']``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

MAX_INT_DIGITS = 4300
"""Digits of the longest whole number Python's JSON parser reads (``sys.get_int_max_str_digits``' default), and
pydantic's (the MCP SDK's)."""

_PATH_CHARS = 80
"""Characters of a path shown whole; a longer one keeps its first and last subscripts (a path 200 levels deep is
600)."""


class Refused(NamedTuple):
    """The first value of an argument that JSON cannot carry as given (`first_refused`)."""

    name: str
    """The argument's name."""
    path: str
    """Where the value is: the name, then a subscript per level (``deep[0]['k']``), cut in its middle when long."""
    value: Any
    """The value: a container nested too deep, a whole number too long, or a float that is NaN or infinite."""

    @property
    def too_deep(self) -> bool:
        """Whether the value is a container nested too deep (else a number)."""
        return isinstance(self.value, dict | list | tuple)


def first_refused(arguments: Mapping[str, Any], max_depth: int, max_digits: int = MAX_INT_DIGITS) -> Refused | None:
    """The first value of ``arguments`` nested deeper than ``max_depth`` levels (the arguments object the first), a
    whole number of more than ``max_digits`` digits, or a float that is NaN or infinite; None when there is none."""
    short_bits = int(max_digits * math.log2(10)) - 1  # a number of fewer bits is surely shorter: not compared
    for name, top in arguments.items():
        # (value, depth, link): the link (parent's link, key) rebuilds the path only for the value refused
        stack: list[tuple[Any, int, Any]] = [(top, 2, None)]
        while stack:
            value, depth, link = stack.pop()
            if isinstance(value, dict | list | tuple):
                if depth > max_depth:
                    return Refused(str(name), _path(str(name), link), value)
                items = value.items() if isinstance(value, dict) else enumerate(value)
                stack.extend((item, depth + 1, (link, key)) for key, item in reversed(list(items)))
            elif isinstance(value, int) and not isinstance(value, bool):
                if abs(value).bit_length() > short_bits and abs(value) >= 10**max_digits:  # 60 µs: only then
                    return Refused(str(name), _path(str(name), link), value)
            elif isinstance(value, float) and not math.isfinite(value):
                return Refused(str(name), _path(str(name), link), value)
    return None


def _path(name: str, link: Any) -> str:
    keys: list[Any] = []
    while link is not None:
        link, key = link
        keys.append(key)
    parts = [f"[{key!r}]" for key in reversed(keys)]
    if len(name) + sum(map(len, parts)) <= _PATH_CHARS:
        return name + "".join(parts)
    head: list[str] = []
    tail: list[str] = []
    for part in parts:  # whole subscripts from the start, then from the end, each side half of the room at most
        if sum(map(len, head)) + len(part) > _PATH_CHARS // 2:
            break
        head.append(part)
    for part in reversed(parts[len(head) :]):
        if sum(map(len, tail)) + len(part) > _PATH_CHARS // 2:
            break
        tail.append(part)
    return name + "".join(head) + "…" + "".join(reversed(tail))
