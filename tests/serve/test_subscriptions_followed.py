"""The resources a `tooltree serve` client follows outlive its runtime's move to a regenerated tree as its sandbox
starts (`sandbox.host.Runtime._follow_tree`: a ``generate-tree`` that ended after `SessionRegistry.use` let the
session's ``execute_python`` in, before its sandbox started), which stops the session's server pool: its new servers
are subscribed again (`agent.serve.upstream_subscriptions.carry_followed`), their updates reach the same connection,
and the session still follows them (`ClientSession.follows`, which the idle rule asks).

Before, the subscriptions ended with the stopped pool's servers, unsaid: no update reached the client any more, and
the session looked, to the idle rule, as if it followed them still (or, once its pool was asked afresh, followed none).

Real parts: a `Runtime` of a tree ``generate-tree`` makes and regenerates from tests/servers/subscribing_server.py
(``live``), and serve's `Subscriptions` over it; no sandbox (the step a sandbox's start takes on a regenerated tree is
taken here, as in tests/serve/test_session_followed_refusals.py). Every wait is on an event, bounded.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import anyio
import pytest

from tests.serve.test_resource_subscriptions import LOG, WAIT, generate, write_config
from tests.serve.test_subscriptions_regenerated import live

pytestmark = pytest.mark.anyio


class Connection:
    """A client's connection: the URIs it was sent ``notifications/resources/updated`` of."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.sent = anyio.Event()

    async def send_resource_updated(self, uri: str) -> None:
        self.uris.append(uri)
        self.sent.set()

    async def until(self, count: int) -> None:
        with anyio.fail_after(WAIT):
            while len(self.uris) < count:
                self.sent = anyio.Event()
                await self.sent.wait()


async def test_a_followed_resource_is_followed_on_the_servers_of_the_tree_the_runtime_moved_to(tmp_path: Path) -> None:
    from agent.serve.client_session import ClientSession
    from agent.serve.upstream_extras import forward
    from agent.serve.upstream_lists import UpstreamExtras
    from agent.serve.upstream_subscriptions import Subscriptions, subscribe_on
    from sandbox.bridge import CallCancel
    from sandbox.host import Runtime
    from tool_tree.config import load_config
    from tool_tree.tree import tree_lock

    entry = live(tmp_path)
    tree = await anyio.to_thread.run_sync(generate, tmp_path, entry)
    config = load_config(write_config(tmp_path, entry))
    extras = UpstreamExtras(config, tree, prompts=False, resources=True)
    extras.reload()
    connection = Connection()
    session = ClientSession("s", Runtime(config, tree))

    def subscribed() -> list[str]:
        result = session.opened().call_tool("live", "subscribed", {})
        return list(json.loads(result["content"][0]["text"]))

    def follow_regenerated() -> None:
        (tmp_path / "state.json").write_text(json.dumps({"tools": ["fresh"]}), encoding="utf-8")
        generate(tmp_path, entry)
        with tree_lock(tree, shared=True):  # as a parallel execute_python's sandbox starts on the regenerated tree
            session.opened()._follow_tree()

    try:
        async with anyio.create_task_group() as tasks:
            subscriptions = Subscriptions(tasks.start_soon, extras, forward)
            runtime = await anyio.to_thread.run_sync(session.opened)
            followed = subscriptions.of(runtime.bridge.pool, connection, asyncio.get_running_loop())
            await anyio.to_thread.run_sync(subscribe_on, followed, forward, runtime, "live", LOG, CallCancel())
            first = await anyio.to_thread.run_sync(subscribed)
            await anyio.to_thread.run_sync(follow_regenerated)
            carried = await anyio.to_thread.run_sync(subscribed)  # the new live process of the regenerated tree
            await connection.until(1)  # one once subscribed again: a change may have been missed meanwhile
            follows, pool = session.follows, session.pool is runtime.bridge.pool
            await anyio.to_thread.run_sync(lambda: runtime.call_tool("live", "touch", {"uri": LOG}))
            await connection.until(2)  # the new process's update reaches the same connection
            tasks.cancel_scope.cancel()
    finally:
        await anyio.to_thread.run_sync(session.close)
    assert (first, carried) == ([LOG], [LOG])  # before: [] on the new process, and no update came
    assert connection.uris == [LOG, LOG]
    assert follows and pool  # before: its stopped pool, whose subscriptions had ended
