"""The listen streams' resource subscriptions (`agent.serve.upstream_listen`): a stream refused for being
one too many (`MAX_LISTEN_STREAMS`) subscribes to nothing on its servers first, and listen requests in flight at once
are bounded as the streams are; an update of a URI sent while the stream's other URIs are still being subscribed to
reaches the stream; a stream that ends while a session replaced after a regeneration subscribes to its URIs again
leaves none subscribed (`agent.serve.upstream_subscriptions.Subscriptions.carry`).

Before, the bound was the SDK's `ListenHandler`'s, checked only once each URI asked had been subscribed to on its
server: a stream one too many subscribed (an audit line each) and was then refused, and a client that sent many listen
requests at once had each subscribe to its URIs (up to `MAX_SUBSCRIPTIONS` each, a URI already followed counting for
nothing), however many. And an update sent after a URI was subscribed to for a stream, before the stream was on the
bus (its acknowledgement), reached it never.

`tooltree serve` runs as a real subprocess over stdio, driven by the official SDK client pinned to 2026-07-28, in
front of tests/servers/subscribing_server.py (as tests/serve/test_listen_subscriptions.py), wrapped to start slowly
where a race's window is made wide, and a server written here whose one resource is subscribed to only when the test
says so. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import threading
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import mcp
import pytest

from agent.serve.upstream_followed import MAX_SUBSCRIPTIONS, Followed, Follower
from agent.serve.upstream_listen import MAX_LISTEN_STREAMS
from agent.serve.upstream_lists import quoted
from agent.serve.upstream_subscriptions import subscribe_on, unsubscribe_on
from tests.serve.test_listen_subscriptions import ITEM, audited, next_uri, serving, subscribed, tree, until
from tests.serve.test_resource_subscriptions import LOG, STATUS, SUBSCRIBING, WAIT, generate, live_entry, touch
from tests.serve.test_subscriptions_regenerated import regenerate

pytestmark = pytest.mark.anyio

__all__ = ["tree"]  # the module's fixture, used here


async def test_a_stream_one_too_many_is_refused_before_it_subscribes_to_anything(tree: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    async with serving(tree, tmp_path / "serve", "--audit", str(audit)) as (client, _), AsyncExitStack() as streams:
        for _ in range(MAX_LISTEN_STREAMS):
            await streams.enter_async_context(client.listen(resources_list_changed=True))
        with pytest.raises(mcp.MCPError, match="Subscription limit reached"):
            async with client.listen(resource_subscriptions=[ITEM]):
                pass
        assert audited(audit, "resources/subscribe") == []  # before: [ITEM], then refused
        assert await subscribed(client) == []


async def test_listen_requests_in_flight_at_once_are_bounded_as_streams_are(tree: Path, tmp_path: Path) -> None:
    audit, asked = tmp_path / "audit.jsonl", 3 * MAX_LISTEN_STREAMS
    outcomes: list[str] = []
    tried, done = anyio.Event(), anyio.Event()

    async def one(client: mcp.Client) -> None:
        try:
            async with client.listen(resource_subscriptions=[LOG, ITEM]):
                outcomes.append("acknowledged")
                if len(outcomes) == asked:
                    tried.set()
                await done.wait()  # open until every request was answered
        except mcp.MCPError as e:
            outcomes.append(e.error.message)
            if len(outcomes) == asked:
                tried.set()

    async with serving(tree, tmp_path / "serve", "--audit", str(audit)) as (client, _):
        with anyio.fail_after(WAIT):
            async with anyio.create_task_group() as tasks:
                for _ in range(asked):
                    tasks.start_soon(one, client)
                await tried.wait()
                done.set()
    assert outcomes.count("acknowledged") == MAX_LISTEN_STREAMS
    assert outcomes.count("Subscription limit reached") == asked - MAX_LISTEN_STREAMS
    # Each stream acknowledged subscribed to its two URIs; none refused did (before: 2 * `asked` lines).
    assert len(audited(audit, "resources/subscribe")) == 2 * MAX_LISTEN_STREAMS


def slow_live(folder: Path) -> tuple[str, Path, Path]:
    """A ``live`` entry whose server, started while the file ``slow`` exists, takes 3 s to start (a line in ``waits``
    as it begins): the window of a race, made wide."""
    slow, waits = folder / "slow", folder / "waits"
    script = (
        f"if [ -e {shlex.quote(str(slow))} ]; then echo waiting >> {shlex.quote(str(waits))}; sleep 3; fi; "
        f"exec {shlex.quote(sys.executable)} {shlex.quote(str(SUBSCRIBING))}"
    )
    entry = (
        f'  live:\n    command: /bin/sh\n    args: ["-c", {json.dumps(script)}]\n'
        f"    env: {{SUBSCRIBING_SERVER_STATE: {json.dumps(str(folder / 'state.json'))}}}\n"
    )
    return entry, slow, waits


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


async def test_a_stream_that_ends_while_its_resources_are_carried_over_leaves_none_subscribed(tmp_path: Path) -> None:
    # The window: the session that replaces the stream's own subscribes to what the stream followed (its ``live``
    # starting).
    entry, slow, waits = slow_live(tmp_path)
    tree = await anyio.to_thread.run_sync(generate, tmp_path, entry)
    serve = '  passthrough: ["live.touch", "live.subscribed", "live.relist"]\n'
    async with serving(tree, tmp_path / "serve", "--regenerate-first", servers=entry, serve=serve) as (client, stderr):
        async with AsyncExitStack() as streams:
            stream = await streams.enter_async_context(client.listen(resource_subscriptions=[LOG]))
            assert stream.honored.resource_subscriptions == [LOG]
            slow.touch()
            await regenerate(client, stderr, hide=STATUS)  # the next call replaces the session, carrying LOG over
            started = lines(waits)
            async with anyio.create_task_group() as tasks:
                answered: list[list[str]] = []

                async def call() -> None:
                    answered.append(await subscribed(client))

                tasks.start_soon(call)
                # The new session's ``live`` is starting: LOG was taken for the stream, not yet subscribed to again.
                await until(lambda: lines(waits) > started, "live's start")
                await streams.aclose()  # the stream ends meanwhile: no one follows LOG now
        # Now: LOG stays subscribed on the new session's ``live`` for a stream that had ended, followed by none.
        assert (answered, await subscribed(client)) == ([[]], [])


SLOW_SERVER = """
import os, time
import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server

async def list_tools(ctx, params):
    tool = types.Tool(name="noop", description="Nothing.", input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool])

async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

async def list_resources(ctx, params):
    return types.ListResourcesResult(resources=[types.Resource(name="x", uri="slow://x")])

async def read_resource(ctx, params):
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=str(params.uri), text="x")])

async def subscribe(ctx, params):  # answered once the file SLOW_GO exists (at most 60 s)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["SLOW_GO"]) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    return types.EmptyResult()

async def unsubscribe(ctx, params):
    return types.EmptyResult()

server = Server("slow", on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                on_read_resource=read_resource, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe)

async def main():
    async with server.lifespan(server) as lifespan, stdio_server() as (read, write):
        options = server.create_initialization_options()
        await serve_loop(server, read, write, lifespan_state=lifespan, init_options=options)

anyio.run(main)
"""
"""A server whose one resource, ``slow://x``, is subscribed to only once the file ``SLOW_GO`` exists."""


async def test_an_update_sent_while_the_streams_other_resources_are_subscribed_to_reaches_the_stream(
    tmp_path: Path,
) -> None:
    script, go = tmp_path / "slow_server.py", tmp_path / "go"
    script.write_text(SLOW_SERVER, encoding="utf-8")
    entry = live_entry() + (
        f"  slow:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(script))}]\n"
        f"    env: {{SLOW_GO: {json.dumps(str(go))}}}\n"
    )
    tree = await anyio.to_thread.run_sync(generate, tmp_path, entry)
    async with serving(tree, tmp_path / "serve", servers=entry) as (client, _), AsyncExitStack() as streams:
        async with anyio.create_task_group() as tasks:
            opened: list[object] = []

            async def listen() -> None:
                opened.append(
                    await streams.enter_async_context(client.listen(resource_subscriptions=[LOG, ITEM, "slow://x"]))
                )

            tasks.start_soon(listen)
            # LOG and ITEM are subscribed to on ``live``; ``slow://x`` is not answered yet: no acknowledgement yet.
            with anyio.fail_after(WAIT):
                while await subscribed(client) != sorted([LOG, ITEM]):
                    await anyio.sleep(0.05)
            await touch(client, LOG)  # LOG changed after it was subscribed to for the stream
            go.touch()
        stream = opened[0]
        await touch(client, ITEM)
        assert await next_uri(stream) == LOG  # before: ITEM, LOG's update lost (sent before the stream was on the bus)


def test_a_stream_that_ended_leaves_room_for_another_before_its_release_runs() -> None:
    """The listen handler marks a stream ended at once and releases its URIs in the background (`leave`); a stream
    opened meanwhile is within the bound. Before, it was refused until that release ran: fresh-clone CI saw a stream
    opened just after a full one ended follow nothing."""
    loop = asyncio.new_event_loop()
    try:
        followed = Followed(None, loop, lambda _: None)
        ended, later = Follower(), Follower()
        for i in range(MAX_SUBSCRIPTIONS):
            followed.ask("live", f"live://items/{i}")
            assert followed.settle("live", f"live://items/{i}", True, by=(ended,))
        with pytest.raises(mcp.MCPError, match="follows 100 resources already"):
            followed.ask("live", LOG)  # the bound, while the stream lives
        ended.ended = True  # as the handler's ``finally`` does, before its release
        followed.ask("live", LOG)
        assert followed.settle("live", LOG, True, by=(later,))
        followed.ask("live", "live://items/0")  # only the ended stream follows it: a new one, within the bound
        assert followed.settle("live", "live://items/0", True, by=(later,))
        assert followed.leave(ended) == sorted(("live", f"live://items/{i}") for i in range(1, MAX_SUBSCRIPTIONS))
        for i in range(MAX_SUBSCRIPTIONS - 2):
            followed.ask("live", f"live://other/{i}")
            followed.settle("live", f"live://other/{i}", True, by=(later,))
        with pytest.raises(mcp.MCPError, match="follows 100 resources already"):
            followed.ask("live", STATUS)  # the bound still holds for the streams that live
    finally:
        loop.close()


def test_a_subscribe_that_fails_while_an_ended_streams_unsubscribe_is_in_flight_leaves_the_uri_unsubscribed() -> None:
    """An ended stream's release unsubscribes from ITEM while a new stream's subscribe of ITEM is sent and fails.
    Before, the release saw the subscribe in flight once its unsubscribe was answered and subscribed again for it: the
    server stayed subscribed to ITEM with no one following. Now the subscribe waits for the unsubscribe (`serial`)."""
    from sandbox.bridge import CallCancel

    loop = asyncio.new_event_loop()
    unsubscribing, go, subscribing, answer = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    on_server: list[str] = []  # the subscribes and unsubscribes of ITEM the server took, in order

    def forward(runtime: object, server: str, method: str, params: dict[str, str], cancel: object, label: str) -> dict:
        if method == "resources/unsubscribe" and not unsubscribing.is_set():
            unsubscribing.set()
            subscribing.wait(1)  # before: the new stream's subscribe is sent now; now it waits for this one to end
            assert go.wait(WAIT)
        elif label == f"live: subscribing to {quoted(ITEM)}":  # the new stream's own: it fails, once answered
            subscribing.set()
            assert answer.wait(WAIT)
            raise mcp.MCPError(-32603, "live failed")
        on_server.append(method)
        return {}

    try:
        followed = Followed(None, loop, lambda _: None)
        ended, new = Follower(), Follower()
        followed.ask("live", ITEM)
        assert followed.settle("live", ITEM, True, by=(ended,))
        release = threading.Thread(target=unsubscribe_on, args=(followed, forward, None, followed.leave(ended)))
        release.start()
        assert unsubscribing.wait(WAIT)
        failed: list[str] = []

        def subscribe() -> None:
            try:
                subscribe_on(followed, forward, None, "live", ITEM, CallCancel(), by=(new,))  # type: ignore[arg-type]
            except mcp.MCPError as e:
                failed.append(e.error.message)

        stream = threading.Thread(target=subscribe)
        stream.start()
        go.set()
        release.join(WAIT)  # before: it subscribed again, its stream's subscribe still in flight
        answer.set()
        stream.join(WAIT)
    finally:
        loop.close()
    assert failed == ["live failed"]
    assert on_server == ["resources/unsubscribe"]  # before: [unsubscribe, subscribe] (the release's, again)
    assert not followed.following and not followed.wanted("live", ITEM)
