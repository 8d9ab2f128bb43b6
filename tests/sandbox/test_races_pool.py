"""A `SandboxPool` that many threads start at once (their first `acquire`s) gets one filling thread.

Before: each thread that found no filling thread started one. Two of them kept more containers warm than ``size``,
and `close` waited only for the last one's, returning while the other still started a container (seen running
by a leak check right after close).
"""

from __future__ import annotations

import threading
import types
from typing import Any

import pytest

import sandbox.pool as pool_module
from sandbox import SandboxPool
from sandbox.bridge import FunctionBridge
from tests.sandbox.test_api_sandbox_args import no_tools
from tests.sandbox.test_api_sandbox_fork import Pipes


def test_threads_starting_a_pool_at_once_start_one_filling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Pipes()
    pool = SandboxPool(backend, size=1)
    made: list[threading.Thread] = []
    second_arrived = threading.Event()
    lock = threading.Lock()

    def thread(*args: Any, **kwargs: Any) -> threading.Thread:
        with lock:
            first = not made and not second_arrived.is_set()
            if not first:
                second_arrived.set()
        if first:  # the first starter waits here for a second one to come by (it cannot, once they take turns)
            second_arrived.wait(1.0)
        t = threading.Thread(*args, **kwargs)
        with lock:
            made.append(t)
        return t

    monkeypatch.setattr(pool_module, "threading", types.SimpleNamespace(Thread=thread))
    starters = [threading.Thread(target=pool.start) for _ in range(2)]
    for t in starters:
        t.start()
    for t in starters:
        t.join(30)
    monkeypatch.undo()
    try:
        assert len(made) == 1
        sandbox = pool.acquire(tools=FunctionBridge(no_tools), timeout=30)
        sandbox.close()
    finally:
        pool.close()
    assert not any(t.is_alive() for t in made)
    assert backend.peers and all(peer.killed.is_set() or peer.stdin.closed for peer in backend.peers)
