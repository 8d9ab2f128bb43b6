"""A client of the 2026-07-28 protocol follows a server's resource through `tooltree serve` on its
``subscriptions/listen`` streams (`agent.serve.upstream_listen`): the URIs of a stream's ``resourceSubscriptions`` are
checked and subscribed to as a ``resources/subscribe`` is, the acknowledgement lists those followed and leaves out
those refused (said on serve's stderr, naming each and why); their ``notifications/resources/updated`` reach the
streams that follow them and no other; a stream's end unsubscribes what no other stream follows; a client session
follows at most `MAX_SUBSCRIPTIONS`, one stream as many; a restarted server is subscribed again and each stream told
once; a session whose stream follows a resource outlives ``idle_timeout``. Before, the acknowledgement honoured no
resource subscription and ``resources.subscribe`` was not declared to such a client: it could not follow one.

`tooltree serve` runs as a real subprocess over stdio, driven by the official SDK client pinned to 2026-07-28
(`mcp.Client.listen`), in front of tests/servers/subscribing_server.py (``live``: declares ``resources.subscribe``;
its ``touch`` tool, offered as a passthrough tool, makes it send ``updated``; its ``subscribed`` says what serve
subscribed it to) and tests/servers/prompts_server.py (``alpha``: declares no subscriptions). No sandbox is started
(``warm: 0``, no script runs). Every wait is on an event, bounded.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from mcp.client.stdio import stdio_client
from mcp.client.subscriptions import ResourceUpdated, ServerEvent, Subscription

from agent.serve.upstream_lists import quoted
from agent.serve.upstream_subscriptions import MAX_SUBSCRIPTIONS
from tests.serve.conftest import processes_with
from tests.serve.test_resource_subscriptions import (
    LOG,
    PASSTHROUGH,
    SERVERS,
    STATUS,
    WAIT,
    generate,
    live_entry,
    serve_argv,
    touch,
    write_config,
)
from tests.serve.test_subscriptions_regenerated import Stderr, regenerate
from tests.serve.test_upstream_prompts_resources import server_entry
from tests.support import REPO, wait_until

pytestmark = pytest.mark.anyio

ITEM = "live://items/7"
"""A URI of ``live``'s template, followed as one it lists."""
REFUSED = "{uri}: {why}"
"""A resource a listen stream does not follow, as serve's one warning of them names it (`_say_refused`)."""
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("listen-subscriptions"), SERVERS)


@asynccontextmanager
async def serving(
    tree: Path, folder: Path, *more: str, servers: str = SERVERS, serve: str = PASSTHROUGH
) -> AsyncIterator[tuple[mcp.Client, Stderr]]:
    """An SDK client pinned to 2026-07-28 of `tooltree serve` (with ``more`` arguments) over stdio, and its stderr."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [*serve_argv(write_config(folder, servers, serve), tree), *more]
    if "--regenerate-first" in more:  # then the server's notices regenerate the tree (`serve_argv` says not to)
        argv.remove("--no-regenerate")
    params = mcp.StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    stderr = Stderr()
    try:
        async with mcp.Client(
            stdio_client(params, errlog=stderr.file), read_timeout_seconds=WAIT, mode=MODERN
        ) as client:
            yield client, stderr
    finally:
        stderr.close()


async def next_uri(stream: Subscription) -> str:
    """The URI of the next event on ``stream`` (at most `WAIT` seconds away), which must be a resource's update."""
    with anyio.fail_after(WAIT):
        event: ServerEvent = await anext(stream)
    assert isinstance(event, ResourceUpdated), event
    return event.uri


async def subscribed(client: mcp.Client) -> list[str]:
    """What the client session's own ``live`` process is subscribed to."""
    result = await client.call_tool("live__subscribed", {})
    assert result.is_error is not True, result.content
    return list(json.loads(result.content[0].text))  # type: ignore[union-attr]


def audited(audit: Path, method: str) -> list[str]:
    """The URIs of the audit lines of ``method`` (``resources/subscribe`` or ``.../unsubscribe``), in order."""
    text = audit.read_text(encoding="utf-8") if audit.exists() else ""
    return [line["uri"] for line in map(json.loads, text.splitlines()) if line.get("method") == method]


async def until(condition: Callable[[], bool], what: str) -> None:
    await anyio.to_thread.run_sync(wait_until, condition, what, WAIT)


async def test_serve_declares_subscriptions_to_a_2026_client_when_a_server_it_offers_declares_them(
    tree: Path, tmp_path: Path
) -> None:
    declared: dict[str, Any] = {}
    for name, servers in (("both", SERVERS), ("alpha", server_entry("alpha", "alpha"))):
        async with serving(tree, tmp_path / name, servers=servers, serve="") as (client, _):
            discovered = types.DiscoverResult.model_validate(await client.session.send_discover(MODERN))
            declared[name] = discovered.capabilities.resources
    assert declared["both"] is not None and declared["both"].subscribe is True  # before: never to this protocol
    assert declared["alpha"] is not None and not declared["alpha"].subscribe


async def test_a_stream_follows_the_resources_it_can_and_its_acknowledgement_leaves_out_those_refused(
    tree: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    asked = [LOG, ITEM, "alpha://readme", "nowhere://x", "live://items/a\x1b[2Jb", LOG]
    async with (
        serving(tree, tmp_path / "serve", "--audit", str(audit)) as (client, stderr),
        client.listen(resource_subscriptions=asked) as stream,
    ):
        assert stream.honored.resource_subscriptions == [LOG, ITEM]  # in the order asked, once
        assert await subscribed(client) == sorted([LOG, ITEM])  # subscribed to before the acknowledgement
        await touch(client, LOG)
        assert await next_uri(stream) == LOG
        await touch(client, STATUS, any=True)  # sent by the server though not followed: dropped
        await touch(client, ITEM)  # sent after it, in the same order: the stream's next event
        assert await next_uri(stream) == ITEM
    for uri, why in (
        ("alpha://readme", "server 'alpha' does not declare resource subscriptions"),
        ("nowhere://x", "no server lists the resource 'nowhere://x'"),
        ("live://items/a\x1b[2Jb", "the resource 'live://items/ab' cannot be followed: a URI followed is a clean"),
    ):
        await anyio.to_thread.run_sync(stderr.until, REFUSED.format(uri=quoted(uri), why=why))  # cleaned, named
    said = "a subscriptions/listen stream does not follow 3 of the resources it asked for (left out of its acknowledg"
    await anyio.to_thread.run_sync(stderr.until, said)  # in one warning
    assert sorted(audited(audit, "resources/subscribe")) == sorted([LOG, ITEM])  # a line each, as for a subscribe


async def test_a_stream_follows_a_resource_a_passthrough_tool_linked_to_on_the_server_that_linked_to_it(
    tree: Path, tmp_path: Path
) -> None:
    # Listed nowhere, as a resource a tool made: followed where the link came from, as its read and a handshake-era
    # subscribe go (before: left out, 'no server lists the resource').
    made, other = "live://made/1", "live://made/2"
    serve = '  passthrough: ["live.touch", "live.subscribed", "live.link"]\n'
    async with serving(tree, tmp_path / "serve", serve=serve) as (client, stderr):
        linked = await client.call_tool("live__link", {"uri": made})
        assert linked.is_error is not True, linked.content
        async with client.listen(resource_subscriptions=[made, other]) as stream:
            assert stream.honored.resource_subscriptions == [made]
            assert await subscribed(client) == [made]
            await touch(client, made)
            assert await next_uri(stream) == made
    why = "no server lists the resource 'live://made/2'"
    await anyio.to_thread.run_sync(stderr.until, REFUSED.format(uri=quoted(other), why=why))


async def test_an_update_reaches_only_the_streams_that_follow_it_and_an_ended_streams_resources_are_unsubscribed(
    tree: Path, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    async with serving(tree, tmp_path / "serve", "--audit", str(audit)) as (client, _), AsyncExitStack() as streams:
        both = await streams.enter_async_context(client.listen(resource_subscriptions=[LOG, STATUS]))
        log = await streams.enter_async_context(client.listen(resource_subscriptions=[LOG]))
        status = await streams.enter_async_context(client.listen(resource_subscriptions=[STATUS]))
        assert both.honored.resource_subscriptions == [LOG, STATUS]
        async with client.listen(resource_subscriptions=[ITEM]) as item:
            await touch(client, LOG)
            assert [await next_uri(both), await next_uri(log)] == [LOG, LOG]  # both streams that follow it
            await touch(client, STATUS)
            assert [await next_uri(both), await next_uri(status)] == [STATUS, STATUS]  # LOG never reached `status`
            await touch(client, ITEM)
            assert await next_uri(item) == ITEM  # nor `item`
        # The stream ended (the client cancelled it): ITEM, which no other stream follows, is unsubscribed from.
        await until(lambda: audited(audit, "resources/unsubscribe") == [ITEM], "the unsubscribe of ITEM")
        assert await subscribed(client) == sorted([LOG, STATUS])
        await streams.aclose()  # `both`, `log` and `status` end: LOG and STATUS are followed by none now
        await until(lambda: len(audited(audit, "resources/unsubscribe")) == 3, "the unsubscribes of LOG and STATUS")
        assert sorted(audited(audit, "resources/unsubscribe")[1:]) == [LOG, STATUS]
        assert await subscribed(client) == []
        async with client.listen(resource_subscriptions=[LOG]) as again:  # followed again, on a new stream
            await touch(client, LOG)
            assert await next_uri(again) == LOG


async def test_two_clients_are_each_told_only_of_what_their_own_streams_follow(tree: Path, tmp_path: Path) -> None:
    async with (
        serving(tree, tmp_path / "one") as (first, _),
        serving(tree, tmp_path / "other") as (second, _),
        first.listen(resource_subscriptions=[LOG]) as one,
        second.listen(resource_subscriptions=[STATUS]) as other,
    ):
        assert (one.honored.resource_subscriptions, other.honored.resource_subscriptions) == ([LOG], [STATUS])
        await touch(first, LOG)
        assert await next_uri(one) == LOG
        await touch(second, LOG, any=True)  # the other client's own server: it follows no LOG
        await touch(second, STATUS)
        assert await next_uri(other) == STATUS
        await touch(first, STATUS, any=True)
        await touch(first, LOG)
        assert await next_uri(one) == LOG


async def test_a_stream_and_a_client_session_follow_at_most_the_bound_of_resources(tree: Path, tmp_path: Path) -> None:
    items = [f"live://items/{i}" for i in range(MAX_SUBSCRIPTIONS + 5)]
    audit = tmp_path / "audit.jsonl"
    async with serving(tree, tmp_path / "serve", "--audit", str(audit)) as (client, stderr):
        async with client.listen(resource_subscriptions=items) as stream:
            assert stream.honored.resource_subscriptions == items[:MAX_SUBSCRIPTIONS]
            await anyio.to_thread.run_sync(stderr.until, "does not follow 5 more of the resources it asked for")
            async with client.listen(resource_subscriptions=[LOG, items[0]]) as more:  # one more in the session
                assert more.honored.resource_subscriptions == [items[0]]  # followed already: not one more
            await anyio.to_thread.run_sync(
                stderr.until,
                REFUSED.format(uri=repr(LOG), why=f"this client session follows {MAX_SUBSCRIPTIONS} resources already"),
            )
        # Both ended. The client's cancel of a stream may reach serve after its next request (the SDK sends it from
        # the stream's own task): the next stream waits for the release, seen in the audit log. That the room is
        # made at once, before the release: `test_listen_subscriptions_races`.
        await until(lambda: len(audited(audit, "resources/unsubscribe")) == MAX_SUBSCRIPTIONS, "the unsubscribes")
        assert sorted(audited(audit, "resources/unsubscribe")) == sorted(items[:MAX_SUBSCRIPTIONS])
        async with client.listen(resource_subscriptions=[LOG]) as stream:  # the first ended: room again
            assert stream.honored.resource_subscriptions == [LOG]
            await touch(client, LOG)
            assert await next_uri(stream) == LOG


async def test_a_restarted_server_is_subscribed_again_and_each_stream_told_once_of_each_resource(
    tree: Path, tmp_path: Path
) -> None:
    mark = tmp_path / "starts"
    followed = [LOG, *(f"live://items/{i}" for i in range(MAX_SUBSCRIPTIONS - 1))]  # all told at once: none lost
    servers = live_entry(mark) + server_entry("alpha", "alpha")
    async with (
        serving(tree, tmp_path / "serve", servers=servers) as (client, _),
        client.listen(resource_subscriptions=followed) as stream,
    ):
        assert stream.honored.resource_subscriptions == followed
        with contextlib.suppress(mcp.MCPError):  # its server exits under the call, which fails
            crashed = await client.call_tool("live__crash", {})
            assert crashed.is_error is True
        await subscribed(client)  # restarts it: a new session, subscribed again
        told = [await next_uri(stream) for _ in followed]  # each once subscribed again: a change may have been missed
        assert sorted(told) == sorted(followed)
        assert await subscribed(client) == sorted(followed)
        await touch(client, LOG)  # the new server process sends it: followed there
        assert await next_uri(stream) == LOG
    assert mark.read_text(encoding="utf-8").splitlines() == ["started", "started"]


async def test_a_session_whose_stream_follows_a_resource_outlives_idle_timeout_until_the_stream_ends(
    tree: Path, tmp_path: Path
) -> None:
    mark, later = tmp_path / "starts", 3.0
    serve = f"{PASSTHROUGH}  idle_timeout: 1\n"  # a session idle that long ends within 1.25 s
    async with serving(tree, tmp_path / "serve", servers=live_entry(mark), serve=serve) as (client, _):
        async with client.listen(resource_subscriptions=[LOG]) as stream:
            assert stream.honored.resource_subscriptions == [LOG]
            result = await client.call_tool("live__touch", {"uri": LOG, "after": later})  # the last call: idle now
            assert result.is_error is not True, result.content
            assert await next_uri(stream) == LOG  # sent past idle_timeout: the session and its server were kept
            assert mark.read_text(encoding="utf-8").splitlines() == ["started"]
        # It follows none now: idle_timeout ends it (and its server) as any other.
        await until(lambda: processes_with("SUBSCRIBING_SERVER_MARK", str(mark)) == [], "the server to stop")


async def test_a_streams_resources_are_followed_on_the_session_that_replaces_its_own_after_a_regeneration(
    tmp_path: Path,
) -> None:
    entry = live_entry() + f"    env: {{SUBSCRIBING_SERVER_STATE: {json.dumps(str(tmp_path / 'state.json'))}}}\n"
    tree = await anyio.to_thread.run_sync(generate, tmp_path, entry)
    serve = '  passthrough: ["live.touch", "live.subscribed", "live.relist"]\n'
    async with (
        serving(tree, tmp_path / "serve", "--regenerate-first", servers=entry, serve=serve) as (client, stderr),
        client.listen(resource_subscriptions=[LOG, STATUS]) as stream,
    ):
        assert stream.honored.resource_subscriptions == [LOG, STATUS]
        await regenerate(client, stderr, hide=STATUS)  # STATUS is no longer offered
        assert await subscribed(client) == [LOG]  # the call replaced the session: LOG carried over, on its servers
        assert await next_uri(stream) == LOG  # told once: a change may have been missed meanwhile
        await anyio.to_thread.run_sync(stderr.until, "follows the resource 'live://status' no more")
        await touch(client, LOG)  # the new session's server sends it: followed there, on the same stream
        assert await next_uri(stream) == LOG


def test_the_resources_a_stream_does_not_follow_are_said_in_one_bounded_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before, one warning each, with the server's stderr in its reason: 100 resources of a server that failed to start
    # wrote about 60 KB each time a stream asking for them was opened.
    from agent.serve.upstream_listen import REFUSALS_SHOWN, _say_refused

    why = "server 'live' could not start: " + "a line of its stderr " * 30
    refused = [(f"live://items/{i}", why) for i in range(MAX_SUBSCRIPTIONS)]
    with caplog.at_level(logging.WARNING, logger="agent.serve.upstream_listen"):
        _say_refused(refused)
    (record,) = caplog.records
    said = record.getMessage()
    assert f"does not follow {MAX_SUBSCRIPTIONS} of the resources it asked for" in said
    assert all(f"'live://items/{i}': server 'live' could not start" in said for i in range(REFUSALS_SHOWN))
    assert f"'live://items/{REFUSALS_SHOWN}'" not in said
    assert said.endswith(f"and {MAX_SUBSCRIPTIONS - REFUSALS_SHOWN} more") and len(said) < 2_000


async def test_with_resources_off_a_stream_follows_none_and_serve_says_why(tree: Path, tmp_path: Path) -> None:
    async with (
        serving(tree, tmp_path, serve=PASSTHROUGH + "  resources: false\n") as (client, stderr),
        client.listen(prompts_list_changed=True, resource_subscriptions=[LOG, ITEM, LOG]) as stream,
    ):
        assert stream.honored.resource_subscriptions is None
        assert stream.honored.prompts_list_changed is True
        said = "does not follow the 2 resources it asked for: serve offers no resources (`serve: resources: false`)"
        await anyio.to_thread.run_sync(stderr.until, said)
    assert not any("no server lists the resource" in line for line in stderr.lines)
