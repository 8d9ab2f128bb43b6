"""`tooltree serve --http` as a real subprocess, with the official SDK client and raw HTTP: the bearer token,
separate client sessions, images (one too big for an event the SDK client reads), bad arguments, progress,
passthrough, the end of a session."""

from __future__ import annotations

import base64
import json
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import TOKEN, Serve, clean_up, containers, http_client, marked_processes, new_serve

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0
HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(serve_tree: Path, tmp_path_factory: pytest.TempPathFactory, docker_engine: Any) -> Iterator[Serve]:
    """One HTTP server for the module (each test opens its own MCP sessions), with an audit log and a passthrough."""
    folder = tmp_path_factory.mktemp("http")
    serve = new_serve(
        folder, serve_tree, serve={"passthrough": ["crm.get_record"], "warm": 2},
        extra=["--audit", str(folder / "audit.jsonl")],
    )  # fmt: skip
    serve.start_http()
    yield serve
    clean_up(serve, docker_engine)


def audit_lines(serve: Serve) -> list[dict[str, Any]]:
    path = Path(serve.extra[serve.extra.index("--audit") + 1])
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def data_lines(body: str) -> list[dict[str, Any]]:
    """JSON-RPC messages in a response body (plain JSON, or the ``data:`` lines of server-sent events)."""
    if body.lstrip().startswith("{"):
        return [json.loads(body)]
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:") and line[5:].strip()]


async def test_requests_without_the_right_token_are_refused_with_401_and_nothing_runs(served: Serve) -> None:
    import httpx2

    before = audit_lines(served)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "crm__get_record", "arguments": {"record_id": "0015e000003NWTR"}}}  # fmt: skip
    async with httpx2.AsyncClient(timeout=30) as http:
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            init = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                     "params": HANDSHAKE}, headers={**ACCEPT, **auth})  # fmt: skip
            assert init.status_code == 401 and init.headers["www-authenticate"].startswith("Bearer")
            assert "mcp-session-id" not in init.headers
            refused = await http.post(served.url, json=call, headers={**ACCEPT, **auth, "Mcp-Session-Id": "x"})
            assert refused.status_code == 401
    with pytest.raises(Exception) as caught:  # the SDK client cannot even connect
        async with http_client(served.url, token="wrong"):
            pass
    assert "MCPError" in repr(caught.value)  # the SDK reports the 401 as an error response
    assert audit_lines(served) == before  # no tool call reached the bridge


async def test_two_concurrent_clients_each_have_their_own_sandbox_session(served: Serve) -> None:
    values: dict[str, str] = {}

    async def client(name: str, both_set: anyio.Event, count: list[int]) -> None:
        async with http_client(served.url, read_timeout_seconds=WAIT) as c:
            await c.call_tool("execute_python", {"code": f"who = {name!r}\nopen('me.txt', 'w').write(who)"})
            count.append(1)
            if len(count) == 2:
                both_set.set()
            await both_set.wait()
            result = await c.call_tool("execute_python", {"code": "print(who, open('me.txt').read())"})
            values[name] = result.content[0].text

    both_set, count = anyio.Event(), []
    with anyio.fail_after(WAIT * 2):
        async with anyio.create_task_group() as tg:
            tg.start_soon(client, "alice", both_set, count)
            tg.start_soon(client, "bob", both_set, count)
    assert values == {"alice": "alice alice", "bob": "bob bob"}


async def test_an_image_a_script_shows_comes_back_as_image_content(served: Serve) -> None:
    code = (
        "from servers.media import render_chart\n"
        "chart = render_chart(title='Q3', values=[3, 1, 2], width=320, height=200)\n"
        "show_image(chart.images[0])\nprint('shown')"
    )
    async with http_client(served.url, read_timeout_seconds=WAIT) as c:
        result = await c.call_tool("execute_python", {"code": code})
    assert not result.is_error
    text, image = result.content
    assert text.type == "text" and text.text.startswith("shown")
    assert image.type == "image" and image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and struct.unpack(">II", png[16:24]) == (320, 200)


SHOW_BIG_PNG = r"""
import os, struct, zlib
def png(side):
    rows = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))  # noise: does not compress
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
big = png(700)
show_image(big)
show_image(png(40))
print(len(big))
"""


async def test_a_result_bigger_than_an_event_the_sdk_client_reads_arrives_with_its_big_image_named(
    served: Serve,
) -> None:
    # The SDK client reads no server-sent event over 1 MiB; the 1.4 MB image alone would take the result with it.
    async with http_client(served.url, read_timeout_seconds=WAIT) as c:
        result = await c.call_tool("execute_python", {"code": SHOW_BIG_PNG})
        after = await c.call_tool("execute_python", {"code": "print(len(big))"})
    assert not result.is_error
    text, note, small = result.content
    size = int(text.text.split()[0])
    assert size > 1024 * 1024
    assert note.type == "text" and note.text.startswith(f"[an image (image/png, {size:,} bytes) left out: over HTTP")
    assert small.type == "image" and struct.unpack(">II", base64.b64decode(small.data)[16:24]) == (40, 40)
    assert after.content[0].text == str(size)  # the same session goes on


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("list_files", {"path": 5}, "path must be a string"),
    ("list_files", {"path": "../etc"}, "'..' is not allowed"),
    ("read_file", {}, "read_file needs a path"),
    ("read_file", {"path": "servers/crm/nothing.py"}, "no such file"),
    ("read_file", {"path": "servers/crm/get_record.py", "offset": "x"}, "offset must be an integer"),
    ("search_tools", {}, "search_tools(query: str"),
    ("search_tools", {"query": "(", "regex": True}, "regex"),
    ("search_tools", {"query": "???"}, "no word to search by in '???'"),
    ("execute_python", {}, "execute_python needs code"),
    ("execute_python", {"code": "   "}, "execute_python needs code"),
    ("crm__get_record", {"record_id": 7}, "invalid arguments"),
    ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
]


async def test_bad_arguments_to_each_tool_are_clear_errors_and_the_server_keeps_serving(served: Serve) -> None:
    async with http_client(served.url, read_timeout_seconds=WAIT) as c:
        for name, arguments, expected in BAD_CALLS:
            result = await c.call_tool(name, arguments)
            assert result.is_error, (name, arguments)
            assert expected in result.content[0].text, (name, arguments, result.content[0].text)
        ok = await c.call_tool("execute_python", {"code": "print('still serving')"})
        assert not ok.is_error and ok.content[0].text == "still serving"


async def test_the_tool_list_is_byte_identical_across_a_session(served: Serve) -> None:
    import httpx2

    auth = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(timeout=60) as http:
        init = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                 "params": HANDSHAKE}, headers=auth)  # fmt: skip
        session = {**auth, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        bodies = []
        for n in range(3):
            if n == 1:  # a call in between changes nothing
                call = {"name": "execute_python", "arguments": {"code": "x = 1"}}
                await http.post(served.url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call},
                                headers=session)  # fmt: skip
            listed = await http.post(served.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                     headers=session)  # fmt: skip
            (message,) = data_lines(listed.text)
            bodies.append(json.dumps(message["result"], sort_keys=False))
        await http.delete(served.url, headers=session)
    assert bodies[0] == bodies[1] == bodies[2]
    names = [t["name"] for t in json.loads(bodies[0])["tools"]]
    assert names == ["list_files", "read_file", "search_tools", "execute_python", "crm__get_record"]


async def test_a_long_execution_sends_progress_notifications(served: Serve) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with http_client(served.url, read_timeout_seconds=WAIT) as c:
        code = "import time\ntime.sleep(1.5)\nprint('done')"
        result = await c.call_tool("execute_python", {"code": code}, progress_callback=progress)
    assert result.content[0].text == "done"
    assert seen, "no progress notification arrived"
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
    assert all(total == 60 and message and message.startswith("running for") for _, total, message in seen)


async def test_a_passthrough_tool_is_proxied_with_its_result_unchanged_and_audited(served: Serve) -> None:
    async with http_client(served.url, read_timeout_seconds=WAIT) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["crm__get_record"].input_schema["required"] == ["object_type", "record_id"]
        result = await c.call_tool("crm__get_record", {"object_type": "account", "record_id": "0015e000003NWTR"})
    assert not result.is_error
    assert result.structured_content["id"] == "0015e000003NWTR"
    assert "Northwind Traders" in json.dumps(result.structured_content["fields"])
    lines = [a for a in audit_lines(served) if a["tool"] == "get_record" and a["outcome"] == "ok"]
    assert lines and lines[-1]["server"] == "crm" and lines[-1]["session"]


async def test_a_2026_client_is_told_to_use_the_handshake_and_an_auto_client_does(served: Serve) -> None:
    from mcp import MCPError

    with pytest.raises(BaseException) as caught:  # an SDK client pinned to the session-less protocol
        async with http_client(served.url, mode="2026-07-28", read_timeout_seconds=WAIT) as pinned:
            await pinned.list_tools()
    errors = [e for e in _leaves(caught.value) if isinstance(e, MCPError)]
    assert errors and errors[0].code == -32022, caught.value
    assert "needs the initialize handshake" in str(errors[0])
    async with http_client(served.url, read_timeout_seconds=WAIT) as c:
        assert c.session.initialize_result is not None  # auto mode fell back to the handshake
        assert "servers/INDEX.md" in str(c.session.initialize_result.instructions)


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in _leaves(e)]
    return [error]


async def test_a_client_leaving_mid_execution_ends_its_session_container_and_servers(
    make_serve: Callable[..., Serve],
) -> None:
    serve = make_serve(serve={"warm": 1})
    serve.start_http()
    running = anyio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        running.set()

    async def call(c: Any) -> None:
        code = "from servers.docs import list_documents\nlist_documents()\nimport time\ntime.sleep(600)"
        await c.call_tool("execute_python", {"code": code}, progress_callback=progress)

    async with http_client(serve.url, read_timeout_seconds=WAIT) as c, anyio.create_task_group() as tg:
        tg.start_soon(call, c)
        with anyio.fail_after(WAIT):
            await running.wait()
        with anyio.fail_after(WAIT):
            while not marked_processes(serve.mark):  # the docs server starts on the script's first call
                await anyio.sleep(0.1)
        assert len(containers(serve.owner)) >= 1
        tg.cancel_scope.cancel()
    # Leaving sent notifications/cancelled and DELETE: the session's servers and container go.
    deadline = time.monotonic() + WAIT
    while marked_processes(serve.mark) or len(containers(serve.owner)) > 1:
        assert time.monotonic() < deadline, "the session outlived its client"
        await anyio.sleep(0.1)
    assert serve.proc is not None and serve.proc.poll() is None  # the server itself keeps serving


async def test_a_delete_the_server_refuses_leaves_the_session_and_its_sandbox(served: Serve) -> None:
    # Before: every DELETE ended the sandbox session, also one the SDK refused (its MCP session lived on).
    import httpx2

    auth = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=WAIT)) as http:
        init = await http.post(served.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                                 "params": HANDSHAKE}, headers=auth)  # fmt: skip
        session = {**auth, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        await http.post(served.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)

        async def run(code: str) -> str:
            call = {"name": "execute_python", "arguments": {"code": code}}
            answer = await http.post(served.url, json={"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                                       "params": call}, headers=session)  # fmt: skip
            return str(data_lines(answer.text)[-1]["result"]["content"][0]["text"])

        assert await run("x = 41\nprint('set')") == "set"
        refused = [
            await http.delete(served.url, headers={**session, "MCP-Protocol-Version": "1999-01-01"}),
            await http.delete(served.url, headers={**session, "Origin": "http://evil.example"}),
        ]
        after = await run("print(x + 1)")
        ended = await http.delete(served.url, headers=session)
        gone = await http.post(served.url, json={"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, headers=session)
    assert all(r.status_code >= 400 for r in refused), [r.status_code for r in refused]
    assert after == "42"  # the variable outlived both refused DELETEs
    assert ended.status_code == 200 and gone.status_code == 404
    # The code a client initializes again on (before: -32600, the SDK's; Claude Code then failed every later call
    # of the conversation "MCP server is not connected").
    error = gone.json()["error"]
    assert error["code"] == -32001 and error["message"].startswith("Session not found: its client ended it (DELETE)")
