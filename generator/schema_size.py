"""The check before a raw JSON Schema is walked: :func:`measure` refuses a schema too big or too deep to convert at all.

(The walk's own caps, past which a part becomes ``Any``, are in :mod:`generator.schema_convert`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAX_NODES = 50_000
"""JSON values in one raw schema; a bigger schema is not converted at all."""
MAX_RAW_DEPTH = 100
"""JSON nesting of one raw schema; a deeper schema is not converted at all."""


def measure(value: Any, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_RAW_DEPTH) -> str | None:
    """Why a raw JSON value is too big or too deep to convert, or None when it is fine (iterative).

    The reason is the first limit a depth-first walk runs into.
    """
    if _within(value, max_nodes, max_depth):
        return None
    # Last child first; each container's children taken one at a time, so the walk stops at the limit (before, all
    # children of each were put on the stack as tuples first: a million-item list took 2 s, mostly in the garbage
    # collector, which walked the whole tool listing as the tuples piled up).
    stack: list[tuple[Iterator[Any], int]] = [(iter((value,)), 1)]
    nodes = 0
    while stack:
        children, depth = stack[-1]
        v = next(children, _END)
        if v is _END:
            stack.pop()
            continue
        nodes += 1
        if nodes > max_nodes:
            return f"more than {max_nodes} JSON values"
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(v, dict):
            stack.append((reversed(v.values()), depth + 1))
        elif isinstance(v, list | tuple):
            stack.append((reversed(v), depth + 1))
    return None


_END = object()


def _within(value: Any, max_nodes: int, max_depth: int) -> bool:
    """Whether ``value`` has at most ``max_nodes`` JSON values, at most ``max_depth`` deep (level by level)."""
    level = [value]
    nodes = depth = 0
    while level:
        nodes += len(level)
        depth += 1
        if nodes > max_nodes or depth > max_depth:
            return False
        below: list[Any] = []
        for v in level:
            if isinstance(v, str):
                continue  # most values
            if isinstance(v, dict):
                below.extend(v.values())
            elif isinstance(v, (list, tuple)):
                below.extend(v)
        level = below
    return True
