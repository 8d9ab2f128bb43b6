"""The prompts, resources and resource templates a server's snapshot records besides its tools, and their bounds.

generate-tree lists them (`list_extras`) on the connection it lists the tools on, when the server declares the
capability (``prompts``, ``resources``), and stores the raw lists in the server's snapshot under `LIST_KEYS`
(``prompts``, ``resources``, ``resourceTemplates``); `tooltree serve` offers what the tree's snapshots record
(`agent.serve.upstream_lists`), reading them back with `recorded_lists`. A list whose listing failed (an error, the
server exited, its timeout ran out) is taken from the server's previous snapshot (`with_previous`), as the tools and
snapshot of a server that fails to start are kept. A snapshot without a key (a server without the capability, a tree
of an older release) records none of that kind; the manifest's ``lists_recorded`` (`tool_tree.tree.Manifest`) tells
the two apart.

A server that declares ``resources.subscribe`` (a request of the handshake era; at 2026-07-28 the URIs of a
``subscriptions/listen`` stream, `tool_tree.listens`) has it recorded in its snapshot's ``info`` as ``"capabilities":
{"resources": {"subscribe": true}}`` (`declared_subscribe`, written by `tool_tree.connect.server_info`; `subscribes`
reads it back): `tooltree serve` declares resource subscriptions when a server it offers has it.

Bounds, the same on both sides: at most `MAX_PAGES` pages and `MAX_ITEMS` items of each list (a cursor at most
`tool_tree.connect.MAX_CURSOR_CHARS` characters, none repeated), `MAX_LIST_BYTES` and `MAX_LIST_VALUES` of each; a
snapshot may come from elsewhere, so what is read back is bounded again (and its values counted before it is parsed,
`tool_tree.tree.snapshot_json`), and each item is cleaned where it is offered
(`agent.serve.upstream_offer`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tool_tree.held_values import Share
from tool_tree.text import one_line
from tool_tree.unparsed import count_values

if TYPE_CHECKING:
    import mcp
    from pydantic import BaseModel

# The MCP SDK and pydantic (about 0.4 s to import) are imported only by the listing below: generate-tree from
# snapshots and its no-op rerun read recorded lists (`recorded_lists`, `with_previous`) and start no server.

logger = logging.getLogger(__name__)

MAX_PAGES = 50
"""Pages of one list (prompts, resources, templates) read from one server."""
MAX_ITEMS = 1_000
"""Items of one list kept from one server (more are counted, and said in a warning)."""
MAX_LIST_BYTES = 8 * 1024 * 1024
"""JSON bytes of one list kept from one server; the pages past them are not read (said in a warning)."""
MAX_LIST_VALUES = 300_000
"""JSON values of one list kept from one server, as `tool_tree.connect.MAX_LIST_VALUES` bounds the tools: about what
`MAX_LIST_BYTES` holds at 28 bytes a value, the density of real tool listings (the lists of the tests' third-party
servers run 21–49 bytes a value), where 8 MiB of ``{}`` is 2.8 million values, 200 MB or more once parsed."""
LIST_KEYS: tuple[tuple[str, str, str], ...] = (
    ("prompts", "prompts/list", "prompts"),
    ("resources", "resources/list", "resources"),
    ("resourceTemplates", "resources/templates/list", "resources"),
)
"""(the key in the snapshot and in the result, the method, the capability the server declares for it)."""


@functools.cache
def _raw() -> type[BaseModel]:
    """The result type of a list request: a model that keeps every field the server sent."""
    from pydantic import BaseModel, ConfigDict

    class _Raw(BaseModel):
        model_config = ConfigDict(extra="allow")

    return _Raw


def declared_keys(client: mcp.Client) -> list[str]:
    """The keys of `LIST_KEYS` whose capability the server declares (the lists it is asked for)."""
    declared = client.server_capabilities
    return [key for key, _, capability in LIST_KEYS if getattr(declared, capability, None) is not None]


def declared_subscribe(client: mcp.Client) -> dict[str, Any]:
    """What a snapshot's ``info`` records of the server's resource subscriptions: ``{"capabilities": {"resources":
    {"subscribe": True}}}`` when it declares ``resources.subscribe`` (at 2026-07-28, which has no
    ``resources/subscribe``, the SDK declares it for the URIs of a ``subscriptions/listen`` stream, which the pool
    subscribes to: `tool_tree.listens`), else nothing."""
    resources = getattr(client.server_capabilities, "resources", None)
    if getattr(resources, "subscribe", None) is not True:
        return {}
    return {"capabilities": {"resources": {"subscribe": True}}}


def subscribes(snapshot: Mapping[str, Any]) -> bool:
    """Whether a snapshot records that its server declares resource subscriptions (`declared_subscribe`)."""
    info = snapshot.get("info")
    declared = info.get("capabilities") if isinstance(info, dict) else None
    resources = declared.get("resources") if isinstance(declared, dict) else None
    return isinstance(resources, dict) and resources.get("subscribe") is True


async def list_extras(
    client: mcp.Client, server: str, share: Share | None = None
) -> tuple[dict[str, list[dict[str, Any]]], list[str], set[str]]:
    """The lists of `LIST_KEYS` ``server`` declares the capability of (raw items, bounded), warnings, and the keys of
    the lists that failed: those are left out here (the server's tools are not affected) and the tree keeps what it
    recorded of them before (`with_previous`); one cut at a bound is kept cut. The items kept are counted against
    the run's values with ``share`` (`tool_tree.held_values`): past the run's limit, a list is cut as at its own."""
    import mcp

    lists: dict[str, list[dict[str, Any]]] = {}
    warnings: list[str] = []
    failed: set[str] = set()
    keys = declared_keys(client)
    share = share if share is not None else Share()
    for key, method, _ in LIST_KEYS:
        if key not in keys:
            continue
        try:
            lists[key] = await _pages(client, server, method, key, warnings, share)
            continue
        except (mcp.MCPError, ValueError) as e:
            said = one_line(str(e), 300)
        except Exception as e:  # the connection broke (the server exited): its tools were listed already
            said = one_line(str(e), 300) or type(e).__name__
        failed.add(key)
        warnings.append(f"{server}: {method} failed, so the tree keeps the ones it recorded before, if any: {said}")
    share.keep()  # each list's items were counted as they were kept
    return lists, warnings, failed


def with_previous(
    lists: Mapping[str, list[dict[str, Any]]], failed: set[str], previous: Mapping[str, Any] | None
) -> dict[str, list[dict[str, Any]]]:
    """``lists`` with, for each key in ``failed``, what the ``previous`` snapshot of the server records under it (as
    a server that fails to start keeps its snapshot, one whose listing of its prompts or resources failed keeps
    them), in the order of `LIST_KEYS`."""
    kept = recorded_lists(previous) if previous is not None and failed else {}
    out: dict[str, list[dict[str, Any]]] = {}
    for key, _, _ in LIST_KEYS:
        if key in lists:
            out[key] = list(lists[key])
        elif key in failed and key in kept:
            out[key] = kept[key]
    return out


def previous_snapshot(tree: Any, manifest: Any, server: str) -> dict[str, Any] | None:
    """The snapshot of ``server`` in the tree folder ``tree`` whose manifest is ``manifest`` (None: none, or not
    readable); the caller holds the tree's lock (`tool_tree.tree.tree_lock`)."""
    from tool_tree.tree import TreeError, snapshot_data

    entry = next((s for s in getattr(manifest, "servers", ()) if s.name == server), None)
    if entry is None:
        return None
    try:
        return snapshot_data(tree, entry)
    except (TreeError, OSError) as e:
        logger.warning("%s: the prompts and resources the tree recorded before cannot be read: %s", server, e)
        return None


async def _pages(
    client: mcp.Client, server: str, method: str, key: str, warnings: list[str], share: Share
) -> list[dict[str, Any]]:
    """The items of one list, over at most `MAX_PAGES` pages, `MAX_ITEMS` items, `MAX_LIST_BYTES` and
    `MAX_LIST_VALUES`, and what the run's limit leaves (``share``).

    Raises:
        mcp.MCPError: the server answered with an error.
        ValueError: the result holds no list under ``key``.
    """
    import mcp_types as mt

    from tool_tree.connect import MAX_CURSOR_CHARS

    requests: dict[str, Any] = {
        "prompts/list": mt.ListPromptsRequest,
        "resources/list": mt.ListResourcesRequest,
        "resources/templates/list": mt.ListResourceTemplatesRequest,
    }
    items: list[dict[str, Any]] = []
    seen: set[bytes] = set()
    size = values = 0
    cursor: str | None = None
    for page in range(MAX_PAGES):
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        result = (await client.session.send_request(requests[method](params=params), _raw())).model_extra or {}
        listed = result.get(key)
        if not isinstance(listed, list):
            raise ValueError(f"the result has no list `{key}`")
        for item in listed:
            if not isinstance(item, dict):
                continue
            try:  # an item that is not text JSON can write (a lone surrogate) is left out, as malformed
                encoded = json.dumps(item, ensure_ascii=False).encode()
            except (UnicodeEncodeError, ValueError, RecursionError):
                continue
            size += len(encoded)
            counted = count_values(encoded, MAX_LIST_VALUES - values + 1, exact=True)
            values += counted
            if len(items) >= MAX_ITEMS or size > MAX_LIST_BYTES or values > MAX_LIST_VALUES:
                warnings.append(
                    f"{server}: {method}: only the first {len(items):,} items are recorded (at most {MAX_ITEMS:,} "
                    f"items, {MAX_LIST_BYTES // 2**20} MiB and {MAX_LIST_VALUES:,} JSON values of each list)"
                )
                return items
            if not share.add(counted) and share.held is not None:
                warnings.append(
                    f"{server}: {method}: only the first {len(items):,} items are recorded: "
                    + share.held.over("the next")
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
