"""`ServerPool`'s resource subscriptions: a URI subscribed to through `ServerPool.request` has its server's
``notifications/resources/updated`` told to ``on_resource_updated`` (no other URI's, none once unsubscribed), and a
new session that replaces one that ended is subscribed to it again, the listener told once; so when an HTTP server
forgot the session (a new one is opened at once, also without an ``on_tools_changed`` listener), and when its stream
of unasked messages was lost and opened again (a change may have been missed). A server with URIs subscribed to that
crashes is started again in the background, with no call (also when it ends just as its last call leaves, seen while
that call was in flight), as its restarts' back-off allows, and given up in one
warning once that back-off reaches its longest wait (a restart it holds ends with the pool's close); one with none
waits for a call.

Against tests/servers/subscribing_server.py, a real SDK server over stdio, or over Streamable HTTP (a real process on a
real socket, its GETs answered as a test asks). Its notices are read in the stream's order, before the answer of the
call that made it send them: told, or not, when the call returns.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import tool_tree.pool
from tests.tool_tree.test_get_streams import on_socket, outside
from tool_tree import restarts
from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool, ServerUnavailable
from tool_tree.pool_slot import _Slot
from tool_tree.restarts import RestartBackoff

pytestmark = pytest.mark.anyio
SERVER = Path(__file__).resolve().parents[1] / "servers" / "subscribing_server.py"
LOG, STATUS = "live://log", "live://status"


WAIT = 30.0
"""Seconds a test waits at most for what it expects."""


def live(name: str = "live", folder: Path | None = None) -> ServerConfig:
    """The server over stdio; with a ``folder``, each start of it is marked in ``NAME.starts`` there (`starts`), and
    what its tools change is kept in ``NAME.json``."""
    env = {}
    if folder is not None:
        env = {
            "SUBSCRIBING_SERVER_MARK": str(folder / f"{name}.starts"),
            "SUBSCRIBING_SERVER_STATE": str(folder / f"{name}.json"),
        }
    return ServerConfig(name=name, command=sys.executable, args=(str(SERVER),), timeout=WAIT, env=env)


def starts(folder: Path, name: str = "live") -> int:
    """How many times the server ``name`` of `live` started."""
    return len((folder / f"{name}.starts").read_text(encoding="utf-8").splitlines())


@asynccontextmanager
async def live_over_http(mode: str) -> AsyncIterator[ServerConfig]:
    """The server over Streamable HTTP with sessions, its GETs answered as ``mode`` says (its ``GET_MODE``)."""
    async with on_socket(SERVER, "live", mode) as config:
        yield config


class Warned(logging.Handler):
    """The warnings of ``tool_tree.upstream`` (what `ServerPool` says of its servers), as they come; `event` is set at
    the first that holds ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.WARNING)
        self.text = text
        self.said: list[str] = []
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())
        if self.text in self.said[-1]:
            self.event.set()


@contextmanager
def warned(caplog: pytest.LogCaptureFixture, text: str) -> Iterator[Warned]:
    """The warnings of ``tool_tree.upstream`` said within the block (`Warned`). They are turned on for it: a test that
    ran ``tooltree exec`` or ``agent`` in this process before left them off (`tooltree_cli.logs.upstream_failures`),
    and the event waited for never came (before: a CI run timed out so)."""
    caplog.set_level(logging.WARNING, logger="tool_tree.upstream")  # as it was again after the test
    handler = Warned(text)
    logging.getLogger("tool_tree.upstream").addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger("tool_tree.upstream").removeHandler(handler)


class Told:
    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []
        self.event = anyio.Event()

    def __call__(self, server: str, uri: str) -> None:
        self.told.append((server, uri))
        self.event.set()

    async def reached(self, count: int) -> None:
        """Wait (at most `WAIT` seconds) until the listener was told ``count`` times."""
        with anyio.fail_after(WAIT):
            while len(self.told) < count:
                self.event = anyio.Event()
                await self.event.wait()


async def test_the_listener_is_told_of_the_uris_subscribed_through_the_pool_only() -> None:
    told = Told()
    async with ServerPool([live()]) as pool:
        pool.on_resource_updated = told  # set once the pool runs, as serve sets it on a client session's pool
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await pool.call("live", "touch", {"uri": LOG})
        await pool.call("live", "touch", {"uri": STATUS, "any": True})  # sent, not subscribed to: not told
        assert told.told == [("live", LOG)]
        assert not isinstance(await pool.request("live", "resources/unsubscribe", {"uri": LOG}), CallFailure)
        await pool.call("live", "touch", {"uri": LOG, "any": True})
    assert told.told == [("live", LOG)]


async def test_a_new_session_is_subscribed_again_and_the_listener_told_once() -> None:
    told = Told()
    async with ServerPool([live()], on_resource_updated=told) as pool:
        await pool.request("live", "resources/subscribe", {"uri": LOG})
        with pytest.raises(ServerUnavailable, match="the server died before answering the call"):
            await pool.call("live", "crash", {})
        await pool.start("live")  # a new session
        with anyio.fail_after(30):
            await told.event.wait()  # subscribed again first, then told
        subscribed = await pool.call("live", "subscribed", {})
        await pool.call("live", "touch", {"uri": LOG})
    assert json.loads(subscribed["content"][0]["text"]) == [LOG]
    assert told.told == [("live", LOG), ("live", LOG)]
    assert pool.restarts("live") == 1


async def test_a_session_an_http_server_forgot_is_replaced_at_once_subscribed_again_and_the_listener_told() -> None:
    # No on_tools_changed listener: before, only one made the pool open a new session at once; without it the next
    # call did, and until then the server's updates reached no one, told nothing.
    told = Told()
    async with live_over_http("forget") as config, ServerPool([config], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await outside(config, "/go")  # the server forgets the session: its stream answered 404, then a tools/list
        await told.reached(1)
        assert pool.restarts("live") == 1 and pool.state("live") == "running"
        subscribed = await pool.call("live", "subscribed", {})  # on the new session
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(2)
    assert json.loads(subscribed["content"][0]["text"]) == [LOG]
    assert told.told == [("live", LOG), ("live", LOG)]  # once for the new session, once for the touch


async def test_a_stream_of_unasked_messages_lost_then_open_again_under_a_subscription_tells_the_listener_once() -> None:
    # The server answers its stream's GETs 503 (a redeploy) until /go, after the subscribe: a change said meanwhile
    # reached no one, so the listener is told once the stream opens again, though the server said nothing.
    told = Told()
    async with live_over_http("503") as config, ServerPool([config], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        await outside(config, "/go")
        await told.reached(1)
        await pool.call("live", "touch", {"uri": LOG})  # on the stream open now
        await told.reached(2)
        assert pool.restarts("live") == 0
    assert told.told == [("live", LOG), ("live", LOG)]


def test_a_listener_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="on_resource_updated: expected a callable or None, got str"):
        ServerPool([live()], on_resource_updated="told")  # type: ignore[arg-type]


@pytest.mark.parametrize("after", [0, 0.2], ids=["during-a-call", "between-calls"])
async def test_a_subscribed_server_that_crashes_is_started_again_without_a_call_subscribed_again_and_the_listener_told(
    after: float, tmp_path: Path
) -> None:
    # Before: it was started again only at the next call to it, and a client that only follows a resource (a log)
    # heard nothing more until it happened to call, unsaid.
    told = Told()
    async with ServerPool([live(folder=tmp_path)], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        if after:  # it exits once it answered: no call finds it dead
            assert (await pool.call("live", "crash", {"after": after}))["content"][0]["text"] == "crashing"
        else:
            with pytest.raises(ServerUnavailable, match="the server died before answering the call"):
                await pool.call("live", "crash", {})
        await told.reached(1)  # no call since: started again, subscribed again, then told
        assert starts(tmp_path) == 2 and pool.restarts("live") == 1 and pool.state("live") == "running"
        subscribed = await pool.call("live", "subscribed", {})  # the URIs its new session holds
        await pool.call("live", "touch", {"uri": LOG})
        await told.reached(2)
    assert json.loads(subscribed["content"][0]["text"]) == [LOG]
    assert told.told == [("live", LOG), ("live", LOG)]  # once for the new session, once for the touch


async def test_a_server_that_crashes_with_nothing_subscribed_is_not_started_again_until_it_is_called(
    tmp_path: Path,
) -> None:
    # "live", subscribed to, crashes after "quiet", which no longer is: once "live" is back and its listener told,
    # "quiet" would have been started too, had it been followed.
    told = Told()
    quiet, followed = live("quiet", tmp_path), live("live", tmp_path)
    async with ServerPool([quiet, followed], start_jobs=2, on_resource_updated=told) as pool:
        for name in ("quiet", "live"):
            assert not isinstance(await pool.request(name, "resources/subscribe", {"uri": LOG}), CallFailure)
        assert not isinstance(await pool.request("quiet", "resources/unsubscribe", {"uri": LOG}), CallFailure)
        for name in ("quiet", "live"):
            with pytest.raises(ServerUnavailable, match="the server died before answering the call"):
                await pool.call(name, "crash", {})
        await told.reached(1)
        assert pool.state("quiet") == "stopped" and starts(tmp_path, "quiet") == 1
        subscribed = await pool.call("quiet", "subscribed", {})  # a call starts it
        assert starts(tmp_path, "quiet") == 2 and pool.state("quiet") == "running"
    assert json.loads(subscribed["content"][0]["text"]) == []
    assert told.told == [("live", LOG)]


async def test_a_subscribed_server_that_crashes_at_every_start_follows_its_back_off_then_is_given_up_in_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A small policy: restarts in a row 1 s, then 2 s after the one before; the next would wait its longest, 4 s. Each
    # wait is longer than the server takes to start and fail (its imports: about 0.7 s), so its back-off holds it.
    monkeypatch.setattr(restarts, "FIRST_DELAY", 1.0)
    monkeypatch.setattr(restarts, "MAX_DELAY", 4.0)
    refusals: list[str | None] = []  # what the back-off answered each start the pool asked of it (its real answer)
    real_refusal = RestartBackoff.refusal

    def refusal(backoff: RestartBackoff) -> str | None:
        refusals.append(real_refusal(backoff))
        return refusals[-1]

    monkeypatch.setattr(RestartBackoff, "refusal", refusal)
    told = Told()
    with warned(caplog, "is not started again for the resources of it subscribed to") as given_up:
        async with ServerPool([live(folder=tmp_path)], on_resource_updated=told) as pool:
            assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
            with pytest.raises(ServerUnavailable, match="the server died before answering the call"):
                await pool.call("live", "crash", {"again": True})  # each process started from now on exits at once
            with anyio.fail_after(WAIT):
                await given_up.event.wait()
            assert pool.state("live") == "stopped"
            assert told.told == []
    # Its first start and 3 restarts (at once, then 1 s and 2 s after the one before), each asked for once its hold had
    # ended: none while the back-off held it (not in a loop); then the one warning that it is given up, said last.
    assert starts(tmp_path) == 4
    assert refusals == [None, None, None, None]  # its first start, then each restart
    (ended, *failed, gave_up) = given_up.said
    assert ended.startswith("server 'live' ended: it died before answering a call")
    assert "resources of it are subscribed to: it is started again now, or once its restart back-off allows" in ended
    assert len(failed) == 3 and all(f.startswith("server 'live' could not start: the server exited") for f in failed)
    assert gave_up.startswith(
        "server 'live' is not started again for the resources of it subscribed to: it ended soon after each of its "
        "last 3 restarts (the last time because it failed to restart: the server exited during start-up"
    )
    assert gave_up.endswith(f"until a call or a request to it starts it, no change is told of {LOG!r}")


async def test_a_restart_the_back_off_holds_in_the_background_ends_at_once_when_the_pool_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Its first restart is at once; the second in a row waits 300 s (far from the longest wait, 1200 s: not given up).
    # The close does not wait it out, nor leave it behind to start a server after the pool closed.
    monkeypatch.setattr(restarts, "FIRST_DELAY", 300.0)
    monkeypatch.setattr(restarts, "MAX_DELAY", 1200.0)
    with warned(caplog, "server 'live' could not start") as restarted, anyio.fail_after(WAIT):
        async with ServerPool([live(folder=tmp_path)], on_resource_updated=Told()) as pool:
            assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
            with pytest.raises(ServerUnavailable, match="the server died before answering the call"):
                await pool.call("live", "crash", {"again": True})
            await restarted.event.wait()  # its restart in the background failed: the next one is held 300 s
    assert starts(tmp_path) == 2
    assert not any("is not started again" in said for said in restarted.said)


async def test_a_subscribed_server_that_ends_as_its_last_call_leaves_is_started_again_by_that_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race: the server answers, then exits while the call that got the answer still counts as in flight. The
    # session's end is seen then (`_ended_alone`), which leaves a server with a call in flight to that call; the
    # call, done, is the last to leave and must look again. Held here in that order: the answer is not returned
    # until the end was seen. Before the last call looked again, nothing started it until the next call.
    ended_seen = anyio.Event()
    seen_with_calls: list[float] = []
    ended_alone = ServerPool._ended_alone

    def seeing(self: ServerPool, slot: _Slot, client: object) -> None:
        if slot.limiter.borrowed_tokens:
            seen_with_calls.append(slot.limiter.borrowed_tokens)
            ended_seen.set()
        ended_alone(self, slot, client)  # type: ignore[arg-type]

    real_send = tool_tree.pool._send

    async def send(*args: Any, **kwargs: Any) -> Any:
        result = await real_send(*args, **kwargs)
        if args[2] == "crash":
            with anyio.fail_after(WAIT):
                await ended_seen.wait()
        return result

    monkeypatch.setattr(ServerPool, "_ended_alone", seeing)
    monkeypatch.setattr(tool_tree.pool, "_send", send)  # as `ServerPool.call` reads it (from tool_tree.pool_forward)
    told = Told()
    async with ServerPool([live(folder=tmp_path)], on_resource_updated=told) as pool:
        assert not isinstance(await pool.request("live", "resources/subscribe", {"uri": LOG}), CallFailure)
        assert (await pool.call("live", "crash", {"after": 0.01}))["content"][0]["text"] == "crashing"
        assert seen_with_calls == [1]  # the end was seen while the call held its turn
        await told.reached(1)  # no call since: started again, subscribed again, then told
        assert starts(tmp_path) == 2 and pool.restarts("live") == 1 and pool.state("live") == "running"
        subscribed = await pool.call("live", "subscribed", {})
    assert json.loads(subscribed["content"][0]["text"]) == [LOG]
