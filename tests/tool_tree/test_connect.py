"""`tool_tree.connect`: a session that cannot open says why in words a user can act on (real processes and sockets).

Before, a server printing a start-up banner on stdout put the SDK's pydantic traceback on the user's terminal
(even when the server then worked) and left no trace in the failure; an HTTP server's 401 or 500 became
"Server returned an error response"; a refused connection "All connection attempts failed"; a missing command
"[Errno 2] No such file or directory: 'x'".
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest

from tests.support import ran_where_permissions_bind
from tool_tree.config import ServerConfig, load_config, setting_named
from tool_tree.connect import connect, list_tools_raw
from tool_tree.stderr_log import NOISE_LINES, StderrLog

pytestmark = pytest.mark.anyio

# A stdio MCP server in plain Python (no SDK import: it answers at once) that first writes ``BANNER`` lines to
# stdout, then answers `initialize` and `tools/list`; with EXIT set it exits after the banner instead.
SERVER = r"""
import json, os, sys
for line in json.loads(os.environ["BANNER"]):
    print(line, flush=True)
print("starting", file=sys.stderr, flush=True)
if os.environ.get("EXIT"):
    sys.exit(1)
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "b", "version": "1"}}
    else:
        result = {"tools": [{"name": "hi", "inputSchema": {"type": "object"}}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"""


def banner_server(tmp_path: Path, banner: list[str], *, exits: bool = False) -> ServerConfig:
    script = tmp_path / "banner.py"
    script.write_text(SERVER, encoding="utf-8")
    env = {"BANNER": json.dumps(banner), "PATH": os.environ.get("PATH", "")} | ({"EXIT": "1"} if exits else {})
    return ServerConfig(name="b", command=sys.executable, args=(str(script),), env=env, timeout=20)


async def open_and_list(server: ServerConfig, stderr: StderrLog | None = None) -> list[dict[str, Any]]:
    with anyio.fail_after(20):
        async with connect(server, stderr=stderr) as conn:
            return await list_tools_raw(conn.client)


async def test_a_banner_on_stdout_logs_no_traceback_and_is_kept_with_the_stderr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stderr = StderrLog()
    with caplog.at_level(logging.DEBUG):
        tools = await open_and_list(banner_server(tmp_path, ["Starting my server v1.0 ...", '{"not": "rpc"}']), stderr)
    assert [t["name"] for t in tools] == ["hi"]
    assert not [r for r in caplog.records if r.exc_info or "JSONRPC" in r.getMessage()]
    assert stderr.tail() == (
        "starting\n[tooltree] the server wrote to stdout what is not JSON-RPC (logs belong on stderr):\n"
        "  'Starting my server v1.0 ...'\n"
        '  \'{"not": "rpc"}\''
    )


async def test_a_server_that_prints_and_exits_shows_what_it_printed_and_only_the_first_lines(tmp_path: Path) -> None:
    stderr = StderrLog()
    banner = [f"line {i}" for i in range(NOISE_LINES + 2)] + ["x" * 1000]
    with pytest.raises(Exception):  # noqa: B017 -- the connection closes; its exact type is the SDK's
        await open_and_list(banner_server(tmp_path, banner, exits=True), stderr)
    tail = stderr.tail()
    assert "what is not JSON-RPC (and 3 more)" in tail
    assert tail.endswith("\n  'line 0'\n  'line 1'\n  'line 2'")


async def test_the_stdout_note_is_redacted_like_the_stderr(tmp_path: Path) -> None:
    server = banner_server(tmp_path, ["token=s3cr3t-value-123"])
    server = ServerConfig(**{**server.__dict__, "env": {**server.env, "API_TOKEN": "s3cr3t-value-123"}})
    stderr = StderrLog()
    await open_and_list(server, stderr)
    assert "s3cr3t-value-123" not in stderr.tail() and "token=" in stderr.tail()


@pytest.mark.parametrize(
    ("status", "content_type", "body", "expected"),
    [
        (401, "application/json", b'{"error": "invalid_token"}', "HTTP 401 Unauthorized: the server wants credentials"),
        (403, "text/plain", b"no", "HTTP 403 Forbidden: the server refused the credentials in its `headers`"),
        (404, "text/plain", b"not found", "HTTP 404 Not Found: no MCP endpoint at this URL"),
        (500, "text/plain", b"boom", "the server answered HTTP 500 Internal Server Error"),
        (200, "text/html", b"<html>login</html>", "the URL answered with a web page (text/html), not MCP"),
    ],
)
async def test_an_http_refusal_says_what_the_server_answered(
    status: int, content_type: str, body: bytes, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    with serving(status, content_type, body) as url, pytest.raises(mcp.MCPError) as info:
        await open_and_list(ServerConfig(name="h", url=url, timeout=20))
    assert info.value.message.startswith(expected)
    assert not [r for r in caplog.records if "Unexpected content type" in r.getMessage()]


async def test_a_redirect_off_the_url_names_where_and_the_setting_once(caplog: pytest.LogCaptureFixture) -> None:
    # Before: "Redirect to http://127.0.0.2:9/mcp not followed; use that URL as the endpoint if it is the intended
    # server", and the same as a warning, twice, naming no server.
    moved = "http://127.0.0.2:9/mcp?token=secret-in-query"
    with serving(307, "text/plain", b"", location=moved) as url, pytest.raises(mcp.MCPError) as info:
        await open_and_list(ServerConfig(name="h", url=url, timeout=20))
    assert info.value.message == (
        "the URL redirects to http://127.0.0.2:9/mcp, which tooltree does not follow (only a 307 or 308 to the same "
        "host and port, 20 in a row at most: the server's headers go only there): if that is the server's MCP "
        "endpoint, set servers.h.url to it"
    )
    assert not [r for r in caplog.records if "Redirect" in r.getMessage() or "secret-in-query" in r.getMessage()]


async def test_a_json_rpc_error_sent_with_an_error_status_is_kept_as_the_server_wrote_it() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "bad version"}}).encode()
    with serving(400, "application/json", body) as url, pytest.raises(Exception) as info:  # a group
        await open_and_list(ServerConfig(name="h", url=url, timeout=20))
    error: BaseException = info.value
    while isinstance(error, BaseExceptionGroup):  # left as the SDK raised it: nothing to explain
        error = error.exceptions[0]
    assert isinstance(error, mcp.MCPError) and error.message == "bad version"


async def test_a_refused_connection_names_host_port_and_reason() -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError) as info:
        await open_and_list(ServerConfig(name="h", url=f"http://127.0.0.1:{port}/mcp?key=secret", timeout=20))
    assert str(info.value) == f"cannot connect to 127.0.0.1:{port}: Connection refused"


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's cap on one variable")
async def test_a_variable_too_long_to_start_the_server_is_named() -> None:
    # Before: "[Errno 7] Argument list too long: '/usr/bin/python3'", though the server had no argument to speak of.
    server = ServerConfig(name="s", command=sys.executable, args=("-c", "pass"), env={"BIG": "a" * 140_000})
    assert await start_error(server) == (
        f"{sys.executable}: its arguments and environment are too large to start it (the longest is servers.s.env.BIG,"
        " 140,005 bytes; Linux takes at most 131,072 bytes for one argument or variable, and about 2 MiB for all of"
        " them: pass a large value in a file instead)"
    )


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's cap on one variable")
async def test_a_variable_too_long_to_start_the_server_is_named_as_a_codex_config_passes_it_on(tmp_path: Path) -> None:
    # Before: "the longest is mcp_servers.s.env.BIG", a key the file does not have: Codex passes BIG on with env_vars.
    path = tmp_path / "config.toml"
    table = f'[mcp_servers.s]\ncommand = "{sys.executable}"\nenv = {{ big = "b" }}\nenv_vars = ["HOME", "BIG"]\n'
    path.write_text(table, encoding="utf-8")
    server = load_config(path, environ={"BIG": "a" * 140_000, "HOME": "/root"}).server("s")
    assert await start_error(server) == (
        f"{sys.executable}: its arguments and environment are too large to start it (the longest is"
        " mcp_servers.s.env_vars[1], 140,005 bytes; Linux takes at most 131,072 bytes for one argument or variable,"
        " and about 2 MiB for all of them: pass a large value in a file instead)"
    )
    assert [setting_named(server, f"env.{k}") for k in ("big", "HOME")] == [
        "mcp_servers.s.env.big",  # its own `env` table's, though BIG differs from it only in case
        "mcp_servers.s.env_vars[0]",
    ]


async def test_a_process_that_cannot_start_is_named_in_the_configurations_terms(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/no/such/interpreter\n", encoding="utf-8")
    script.chmod(0o755)
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/sh\n", encoding="utf-8")  # no execute bit: refused even to root
    cases = {
        "no-such-command-xyz": "command not found: 'no-such-command-xyz' is not on PATH (/usr/local/bin:/usr/bin:/bin);"
        " give its full path in servers.s.command (`command -v` in a shell finds it)",
        str(tmp_path / "gone"): f"{tmp_path / 'gone'}: no such file",
        str(tmp_path): f"{tmp_path} is a folder, not a program",
        str(script): f"{script}: the interpreter its #! line names was not found",
        str(plain): f"{plain} is not executable (chmod +x it, or run it through its interpreter)",
    }
    searchable = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # the tests' own PATH may hold folders a user cannot search
    for command, expected in cases.items():
        assert await start_error(ServerConfig(name="s", command=command, env=searchable)) == expected
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "tooltree-no-exec").write_text("#!/bin/sh\n", encoding="utf-8")  # found on PATH, no execute bit
    env = {"PATH": f"{on_path}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert await start_error(ServerConfig(name="s", command="tooltree-no-exec", env=env)) == (
        f"'tooltree-no-exec' on PATH is {on_path / 'tooltree-no-exec'}, which is not executable (chmod +x it)"
    )
    missing_cwd = str(tmp_path / "nowhere")
    assert await start_error(ServerConfig(name="s", command=sys.executable, cwd=missing_cwd)) == (
        f"the working folder {missing_cwd} does not exist (servers.s.cwd)"
    )
    (tmp_path / "a-file").write_text("", encoding="utf-8")  # before: said not to exist either, and (`cwd`), not the key
    assert await start_error(ServerConfig(name="s", command=sys.executable, cwd=str(tmp_path / "a-file"))) == (
        f"the working folder {tmp_path / 'a-file'} is a file, not a folder (servers.s.cwd)"
    )


async def test_a_whole_command_line_in_command_says_to_put_its_arguments_in_args() -> None:
    # Before: "command not found: 'npx -y @scope/server' is not on PATH", as if npx were missing.
    for command in ("npx -y @scope/server", f"{sys.executable} server.py"):
        assert await start_error(ServerConfig(name="s", command=command)) == (
            f"no program named {command!r}: `command` is the program alone; give its arguments as a list in `args`"
            " (servers.s.args)"
        )


async def test_a_command_not_found_says_when_a_folder_on_path_cannot_be_searched(tmp_path: Path) -> None:
    # Run again without root's capabilities where they override permissions (before, as root on CI, the case was
    # skipped in silence: root searches any folder).
    if ran_where_permissions_bind(
        f"{__file__}::test_a_command_not_found_says_when_a_folder_on_path_cannot_be_searched"
    ):
        return
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o000)
    env = {"PATH": f"{locked}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert await start_error(ServerConfig(name="s", command="no-such-command-xyz", env=env)) == (
        "command not found: 'no-such-command-xyz' is not on PATH (and a folder on PATH cannot be searched)"
        f" ({env['PATH']}); give its full path in servers.s.command (`command -v` in a shell finds it)"
    )


async def start_error(server: ServerConfig) -> str:
    try:
        await open_and_list(server)
    except OSError as e:
        return str(e)
    return "started"


class _Fixed(BaseHTTPRequestHandler):
    status = 200
    content_type = "text/plain"
    body = b""
    location = ""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(self.status)
        self.send_header("content-type", self.content_type)
        if self.location:
            self.send_header("location", self.location)
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_DELETE = do_POST


class serving:  # used as a context manager, like `open`
    """An HTTP server on a free port answering every request with one fixed reply; yields its MCP URL."""

    def __init__(self, status: int, content_type: str, body: bytes, location: str = "") -> None:
        replies = {"status": status, "content_type": content_type, "body": body, "location": location}
        handler = type("Handler", (_Fixed,), replies)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/mcp"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
