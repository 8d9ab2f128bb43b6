"""`tooltree serve --http`'s bearer token as clients write its header: the scheme in any case, spaces after it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serve.conftest import RAW_HANDSHAKE, RAW_HEADERS, TOKEN, write_config
from tests.support import TEST_OWNER, ServeProcess

pytestmark = pytest.mark.anyio


@pytest.fixture
def served(serve_tree: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    """A real ``serve --http`` (no sandbox kept warm: a handshake starts none)."""
    config = write_config(tmp_path, "bearer")
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--http", "--port", "0", "--warm", "0"]
    argv += ["--config", str(config), "--tree", str(serve_tree), "--no-regenerate"]
    process = ServeProcess(argv, {**os.environ, "TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "TOOLTREE_SERVE_TOKEN": TOKEN})
    yield process
    process.stop()


async def test_the_scheme_in_any_case_and_spaces_after_it_are_taken_and_a_wrong_token_is_not(
    served: ServeProcess,
) -> None:
    # Before: `Authorization: bearer <the token>` was 401 "wrong bearer token" (the MCP Inspector then asked for an
    # OAuth login), though HTTP reads an authentication scheme in any case, as the MCP SDK's own guard does.
    import httpx2

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": RAW_HANDSHAKE}
    async with httpx2.AsyncClient(timeout=30) as http:

        async def status(authorization: str) -> int:
            answer = await http.post(
                served.url, json=initialize, headers={**RAW_HEADERS, "Authorization": authorization}
            )
            return int(answer.status_code)

        assert [await status(f"{scheme} {TOKEN}") for scheme in ("Bearer", "bearer", "BEARER")] == [200, 200, 200]
        assert await status(f"Bearer   {TOKEN}") == 200
        refused = [f"bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, f"Bearer{TOKEN}", f"Bearer {TOKEN} {TOKEN}", "bearer"]
        assert [await status(authorization) for authorization in refused] == [401] * len(refused)
