"""`RestartBackoff`: how soon a server whose connection ended may be started again by the pool.

A server's budgets (`tool_tree.budget`: the reader's 2 s CPU burst, the notification burst, the stray-answer
allowance) are per connection, so each restart gives a server fresh ones, and costs the host a process start.
A server the host ends for breaking a budget, or that crashes in a loop, would get them again on every call.
So the first restart is at once (a server that crashed once is back for the next call), and each later one
within `QUIET` seconds of the previous one waits `FIRST_DELAY`, then twice as long each time, up to
`MAX_DELAY`, counted from the previous restart; a call meanwhile is refused at once (`ServerPool` says why the
server ended last and when it may start again). Any restart counts, whatever ended the server: the pool cannot
always tell (a budget broken with no call in flight shows only as a connection that closed), and a crash loop
costs the same process starts. A start that failed counts as an ending too, so a server that cannot start is
tried again at once once, then backs off the same way.
"""

from __future__ import annotations

import math
from time import monotonic  # looked up at each call: tests replace it

FIRST_DELAY = 1.0
"""The wait before a second restart: a Python server's process start costs the host about 0.1–0.3 s of CPU,
so at most one a second while the back-off grows."""
MAX_DELAY = 60.0
"""The longest wait: a server ended at once after each restart then gets its reader's 2 s burst once a minute,
3% of a core, under the 5% its reader may spend at the steady rate; reached after 7 restarts in a row."""
QUIET = 600.0
"""Seconds after the previous restart from which a restart is a first one again (well over `MAX_DELAY`, so a
server held at it never counts as quiet)."""


class RestartBackoff:
    """The restarts of one server: `refusal` before each start."""

    def __init__(self) -> None:
        self.ended: str | None = None
        """Why its last connection ended, until it runs again (None: it never ran, or it runs)."""
        self.streak = 0
        """Restarts in a row, each within `QUIET` seconds of the one before."""
        self._last = -math.inf

    def delay(self, streak: int) -> float:
        """The wait after the previous restart before restart number ``streak`` of a row (the first: none)."""
        return 0.0 if streak <= 1 else min(MAX_DELAY, FIRST_DELAY * 2 ** (streak - 2))

    def admit(self) -> float:
        """Records a restart now and returns 0.0, or returns the seconds left before one may happen (and records
        nothing)."""
        now = monotonic()
        streak = 1 if now - self._last >= QUIET else self.streak + 1
        left = self._last + self.delay(streak) - now
        if left > 0:
            return left
        self.streak, self._last = streak, now
        return 0.0

    def failed(self, reason: str) -> None:
        """A start failed for ``reason``: that is now why the server last ended, so the next start is a
        restart (a server that cannot start backs off like one that keeps ending)."""
        self.ended = f"it failed to {'re' if self.ended is not None else ''}start: {reason}"

    def refusal(self) -> str | None:
        """Before a start: None if it may start now (a restart is recorded), else why not, for the caller."""
        if self.ended is None:
            return None  # a first start
        held = self.admit()
        if not held:
            return None
        after = "its restart" if self.streak == 1 else f"each of its last {self.streak} restarts"
        return (
            f"not restarted for {held:.1f} s more: it ended again soon after {after}, the last time because "
            f"{self.ended[:300]} (restarts in a row back off: {FIRST_DELAY:g} s, {2 * FIRST_DELAY:g} s, "
            f"{4 * FIRST_DELAY:g} s … {MAX_DELAY:g} s)"
        )
