"""Loopback addresses other than 127.0.0.1: `tooltree serve --http` on one, served without ``--allow-remote``, to the
official SDK client, with the SDK's DNS-rebinding protection on; a URL elicitation's ``http://`` URL to one."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.serve.loopback import is_loopback
from agent.serve.upstream_asks import url_problem
from tests.serve.conftest import RAW_HANDSHAKE, RAW_HEADERS, TOKEN, http_client, write_config
from tests.support import TEST_OWNER, ServeProcess

pytestmark = pytest.mark.anyio


@pytest.fixture
def on_127_0_0_2(serve_tree: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    """A real ``serve --http --host 127.0.0.2`` (no sandbox kept warm: listing the tools starts none)."""
    config = write_config(tmp_path, "loopback")
    argv = ["-m", "tooltree_cli.main", "serve", "--http", "--host", "127.0.0.2", "--port", "0", "--warm", "0"]
    argv += ["--config", str(config), "--tree", str(serve_tree), "--no-regenerate"]
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "TOOLTREE_SERVE_TOKEN": TOKEN}
    served = ServeProcess([sys.executable, *argv], env)
    yield served
    served.stop()


async def test_serve_on_127_0_0_2_answers_the_sdk_client_and_refuses_another_host(on_127_0_0_2: ServeProcess) -> None:
    # Before: refused at start as not loopback; with --allow-remote, served with no Host check at all.
    import httpx2

    assert on_127_0_0_2.url.startswith("http://127.0.0.2:")
    async with http_client(on_127_0_0_2.url) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
    assert names == ["list_files", "read_file", "search_tools", "execute_python"]
    port = on_127_0_0_2.url.split(":")[2].split("/")[0]
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": RAW_HANDSHAKE}
    headers = {**RAW_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(timeout=30) as http:
        rebound = await http.post(
            on_127_0_0_2.url, json=initialize, headers={**headers, "Host": f"evil.example:{port}"}
        )
        assert rebound.status_code == 421  # a page of another site whose name was rebound to 127.0.0.2
        cross = await http.post(on_127_0_0_2.url, json=initialize, headers={**headers, "Origin": "http://evil.example"})
        assert cross.status_code == 403
        # Host names compare in any case: before, 421 'Invalid Host header' (curl sends the URL's case).
        upper = await http.post(
            on_127_0_0_2.url, json=initialize,
            headers={**headers, "Host": f"LocalHost:{port}", "Origin": f"http://LOCALHOST:{port}"},
        )  # fmt: skip
        assert upper.status_code == 200, upper.text


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("127.255.255.254", True), ("localhost", True), ("::1", True),
     ("0:0:0:0:0:0:0:1", True), ("0.0.0.0", False), ("::", False), ("192.0.2.1", False), ("128.0.0.1", False),
     ("localhost.example", False)],
)  # fmt: skip
def test_every_address_of_127_0_0_0_8_and_1_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_url_elicitation_may_open_http_on_any_loopback_address_and_on_no_other() -> None:
    # Before: http://127.0.0.2/… (a server in development on another loopback address) was refused as not this machine.
    for url in ("http://127.0.0.2:8080/callback", "http://[::1]:8080/cb", "http://LOCALHOST/cb", "http://127.0.0.1/"):
        assert url_problem(url) is None, url
    for url in ("http://128.0.0.1/cb", "http://localhost.example/cb", "http://0.0.0.0/cb", "http://[::]/cb"):
        assert (
            url_problem(url)
            == "the URL is neither https:// nor http:// to this machine, which a client may open in a browser"
        )
