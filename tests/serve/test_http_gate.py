"""`agent.serve.http_gate` in a real `tooltree serve --http` process, with the official SDK client and raw HTTP:
a new client gets the place of the longest idle session, the refusal when none can be ended names the
settings, a client's message is counted before it is parsed, the requests a session and the server have in
flight are bounded, paths other than ``/mcp`` carry no OAuth challenge, and a request whose client's
connection closed is cancelled (that one needs the Docker engine: it runs a script).

The upstream server is `held_server.py`: its ``hold`` calls (the passthrough tool ``held__hold``) stay in
flight until the test lets them go, so "a request in flight" is a fact the test waits on, not a timing.
"""

from __future__ import annotations

import json
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from agent.serve.http_requests import MAX_MESSAGE_VALUES, SESSION_LARGE, SMALL_BODY, TOTAL_LARGE
from tests.serve.conftest import MARK_ENV, RAW_HANDSHAKE, TOKEN, Serve, clean_up, http_client, new_serve
from tests.serve.conftest import raw_session as initialize
from tests.support import run_owner, wait_until

pytestmark = pytest.mark.anyio

WAIT = 90.0
HELD_SERVER = Path(__file__).with_name("held_server.py")
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **AUTH}
LARGE_TAG = "x" * (SMALL_BODY + 1024)


@dataclass
class Upstream:
    """The held server's calls: those that arrived (by tag), and the event that lets them all go."""

    socket: Path
    arrived: list[str] = field(default_factory=list)
    release: anyio.Event = field(default_factory=anyio.Event)
    changed: anyio.Event = field(default_factory=anyio.Event)

    async def at_the_server(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while not data.endswith(b"\n"):
                data += await stream.receive()
            self.arrived.append(data.decode().strip())
            self.changed.set()
            await self.release.wait()
            await stream.send(b"go\n")

    async def until(self, count: int) -> None:
        """Wait until ``count`` calls have arrived."""
        with anyio.fail_after(WAIT):
            while len(self.arrived) < count:
                self.changed = anyio.Event()
                await self.changed.wait()


@pytest.fixture(scope="module")
def held_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree of `held_server.py`, generated once."""
    from generator.generate import generate
    from tooltree_cli.common import load

    folder = tmp_path_factory.mktemp("held-tree")
    config = folder / "tooltree.yaml"
    config.write_text(_config_text("/nonexistent", "generate", {}), encoding="utf-8")
    result = generate(load(config), folder / "tree", embeddings="off")
    assert not result.failed, [s.error for s in result.failed]
    return folder / "tree"


def _config_text(socket: str, mark: str, serve: dict[str, Any]) -> str:
    env = json.dumps({"HELD_SOCKET": socket, MARK_ENV: mark})
    lines = ["servers:", "  held:", f"    command: {json.dumps(sys.executable)}",
             f"    args: [{json.dumps(str(HELD_SERVER))}]", f"    env: {env}",
             "sandbox:", "  timeout: 600"]  # fmt: skip
    settings = {"passthrough": ["held.hold"], "warm": 0, "progress_interval": 0.2, **serve}
    return "\n".join([*lines, "serve:", *(f"  {k}: {json.dumps(v)}" for k, v in settings.items())]) + "\n"


@pytest.fixture
def held(held_tree: Path, tmp_path: Path) -> Iterator[Callable[..., tuple[Serve, Upstream]]]:
    """``held(max_sessions=2)``: a serve process over HTTP (no warm sandbox) whose upstream is the held server."""
    made: list[Serve] = []
    with tempfile.TemporaryDirectory(prefix="gate-", dir="/tmp") as short:  # unix socket paths stay short

        def make(**serve: Any) -> tuple[Serve, Upstream]:
            mark = uuid.uuid4().hex[:12]
            socket = Path(short) / f"{mark}.sock"
            config = tmp_path / f"tooltree-{mark}.yaml"
            config.write_text(_config_text(str(socket), mark, serve), encoding="utf-8")
            made.append(Serve(config, held_tree, run_owner(f"serve-{mark}"), mark))
            made[-1].start_http()
            return made[-1], Upstream(socket)

        yield make
        for serve in made:
            serve.stop()


@asynccontextmanager
async def listening(upstream: Upstream) -> AsyncIterator[None]:
    """The held server's calls reach ``upstream`` meanwhile; on leaving, every call still held is let go."""
    listener = await anyio.create_unix_listener(upstream.socket)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, upstream.at_the_server)
        try:
            yield
        finally:
            upstream.release.set()
            tg.cancel_scope.cancel()


async def list_tools(http: Any, url: str, session: dict[str, str]) -> int:
    return int((await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session))
               .status_code)  # fmt: skip


async def test_a_new_client_takes_the_place_of_an_idle_session_even_one_holding_a_get_stream(
    held: Callable[..., tuple[Serve, Upstream]],
) -> None:
    # Before: with max_sessions open and never ended, every new client got 503 for idle_timeout (1800 s), and a
    # session holding a GET stream open never became idle at all.
    import httpx2

    serve, upstream = held(max_sessions=2)
    url = serve.url
    stream_ended = anyio.Event()
    async with listening(upstream), httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as http:
        streaming = await initialize(http, url)  # the older session, which holds a GET stream open
        assert await list_tools(http, url, streaming) == 200  # past its handshake (a session in it is never ended)
        opened = anyio.Event()

        async def hold_stream() -> None:
            async with http.stream("GET", url, headers={**streaming, "Accept": "text/event-stream"}) as response:
                assert response.status_code == 200
                opened.set()
                async for _ in response.aiter_bytes():
                    pass
            stream_ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold_stream)
            with anyio.fail_after(WAIT):
                await opened.wait()
            worked = await initialize(http, url)  # newer, and it called a tool
            call = {"name": "list_files", "arguments": {"path": "servers"}}
            listed = await http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call},
                                     headers=worked)  # fmt: skip
            assert listed.status_code == 200
            async with http_client(url, read_timeout_seconds=WAIT) as newcomer:  # a third client, the SDK's
                tools = [t.name for t in (await newcomer.list_tools()).tools]
                with anyio.fail_after(WAIT):
                    await stream_ended.wait()  # the session idle longest was ended, its GET stream with it
                assert await list_tools(http, url, streaming) == 404  # its client would initialize again
                assert await list_tools(http, url, worked) == 200
    assert "held__hold" in tools


async def test_a_new_client_is_refused_naming_the_settings_only_while_every_session_has_a_request_in_flight(
    held: Callable[..., tuple[Serve, Upstream]],
) -> None:
    import httpx2

    serve, upstream = held(max_sessions=2, idle_timeout=900)
    answered: list[Any] = []

    async def hold(client: Any, tag: str) -> None:
        answered.append(await client.call_tool("held__hold", {"tag": tag}))

    async with (
        listening(upstream),
        http_client(serve.url, read_timeout_seconds=WAIT) as a,
        http_client(serve.url, read_timeout_seconds=WAIT) as b,
        httpx2.AsyncClient(timeout=30) as http,
    ):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": RAW_HANDSHAKE}
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold, a, "a")
            tg.start_soon(hold, b, "b")
            await upstream.until(2)
            refused = await http.post(serve.url, json=init, headers=ACCEPT)
            upstream.release.set()
        admitted = await http.post(serve.url, json=init, headers=ACCEPT)  # a and b are open, with nothing in flight
    assert refused.status_code == 503
    message = refused.json()["error"]["message"]
    assert "serve.max_sessions" in message and "idle_timeout (900 s" in message, message
    assert admitted.status_code == 200 and len(answered) == 2
    process = serve.process
    assert process is not None
    wait_until(lambda: any("serve.max_sessions" in line for line in process.stderr_lines), "the refusal's log line")


async def test_a_message_of_more_values_than_a_tool_call_may_hold_is_refused_unparsed(
    held: Callable[..., tuple[Serve, Upstream]],
) -> None:
    # Before: parsed whatever it held; 48 messages of 3.7 MiB of [{}, {}, ...] at once took serve to 4.9 GB.
    from mcp import MCPError

    serve, _ = held()
    async with http_client(serve.url, read_timeout_seconds=WAIT) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool("search_tools", {"query": "hold", "pad": [{}] * (MAX_MESSAGE_VALUES + 1)})
        # The session goes on, and a message under the cap is parsed: the tool itself refuses the argument.
        parsed = await c.call_tool("search_tools", {"query": "hold", "pad": [{}] * 1000})
        found = await c.call_tool("search_tools", {"query": "hold"})
    assert f"more than {MAX_MESSAGE_VALUES:,} JSON values" in str(refused.value)
    assert parsed.is_error and "search_tools has no argument 'pad'" in str(parsed.content)
    assert not found.is_error


async def test_large_requests_in_flight_are_bounded_per_session_and_on_the_server(
    held: Callable[..., tuple[Serve, Upstream]],
) -> None:
    # Before: every request was held however many a client sent at once, each with its body and parsed message.
    from mcp import MCPError

    serve, upstream = held()
    sessions = TOTAL_LARGE // SESSION_LARGE
    async with listening(upstream), anyio.create_task_group() as tg:
        clients = [await tg.start(_client, serve.url) for _ in range(sessions + 1)]
        for n, client in enumerate(clients[:sessions]):
            for k in range(SESSION_LARGE):
                tg.start_soon(client.call_tool, "held__hold", {"tag": f"{n}.{k}.{LARGE_TAG}"})
        await upstream.until(TOTAL_LARGE)
        with anyio.fail_after(WAIT), pytest.raises(MCPError) as per_session:
            await clients[0].call_tool("held__hold", {"tag": LARGE_TAG})
        with anyio.fail_after(WAIT), pytest.raises(MCPError) as on_the_server:
            await clients[-1].call_tool("held__hold", {"tag": LARGE_TAG})
        small = await clients[-1].call_tool("search_tools", {"query": "hold"})  # small requests still pass
        upstream.release.set()
        tg.cancel_scope.cancel()
    assert f"this session has {SESSION_LARGE} large requests in flight" in str(per_session.value)
    assert f"the server has {TOTAL_LARGE} large requests in flight" in str(on_the_server.value)
    assert not small.is_error and len(upstream.arrived) == TOTAL_LARGE


async def _client(url: str, *, task_status: anyio.abc.TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
    async with http_client(url, read_timeout_seconds=WAIT) as client:
        task_status.started(client)
        await anyio.sleep_forever()


async def test_paths_other_than_mcp_are_404_without_an_oauth_challenge(
    held: Callable[..., tuple[Serve, Upstream]],
) -> None:
    # Before: 401 with WWW-Authenticate, so the MCP Inspector CLI started an interactive OAuth login.
    import httpx2

    serve, _ = held()
    root = serve.url.removesuffix("/mcp")
    paths = ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
             "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
             "/register", "/"]  # fmt: skip
    async with httpx2.AsyncClient(timeout=30) as http:
        answers = [await http.get(root + path) for path in paths]
        unauthorized = await http.post(serve.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert [a.status_code for a in answers] == [404] * len(paths)
    assert not any("www-authenticate" in a.headers for a in answers)
    assert unauthorized.status_code == 401 and unauthorized.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.docker
async def test_a_script_whose_clients_connection_closed_is_cancelled_and_the_session_goes_on(
    serve_tree: Path, tmp_path: Path, docker_engine: Any
) -> None:
    # Before: the script ran on to its timeout (here 600 s), the session's next execution waiting behind it.
    import httpx2

    serve = new_serve(tmp_path, serve_tree, timeout=600)
    serve.start_http()
    try:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as http:
            session = await initialize(http, serve.url)
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "execute_python",
                    "arguments": {"code": "import time\ntime.sleep(600)"}, "_meta": {"progressToken": 1}}}  # fmt: skip
        dropped = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None))
        async with dropped.stream("POST", serve.url, json=call, headers=session) as response:
            with anyio.fail_after(WAIT):
                async for line in response.aiter_lines():
                    if "notifications/progress" in line:  # the script runs
                        break
        await dropped.aclose()  # the connection closes: no cancel, no DELETE
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=WAIT)) as http:
            with anyio.fail_after(WAIT):
                nxt = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                       "params": {"name": "execute_python", "arguments": {"code": "print('next')"}}}  # fmt: skip
                after = await http.post(serve.url, json=nxt, headers=session)
        assert '"text":"next"' in after.text, after.text
        assert serve.process is not None
        said = [line.strip() for line in serve.process.stderr_lines if "connection closed before" in line]
        assert said == [
            "warning: tooltree serve: a request's connection closed before its answer; it was cancelled in its "
            "session, as its client would have"
        ]
    finally:
        clean_up(serve, docker_engine)
