"""`InFlight`: the calls in flight on each session of a server, so a session the server ended is closed only once
the calls sent on it have their answers (closing it cuts them off: they would fail as "the server died during the
call", outcome unknown, when their answer, a 404, says the server never ran them)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class InFlight:
    """Counts the calls in flight on each session (by identity); `drained` waits until a session has none."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._changed = anyio.Event()

    @contextmanager
    def call(self, session: object) -> Iterator[None]:
        """One call in flight on ``session`` for the block (the session is referenced meanwhile: its id is its own)."""
        key = id(session)
        self._counts[key] = self._counts.get(key, 0) + 1
        try:
            yield
        finally:
            if left := self._counts[key] - 1:
                self._counts[key] = left
            else:
                del self._counts[key]
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

    async def drained(self, session: object, timeout: float) -> None:
        """Wait until no call is in flight on ``session``, at most ``timeout`` seconds."""
        with anyio.move_on_after(timeout):
            while id(session) in self._counts:
                await self._changed.wait()
