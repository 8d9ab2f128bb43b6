"""A session whose client is still in its handshake (``initialize`` answered, ``notifications/initialized`` sent, its
first request about to come) is never ended for a new client. Before, 20 MCP Inspector CLI runs at once against
``serve --http`` (16 places) had 4 fail with ``404 Session not found`` on their first call: each newcomer ended a
session initialized a moment before, the only one without a request in flight. Now the newcomer waits
`ADMISSION_GRACE` and is refused with a ``503`` that names ``serve.max_sessions``, as when every session is busy.

In process (the gate with a stand-in for the SDK's app), and once with a real ``serve --http`` and raw HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from agent.serve import http_gate
from tests.serve import test_http_gate as gate_tests
from tests.serve.conftest import RAW_HANDSHAKE, Serve, http_client
from tests.serve.test_http_gate import ACCEPT, Upstream, initialize, list_tools, listening
from tests.serve.test_soak_gate import App, Harness, request

pytestmark = pytest.mark.anyio

held_tree = gate_tests.held_tree  # the fixtures of the held server
held = gate_tests.held

WAIT = 30.0


class HoldingApp(App):
    """`App`, but a ``tools/call`` stays in flight until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = anyio.Event()
        self.holding = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        body = message.get("body", b"")
        if scope["method"] == "POST" and b'"tools/call"' in body:
            self.holding += 1
            await self.release.wait()

        async def again() -> Message:
            return message

        await super().__call__(scope, again, send)


async def notify(h: Harness, key: str) -> None:
    """The client's ``notifications/initialized`` in session ``key`` (a notification: no id)."""
    body = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    headers = {"content-length": str(len(body)), "content-type": "application/json", "mcp-session-id": key}
    given = iter([{"type": "http.request", "body": body, "more_body": False}])

    async def receive() -> Message:
        return next(given, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        pass

    await h.gate(request("POST", headers), receive, send)


def holding_harness(max_sessions: int) -> tuple[Harness, HoldingApp]:
    h = Harness(max_sessions)
    app = HoldingApp()
    h.app = app
    h.gate.app = app
    return h, app


async def test_a_new_client_is_refused_rather_than_end_a_session_still_in_its_handshake() -> None:
    h, app = holding_harness(max_sessions=2)
    statuses: list[int] = []
    async with anyio.create_task_group() as tg:
        assert await h.post("initialize") == 200  # s1, whose client calls a tool that is still running

        async def call() -> None:
            statuses.append(await h.post("tools/call", "s1"))

        tg.start_soon(call)
        with anyio.fail_after(WAIT):
            while app.holding == 0:
                await anyio.sleep(0)
        assert await h.post("initialize") == 200  # s2: its client is about to make its first call
        await notify(h, "s2")
        started = anyio.current_time()
        refused = await h.post("initialize")  # before: 200, s2 ended (its first call got 404)
        waited = anyio.current_time() - started
        app.release.set()
    assert refused == 503 and h.ended == [] and app.deleted == []
    assert waited >= http_gate.ADMISSION_GRACE * 0.9  # it waited for a place, as for busy sessions
    assert statuses == [200]


async def test_newcomers_that_find_every_place_taken_wait_side_by_side_and_are_all_refused_after_one_grace() -> None:
    # Before: they waited in turn, each up to ADMISSION_GRACE under a lock, so the sixth was refused after 6 s (of 200
    # initializes at once against serve --http, the last after 50 s, past many a client's timeout).
    h = Harness(max_sessions=1)
    assert await h.post("initialize") == 200  # s1, in its handshake: it is not ended for a newcomer
    statuses: list[int] = []

    async def newcomer() -> None:
        statuses.append(await h.post("initialize"))

    with anyio.fail_after(3 * http_gate.ADMISSION_GRACE):  # one grace each, side by side (before: 6 graces in turn)
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(newcomer)
    assert statuses == [503] * 6 and h.ended == []


async def test_a_new_client_ends_an_idle_session_that_has_worked_not_a_newer_idle_one_in_its_handshake() -> None:
    h = Harness(max_sessions=2)
    assert await h.post("initialize") == 200  # s1
    assert await h.post("initialize") == 200  # s2, in its handshake from now on
    await notify(h, "s2")
    assert await h.post("tools/call", "s1") == 200  # s1 worked since: s2 is idle longer
    assert await h.post("initialize") == 200  # s3
    await h.until(lambda: h.ended)
    assert h.ended == ["s1"] and h.app.deleted == ["s1"]  # before: s2, the session still in its handshake


async def test_a_session_in_its_handshake_past_the_grace_can_be_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    # Never a request after its initialize, for longer than the grace: its client left (or hangs); its place is free.
    monkeypatch.setattr(http_gate, "FIRST_REQUEST_GRACE", 0.0)
    h = Harness(max_sessions=1)
    assert await h.post("initialize") == 200  # s1
    await notify(h, "s1")
    assert await h.post("initialize") == 200  # s2
    await h.until(lambda: h.ended)
    assert h.ended == ["s1"]


async def test_over_http_a_newcomer_is_refused_503_and_the_session_in_its_handshake_makes_its_first_call(
    held: Callable[..., tuple[Serve, Upstream]],
) -> None:
    import httpx2

    serve, upstream = held(max_sessions=2, idle_timeout=900)
    answered: list[Any] = []
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": RAW_HANDSHAKE}
    async with (
        listening(upstream),
        http_client(serve.url, read_timeout_seconds=WAIT) as busy,
        httpx2.AsyncClient(timeout=30) as http,
    ):

        async def hold() -> None:
            answered.append(await busy.call_tool("held__hold", {"tag": "busy"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await upstream.until(1)
            starting = await initialize(http, serve.url)  # initialize and notifications/initialized, no call yet
            refused = await http.post(serve.url, json=init, headers=ACCEPT)  # before: 200, ending `starting`
            first_call = await list_tools(http, serve.url, starting)  # before: 404 Session not found
            upstream.release.set()
    assert refused.status_code == 503, refused.text
    assert "serve.max_sessions" in refused.json()["error"]["message"]
    assert first_call == 200
    assert len(answered) == 1
