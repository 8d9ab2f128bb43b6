"""The release of listen streams that ended (`agent.serve.upstream_listen.Releases`): one background task at a time
unsubscribes from what they followed, and the streams that end while it runs are released together by its next
round. Before, each stream's end started a task of its own, so a client that opened and cancelled streams in a tight
loop started one task per stream, each waiting for a worker thread of its session, with no bound on their number.

The first test drives `Releases` on an anyio loop with a release that waits until the test lets it go. The second
runs `tooltree serve` as a real subprocess over stdio, driven by the official SDK client pinned to 2026-07-28 in front
of tests/servers/subscribing_server.py (as tests/serve/test_listen_subscriptions.py). Every wait is bounded.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from agent.serve.upstream_followed import Follower
from agent.serve.upstream_listen import Releases
from tests.serve.test_listen_subscriptions import ITEM, audited, next_uri, serving, subscribed, tree, until
from tests.serve.test_resource_subscriptions import LOG, WAIT, touch

pytestmark = pytest.mark.anyio

__all__ = ["tree"]  # the fixture of tests/serve/test_listen_subscriptions.py, used here

STDIO = SimpleNamespace(request=None)
"""A request's context over stdio, as `agent.serve.server.session_key` reads it (its session: ``"stdio"``)."""


def over_http(session: str) -> Any:
    return SimpleNamespace(request=SimpleNamespace(headers={"mcp-session-id": session}))


def last_said(audit: Path) -> dict[str, str]:
    """Each URI's last ``resources/subscribe`` or ``.../unsubscribe`` in the audit log: ``"subscribe"`` or
    ``"unsubscribe"``."""
    text = audit.read_text(encoding="utf-8") if audit.exists() else ""
    last: dict[str, str] = {}
    for line in map(json.loads, text.splitlines()):
        if line.get("method") in ("resources/subscribe", "resources/unsubscribe"):
            last[line["uri"]] = line["method"].removeprefix("resources/")
    return last


async def test_streams_that_end_while_a_release_runs_are_released_together_by_the_same_task() -> None:
    rounds: list[tuple[Any, list[Follower]]] = []
    first_running, let_go = anyio.Event(), anyio.Event()
    spawned = 0

    async def release(ctx: Any, streams: list[Follower]) -> None:
        rounds.append((ctx, list(streams)))
        if len(rounds) == 1:
            first_running.set()
            await let_go.wait()

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as tasks:

            def spawn(send: Any) -> None:
                nonlocal spawned
                spawned += 1
                tasks.start_soon(send)

            releases = Releases(spawn, release)
            first = Follower()
            releases.ended(STDIO, first)
            await first_running.wait()
            later = [Follower() for _ in range(1_000)]  # a client's open/cancel loop, while the first release runs
            for stream in later:
                releases.ended(STDIO, stream)
            assert spawned == 1  # before: 1,001 tasks
            assert releases.pending == 1_000
            let_go.set()
    assert [streams for _, streams in rounds] == [[first], later]  # one round for the 1,000, in the order they ended
    assert releases.pending == 0 and releases.rounds == 2

    # Once idle, the next end starts a task again, and each session of a round is released on its own.
    async with anyio.create_task_group() as tasks:
        releases = Releases(lambda send: tasks.start_soon(send), release)
        a, b, c = Follower(), Follower(), Follower()
        releases.ended(over_http("one"), a)
        releases.ended(over_http("two"), b)
        releases.ended(over_http("one"), c)
    assert [streams for _, streams in rounds[2:]] == [[a, c], [b]]
    assert releases.rounds == 2


async def test_a_tight_loop_of_streams_opened_and_cancelled_leaves_nothing_subscribed(
    tree: Path, tmp_path: Path
) -> None:
    audit, loops = tmp_path / "audit.jsonl", 60
    async with serving(tree, tmp_path / "serve", "--audit", str(audit)) as (client, _):
        with anyio.fail_after(WAIT * 4):
            for _ in range(loops):
                async with client.listen(resource_subscriptions=[ITEM, LOG]) as stream:
                    assert stream.honored.resource_subscriptions == [ITEM, LOG]
        # Every stream ended: whatever rounds their releases took, each URI's last word to its server is an
        # unsubscribe, and the server follows nothing.
        await until(lambda: last_said(audit) == {ITEM: "unsubscribe", LOG: "unsubscribe"}, "the last unsubscribes")
        assert await subscribed(client) == []
        assert len(audited(audit, "resources/subscribe")) <= 2 * loops
        async with client.listen(resource_subscriptions=[ITEM]) as again:  # followed again, and told
            await touch(client, ITEM)
            assert await next_uri(again) == ITEM
