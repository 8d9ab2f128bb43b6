"""The lists `tooltree serve` offers of its servers' prompts, resources and templates are paged
(`agent.serve.list_pages`): a long one comes in pages, each naming the next, that together hold every item once.

`tooltree serve` runs as a real subprocess over stdio, driven by the official SDK client, in front of
tests/servers/prompts_server.py with about 2 MB of resources (``wide``); no sandbox starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import MCPError

from agent.serve.list_pages import PAGE_BYTES, page
from tests.serve.test_upstream_prompts_resources import generate, serve, server_entry

pytestmark = pytest.mark.anyio

WIDE = server_entry("alpha", "alpha", "wide")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return generate(tmp_path, WIDE)


async def test_a_long_resource_list_comes_in_pages_that_name_the_next_and_hold_each_item_once(
    tree: Path, tmp_path: Path
) -> None:
    # Before: one answer of about 2 MB, which the SDK client refuses over HTTP ("Server-sent event exceeded the
    # 1048576 byte limit"): the client saw no resource at all.
    async with serve(tree, tmp_path / "serve", WIDE) as client:
        pages = [await client.list_resources()]
        while (cursor := pages[-1].next_cursor) is not None and len(pages) < 100:
            pages.append(await client.list_resources(cursor=cursor))
        with pytest.raises(MCPError) as refused:
            await client.list_resources(cursor="page-2")
    assert len(pages) > 1
    assert all(len(p.model_dump_json(by_alias=True).encode()) < PAGE_BYTES + 16_384 for p in pages)
    uris = [str(r.uri) for p in pages for r in p.resources]
    wide = [f"alpha://wide/{n}" for n in range(900)]
    assert len(uris) == len(set(uris)) and set(wide) < set(uris) and "alpha://readme" in uris
    assert str(refused.value) == (
        "resources/list: the cursor 'page-2' is not one this list gave; list again without a cursor"
    )


def test_a_list_that_fits_a_page_has_no_cursor_and_a_page_holds_at_least_one_item() -> None:
    import mcp_types as types

    few = [types.Prompt(name=f"p{n}") for n in range(3)]
    assert page(few, None, "prompts/list") == (few, None)
    huge = [types.Prompt(name="big", description="d" * (PAGE_BYTES + 10)), *few]
    assert page(huge, None, "prompts/list") == (huge[:1], "1")
    assert page(huge, "1", "prompts/list") == (few, None)
    assert page(huge, "4", "prompts/list") == ([], None)
