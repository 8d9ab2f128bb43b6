"""`tool_tree.http_errors`: an HTTP error status names the setting it is about and the configuration file, in each
surface (generate-tree's listing, a pool's start, a call once the session is open), on real sockets.

Before, "server error: HTTP 401 Unauthorized: the server wants credentials: set them in its `headers` (…)", or "the
server answered HTTP 502 Bad Gateway", named the server but neither ``servers.NAME.headers`` or ``servers.NAME.url``
nor the file, as the other errors of a server's configuration do.
"""

from __future__ import annotations

import pytest

from generator.discover import discover_one
from tests.tool_tree.test_connect import serving
from tests.tool_tree.test_http_lifecycle import Tokens, sdk_server, text
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (401, "HTTP 401 Unauthorized: the server wants credentials: set them in its `headers`"),
        (403, "HTTP 403 Forbidden: the server refused the credentials in its `headers`"),
        (404, "HTTP 404 Not Found: no MCP endpoint at this URL: check its path (often /mcp)"),
        (502, "the server answered HTTP 502 Bad Gateway"),
    ],
)
async def test_a_status_refusing_the_session_names_its_setting_and_file_in_the_listing_and_the_pool(
    status: int, said: str
) -> None:
    key = "headers" if status in (401, 403) else "url"
    with serving(status, "text/plain", b"no") as url:
        server = ServerConfig(name="web", url=url, timeout=20)
        result = await discover_one(server, source="tooltree.yaml")
        async with ServerPool([server], source="tooltree.yaml") as pool:
            with pytest.raises(ServerUnavailable) as info:
                await pool.call("web", "bump", {"tag": "a"})
    assert result.error is not None and result.error.startswith(f"server error: {said}")
    assert result.error.endswith(f" (servers.web.{key} in tooltree.yaml)")
    assert info.value.reason.startswith(said)
    assert info.value.reason.endswith(f" (servers.web.{key} in tooltree.yaml)")


async def test_a_token_revoked_mid_session_names_the_headers_setting_and_file_in_the_calls_error() -> None:
    tokens = Tokens("t0k3n")
    async with sdk_server(tokens) as server:
        config = ServerConfig(name="auth", url=server.url, timeout=20, headers={"Authorization": "Bearer t0k3n"})
        async with ServerPool([config], source="tooltree.yaml") as pool:
            assert text(await pool.call("auth", "bump", {"tag": "a"})) == "bumped a"
            tokens.valid.clear()
            result = await pool.call("auth", "bump", {"tag": "b"})
    message = text(result)
    assert message.startswith("server error -32603: HTTP 401 Unauthorized: the server refused the credentials")
    assert message.endswith(" (servers.auth.headers in tooltree.yaml)")
    assert "t0k3n" not in message
