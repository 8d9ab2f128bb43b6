"""A server pool reads a server's listing again once the server said its tools changed (`tool_tree.pool_relist`), at
the next check of a tool of it, once for any number of notices, paced, with a real stdio server that renames,
removes and changes its tools on a call."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import tool_tree.pool_relist
from tool_tree.config import ServerConfig
from tool_tree.held_values import HeldValues
from tool_tree.pool import ServerPool
from tool_tree.pool_slot import _closed

SERVERS = Path(__file__).resolve().parents[1] / "servers"
OBJECT = {"type": "object"}


def shifting(tmp_path: Path) -> ServerConfig:
    return ServerConfig(name="s", command=sys.executable, args=(str(SERVERS / "shifting_server.py"),
                        str(tmp_path / "tools.json")))  # fmt: skip


async def listings(pool: ServerPool) -> int:
    return int((await pool.call("s", "listings", {}))["content"][0]["text"])


@pytest.mark.anyio
async def test_a_tool_the_server_renamed_or_changed_after_saying_so_is_seen_as_it_lists_it_now(tmp_path: Path) -> None:
    # Before: the listing of the session's start for its whole life, so `echo` was still there, as it was.
    async with ServerPool([shifting(tmp_path)]) as pool:
        assert await pool.live_tool("s", "echo") is not None
        before = pool.listing("s")
        changed = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        await pool.call("s", "shift", {"tools": {"echo2": OBJECT, "other": changed}})
        assert pool.listing("s") != before  # the notice is read before the call's answer
        assert await pool.live_tool("s", "echo") is None
        assert (await pool.live_tool("s", "echo2")) == {"name": "echo2", "description": "The echo2 tool.",
                                                        "inputSchema": OBJECT}  # fmt: skip
        other = await pool.live_tool("s", "other")
        assert other is not None and other["inputSchema"] == changed
        assert pool.listing("s") == (0, 1)


@pytest.mark.anyio
async def test_a_flood_of_notices_has_the_listing_read_once_at_the_next_check_and_not_before(tmp_path: Path) -> None:
    async with ServerPool([shifting(tmp_path)]) as pool:
        await pool.start("s")
        assert await listings(pool) == 1
        await pool.call("s", "shift", {"tools": {"echo2": OBJECT}, "notices": 500})
        assert await listings(pool) == 1  # notices alone read nothing
        found: list[dict[str, Any] | None] = []

        async def check() -> None:
            found.append(await pool.live_tool("s", "echo2"))

        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(check)
        assert len(found) == 20 and all(f is not None for f in found)
        assert await listings(pool) == 2  # one listing for the 500 notices and the 20 checks
        assert await pool.live_tool("s", "echo") is None
        assert await listings(pool) == 2


@pytest.mark.anyio
async def test_a_listing_read_again_waits_nine_times_as_long_as_the_last_took_at_most_the_servers_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[tuple[float, tuple[float, float] | None]] = []  # each deadline, and the last listing's time then
    pools: list[ServerPool] = []

    async def sleep_until(deadline: float) -> None:
        waits.append((deadline, pools[-1]._slots["s"].relisted))

    monkeypatch.setattr(tool_tree.pool_relist, "sleep_until", sleep_until)
    async with ServerPool([shifting(tmp_path)]) as pool:
        pools.append(pool)
        await pool.start("s")
        for n in range(3):
            await pool.call("s", "shift", {"tools": {f"t{n}": OBJECT}})
            assert await pool.live_tool("s", f"t{n}") is not None
        assert await listings(pool) == 4
    assert len(waits) == 2  # not before the first
    for deadline, last in waits:
        assert last is not None and deadline == last[0] + last[1] * tool_tree.pool_relist.IDLE_PER_BUSY
    # A listing that took long (a server near its timeout) holds the next check the server's timeout at most.
    async with ServerPool([shifting(tmp_path)]) as pool:
        pools.append(pool)
        await pool.start("s")
        slot = pool._slots["s"]
        slot.relisted, slot.changed = (anyio.current_time(), 3600.0), slot.changed + 1
        await pool.live_tool("s", "t2")
    deadline, last = waits[-1]
    assert len(waits) == 3 and last is not None and deadline == last[0] + slot.config.timeout


@pytest.mark.anyio
async def test_a_listing_that_fails_to_be_read_again_is_said_once_left_behind_and_read_at_the_next_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing(*args: object) -> list[dict[str, Any]]:
        raise ValueError("tools/list holds more than 100,000 tools, the limit for one server")

    async with ServerPool([shifting(tmp_path)]) as pool:
        await pool.start("s")
        await pool.call("s", "shift", {"tools": {"echo2": OBJECT}})
        monkeypatch.setattr(tool_tree.pool_relist, "list_tools_raw", failing)
        with caplog.at_level(logging.WARNING, logger="tool_tree.upstream"):
            for _ in range(2):  # the check goes on with the listing it has, as before
                assert await pool.live_tool("s", "echo") is not None
                assert pool.listed("s") != pool.listing("s")
        monkeypatch.undo()
        (said,) = [r.getMessage() for r in caplog.records if r.name == "tool_tree.upstream"]
        assert said == (
            "server 's' said its tools changed, and listing them again failed (tools/list holds more than 100,000 "
            "tools, the limit for one server); its calls are checked against the tools it listed before until a "
            "listing again succeeds"
        )
        assert await pool.live_tool("s", "echo2") is not None
        assert await pool.live_tool("s", "echo") is None
        assert pool.listed("s") == pool.listing("s")


@pytest.mark.anyio
async def test_a_server_that_ended_after_saying_its_tools_changed_is_started_again_by_the_check_and_listed_anew(
    tmp_path: Path,
) -> None:
    # Before: the check read the listing of the session that ended, and its call alone started the server again.
    async with ServerPool([shifting(tmp_path)]) as pool:
        await pool.start("s")
        await pool.call("s", "shift", {"tools": {"echo2": OBJECT}})
        client = pool._slots["s"].client
        assert client is not None
        os.kill(int((tmp_path / "tools.pid").read_text(encoding="utf-8")), signal.SIGKILL)
        with anyio.fail_after(30):
            while not _closed(client):
                await anyio.sleep(0.05)
        assert await pool.live_tool("s", "echo2") is not None
        assert pool.restarts("s") == 1 and pool.listed("s") == pool.listing("s")


@pytest.mark.anyio
async def test_a_listing_read_again_replaces_the_one_counted_and_a_session_after_it_counts_its_own(
    tmp_path: Path,
) -> None:
    held = HeldValues()
    many = {f"tool_{n}": {"type": "object", "properties": {"x": {"type": "string"}}} for n in range(40)}
    async with ServerPool([shifting(tmp_path)], held_within=held) as pool:
        await pool.start("s")
        one = held.held
        await pool.call("s", "shift", {"tools": many})
        assert await pool.live_tool("s", "tool_39") is not None
        more = held.held
        assert more > one  # the listing read again, counted instead of the first
        await pool.call("s", "shift", {"tools": {"echo": OBJECT}})
        assert await pool.live_tool("s", "echo") is not None
        assert held.held == one
    assert held.held == 0
