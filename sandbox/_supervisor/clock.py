"""The supervisor's timers on one thread, started before any user code runs.

A script can take every process and thread the sandbox allows (a fork bomb, stopped by the pids limit or, under
gVisor, the ``nproc`` ulimit, which counts the supervisor's threads too: it runs as the same user). A supervisor
that started a thread for each execution's timeout or each cancel then failed to start it ("can't start new
thread") and exited, ending the session: the slot the previous execution's timer freed came back only once that
thread had ended, a race the next execution often won. The clock thread exists from the start, so an execution and
a cancel need no new thread.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import sys
import threading
import time
from collections.abc import Callable


def _nothing() -> None:
    pass


class Alarm:
    """One scheduled call; `cancel` stops it unless it has started."""

    def __init__(self, when: float, action: Callable[[], object]) -> None:
        self.when = when
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        # The call is dropped now, not when its time comes (it stays in the clock's queue until then): an
        # execution's timeout holds the execution, its output and its images, for up to a week.
        self.cancelled = True
        self.action = _nothing


class Clock:
    """Runs each scheduled call at its time (``time.monotonic``), one after another, on its own thread.

    A call must be short (it holds up the ones after it); an exception it raises is printed and the clock goes on.
    """

    def __init__(self, name: str = "clock") -> None:
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def call_later(self, delay: float, action: Callable[[], object]) -> Alarm:
        """Call ``action`` in ``delay`` seconds (on the clock's thread)."""
        alarm = Alarm(time.monotonic() + max(0.0, delay), action)
        with self._cond:
            heapq.heappush(self._due, (alarm.when, next(self._order), alarm))
            self._cond.notify()
        return alarm

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due or self._due[0][0] > time.monotonic():
                    self._cond.wait(self._due[0][0] - time.monotonic() if self._due else None)
                _, _, alarm = heapq.heappop(self._due)
            if not alarm.cancelled:
                try:
                    alarm.action()
                except Exception as e:  # the top of the thread: one failed call must not stop every later timeout
                    with contextlib.suppress(Exception):  # nor may saying so (a closed stderr, a repr that raises)
                        print(f"supervisor: a timer failed: {e!r}", file=sys.stderr)
