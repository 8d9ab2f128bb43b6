"""`tooltree_cli.serve_follow.Follow`: notices coalesced, each server regenerated at most once per interval, stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from generator.cancel import Cancel, GenerateCancelled
from tooltree_cli.serve_follow import IDLE_PER_BUSY, Follow


class Recorder:
    def __init__(self) -> None:
        self.runs: list[tuple[list[str], float]] = []
        self.reports: list[str] = []

    def regenerate(self, servers: Sequence[str], cancel: Cancel) -> None:
        self.runs.append((list(servers), time.monotonic()))


def test_notices_that_come_together_make_one_regeneration_of_the_servers_named() -> None:
    rec = Recorder()
    follow = Follow(rec.regenerate, rec.reports.append, settle=0.2, min_interval=60)
    follow.start()
    try:
        for server in ("b", "a", "b", "a", "b"):  # every session's copy of the server says so
            follow.changed(server)
        assert follow.wait_for(1, 10)
        assert not follow.wait_for(2, 0.5)  # nothing more was due
    finally:
        follow.stop()
    assert [servers for servers, _ in rec.runs] == [["a", "b"]]


def test_a_server_is_regenerated_at_most_once_per_interval_others_are_not_held_back() -> None:
    rec = Recorder()
    follow = Follow(rec.regenerate, rec.reports.append, settle=0.01, min_interval=1.0)
    follow.start()
    try:
        follow.changed("loop")
        assert follow.wait_for(1, 10)
        first = rec.runs[0][1]
        for _ in range(100):  # a server that says so in a loop
            follow.changed("loop")
        follow.changed("other")
        assert follow.wait_for(2, 10)
        assert rec.runs[1][0] == ["other"] and rec.runs[1][1] - first < 0.9
        assert follow.wait_for(3, 10)
        assert rec.runs[2][0] == ["loop"] and rec.runs[2][1] - first >= 1.0
        assert not follow.wait_for(4, 0.3)
    finally:
        follow.stop()


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_after_a_long_regeneration_the_server_waits_that_many_times_longer_before_the_next() -> None:
    # Before: 30 s after any regeneration, however long it took: a server near the listing's caps (about 80 s of CPU
    # to regenerate) that said its tools changed after each one kept serve regenerating it most of the time.
    clock, calls, reports = Clock(), [], []

    def regenerate(servers: Sequence[str], cancel: Cancel) -> None:
        calls.append(list(servers))
        clock.now += 100.0  # it took 100 s

    follow = Follow(regenerate, reports.append, settle=0.0, min_interval=1.0, clock=clock)
    follow.start()
    try:
        follow.changed("big")
        assert follow.wait_for(1, 10)
        clock.now += 10.0  # ten times the least interval since it ended
        follow.changed("big")
        assert not follow.wait_for(2, 0.5)
        clock.now += 100.0 * IDLE_PER_BUSY
        follow.changed("big")  # the thread looks at the clock again
        assert follow.wait_for(2, 10)
    finally:
        follow.stop()
    assert calls == [["big"], ["big"]] and reports == []


def test_a_failed_regeneration_is_reported_and_following_goes_on() -> None:
    reports: list[str] = []
    calls: list[list[str]] = []

    def regenerate(servers: Sequence[str], cancel: Cancel) -> None:
        calls.append(list(servers))
        if len(calls) == 1:
            raise OSError("No space left on device")

    follow = Follow(regenerate, reports.append, settle=0.01, min_interval=0.01)
    follow.start()
    try:
        follow.changed("crm")
        assert follow.wait_for(1, 10)
        follow.changed("crm")
        assert follow.wait_for(2, 10)
    finally:
        follow.stop()
    assert reports == ["regenerating crm failed: OSError: No space left on device"] and calls == [["crm"], ["crm"]]


def test_the_first_regeneration_waits_for_the_refresh_serve_started_with_and_stop_cancels_one_running() -> None:
    refresh_may_end, running = threading.Event(), threading.Event()
    refresh = threading.Thread(target=refresh_may_end.wait)
    refresh.start()

    def regenerate(servers: Sequence[str], cancel: Cancel) -> None:
        stopped = threading.Event()
        if cancel.on_set(stopped.set) is not None:
            running.set()
            assert stopped.wait(10)
        raise GenerateCancelled

    follow = Follow(regenerate, print, settle=0.01, min_interval=0.01)
    follow.start(after=refresh)
    follow.changed("crm")
    assert not running.wait(0.3)  # the refresh still runs
    refresh_may_end.set()
    refresh.join()
    assert running.wait(10)
    follow.stop()  # returns: the regeneration was cancelled
    assert follow.regenerations == 0


def test_due_says_how_long_until_a_server_that_said_its_tools_changed_is_regenerated() -> None:
    # What a call of a tool the server changed meanwhile says (`sandbox.tool_changes.regenerating`): before, to
    # regenerate the tree with the command, which serve was about to do.
    clock, gate, calls = Clock(), threading.Event(), []
    running = threading.Event()

    def regenerate(servers: Sequence[str], cancel: Cancel) -> None:
        calls.append(list(servers))
        running.set()
        assert gate.wait(10)
        clock.now += 2.0  # it took 2 s

    follow = Follow(regenerate, [].append, settle=1.0, min_interval=30.0, clock=clock)
    assert follow.due("crm") is None  # it said nothing
    follow.start()
    try:
        follow.changed("crm")
        clock.now += 0.25
        assert follow.due("crm") == 0.75 and follow.due("docs") is None
        clock.now += 1.0  # crm is due: the thread finds it at the end of its wait
        assert running.wait(10)
        assert follow.due("crm") == 0.0  # under way
        gate.set()
        assert follow.wait_for(1, 10)
        assert follow.due("crm") is None
        follow.changed("crm")  # again: not before 30 s after the last one ended
        assert follow.due("crm") == 30.0
    finally:
        gate.set()
        follow.stop()
    assert follow.due("crm") is None  # stopped: nothing regenerates it
    assert calls[0] == ["crm"]


def test_due_is_zero_for_every_server_while_the_refresh_serve_started_with_runs() -> None:
    rec, release = Recorder(), threading.Event()
    refresh = threading.Thread(target=release.wait, args=(10,))
    refresh.start()
    follow = Follow(rec.regenerate, rec.reports.append)
    follow.start(after=refresh)
    try:
        assert follow.due("crm") == 0.0
        release.set()
        refresh.join()
        assert follow.due("crm") is None
    finally:
        release.set()
        follow.stop()
