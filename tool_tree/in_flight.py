"""`InFlight`: the calls in flight on each session of a server, so a session the server ended is closed only once
the calls sent on it have their answers (closing it cuts them off: they would fail as "the server died before
answering the call", outcome unknown, when their answer, a 404, says the server never ran them); and who answers
what the server asks during them (`asker`)."""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio
import mcp.types as mt

from tool_tree.config_servers import ASKABLE
from tool_tree.server_asks import Asker, no_one_to_ask, refusal_of

MAX_URL_ELICITATIONS = 16
"""URL elicitations a session remembers the asker of, to tell it when the server says one was completed (the oldest
forgotten first)."""
URL_ELICITATION_SECONDS = 600.0
"""How long such an elicitation is remembered (a sign-in the user finishes later is still told)."""
MAX_ELICITATION_ID_CHARS = 256
"""The longest elicitation id remembered (a longer one's completion is not told)."""

_OWN: ContextVar[tuple[int, _Asking | None] | None] = ContextVar("tooltree_own_call", default=None)
"""The call in flight in this task (and the tasks it starts), by session, and its asking: the SDK dispatches the
questions of an ``input required`` result in the task of the call whose result it is, so they name their call."""

CALL_ENDED = "the call it came during ended before the client answered (its timeout, or the client's cancel)"
"""Why a question still open at its call's end is refused to the server (and withdrawn from the client)."""


class _Asking:
    """One call's asker and the questions it is answering now, withdrawn at the call's end (`end`): a server that
    never withdraws its own would keep its question open on the client for good."""

    def __init__(self, asker: Asker, remember: Callable[[str, Callable[[str], None]], None]) -> None:
        self.asker = asker
        self.open: set[anyio.CancelScope] = set()
        self.ended = False
        self.was_asking = False
        """Whether a question was with its asker when the call ended."""
        self._remember = remember

    async def __call__(self, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        with anyio.CancelScope() as scope:
            if self.ended:
                scope.cancel()
            self.open.add(scope)
            try:
                answer = await self.asker(request)
            finally:
                self.open.discard(scope)
            completed = getattr(self.asker, "completed", None)
            url = request.params if isinstance(request, mt.ElicitRequest) else None
            accepted = isinstance(answer, mt.ElicitResult) and answer.action == "accept"
            if isinstance(url, mt.ElicitRequestURLParams) and url.elicitation_id and accepted and completed is not None:
                self._remember(url.elicitation_id, completed)  # its completion, told later, goes to the same asker
            return answer
        return refusal_of(request, CALL_ENDED, offered=True)

    def accepts(self, capability: str) -> bool:
        """Whether its asker passes questions of ``capability`` on (an asker's ``kinds``; all when it says none)."""
        return capability in getattr(self.asker, "kinds", ASKABLE)

    def end(self) -> None:
        self.was_asking = bool(self.open)
        self.ended = True
        for scope in self.open:
            scope.cancel()


class InFlight:
    """Counts the calls in flight on each session (by identity); `drained` waits until a session has none."""

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._changed = anyio.Event()
        self._askers: dict[int, list[_Asking | None]] = {}
        self._urls: dict[int, OrderedDict[str, tuple[float, Callable[[str], None]]]] = {}

    @contextmanager
    def call(self, session: object, asker: Asker | None = None) -> Iterator[_Asking | None]:
        """One call in flight on ``session`` for the block (the session is referenced meanwhile: its id is its own);
        ``asker`` answers what the server asks during it (`asker`)."""
        key = id(session)
        self._counts[key] = self._counts.get(key, 0) + 1
        askers = self._askers.setdefault(key, [])
        asking = None if asker is None else _Asking(asker, functools.partial(self._remember, key))
        askers.append(asking)
        token = _OWN.set((key, asking))
        try:
            yield asking
        finally:
            _OWN.reset(token)
            askers.remove(asking)  # itself, or one of the Nones: the order of those left is kept
            if asking is not None:
                asking.end()  # its questions still open are withdrawn
            if not askers:
                del self._askers[key]
            if left := self._counts[key] - 1:
                self._counts[key] = left
            else:
                del self._counts[key]
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

    def asker(self, session: object, capability: str) -> Asker | str:
        """Who answers a question of ``capability`` the server asks on ``session`` now: the asker of its oldest call
        in flight not asking already, when every call in flight there has one that passes such questions on; else why
        none does. A question of an ``input required`` result is its own call's: the SDK asks it in that call's task
        (`_OWN`). One on the wire names no call (the SDK does not link it to the call it belongs to), so it may be any
        of them: all the calls of a pool are one caller's (a `tooltree serve` client's session), and a call in flight
        at the same time that could not pass it on (a script's, a host caller's) makes the question refused rather
        than put to another call's asker."""
        own = _OWN.get()
        if own is not None and own[0] == id(session):  # asked in its own call's result (2026-07-28)
            return own[1] or no_one_to_ask(capability)
        askers = self._askers.get(id(session), [])
        if not askers:
            return "it came between calls; tooltree passes a question on only during the call it belongs to"
        if len(askers) == 1:  # its own call's: its asker says whether it passes such a question on
            return askers[0] or no_one_to_ask(capability)
        calls = [a for a in askers if a is not None and a.accepts(capability)]
        if len(calls) < len(askers):
            return (
                f"another call to this server was in flight that may not pass {capability} on (a script's, or a host "
                "caller's), and a question names no call, so it could have been that one's"
            )
        # The oldest call not asking already: parallel calls that each ask once all get their question through.
        return next((a for a in calls if not a.open), calls[0])

    def _remember(self, key: int, elicitation_id: str, completed: Callable[[str], None]) -> None:
        """Keep who passed URL elicitation ``elicitation_id`` on in session ``key``, to tell it of its completion."""
        if len(elicitation_id) > MAX_ELICITATION_ID_CHARS:
            return
        urls = self._urls.setdefault(key, OrderedDict())
        urls[elicitation_id] = (time.monotonic() + URL_ELICITATION_SECONDS, completed)
        urls.move_to_end(elicitation_id)
        while len(urls) > MAX_URL_ELICITATIONS:
            urls.popitem(last=False)

    def forget(self, session: object) -> None:
        """``session`` ended: its URL elicitations are told no more."""
        self._urls.pop(id(session), None)

    def completed(self, session: object, elicitation_id: str) -> None:
        """The server says URL elicitation ``elicitation_id`` was completed: tell the asker that passed it on (once,
        within `URL_ELICITATION_SECONDS`); one tooltree passed on to no one is dropped."""
        urls = self._urls.get(id(session))
        found = None if urls is None or not isinstance(elicitation_id, str) else urls.pop(elicitation_id, None)
        if found is not None and found[0] > time.monotonic():
            found[1](elicitation_id)

    async def drained(self, session: object, timeout: float) -> None:
        """Wait until no call is in flight on ``session``, at most ``timeout`` seconds."""
        with anyio.move_on_after(timeout):
            while id(session) in self._counts:
                await self._changed.wait()
