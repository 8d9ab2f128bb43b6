"""The supervisor's clock lets go of a cancelled timeout at once, not when its time comes.

Each execution's timeout is an alarm on the clock holding the execution: its output captures (a head and a tail of
up to 1 MiB each, per stream) and its images. A finished execution's alarm is cancelled but stays queued until its
time (the execution's timeout, up to a week); before, it kept the execution alive until then, and a session whose
scripts printed a few MB each filled the container's memory in about 50 executions: every later one ended "memory
limit exceeded".
"""

from __future__ import annotations

import functools
import gc
import threading
import weakref

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox._supervisor.clock import Clock


class _Held:
    """Something an alarm's call holds (an execution, in the supervisor)."""

    def __init__(self) -> None:
        self.used = threading.Event()

    def use(self) -> None:
        self.used.set()


def test_a_cancelled_alarm_no_longer_holds_what_its_call_would_have_used() -> None:
    clock = Clock(name="test-clock")
    held = _Held()
    used = held.used
    alarm = clock.call_later(3600.0, functools.partial(_Held.use, held))
    gone = weakref.ref(held)
    alarm.cancel()
    del held
    gc.collect()
    assert gone() is None
    assert not used.is_set()


def test_an_alarm_still_runs_at_its_time_and_a_cancelled_one_never() -> None:
    clock = Clock(name="test-clock")
    ran: list[str] = []
    last = threading.Event()
    clock.call_later(0.01, lambda: ran.append("first")).cancel()
    clock.call_later(0.02, lambda: ran.append("second"))
    clock.call_later(0.03, last.set)
    assert last.wait(10)
    assert ran == ["second"]


LOUD = "import sys\nsys.stdout.write('x' * 2_500_000)\nsys.stderr.write('y' * 2_500_000)\n"
"""Past the captures' memory: each keeps a 1 MiB head and a 1 MiB tail in the supervisor, until it is freed."""


@pytest.mark.docker
def test_a_hundred_executions_that_print_megabytes_each_do_not_fill_the_sandboxs_memory(
    backend: DockerBackend,
) -> None:
    # 512 MB of memory (the default), a 20 s timeout: within it, before, the 53rd execution found the memory full.
    with Sandbox(backend) as sb:
        errors = [sb.execute(LOUD).error for _ in range(100)]
        assert errors == [None] * 100


class _Unsayable(Exception):
    def __repr__(self) -> str:
        raise RuntimeError("no words for it")


def test_a_call_that_fails_and_cannot_even_be_reported_leaves_the_clock_running() -> None:
    # Every later timeout and cancel of the session runs on this one thread: it must outlive any call's failure.
    def fail() -> None:
        raise _Unsayable

    clock, after = Clock(name="test-clock"), threading.Event()
    clock.call_later(0.0, fail)
    clock.call_later(0.0, after.set)
    assert after.wait(10)
