"""Native tool names for the baseline modes: ``<server>__<tool>``, always valid, mapped back exactly.

The Messages API wants tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; MCP allows far more
(dots, slashes, unicode, any length). Each character outside the allowed set becomes ``_``; a
name longer than 64 characters keeps its start and gets a short hash of the full name; two
tools that map to the same name are told apart by ``_2``, ``_3``, ... in (server, tool) order,
so the mapping is deterministic. The mapping back is a dictionary, never a reverse parse.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from tool_tree.tree import ToolEntry

MAX_NAME = 64
SEPARATOR = "__"
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def _clean(text: str) -> str:
    return _BAD.sub("_", text) or "_"


def _fit(base: str, suffix: str = "", limit: int = MAX_NAME) -> str:
    if len(base) + len(suffix) <= limit:
        return base + suffix
    digest = hashlib.sha256(base.encode("utf-8")).hexdigest()[:8]
    return f"{base[: limit - len(suffix) - 9]}_{digest}{suffix}"


def native_names(entries: Iterable[ToolEntry], *, limit: int = MAX_NAME) -> dict[str, ToolEntry]:
    """Every tool under a valid, unique native name (in server, tool order) of at most ``limit`` characters (at
    least 20)."""
    out: dict[str, ToolEntry] = {}
    for entry in sorted(entries, key=lambda e: (e.server, e.tool)):
        base = f"{_clean(entry.server)}{SEPARATOR}{_clean(entry.tool)}"
        name, n = _fit(base, limit=limit), 2
        while name in out:
            name, n = _fit(base, f"_{n}", limit), n + 1
        out[name] = entry
    return out
