"""`Follow`: `tooltree serve` regenerates a server's part of the tree when the server says its tools, prompts or
resources changed.

A client session's server pool hears a server's ``notifications/tools/list_changed``, ``.../prompts/list_changed`` or
``.../resources/list_changed`` (one sent after its session was listed; `tool_tree.pool.ServerPool`'s
``on_tools_changed``; also when such a notice may have been missed: an HTTP server's lost stream of unasked messages
open again, a new session replacing one that ended) and tells `Follow.changed` the server's name, from the pool's
thread. A worker thread then
regenerates that server's part of the tree (`generate` with ``only``: its stubs, the index files, the manifest and the
search index; the other servers' stubs are kept) and has the served tree read again
(`agent.serve.server.ToolServer.reload_tree`). Client sessions that start after it get the new tree; those already
running see it in ``search_tools`` and ``read_file``, while their scripts keep the tree their sandbox started with (they
are told so; with a workspace folder, one whose script fails to import what was added is renewed at its next call,
`agent.serve.sessions.RENEWING`). The tools serve offers never change. The regenerated snapshot records the server's
prompts and resources as they are now: the sessions that listed them are told if they changed
(`agent.serve.upstream_lists.UpstreamExtras.reload`).

Before, a server that added a tool while serve ran was followed by nothing: the tree kept its old stubs until serve
was restarted; and one that added a prompt or a resource was followed by nothing until something else regenerated it.

Bounded against a server that says so in a loop, whichever of its lists it names: the three are one signal, the
server's name, so notifications that come together (each session's copy of the server says it, of one list or of
all three) make one regeneration, a server is regenerated at most once per ``min_interval`` seconds and no sooner
after a regeneration than `IDLE_PER_BUSY` times as long as it took (so regenerating takes at most a tenth of the time,
however large the server's listing), and one regeneration runs at a time, never during the refresh that serve
starts with (``after``). A notice of prompts or resources is followed only when serve offers that list (``serve:
prompts``, ``serve: resources``): the pool's listener is told which list changed, and `agent.serve.server.ToolServer`
tells `Follow.changed` only of those (before, it was told the server alone, and a notice of a list serve did not offer
regenerated the tree all the same).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from generator.cancel import Cancel

SETTLE_SECONDS = 1.0
"""How long a notification waits for others (the same server's, in other sessions) before its regeneration."""
MIN_INTERVAL_SECONDS = 30.0
"""The least time between two regenerations of one server: each starts the server once more."""
IDLE_PER_BUSY = 9.0
"""After a regeneration, the time before the next of its servers, per second it took. Before, only
`MIN_INTERVAL_SECONDS`: a listing of 2,000 tools of 5.6 KB (a sixth of the listing's cap) takes 14 s of CPU to
regenerate, one near the cap about 80 s, so a server saying its tools changed after each regeneration kept serve
regenerating it most of the time, for as long as it went on."""


class Follow:
    """Regenerations of the servers that said their tools changed, on a thread of their own.

    Args:
        regenerate: regenerates the named servers' part of the tree (and has it served); stopped through the
            `Cancel` it is given. What it raises is reported through ``report`` and following goes on.
        report: says a line to the user (stderr).
        settle, min_interval: see `SETTLE_SECONDS` and `MIN_INTERVAL_SECONDS`.
        clock: the monotonic clock the intervals are measured on.
    """

    def __init__(
        self,
        regenerate: Callable[[Sequence[str], Cancel], None],
        report: Callable[[str], None],
        *,
        settle: float = SETTLE_SECONDS,
        min_interval: float = MIN_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from generator.cancel import Cancel

        self._regenerate, self._report = regenerate, report
        self.settle, self.min_interval, self._clock = settle, min_interval, clock
        self.cancel = Cancel()
        self._told: dict[str, float] = {}  # a server that said so and is not regenerated yet: when it first said so
        self._next: dict[str, float] = {}  # the soonest each server may be regenerated again
        self._cond = threading.Condition()
        self._stopped = False
        self._after: threading.Thread | None = None
        self._thread = threading.Thread(target=self._run, name="tooltree-follow", daemon=True)
        self.regenerations = 0
        """How many regenerations ran (each of one or more servers)."""
        self._running: Sequence[str] = ()  # the servers being regenerated now

    def start(self, *, after: threading.Thread | None = None) -> None:
        """Start following; the first regeneration waits for ``after`` (the refresh serve starts with) to end."""
        self._after = after
        self._thread.start()

    def changed(self, server: str) -> None:
        """``server`` said its tools, prompts or resources changed (from any thread; never blocks for long)."""
        with self._cond:
            if not self._stopped:
                self._told.setdefault(server, self._clock())
                self._cond.notify()

    def due(self, server: str) -> float | None:
        """Seconds until ``server``'s part of the tree is regenerated as it said its tools changed (0: under way, or
        the refresh serve starts with still runs), None when none is due (from any thread). A call of a tool whose
        server changed it meanwhile says so (`sandbox.tool_changes.regenerating`): before, it said to regenerate the
        tree with the command, which serve was about to do."""
        with self._cond:
            if self._stopped:
                return None
            if server in self._running or (self._after is not None and self._after.is_alive()):
                return 0.0
            told = self._told.get(server)
            if told is None:
                return None
            return max(0.0, max(told + self.settle, self._next.get(server, -math.inf)) - self._clock())

    def stop(self) -> None:
        """Stop following: a regeneration running is cancelled (nothing of it is written) and waited for."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self.cancel.set()
        if self._thread.is_alive():
            self._thread.join()

    def _due(self, now: float) -> tuple[list[str], float | None]:
        """The servers to regenerate now, and how long until the next one is due (None: none is waiting)."""
        due, wait = [], math.inf
        for name, told in self._told.items():
            at = max(told + self.settle, self._next.get(name, -math.inf))
            if at <= now:
                due.append(name)
            else:
                wait = min(wait, at - now)
        return sorted(due), (None if wait == math.inf else wait)

    def _run(self) -> None:
        from generator.cancel import GenerateCancelled

        if self._after is not None:
            self._after.join()
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    due, wait = self._due(self._clock())
                    if due:
                        break
                    self._cond.wait(wait)
                for name in due:
                    del self._told[name]
                self._running = due
            started = self._clock()
            try:
                self._regenerate(due, self.cancel)
            except GenerateCancelled:
                return
            except Exception as e:  # serving goes on with the tree as it is
                self._report(f"regenerating {', '.join(due)} failed: {type(e).__name__}: {e}")
            with self._cond:
                self._running = ()
                self.regenerations += 1
                ended = self._clock()
                for name in due:
                    self._next[name] = ended + max(self.min_interval, IDLE_PER_BUSY * (ended - started))
                self._cond.notify_all()

    def wait_for(self, regenerations: int, timeout: float) -> bool:
        """Wait until ``regenerations`` regenerations have run; whether they had within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.regenerations >= regenerations, timeout)
