"""Pages of the prompts, resources and resource templates `tooltree serve` offers (`agent.serve.upstream_extras`).

A list is answered in pages of at most `PAGE_BYTES` of JSON, each but the last with a ``nextCursor`` (the offset of
its next item, as text), as MCP lists are paged. Before, a list went out whole: the servers' lists together may hold
thousands of items (`tool_tree.snapshot_lists.MAX_ITEMS` per server), and over HTTP an answer of more than 1 MiB is
one server-sent event the official SDK client refuses ("Server-sent event exceeded the 1048576 byte limit"), so a
client saw none of them. A list that fits one page is answered as before, with no cursor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

PAGE_BYTES = 256 * 1024
"""The most JSON of one page's items (one item more than that is a page of its own): a quarter of the 1 MiB event
the SDK client reads over HTTP, so a page fits with its envelope whatever an item holds (each is capped:
`agent.serve.upstream_offer`)."""

Item = TypeVar("Item", bound=BaseModel)


def page(items: Sequence[Item], cursor: str | None, what: str) -> tuple[list[Item], str | None]:
    """The items of the page ``cursor`` names (None: the first) and the cursor of the next page (None: it was the
    last). ``what``: the list's method, for the error.

    Raises:
        MCPError: ``cursor`` is not one this list gave (INVALID_PARAMS, as MCP asks).
    """
    start = 0
    if cursor is not None:
        if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 12 and int(cursor) <= len(items)):
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"{what}: the cursor {cursor[:40]!r} is not one this list gave; list again without a cursor",
            )
        start = int(cursor)
    end, used = start, 0
    while end < len(items):
        cost = len(items[end].model_dump_json(by_alias=True, exclude_none=True).encode("utf-8")) + 1
        if end > start and used + cost > PAGE_BYTES:
            break
        used += cost
        end += 1
    return list(items[start:end]), (str(end) if end < len(items) else None)
