"""A `BackgroundPool` or `Sandbox` dropped without being closed warns (`ResourceWarning`, as an unclosed file does)
when it is garbage-collected, and its servers or its container are released then; one closed warns of nothing.

Before: no warning, and the pool's thread (and its servers) or the session's container ran until the process
exited: the thread, or the channel's reader, kept the dropped object alive.
"""

from __future__ import annotations

import gc
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from sandbox import Sandbox, SandboxConfig
from tests.docker_cli import EngineWithCLI
from tests.support import wait_until
from tests.tool_tree.test_api_background_pool import media, text
from tool_tree.pool import BackgroundPool


@contextmanager
def unclosed_warnings() -> Iterator[list[str]]:
    """The messages of the ``unclosed …`` ResourceWarnings given inside the block (garbage of earlier tests collected
    before, so that only this test's is)."""
    gc.collect()
    said: list[str] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield said
    said += [str(w.message) for w in seen if issubclass(w.category, ResourceWarning) and "unclosed" in str(w.message)]


def dropped(make: Callable[[], object]) -> weakref.ref[object]:
    """Make an object with ``make``, drop it and collect: a weak reference to it, to show it is gone."""
    thing = make()
    gone = weakref.ref(thing)
    del thing
    gc.collect()
    return gone


def test_a_running_pool_dropped_unclosed_warns_and_its_servers_are_stopped() -> None:
    threads: list[threading.Thread] = []

    def running() -> BackgroundPool:
        bg = BackgroundPool([media()]).__enter__()
        assert text(bg.call("media", "slow_echo", {"text": "up", "seconds": 0})) == "up"  # its server runs
        assert bg._thread is not None
        threads.append(bg._thread)
        return bg

    gc.collect()
    with pytest.warns(ResourceWarning, match=r"unclosed BackgroundPool \(servers media\) dropped while running: its "
                      r"servers are stopped now; use it as `with BackgroundPool\(\.\.\.\) as pool:`, or call "
                      r"pool\.close\(\)"):  # fmt: skip
        gone = dropped(running)
    assert gone() is None
    threads[0].join(30)
    assert not threads[0].is_alive(), "the dropped pool's loop (and its server) still ran"


@pytest.mark.parametrize("how", ["with", "close", "never entered"])
def test_a_closed_or_never_entered_pool_warns_of_nothing(how: str) -> None:
    def made() -> BackgroundPool:
        bg = BackgroundPool([media()])
        if how == "with":
            with bg:
                assert text(bg.call("media", "slow_echo", {"text": "w", "seconds": 0})) == "w"
        elif how == "close":
            bg.__enter__()
            bg.close()
            bg.close()  # a second close is a no-op
        return bg

    with unclosed_warnings() as said:
        assert dropped(made)() is None
    assert said == []


@pytest.mark.docker
def test_a_started_sandbox_dropped_unclosed_warns_and_its_container_is_destroyed(
    docker_engine: EngineWithCLI, owner: str, tmp_path: object
) -> None:
    names: list[str] = []

    def started() -> Sandbox:
        sandbox = Sandbox(config=SandboxConfig(owner=owner), workspace=str(tmp_path)).start()
        assert sandbox.execute("print(6 * 7)").stdout == "42\n"
        names.append(sandbox.name)
        return sandbox

    gc.collect()
    with pytest.warns(ResourceWarning) as seen:
        gone = dropped(started)
    assert gone() is None
    (message,) = [str(w.message) for w in seen if "unclosed Sandbox" in str(w.message)]
    assert message == (
        f"unclosed Sandbox (container {names[0]}) dropped while running: its container is destroyed now, without "
        f"saving its workspace {tmp_path}; use it as `with Sandbox(...) as sandbox:`, or call sandbox.close()"
    )
    wait_until(lambda: docker_engine.owned(owner) == [], "the dropped sandbox's container to go", timeout=30)


@pytest.mark.docker
@pytest.mark.parametrize("how", ["with", "close", "kill", "never started"])
def test_a_closed_or_never_started_sandbox_warns_of_nothing(docker_engine: EngineWithCLI, owner: str, how: str) -> None:
    def made() -> Sandbox:
        sandbox = Sandbox(config=SandboxConfig(owner=owner))
        if how == "with":
            with sandbox:
                assert sandbox.execute("print(1)").stdout == "1\n"
        elif how in ("close", "kill"):
            sandbox.start()
            getattr(sandbox, how)()
        return sandbox

    with unclosed_warnings() as said:
        assert dropped(made)() is None
    assert said == []
    assert docker_engine.owned(owner) == []
