"""A call given a progress listener asks its server for progress and tells the listener each notification; a
listener that raises, or a progress number no float holds, never fails the call. Without one, the server is given
no progress token (tests/servers/progress_server.py answers how many notifications it sent)."""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

import pytest

from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool

SERVER = ServerConfig(
    name="progress",
    command=sys.executable,
    args=(str(Path(__file__).resolve().parents[1] / "servers" / "progress_server.py"),),
)


def text(result: dict[str, object]) -> str:
    assert not result.get("isError"), result
    return result["content"][0]["text"]  # type: ignore[index, no-any-return]


def test_a_listener_is_told_each_step_and_without_one_the_server_is_given_no_token() -> None:
    told: list[tuple[float, float | None, str | None]] = []
    all_told = threading.Event()

    def listener(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total, message))
        if len(told) == 3:
            all_told.set()

    with BackgroundPool([SERVER]) as pool:
        assert text(pool.call("progress", "steps", {"n": 3, "message": "part"}, progress=listener)) == "sent 3"
        assert all_told.wait(10)
        assert text(pool.call("progress", "steps", {"n": 3})) == "sent 0"
    assert told == [(1.0, 3.0, "part 1"), (2.0, 3.0, "part 2"), (3.0, 3.0, "part 3")]


def test_a_listener_that_raises_is_logged_at_debug_and_the_call_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    raised = threading.Event()

    def listener(progress: float, total: float | None, message: str | None) -> None:
        raised.set()
        raise ValueError("the listener's own bug")

    with caplog.at_level(logging.DEBUG, logger="tool_tree.pool"), BackgroundPool([SERVER]) as pool:
        assert text(pool.call("progress", "steps", {"n": 2}, progress=listener)) == "sent 2"
        assert raised.wait(10)
        assert text(pool.call("progress", "steps", {"n": 1}, progress=listener)) == "sent 1"  # the same session
    records = [r for r in caplog.records if r.name == "tool_tree.pool" and "progress listener" in r.getMessage()]
    assert records and all(r.levelno == logging.DEBUG for r in records)


def test_a_progress_number_no_float_holds_is_dropped_and_the_call_answers() -> None:
    # Before (given a listener): the SDK's float() of it raised as it read it, ending the connection; the call
    # failed as "the server died during the call".
    told: list[float] = []
    with BackgroundPool([SERVER]) as pool:
        result = pool.call("progress", "steps", {"n": 2, "huge": True}, progress=lambda p, t, m: told.append(p))
        assert text(result) == "sent 2"
    assert told == []
