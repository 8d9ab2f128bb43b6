"""Restarts of a server that keeps ending back off (`tool_tree.restarts`), with real stdio servers and a fake clock."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import alive
from tool_tree import restarts
from tool_tree.budget import STRAY_ANSWERS
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable
from tool_tree.restarts import MAX_DELAY, QUIET, RestartBackoff

REPO = Path(__file__).resolve().parents[2]
FLOOD = REPO / "tests" / "servers" / "flood_server.py"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(restarts, "monotonic", fake)
    return fake


def flood(name: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=(str(FLOOD),), timeout=30)


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


def test_the_first_restart_is_at_once_then_each_waits_twice_as_long_up_to_a_minute_until_a_quiet_spell(
    clock: Clock,
) -> None:
    backoff = RestartBackoff()
    waits = []
    for _ in range(10):
        waits.append(backoff.admit())  # as soon as it may: ended at once after each restart
        if waits[-1]:
            clock.now += waits[-1]
            assert backoff.admit() == 0.0
    assert waits == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, MAX_DELAY, MAX_DELAY, MAX_DELAY]
    clock.now += MAX_DELAY - 1
    assert backoff.admit() == 1.0  # a refused start is not recorded: the wait runs from the last restart
    clock.now += QUIET
    assert backoff.admit() == 0.0 and backoff.streak == 1


def test_a_first_start_is_never_held_and_a_failed_start_counts_as_an_ending(clock: Clock) -> None:
    backoff = RestartBackoff()
    assert backoff.refusal() is None and backoff.streak == 0
    backoff.failed("cannot start")  # a first start that failed: the next start is a restart
    assert backoff.ended == "it failed to start: cannot start"
    assert backoff.refusal() is None and backoff.streak == 1  # tried again at once, once
    backoff.failed("the server exited during start-up")
    refusal = backoff.refusal()
    assert refusal is not None
    assert "not restarted for 1.0 s more" in refusal
    assert "it failed to restart: the server exited during start-up" in refusal


@pytest.mark.anyio
async def test_a_server_the_host_keeps_ending_is_refused_at_once_until_its_back_off_ends(clock: Clock) -> None:
    # Before: each call restarted it at once, with fresh budgets (its reader's 2 s CPU burst among them).
    async with ServerPool([flood("flood"), flood("steady")]) as pool:
        steady_pid = int(text(await pool.call("steady", "pid", {})))

        async def ended_by_the_host() -> None:
            pid = int(text(await pool.call("flood", "pid", {})))
            with pytest.raises(ServerUnavailable, match=f"more than {STRAY_ANSWERS} answers"):
                await pool.call("flood", "strays", {"n": 1000})
            assert not alive(pid)

        await ended_by_the_host()  # its first start
        await ended_by_the_host()  # the first restart: at once
        assert pool.restarts("flood") == 2  # ended twice
        for _ in range(2):  # not started meanwhile, however often it is called
            with pytest.raises(ServerUnavailable) as held:
                await pool.call("flood", "pid", {})
            message = str(held.value)
            assert message.startswith("server 'flood' is unavailable: not restarted for 1.0 s more")
            assert (
                f"the last time because tooltree ended it during a call (server 'flood' sent more than {STRAY_ANSWERS}"
                in (message)
            )
            assert pool.state("flood") == "stopped"
        assert int(text(await pool.call("steady", "pid", {}))) == steady_pid  # the others go on

        clock.now += 1.0
        await ended_by_the_host()  # the second restart, once its second had passed
        with pytest.raises(ServerUnavailable, match=r"not restarted for 2\.0 s more"):
            await pool.call("flood", "pid", {})

        clock.now += QUIET  # a quiet spell: its next restart is a first one again
        assert int(text(await pool.call("flood", "pid", {}))) > 0
        assert pool.state("flood") == "running" and pool.restarts("flood") == 3


@pytest.mark.anyio
async def test_a_server_ended_now_and_then_is_restarted_at_once_each_time(clock: Clock) -> None:
    async with ServerPool([flood("flood")]) as pool:
        pids = [int(text(await pool.call("flood", "pid", {})))]
        for _ in range(3):
            with pytest.raises(ServerUnavailable):
                await pool.call("flood", "strays", {"n": 1000})
            clock.now += MAX_DELAY  # as long as the longest wait since its last restart
            pids.append(int(text(await pool.call("flood", "pid", {}))))
        assert len(set(pids)) == 4 and pool.restarts("flood") == 3


@pytest.mark.anyio
async def test_a_server_that_cannot_start_is_tried_again_once_at_once_then_backs_off(
    clock: Clock, tmp_path: Path
) -> None:
    # Before: each call started its process again after a sleep of 0.2 s, 0.4 s … held inside the call.
    starts = tmp_path / "starts"
    script = f"open({str(starts)!r}, 'a').write('x'); import sys; sys.exit('no such database: crm.db')"
    broken = ServerConfig(name="broken", command=sys.executable, args=("-c", script), timeout=30)
    async with ServerPool([broken]) as pool:
        for _ in range(2):  # its first start, then one more at once: both carry what it printed
            with pytest.raises(ServerUnavailable, match="exited during start-up") as failed:
                await pool.call("broken", "pid", {})
            assert "no such database: crm.db" in failed.value.stderr_tail
        assert starts.read_text() == "xx"
        with pytest.raises(ServerUnavailable) as held:
            await pool.call("broken", "pid", {})
        message = str(held.value)
        assert "not restarted for 1.0 s more" in message
        assert "because it failed to restart: the server exited during start-up" in message
        assert "no such database: crm.db" in held.value.stderr_tail  # its last start's stderr
        assert starts.read_text() == "xx"  # refused without starting a process
        clock.now += 1.0
        with pytest.raises(ServerUnavailable, match="exited during start-up"):
            await pool.call("broken", "pid", {})
        assert starts.read_text() == "xxx"
