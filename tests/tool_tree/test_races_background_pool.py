"""`BackgroundPool.call` racing the end of the pool's ``with`` block: a `PoolError` at once, never a hang or a
`RuntimeError`.

The interleavings are forced: the pool's ``loop`` property (read by `call` after its check that the pool runs) ends
the pool before it hands the call over, and the pool's loop is held between its last round of tasks and its close.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import tool_tree.run_loop as run_loop
from tests.support import in_thread
from tests.tool_tree.test_api_background_pool import media
from tool_tree.pool import BackgroundPool, PoolError


def call_in_thread(bg: BackgroundPool) -> tuple[threading.Event, list[BaseException]]:
    return in_thread(lambda: bg.call("media", "slow_echo", {"text": "late", "seconds": 0}, timeout=10))


def loop_read_then(monkeypatch: pytest.MonkeyPatch, action: Callable[[asyncio.AbstractEventLoop], None]) -> None:
    """`BackgroundPool.loop` runs ``action`` with the loop after `call` has checked that the pool runs."""
    real = BackgroundPool.loop

    def loop(self: BackgroundPool) -> asyncio.AbstractEventLoop:
        the_loop = real.fget(self)  # type: ignore[attr-defined]
        action(the_loop)
        return the_loop  # type: ignore[no-any-return]

    monkeypatch.setattr(BackgroundPool, "loop", property(loop))


def test_a_call_handed_to_a_closed_loop_is_a_pool_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: RuntimeError("Event loop is closed") from run_coroutine_threadsafe.
    bg = BackgroundPool([media()]).__enter__()
    loop_read_then(monkeypatch, lambda loop: bg.__exit__(None, None, None))
    done, errors = call_in_thread(bg)
    assert done.wait(30)
    assert [type(e) for e in errors] == [PoolError]
    assert "closed during the call" in str(errors[0]) or "closed" in str(errors[0])


def test_a_call_handed_to_the_loop_after_its_last_round_of_tasks_is_a_pool_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the call reached a loop that no longer ran and was then closed, dropping it: `call` waited for ever,
    # whatever its timeout.
    last_round, handed = threading.Event(), threading.Event()
    real_end_tasks = run_loop._end_tasks
    rounds: list[int] = []

    def end_tasks(loop: asyncio.AbstractEventLoop) -> None:
        real_end_tasks(loop)
        rounds.append(1)
        if len(rounds) == 2:  # the last round, just before the loop closes
            last_round.set()
            assert handed.wait(30)

    monkeypatch.setattr(run_loop, "_end_tasks", end_tasks)
    bg = BackgroundPool([media()]).__enter__()
    exiting = threading.Thread(target=bg.__exit__, args=(None, None, None), daemon=True)

    def end_the_pool(loop: asyncio.AbstractEventLoop) -> None:
        real_handover = loop.call_soon_threadsafe

        def call_soon_threadsafe(callback: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return real_handover(callback, *args, **kwargs)
            finally:
                handed.set()

        loop.call_soon_threadsafe = call_soon_threadsafe  # type: ignore[method-assign]
        exiting.start()
        assert last_round.wait(30)

    loop_read_then(monkeypatch, end_the_pool)
    done, errors = call_in_thread(bg)
    assert done.wait(10), "the call waited for ever on a loop that had ended"
    assert [type(e) for e in errors] == [PoolError]
    exiting.join(30)
    assert not exiting.is_alive()


def test_a_second_exit_from_another_thread_returns_once_the_pool_has_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: it found the pool marked closed and returned at once, its servers still stopping.
    ending, release = threading.Event(), threading.Event()
    real_end_tasks = run_loop._end_tasks

    def end_tasks(loop: asyncio.AbstractEventLoop) -> None:
        ending.set()
        assert release.wait(30)
        real_end_tasks(loop)

    monkeypatch.setattr(run_loop, "_end_tasks", end_tasks)
    bg = BackgroundPool([media()]).__enter__()
    first = threading.Thread(target=bg.__exit__, args=(None, None, None), daemon=True)
    first.start()
    second_done = threading.Event()
    try:
        assert ending.wait(30)
        threading.Thread(target=lambda: (bg.__exit__(None, None, None), second_done.set()), daemon=True).start()
        assert not second_done.wait(0.5), "the second exit returned while the pool was still stopping"
    finally:
        release.set()
    assert second_done.wait(30)
    first.join(30)
    assert not first.is_alive()
