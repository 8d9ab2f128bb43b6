"""`tool_tree.unreachable`: an ``https://`` URL of a port that does not speak TLS says so, and to try ``http://``, in
each surface (generate-tree's listing, a pool's start, a call once the session is open), naming the setting and the
file (a real official-SDK server, and a real listening socket that never answers).

Before, a plain-HTTP port failed as "TLS handshake failed: [SSL: WRONG_VERSION_NUMBER] wrong version number
(_ssl.c:1006); check that the server is running and listening there"; a port that took the connection and never
answered the handshake waited the whole start-up timeout, then warned that the server had not answered
``server/discover`` (it was never asked) and failed as "timed out after 8 s starting up" (past 30 s: "ConnectTimeout").
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from generator.discover import discover_one
from tests.tool_tree.test_http_lifecycle import sdk_server
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio

PLAIN = (
    "the port does not speak TLS: it answered the TLS handshake in plain text, as a plain-HTTP server does; if the "
    "server speaks plain HTTP, use http:// in its URL (servers.web.url in tooltree.yaml)"
)
SILENT = (
    "the TLS handshake got no answer in 1 s (the port took the connection and said nothing); check that the port "
    "serves HTTPS, or use http:// in its URL if the server speaks plain HTTP (servers.web.url in tooltree.yaml)"
)


@contextmanager
def silent_port() -> Iterator[int]:
    """A port that takes connections (the kernel's backlog) and never says anything on them."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


async def test_an_https_url_of_a_plain_http_server_says_so_at_once_in_the_listing() -> None:
    async with sdk_server() as server:
        https = server.url.replace("http://", "https://")
        result = await discover_one(ServerConfig(name="web", url=https, timeout=20), source="tooltree.yaml")
    port = https.split(":")[2].split("/")[0]
    assert result.error == f"cannot connect to 127.0.0.1:{port}: {PLAIN}"


async def test_an_https_url_of_a_plain_http_server_says_so_at_a_pools_start_and_at_a_call() -> None:
    async with sdk_server() as server:
        https = ServerConfig(name="web", url=server.url.replace("http://", "https://"), timeout=20)
        async with ServerPool([https], source="tooltree.yaml") as pool:
            with pytest.raises(ServerUnavailable) as info:
                await pool.call("web", "bump", {"tag": "a"})
    port = https.url.split(":")[2].split("/")[0]
    assert info.value.reason == (
        f"could not reach the server at its URL (127.0.0.1:{port}: {PLAIN.replace('; if', '); no call was sent: if')}"
    )
    assert server.calls == []


async def test_a_port_that_never_answers_the_tls_handshake_says_so_within_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with silent_port() as port:
        server = ServerConfig(name="web", url=f"https://127.0.0.1:{port}/mcp", timeout=2)
        result = await discover_one(server, source="tooltree.yaml")
        async with ServerPool([server], source="tooltree.yaml") as pool:
            with pytest.raises(ServerUnavailable) as info:
                await pool.call("web", "bump", {"tag": "a"})
    assert result.error == f"cannot connect to 127.0.0.1:{port}: {SILENT}"
    assert info.value.reason == (
        f"could not reach the server at its URL (127.0.0.1:{port}: the TLS handshake got no answer in 1 s (the port "
        "took the connection and said nothing)); no call was sent: check that the port serves HTTPS, or use http:// "
        "in its URL if the server speaks plain HTTP (servers.web.url in tooltree.yaml)"
    )
    assert not [r for r in caplog.records if "server/discover" in r.getMessage()]
