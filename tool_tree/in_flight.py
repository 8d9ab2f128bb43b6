"""`InFlight`: the calls in flight on each session of a server, so a session the server ended is closed only once
the calls sent on it have their answers (closing it cuts them off: they would fail as "the server died during the
call", outcome unknown, when their answer, a 404, says the server never ran them); and who answers what the server
asks during them (`asker`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from tool_tree.server_asks import Asker


class InFlight:
    """Counts the calls in flight on each session (by identity); `drained` waits until a session has none."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._changed = anyio.Event()
        self._askers: dict[int, list[Asker | None]] = {}

    @contextmanager
    def call(self, session: object, asker: Asker | None = None) -> Iterator[None]:
        """One call in flight on ``session`` for the block (the session is referenced meanwhile: its id is its own);
        ``asker`` answers what the server asks during it (`asker`)."""
        key = id(session)
        self._counts[key] = self._counts.get(key, 0) + 1
        askers = self._askers.setdefault(key, [])
        askers.append(asker)
        try:
            yield
        finally:
            askers.remove(asker)  # one of the equal ones: the order of those left is kept
            if not askers:
                del self._askers[key]
            if left := self._counts[key] - 1:
                self._counts[key] = left
            else:
                del self._counts[key]
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

    def asker(self, session: object) -> Asker | None:
        """Who answers a question the server asks on ``session`` now: the asker of its oldest call in flight, when
        every call in flight there has one; else None. A session's question names no call (the SDK links neither a
        request on the wire nor an ``input required`` question to the call it belongs to), so it may be any of them:
        all the calls of a pool are one caller's (a `tooltree serve` client's session), and a call without an asker (a
        script's) in flight at the same time makes the question refused rather than put to someone else's call."""
        askers = self._askers.get(id(session), [])
        return askers[0] if askers and all(a is not None for a in askers) else None

    async def drained(self, session: object, timeout: float) -> None:
        """Wait until no call is in flight on ``session``, at most ``timeout`` seconds."""
        with anyio.move_on_after(timeout):
            while id(session) in self._counts:
                await self._changed.wait()
