"""The prompts, resources and resource templates a server's snapshot records besides its tools, and their bounds.

generate-tree lists them (`list_extras`) on the connection it lists the tools on, when the server declares the
capability (``prompts``, ``resources``), and stores the raw lists in the server's snapshot under `LIST_KEYS`
(``prompts``, ``resources``, ``resourceTemplates``); `tooltree serve` offers what the tree's snapshots record
(`agent.serve.upstream_lists`), reading them back with `recorded_lists`. A snapshot without a key (a server without
the capability, one whose listing failed, a tree of an older release) records none of that kind.

Bounds, the same on both sides: at most `MAX_PAGES` pages and `MAX_ITEMS` items of each list (a cursor at most
`tool_tree.connect.MAX_CURSOR_CHARS` characters, none repeated), `MAX_LIST_BYTES` of each; a snapshot may come from
elsewhere, so what is read back is bounded again, and each item is cleaned where it is offered
(`agent.serve.upstream_offer`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import mcp
import mcp_types as mt
from pydantic import BaseModel, ConfigDict

from tool_tree.connect import MAX_CURSOR_CHARS
from tool_tree.text import one_line

logger = logging.getLogger(__name__)

MAX_PAGES = 50
"""Pages of one list (prompts, resources, templates) read from one server."""
MAX_ITEMS = 1_000
"""Items of one list kept from one server (more are counted, and said in a warning)."""
MAX_LIST_BYTES = 8 * 1024 * 1024
"""JSON bytes of one list kept from one server; the pages past them are not read (said in a warning)."""
LIST_KEYS: tuple[tuple[str, str, str], ...] = (
    ("prompts", "prompts/list", "prompts"),
    ("resources", "resources/list", "resources"),
    ("resourceTemplates", "resources/templates/list", "resources"),
)
"""(the key in the snapshot and in the result, the method, the capability the server declares for it)."""
_REQUESTS: dict[str, Any] = {
    "prompts/list": mt.ListPromptsRequest,
    "resources/list": mt.ListResourcesRequest,
    "resources/templates/list": mt.ListResourceTemplatesRequest,
}


class _Raw(BaseModel):
    """A result that keeps every field the server sent."""

    model_config = ConfigDict(extra="allow")


async def list_extras(client: mcp.Client, server: str) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The lists of `LIST_KEYS` ``server`` declares the capability of (raw items, bounded), and warnings: a list
    that failed is left out (the server's tools are not affected), one cut at a bound is kept cut."""
    declared = client.server_capabilities
    lists: dict[str, list[dict[str, Any]]] = {}
    warnings: list[str] = []
    for key, method, capability in LIST_KEYS:
        if declared is None or getattr(declared, capability, None) is None:
            continue
        try:
            lists[key] = await _pages(client, server, method, key, warnings)
        except (mcp.MCPError, ValueError) as e:
            warnings.append(f"{server}: {method} failed, so the tree records none: {one_line(str(e), 300)}")
        except Exception as e:  # the connection broke (the server exited): its tools were listed already
            said = one_line(str(e), 300) or type(e).__name__
            warnings.append(f"{server}: {method} failed, so the tree records none: {said}")
    return lists, warnings


async def _pages(client: mcp.Client, server: str, method: str, key: str, warnings: list[str]) -> list[dict[str, Any]]:
    """The items of one list, over at most `MAX_PAGES` pages, `MAX_ITEMS` items and `MAX_LIST_BYTES`.

    Raises:
        mcp.MCPError: the server answered with an error.
        ValueError: the result holds no list under ``key``.
    """
    items: list[dict[str, Any]] = []
    seen: set[bytes] = set()
    size = 0
    cursor: str | None = None
    for page in range(MAX_PAGES):
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        result = (await client.session.send_request(_REQUESTS[method](params=params), _Raw)).model_dump()
        listed = result.get(key)
        if not isinstance(listed, list):
            raise ValueError(f"the result has no list `{key}`")
        for item in listed:
            try:  # an item that is not text JSON can write (a lone surrogate) is left out, as malformed
                size += len(json.dumps(item, ensure_ascii=False).encode()) if isinstance(item, dict) else 0
            except (UnicodeEncodeError, ValueError, RecursionError):
                continue
            if not isinstance(item, dict):
                continue
            if len(items) >= MAX_ITEMS or size > MAX_LIST_BYTES:
                warnings.append(
                    f"{server}: {method}: only the first {len(items):,} items are recorded (at most {MAX_ITEMS:,} "
                    f"items and {MAX_LIST_BYTES // 2**20} MiB of each list)"
                )
                return items
            items.append(item)
        cursor = result.get("nextCursor")
        if cursor is None or cursor == "":
            return items
        digest = hashlib.sha256(str(cursor).encode("utf-8", "surrogatepass")).digest()
        if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS or digest in seen:
            warnings.append(f"{server}: {method}: malformed or repeated cursor after page {page + 1}")
            return items
        seen.add(digest)
    warnings.append(f"{server}: {method}: only the first {MAX_PAGES} pages are recorded")
    return items


def recorded_lists(snapshot: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The lists a snapshot records (a key absent or not a list: none), each its first `MAX_ITEMS` objects."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key, _, _ in LIST_KEYS:
        listed = snapshot.get(key)
        if isinstance(listed, list):
            out[key] = [item for item in listed[:MAX_ITEMS] if isinstance(item, dict)]
    return out
