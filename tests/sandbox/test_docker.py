"""The engine seam: DOCKER_HOST is honoured, no engine is a clear error, engine events end a dead session."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError
from sandbox._docker import DockerEngine, default_engine
from sandbox.docker_backend import DockerConnection
from sandbox.errors import EngineUnavailableError
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import write_sample_tree


def test_no_engine_at_docker_host_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"unix://{tmp_path}/no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", address)
    engine = DockerEngine()
    with pytest.raises(EngineUnavailableError, match="no Docker engine answers at") as info:
        engine.ping()
    assert address in str(info.value) and "DOCKER_HOST" in str(info.value)
    with pytest.raises(EngineUnavailableError):
        DockerBackend(docker=engine).prepare()


def test_asking_an_engine_that_is_down_leaves_no_socket_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import socket
    import warnings

    path = tmp_path / "stopped-engine.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stopped:  # a socket file nobody listens on
        stopped.bind(str(path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine = DockerEngine()
        for _ in range(3):  # the engine down or restarting: each call's connect fails
            with pytest.raises(EngineUnavailableError):
                engine.ping()
        engine.close()
        del engine
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.docker
def test_docker_host_names_the_engine_to_use(docker_engine: EngineWithCLI, monkeypatch: pytest.MonkeyPatch) -> None:
    socket_path = docker_engine.api.base_url  # what the environment gave: the local socket here
    if not socket_path.startswith("http+docker://localhost"):
        pytest.skip(f"the engine is not on the local socket ({socket_path})")
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    engine = DockerEngine()
    try:
        assert engine.ping() == docker_engine.ping()
    finally:
        engine.close()


@pytest.mark.docker
def test_a_container_killed_from_outside_fails_the_waiting_execution_with_its_exit_status(
    docker_engine: EngineWithCLI, backend: DockerBackend
) -> None:
    in_call = threading.Event()

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        in_call.set()
        return {"content": []}

    sb = Sandbox(backend, tools=tool).start()
    outcome: list[BaseException] = []
    ended = threading.Event()

    def run() -> None:
        try:
            sb.execute("from tool_tree.runtime import call_tool\ncall_tool('a', 'b', {})\nimport time\ntime.sleep(600)")
        except SessionError as e:
            outcome.append(e)
        ended.set()

    threading.Thread(target=run, daemon=True).start()
    assert in_call.wait(60)
    docker_engine.run(["kill", sb.name])
    assert ended.wait(60), "the execution did not end when its container died"
    assert "its container exited with status 137" in str(outcome[0])
    assert docker_engine.text(["ps", "--all", "--quiet", "--filter", f"name={sb.name}"]) == ""
    sb.close()


@pytest.mark.docker
def test_closing_a_session_ends_its_supervisor_through_stdin_and_leaves_no_container(
    docker_engine: EngineWithCLI, backend: DockerBackend
) -> None:
    sb = Sandbox(backend).start()
    assert sb.execute("print(1)").stdout == "1\n"
    channel = sb._channel
    assert channel is not None
    connection = channel.connection
    assert isinstance(connection, DockerConnection)
    sb.close()
    # The output ended on its own (a kill would have aborted the stream instead), and if the engine
    # already said how the container ended, it ended well.
    assert connection.ended.is_set(), "the supervisor did not end by itself when its stdin closed"
    assert connection.exit_status in (None, "0")
    assert docker_engine.text(["ps", "--all", "--quiet", "--filter", f"name={sb.name}"]) == ""


def test_the_process_engine_follows_docker_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = default_engine()
    assert default_engine() is first
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/elsewhere.sock")
    elsewhere = default_engine()
    assert elsewhere is not first
    with pytest.raises(EngineUnavailableError, match=r"elsewhere\.sock"):
        elsewhere.ping()


@pytest.mark.docker
def test_many_sessions_leave_no_sockets_open_to_the_engine(backend: DockerBackend) -> None:
    import gc
    import os

    def open_fds() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    with Sandbox(backend) as sb:  # connections and the events stream are set up here
        sb.execute("print(0)")
    before = open_fds()
    for i in range(8):
        with Sandbox(backend) as sb:
            assert sb.execute(f"print({i})").stdout == f"{i}\n"
    assert open_fds() <= before + 4  # at most a few idle pooled connections, however many sessions


def test_an_unchanged_tree_finds_its_volume_without_packing_and_a_changed_one_is_copied_again(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every new backend (each `tooltree exec`) packed the whole tree and ran a container to copy it,
    # which found the volume complete: 0.4 s of a 1.7 s `exec` for 527 tools, 3.4 s of 5 s for 20,000.
    from sandbox import docker_backend

    tree = write_sample_tree(tmp_path / "tree")
    packs: list[Path] = []
    pack = docker_backend.pack_tree

    def counted(path: Path, **kwargs: Any) -> bytes:
        packs.append(path)
        return pack(path, **kwargs)

    monkeypatch.setattr(docker_backend, "pack_tree", counted)

    def volume() -> str:
        b = DockerBackend(test_config, tree=tree, docker=docker_engine)
        b.prepare()
        assert b.tree_volume is not None
        return b.tree_volume

    first = volume()
    assert (volume(), len(packs)) == (first, 1)
    stub = tree / "servers" / "crm" / "list_leads.py"
    text = stub.read_text(encoding="utf-8")
    stub.write_text(text.replace('status: str = "open"', 'status: str = "shut"'), encoding="utf-8")  # same size
    changed = volume()
    assert changed != first and len(packs) == 2
    with Sandbox(DockerBackend(test_config, tree=tree, docker=docker_engine)) as sb:
        result = sb.execute("print(open('/workspace/servers/crm/list_leads.py').read().count('= \"shut\"'))")
    assert result.stdout == "1\n"
