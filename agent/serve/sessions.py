"""One sandbox session per MCP client session, and the end of idle ones.

`SessionRegistry` keeps one `ClientSession` per MCP client session (`agent.serve.client_session`: its runtime, its
executions and their cancels, its workspace saves), and a client session's variables persist between its
``execute_python`` calls and no other's. A session ends when the client disconnects (stdio: stdin closes; HTTP:
``DELETE``), when it has been idle for ``idle_timeout`` seconds (one whose client follows a resource and can be told
of it is not idle: `SessionRegistry`; its sandbox alone is stopped then), when its HTTP client's ``GET`` stream closed
and nothing came from it for ``gone_grace`` seconds (Claude Code exits without a ``DELETE``; its stream's close is the
one sign it left), or when the server stops; ending it stops its container and upstream servers and saves the
workspace (one save at a time, so two sessions of one workspace never write it at once); the workspace is saved after
each script that changed it too, also after a save that failed (`ClientSession._save_workspace`). A client that calls
again after its session ended gets a new one, and its first result says so.

Ending sessions has worker threads of its own (`CLOSE_THREADS`), apart from each client session's (`CALL_THREADS`):
a client whose calls block (a slow upstream tool, a flood of calls) never holds up the end of a session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from agent.serve.client_session import CALL_THREADS as CALL_THREADS
from agent.serve.client_session import CANCEL_RESTARTED as CANCEL_RESTARTED
from agent.serve.client_session import QUEUED_EXECUTIONS as QUEUED_EXECUTIONS
from agent.serve.client_session import RESTARTED as RESTARTED
from agent.serve.client_session import ClientSession as ClientSession
from agent.serve.client_session import heartbeat as heartbeat
from agent.serve.renewal import FOLLOWED, INSTRUCTIONS_BEFORE, RENEWED, STALE_TREE, restored
from agent.serve.upstream_subscriptions import carry
from tool_tree.text import counted

if TYPE_CHECKING:
    from sandbox.host import Runtime

logger = logging.getLogger(__name__)

STDIO_SESSION = "stdio"
"""The session key over stdio, where the process serves exactly one client."""
CLOSE_WAIT = 60.0
"""Seconds the server waits for its sessions to close when it stops."""
CLOSE_THREADS = 4
"""Worker threads that end sessions (disconnects, idle ones, the server stopping)."""
RESTED = (
    "this session's sandbox was stopped after {idle} s without a call (the session and its servers stayed, for the "
    "resources its client follows): variables and imports are gone, {files}; the next script starts a new sandbox"
)
"""Said once, in front of the next result of a session whose idle sandbox was stopped (`SessionRegistry._rest`)."""
GONE_GRACE = 60.0
"""Seconds a client whose ``GET`` stream closed (and that sent nothing since) may take to come back before its
sandbox session ends: a client that lost its connection reopens the stream within seconds."""
_EXPIRED_KEPT = 1024
_WHY_CHARS = 600
"""Most characters of why a sandbox ended in the note of the session that replaces its session (`FOLLOWED`)."""


class SessionLimitError(Exception):
    """``max_sessions`` client sessions are open already."""


class SessionRegistry:
    """The open client sessions, by key.

    Args:
        make_runtime: a new (unopened) runtime for a client session key.
        idle_timeout: seconds without a call after which a session ends, unless its client follows a resource and
            can be told of it (`_told`).
        max_sessions: the most sessions at once.
        gone_grace: seconds after its client's ``GET`` stream closed (with nothing from it since) that a session
            ends, if sooner than ``idle_timeout``.

    A session whose client follows a resource (``resources/subscribe``) is not idle while the client can be told of a
    change: over stdio while it is connected (until stdin closes), over HTTP while its ``GET`` stream is open, where the
    SDK sends it (an HTTP client without one would be told nothing, and the SDK ends its session after ``idle_timeout``
    all the same). MCP has no notice that a subscription ended: before, such a client was sent no
    ``notifications/resources/updated`` after ``idle_timeout`` without a word. Its sandbox, if one was started, is
    stopped after ``idle_timeout`` seconds without a call, its workspace saved (`_rest`; before, it stayed with the
    session for as long as the client followed), and its next script starts a new one. The bound stays ``max_sessions``
    sessions in all (over stdio, one): over HTTP such a session has no request in flight, so a new client that finds
    every place taken may be given its place (`agent.serve.http_gate.SessionGate` ends the one gone longest without a
    request), and one whose ``GET`` stream closed ends ``gone_grace`` seconds later.
    """

    def __init__(
        self,
        make_runtime: Callable[[str], Runtime],
        *,
        idle_timeout: float,
        max_sessions: int,
        gone_grace: float = GONE_GRACE,
    ) -> None:
        self._make_runtime = make_runtime
        self.idle_timeout = idle_timeout
        self.gone_grace = gone_grace
        self.max_sessions = max_sessions
        self._sessions: dict[str, ClientSession] = {}
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._streams: dict[str, int] = {}
        """The ``GET`` streams of each HTTP client session open now (`stream`), whether it has a session here yet or
        not (a client opens its stream before its first call)."""
        self._close_lock = threading.Lock()
        self.tree_generation = 0
        """How many times the tree was regenerated while serving (`tree_refreshed`)."""
        self._closing = anyio.CapacityLimiter(CLOSE_THREADS)

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: str) -> ClientSession | None:
        return self._sessions.get(key)

    @asynccontextmanager
    async def use(self, key: str) -> AsyncIterator[ClientSession]:
        """The session of ``key`` (created on first use), marked busy while in use so it does not expire.

        A session replaced here after the tree was regenerated (renewed, or one without a sandbox running:
        `_follows_tree`) hands the resources its client follows to the new one before the call goes on
        (`agent.serve.upstream_subscriptions.carry`): before, they ended with its servers, unsaid.

        Raises:
            SessionLimitError: it would be one session too many.
        """
        session = self._sessions.get(key)
        if session is not None and session.resting is not None:  # its idle sandbox is being stopped: saved first
            await session.resting.wait()
            session = self._sessions.get(key)
        renewed = replaced = None
        if session is not None and session.renew and session.busy == 0:  # for the tools the regenerated tree added
            session.renew = False
            del self._sessions[key]
            await self._close(session)  # its workspace saved, its sandbox and servers ended
            renewed = replaced = session
            session = self._sessions.get(key)  # another call of this client's may have made the new one meanwhile
        followed = None
        if session is not None and session.busy == 0 and self._follows_tree(session):
            followed = self._followed(session)
            del self._sessions[key]
            await self._close(session)  # its servers ended (its sandbox had ended or been stopped)
            replaced, session = session, self._sessions.get(key)  # as above: perhaps made meanwhile
        if session is not None and session.tree_generation != self.tree_generation and session.busy == 0:
            self._keep_tree(session)
        if session is None:
            if len(self._sessions) >= self.max_sessions:
                open_ = counted(self.max_sessions, "client session is", "client sessions are")
                raise SessionLimitError(f"{open_} open (serve.max_sessions)")
            session = ClientSession(key, self._make_runtime(key), saves=self._close_lock)
            session.tree_generation = self.tree_generation
            ended = self._expired.pop(key, None)
            if renewed is not None:
                session.note = RENEWED.format(files=_files_kept(session.runtime))
            elif followed:
                session.note = followed
            elif ended is not None:
                session.note = (
                    f"a new sandbox session: the previous one ended {ended}; variables and imports are gone, "
                    f"{_files_kept(session.runtime)}"
                )
            self._sessions[key] = session
        session.gone_since = None
        session.busy += 1
        session.last_used = time.monotonic()
        try:
            if replaced is not None:
                await carry(replaced, session)
            yield session
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    def tree_refreshed(self) -> None:
        """The tree was regenerated (from any thread): each session learns it at its next call (`use`)."""
        self.tree_generation += 1

    def _follows_tree(self, session: ClientSession) -> bool:
        """Whether ``session``, at a call that finds it idle, ends for a new one on the regenerated tree: it was opened
        before the tree was regenerated and has no sandbox running (none started yet, or its sandbox ended or was
        stopped when idle, before the regeneration or since), so a new one takes the regenerated tree (its manifest,
        its servers, a sandbox that mounts it, the resources its client followed: `use`).

        Before, only one that had never started a sandbox did: the others started their next sandbox themselves,
        which mounted the regenerated tree (the warm pool's, or the shared backend's) while their bridge checked calls
        against the manifest of the tree before (`FOLLOWED`)."""
        regenerated = session.stale_tree or session.tree_generation != self.tree_generation
        return regenerated and session.runtime.running_sandbox is None

    def _followed(self, session: ClientSession) -> str:
        """What the session that replaces ``session`` (`_follows_tree`) says first: `FOLLOWED` when ``session``'s
        sandbox ended or was stopped, else the notes it had yet to give (a sandbox stopped when idle before the
        regeneration: `RESTED`; before, those were dropped with it) and `INSTRUCTIONS_BEFORE`."""
        why = session.runtime.sandbox_ended
        if why is not None:
            gone = f"ended ({why[:_WHY_CHARS]})"
        elif session.stale_tree:  # its sandbox, started on the tree before, was stopped when idle (`_rest`)
            gone = f"was stopped after {self.idle_timeout:g} s without a call"
        else:
            return "; ".join(filter(None, [session.note, INSTRUCTIONS_BEFORE]))
        return FOLLOWED.format(gone=gone, files=_files_kept(session.runtime))

    def _keep_tree(self, session: ClientSession) -> None:
        """A session opened before the tree was regenerated whose sandbox runs, at a call that finds it idle: it goes
        on with the tree its sandbox mounted and is told so once. One whose runtime opened on the regenerated tree (a
        `generate-tree` that ended between serve's look at the tree and the session's opening: its sandbox mounts that
        tree too, `sandbox.runtime_sandbox`) runs on it: it is told that the instructions of its client's handshake
        are of the tree before (before: that it kept the tree it started with, which it never had)."""
        session.tree_generation = self.tree_generation
        if session.runtime.on_tree_now:
            session.note = "; ".join(filter(None, [session.note, INSTRUCTIONS_BEFORE]))
            return
        session.stale_tree = True
        stale = STALE_TREE.format(restored=restored(session.runtime.workspace))
        session.note = "; ".join(filter(None, [session.note, stale]))

    def stream(self, key: str, *, opened: bool) -> None:
        """The HTTP client of ``key`` opened (it is there) or closed (it may have gone) its ``GET`` stream."""
        if opened:
            self._streams[key] = self._streams.get(key, 0) + 1
        elif (left := self._streams.pop(key, 0) - 1) > 0:
            self._streams[key] = left
        session = self._sessions.get(key)
        if session is not None:
            session.gone_since = None if opened else time.monotonic()

    async def end(self, key: str) -> None:
        """End one session (the client disconnected); nothing when there is none."""
        self._streams.pop(key, None)
        session = self._sessions.pop(key, None)
        if session is not None:
            await self._close(session)

    async def _close(self, session: ClientSession) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._close_one, session, limiter=self._closing)

    def _close_one(self, session: ClientSession) -> None:
        from sandbox.errors import SandboxError

        session.cancel()  # a running script would hold the sandbox until its timeout
        try:
            with self._close_lock:  # one workspace save at a time, only the save: not the container's removal or
                session.save_workspace()  # the servers' stop (before: a slow one held every session's results)
        except (SandboxError, OSError) as e:
            logger.warning("session %s ended without saving its workspace: %s", session.key[:16], e)
            session.drop_sandbox()  # its close would try the same save again, outside the lock of saves
        try:  # also after a failed save (before: skipped, its container and servers stayed until serve stopped)
            session.close()
        except (SandboxError, OSError) as e:
            logger.warning("session %s did not close cleanly: %s", session.key[:16], e)

    async def expire_idle(self) -> None:
        """End sessions idle for ``idle_timeout`` seconds, forever (run it as a task); stop the sandbox of those kept
        because their client follows a resource (`_rest`)."""
        check = max(0.05, min(30.0, self.idle_timeout / 4, self.gone_grace / 4))
        while True:
            await anyio.sleep(check)
            now = time.monotonic()
            ended = [(s, why) for s in list(self._sessions.values()) if (why := self._why_end(s, now)) is not None]
            for session, why in ended:
                if self._sessions.get(session.key) is session:
                    del self._sessions[session.key]
                    self._expired[session.key] = why
                    while len(self._expired) > _EXPIRED_KEPT:
                        self._expired.popitem(last=False)
                    logger.info("session %s ended %s", session.key[:16], why)
                    await self._close(session)
            for session in [s for s in list(self._sessions.values()) if self._rests(s, now)]:
                # Asked again: a call may have come while another session was closed or rested.
                if self._sessions.get(session.key) is session and self._rests(session, time.monotonic()):
                    await self._rest(session)

    def _why_end(self, session: ClientSession, now: float) -> str | None:
        """Why ``session`` ends now (the words the client's next result is told), or None: it stays."""
        if session.busy:
            return None
        if now - session.last_used >= self.idle_timeout and not self._told(session):
            return f"after {self.idle_timeout:g} s without a call"
        gone = session.gone_since
        if gone is not None and now - max(gone, session.last_used) >= self.gone_grace:
            return f"{self.gone_grace:g} s after its client's connection closed"
        return None

    def _rests(self, session: ClientSession, now: float) -> bool:
        """Whether ``session`` is kept though idle for ``idle_timeout`` seconds (its client follows a resource and can
        be told of it: `_told`) with a sandbox running, which is then stopped (`_rest`)."""
        return (
            session.busy == 0
            and session.resting is None
            and now - session.last_used >= self.idle_timeout
            and session.kept_since != session.last_used
            and session.runtime.running_sandbox is not None
            and self._told(session)
        )

    async def _rest(self, session: ClientSession) -> None:
        """Stop the sandbox of ``session``, idle and kept for the resources its client follows, and keep the session
        and its servers (they send what the client follows): its workspace is saved first, and its next result says
        what is gone. A call of its client meanwhile waits for that (`use`).

        Before, such a session held its container (up to its memory limit) for as long as its client followed a
        resource, though an idle session that follows none ends after ``idle_timeout`` seconds."""
        session.resting = rested = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._rest_one, session, limiter=self._closing)
        finally:
            session.resting = None
            rested.set()

    def _rest_one(self, session: ClientSession) -> None:
        from sandbox.errors import SandboxError

        try:
            with self._close_lock:  # one workspace save at a time, as a session's end saves
                session.save_workspace()
        except (SandboxError, OSError) as e:  # kept, and not tried again until it is used: its files are not lost
            session.kept_since = session.last_used
            logger.warning("session %s: its idle sandbox is kept: its workspace could not be saved: %s",
                           session.key[:16], e)  # fmt: skip
            return
        try:
            stopped = session.runtime.stop_sandbox()  # saves again only what changed since (nothing ran meanwhile)
        except (SandboxError, OSError) as e:
            stopped = True
            logger.warning("session %s: its idle sandbox was stopped, but not cleanly: %s", session.key[:16], e)
        if not stopped:
            return
        logger.info("session %s: its sandbox was stopped after %g s without a call; the session stays (its client "
                    "follows resources)", session.key[:16], self.idle_timeout)  # fmt: skip
        rested = RESTED.format(idle=f"{self.idle_timeout:g}", files=_files_kept(session.runtime))
        with session._state:
            session.note = "; ".join(filter(None, [session.note, rested]))

    def _told(self, session: ClientSession) -> bool:
        """Whether ``session``'s client follows a resource and can be told of a change: over stdio (it is connected
        while the session lasts), or over HTTP with its ``GET`` stream open, or closed since (one that stays closed
        ends `gone_grace` seconds later: `_why_end`)."""
        reachable = (
            session.key == STDIO_SESSION or bool(self._streams.get(session.key)) or session.gone_since is not None
        )
        return reachable and session.follows

    async def aclose(self) -> None:
        """End every session (the server stops): running scripts are cancelled first."""
        sessions, self._sessions = list(self._sessions.values()), {}
        with anyio.move_on_after(CLOSE_WAIT, shield=True):
            async with anyio.create_task_group() as tg:
                for session in sessions:
                    tg.start_soon(self._close, session)


def _files_kept(runtime: Runtime) -> str:
    """What a new sandbox of ``runtime`` keeps of the old one's files, in the words of a session's note. Without a
    workspace folder nothing of the old sandbox's /workspace is kept (before: "saved workspace files remain",
    whatever the setting)."""
    if runtime.workspace is not None:
        return f"files saved into {runtime.workspace} remain"
    return "so are the files in /workspace (serve runs without --workspace: nothing is saved)"
