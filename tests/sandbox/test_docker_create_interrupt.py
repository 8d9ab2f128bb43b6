"""In a real engine: a Ctrl-C while the create request is with the engine leaves no container behind, even when
the engine makes it after the interrupt (the race of a remove by name)."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.errors import EngineError
from tests.docker_cli import EngineWithCLI

pytestmark = pytest.mark.docker

_BOUND = 10.0
"""Seconds any one step of the choreography below may take."""


def test_ctrl_c_while_the_create_is_in_flight_leaves_no_container_even_if_the_engine_makes_it_later(
    docker_engine: EngineWithCLI, backend: DockerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: tooltree removed the container by name at once; the engine, which still had the request, made it
    # after that, and it stayed ("tooltree-… Created"), as `slowproxy` in front of the real socket showed.
    backend.prepare()
    create, remove = docker_engine.api.create_container, docker_engine.remove_container
    removal_asked, made = threading.Event(), threading.Event()
    names: list[str] = []

    def engine_side(spec: dict[str, Any], reply: list[Any]) -> None:
        removal_asked.wait(2.0)  # the engine gets to it after tooltree's remove by name, or else 2 s later
        reply.append(create(**spec))
        names.append(spec["name"])
        made.set()

    def create_in_flight(**spec: Any) -> Any:
        reply: list[Any] = []
        engine = threading.Thread(target=engine_side, args=(spec, reply), daemon=True)
        engine.start()
        # Ctrl-C: the main thread's handler raises KeyboardInterrupt wherever it waits for this reply.
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        engine.join(_BOUND)
        return reply[0]

    def remove_noted(container: str) -> None:
        try:
            remove(container)
        finally:
            removal_asked.set()

    monkeypatch.setattr(docker_engine.api, "create_container", create_in_flight)
    monkeypatch.setattr(docker_engine, "remove_container", remove_noted)
    try:
        with pytest.raises(KeyboardInterrupt), Sandbox(backend):
            pytest.fail("the sandbox started")
        assert made.wait(_BOUND) and names[0].startswith("tooltree-")
        listed = docker_engine.text(["ps", "--all", "--filter", f"name={names[0]}", "--format", "{{.Names}}"])
        assert listed == ""  # was "tooltree-…" (Created)
    finally:
        for name in names:
            with contextlib.suppress(EngineError):
                remove(name)
