"""`ServerPool` entered and left more than once, as an async developer may: it runs once."""

from __future__ import annotations

import pytest

from tests.tool_tree.test_api_background_pool import media, text
from tool_tree.pool import PoolError, ServerPool

pytestmark = pytest.mark.anyio


async def test_a_server_pool_entered_again_refuses_and_the_running_one_goes_on() -> None:
    # Before: the second `async with` replaced the pool's task group (the first was never left, its servers'
    # owner tasks orphaned), its exit stopped every server, and leaving the outer block was an AssertionError.
    pool = ServerPool([media()])
    async with pool:
        assert text(await pool.call("media", "slow_echo", {"text": "a", "seconds": 0})) == "a"
        with pytest.raises(PoolError, match=r"^this ServerPool was already entered \(it is running\): a pool runs"):
            async with pool:
                pass
        assert text(await pool.call("media", "slow_echo", {"text": "b", "seconds": 0})) == "b"
        assert pool.restarts("media") == 0
    await pool.__aexit__(None, None, None)  # left twice: nothing more to do
    with pytest.raises(PoolError, match=r"^this ServerPool was already entered \(it has run\)"):
        async with pool:
            pass
    with pytest.raises(PoolError, match=r"^the pool is not open"):
        await pool.call("media", "slow_echo", {"text": "c", "seconds": 0})


def test_a_server_pool_awaited_on_another_event_loop_refuses_and_its_own_loop_goes_on() -> None:
    # Before: from another loop (asyncio.run in the caller's thread), a call to a running server hung past its own
    # timeout (5 s; cut here by wait_for at 20 s), a call to a new one started it from the wrong thread, and the pool
    # then refused every call: "the pool is closing".
    import asyncio

    from tool_tree.pool import BackgroundPool

    with BackgroundPool([media()]) as bg:
        assert text(bg.call("media", "slow_echo", {"text": "a", "seconds": 0})) == "a"

        async def elsewhere() -> None:
            for awaited in (
                bg.pool.call("media", "slow_echo", {"text": "b", "seconds": 0}, timeout=5),
                bg.pool.start("media"),
                bg.pool.live_tool("media", "slow_echo"),
            ):
                with pytest.raises(PoolError, match=r"^this ServerPool runs on the event loop that entered it"):
                    await asyncio.wait_for(awaited, 20)

        asyncio.run(elsewhere())
        assert text(bg.call("media", "slow_echo", {"text": "c", "seconds": 0}, timeout=5)) == "c"
        assert bg.pool.restarts("media") == 0
