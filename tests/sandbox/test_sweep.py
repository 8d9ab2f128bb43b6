"""A process's first sandbox start removes the containers its owner's tooltree processes left when they were killed
on this host, and no other (real engine).

Every container here carries an owner label of this test alone (the ``owner`` fixture), or of another owner made
from it, and is removed after by its id.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import docker.errors
import pytest
import requests.exceptions

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.image import image_name
from sandbox.sweep import started
from tests.docker_cli import EngineWithCLI
from tests.support import REPO, alive

pytestmark = pytest.mark.docker

_BOUND = 60
"""Seconds the engine may take to remove a container, or a process to end."""
SWEPT = "removed 1 sandbox container(s) left by ended tooltree processes on this host"

_KILLED_MID_START = """\
import sys

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox._docker import DockerEngine


def start(self: DockerEngine, container: str) -> None:  # the start never comes: the process is killed first
    print(container, flush=True)
    sys.stdin.read()


DockerEngine.start = start
Sandbox(DockerBackend(SandboxConfig(owner=sys.argv[1]))).start()
"""


def _ids(docker: EngineWithCLI, owner: str) -> set[str]:
    """The full ids of ``owner``'s containers, running or not."""
    listed = docker.text(["ps", "--all", "--no-trunc", "--quiet", "--filter", f"label=tooltree.owner={owner}"])
    return set(listed.split())


def _removed(engine: EngineWithCLI, container: str) -> bool:
    """Whether the engine removes ``container`` within `_BOUND` seconds (waits on the engine, not a clock)."""
    try:
        engine.api.wait(container, condition="removed", timeout=_BOUND)
    except docker.errors.NotFound:
        return True  # removed before the wait began
    except requests.exceptions.RequestException:
        return False  # the wait timed out
    return True


@pytest.fixture
def ended_pid() -> int:
    """The PID of a process of this host that has ended (and was reaped)."""
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait(_BOUND)
    assert not alive(ended.pid)
    return ended.pid


@pytest.fixture
def running_pid() -> Iterator[int]:
    """The PID of a process of this host that runs (not this one) until the test ends."""
    with subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE) as proc:
        yield proc.pid  # leaving closes its stdin: it ends, and is waited for


def _start_and_sweep(docker: EngineWithCLI, owner: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Start and close a sandbox of ``owner`` in this process, its sweep waited for: what the sweep logged."""
    with caplog.at_level(logging.DEBUG, logger="sandbox.sweep"):
        with Sandbox(DockerBackend(SandboxConfig(owner=owner, timeout=20.0), docker=docker)):
            sweep = started(docker, owner)
            assert sweep is not None, "the start did not sweep"
            sweep.join(_BOUND)
            assert not sweep.is_alive()
        return [r.getMessage() for r in caplog.records if r.name == "sandbox.sweep"]


def test_a_start_removes_only_the_owners_containers_a_dead_process_of_this_host_left(
    docker_engine: EngineWithCLI,
    owner: str,
    ended_pid: int,
    running_pid: int,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: each stayed until `tooltree sandbox prune`.
    here, other = socket.gethostname(), f"{owner}-other"

    def made(labels: dict[str, str]) -> str:
        flags = [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
        return docker_engine.text(["create", "--network", "none", *flags, image_name(), "true"])

    dead = made({"tooltree.owner": owner, "tooltree.host": f"{here}:{ended_pid}"})
    kept = {
        made({"tooltree.owner": owner, "tooltree.host": f"{here}:{running_pid}"}),
        made({"tooltree.owner": owner, "tooltree.host": f"{here}:{os.getpid()}"}),
        # Another host sharing the engine: its PIDs mean nothing here.
        made({"tooltree.owner": owner, "tooltree.host": f"{here}-elsewhere:{ended_pid}"}),
        made({"tooltree.owner": owner, "tooltree.host": f"{here}:"}),
        made({"tooltree.owner": owner, "tooltree.host": f"{here}:0"}),
        made({"tooltree.owner": owner, "tooltree.host": f"{here}:99999999999999999999"}),
        made({"tooltree.owner": owner}),
    }
    another_owners = made({"tooltree.owner": other, "tooltree.host": f"{here}:{ended_pid}"})
    try:
        assert _ids(docker_engine, owner) == {dead, *kept}
        logged = _start_and_sweep(docker_engine, owner, caplog)
        assert _removed(docker_engine, dead)
        assert _ids(docker_engine, owner) == kept
        assert _ids(docker_engine, other) == {another_owners}
        assert logged == [SWEPT]
    finally:
        docker_engine.run(["rm", "--force", dead, *kept, another_owners], check=False)


def test_a_running_container_stays_though_its_label_names_a_process_ended_here(
    docker_engine: EngineWithCLI, owner: str, ended_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    # A tooltree of another PID namespace with this host's name (run with --network host) has PIDs that look ended
    # here: before, the sweep killed its live sessions. One whose tooltree was killed ends on its own.
    labels = ["--label", f"tooltree.owner={owner}", "--label", f"tooltree.host={socket.gethostname()}:{ended_pid}"]
    live = docker_engine.text(["run", "--detach", "--network", "none", *labels, image_name(), "sleep", "600"])
    try:
        assert _start_and_sweep(docker_engine, owner, caplog) == []
        assert docker_engine.json(["inspect", live])[0]["State"]["Status"] == "running"
    finally:
        docker_engine.run(["rm", "--force", live], check=False)


def test_the_container_of_a_process_killed_mid_start_is_removed_by_the_next_processs_start(
    docker_engine: EngineWithCLI, owner: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: `kill -9` of tooltree between the container's create and its start left it "Created" until
    # `tooltree sandbox prune`. The child's start waits between the two (its `DockerEngine.start` never returns), so
    # the kill lands there every time; one killed mid-script leaves nothing (its container ends when stdin closes).
    with subprocess.Popen(
        [sys.executable, "-c", _KILLED_MID_START, owner], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as child:
        try:
            assert child.stdout is not None
            container = child.stdout.readline().decode().strip()
            assert container, "the child did not create its container"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(_BOUND)
    try:
        left = docker_engine.json(["inspect", container])[0]
        assert (left["State"]["Status"], left["Config"]["Labels"]["tooltree.host"]) == (
            "created",
            f"{socket.gethostname()}:{child.pid}",
        )
        logged = _start_and_sweep(docker_engine, owner, caplog)
        assert _removed(docker_engine, container)
        assert _ids(docker_engine, owner) == set()
        assert logged == [SWEPT]
    finally:
        docker_engine.run(["rm", "--force", container], check=False)
