"""The engine seam: DOCKER_HOST is honoured, no engine is a clear error, engine events end a dead session."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox._docker import DockerEngine, default_engine
from sandbox.docker_backend import DockerConnection
from sandbox.errors import EngineUnavailableError
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import killed_in_a_call, write_sample_tree

DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def test_no_engine_at_docker_host_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"unix://{tmp_path}/no-engine.sock"
    monkeypatch.setenv("DOCKER_HOST", address)
    engine = DockerEngine()
    with pytest.raises(EngineUnavailableError, match="no Docker engine answers at") as info:
        engine.ping()
    assert address in str(info.value) and "DOCKER_HOST" in str(info.value)
    with pytest.raises(EngineUnavailableError):
        DockerBackend(docker=engine).prepare()


def test_a_refresh_of_the_tree_before_the_first_start_asks_no_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tooltree serve` without warm sandboxes refreshes its sessions' backend at each regeneration: before any
    # session started a sandbox, that must not need an engine (the first start reads the tree as it is then).
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    tree = write_sample_tree(tmp_path / "tree")
    backend = DockerBackend(SandboxConfig(owner="test"), tree=tree, docker=DockerEngine())
    assert backend.refresh_tree() is False
    assert backend.tree_volume is None
    with pytest.raises(EngineUnavailableError):
        backend.prepare()


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
    given = os.environ.get("DOCKER_HOST", DEFAULT_SOCKET)
    if not socket_path.startswith("http+docker://localhost") or given != DEFAULT_SOCKET:
        pytest.skip(f"the engine is not on the default socket ({given})")  # docker-py names every socket localhost
    monkeypatch.setenv("DOCKER_HOST", DEFAULT_SOCKET)
    engine = DockerEngine()
    try:
        assert engine.ping() == docker_engine.ping()
    finally:
        engine.close()


@pytest.mark.docker
def test_a_container_killed_from_outside_fails_the_waiting_execution_with_its_exit_status(
    docker_engine: EngineWithCLI, backend: DockerBackend
) -> None:
    with killed_in_a_call(docker_engine, backend) as (sb, error):
        assert "its container exited with status 137" in str(error)
        # Under runc a memory limit ends only the script: the kill from outside is named (before: only the memory limit)
        assert "under runc, where the memory limit ends only the script, most likely stopped from outside" in str(error)
        assert docker_engine.text(["ps", "--all", "--quiet", "--filter", f"name={sb.name}"]) == ""


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


@pytest.mark.docker
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


@pytest.mark.docker
def test_sessions_started_together_on_a_new_tree_all_see_the_whole_tree(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: each session's copy container, finding no marker, deleted what the other was writing; one of
    # them failed, or marked complete a volume missing half its stubs, and every later session got ImportError.
    from sandbox import docker_backend

    tree = write_sample_tree(tmp_path / "tree", unique=True)
    (tree / "servers" / "bulk").mkdir()
    for i in range(1000):
        (tree / "servers" / "bulk" / f"m{i}.py").write_text(f"X = {i}\n" + "# padding\n" * 40, encoding="utf-8")
    first_half_sent, second_started = threading.Event(), threading.Event()
    feed, calls, lock = docker_backend._feed, [], threading.Lock()

    def interleaved(attached: Any, data: bytes) -> None:
        """The first copy stops halfway until the second copy's container runs, then both go on."""
        with lock:
            calls.append(data)
            first = len(calls) == 1
        if not first:
            second_started.set()
            return feed(attached, data)
        attached.stdin.write(data[: len(data) // 2])
        first_half_sent.set()
        assert second_started.wait(60)
        return feed(attached, data[len(data) // 2 :])

    monkeypatch.setattr(docker_backend, "_feed", interleaved)
    volumes: list[str] = []
    errors: list[BaseException] = []

    def prepare() -> None:
        backend = DockerBackend(test_config, tree=tree, docker=docker_engine)
        try:
            backend.prepare()
        except BaseException as e:
            errors.append(e)
        volumes.append(backend.tree_volume or "")

    threads = [threading.Thread(target=prepare) for _ in range(2)]
    threads[0].start()
    assert first_half_sent.wait(60)
    threads[1].start()
    for t in threads:
        t.join(120)
    assert errors == [] and len(calls) == 2 and len(set(volumes)) == 1
    with Sandbox(DockerBackend(test_config, tree=tree, docker=docker_engine)) as sb:
        result = sb.execute(
            "import os\nfrom servers.bulk import m999\n"
            "print(sum(n.endswith('.py') for n in os.listdir('/opt/tooltree/tree/servers/bulk')))"
        )
    assert (result.stdout, result.error) == ("1000\n", None)


@pytest.mark.docker
def test_a_session_started_while_generate_tree_writes_the_tree_gets_the_whole_new_tree(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the volume was packed from whatever the tree held at that moment (the old manifest, some new
    # stubs), or the packing failed on a stub deleted under it.
    import fcntl

    from generator.generate import generate
    from tests.generator.paused import paused_generate, write_snapshots

    tree = tmp_path / "tree"
    generate(None, tree, snapshots=write_snapshots(tmp_path / "prior", "prior"))
    reached = threading.Event()  # the backend waits for the tree's lock, or is done without one
    flock = fcntl.flock

    def reporting(fd: Any, operation: int) -> None:
        reached.set()
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", reporting)
    backend = DockerBackend(test_config, tree=tree, docker=docker_engine)
    errors: list[BaseException] = []

    def prepare() -> None:
        try:
            backend.prepare()
        except BaseException as e:
            errors.append(e)
        finally:
            reached.set()

    with paused_generate(write_snapshots(tmp_path / "new", "new"), tree) as run:
        thread = threading.Thread(target=prepare)
        thread.start()
        assert reached.wait(60)
        assert run.resume()[0] == 0
        thread.join(120)
    assert errors == []
    code = (
        "import json, os\nroot = '/opt/tooltree/tree'\n"
        "listed = sorted(t['path'] for t in json.load(open(root + '/manifest.json'))['tools'])\n"
        "stubs = sorted('servers/alpha/' + n for n in os.listdir(root + '/servers/alpha') if n.endswith('.py'))\n"
        "print(listed == [s for s in stubs if not s.endswith('__init__.py')], len(listed), listed[0])"
    )
    with Sandbox(backend) as sb:
        result = sb.execute(code)
    assert (result.stdout, result.error) == ("True 200 servers/alpha/new_0.py\n", None)


def test_packing_skips_files_being_written_kept_copies_and_files_gone_since_they_were_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a search index replaced while a session packed the tree failed that session with FileNotFoundError
    # (its temporary name was listed, then renamed away); a half-written temporary file went into the volume.
    import io
    import os
    import tarfile

    from sandbox import tree_pack

    def names(data: bytes) -> list[str]:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            return sorted(tar.getnames())

    tree = write_sample_tree(tmp_path / "tree")
    clean = names(tree_pack.pack_tree(tree))
    (tree / ".search_index.json.tmp").write_text("{half", encoding="utf-8")
    (tree / "servers" / ".tmp-abc.part").write_text("half", encoding="utf-8")
    (tree / ".tooltree-kept" / "servers" / "crm").mkdir(parents=True)  # a user's edited stub, kept by a rerun
    (tree / ".tooltree-kept" / "servers" / "crm" / "list_leads.py").write_text("# mine", encoding="utf-8")
    assert names(tree_pack.pack_tree(tree)) == clean
    walk = os.walk

    def listing_a_vanished_file(top: Any, **kwargs: Any) -> Any:
        for dirpath, dirnames, filenames in walk(top, **kwargs):
            yield dirpath, dirnames, [*filenames, "gone.py"]

    monkeypatch.setattr(tree_pack.os, "walk", listing_a_vanished_file)
    assert names(tree_pack.pack_tree(tree)) == clean


class _Attached:
    stdin = stderr = stdout = None

    def abort(self, reason: str) -> None:
        pass

    def close(self) -> None:
        pass


class _SlowEngine:
    """An engine whose removal of a container fails ``failures`` times (it did not answer in time)."""

    def __init__(self, failures: int) -> None:
        self.failures, self.asked = failures, 0

    def unwatch(self, container: str) -> None:
        pass

    def remove_container(self, container: str) -> None:
        from sandbox.errors import EngineError

        self.asked += 1
        if self.asked <= self.failures:
            raise EngineError("container remove: the Docker engine did not answer in time")


@pytest.mark.parametrize("failures", [1, 2])
def test_a_container_the_engine_did_not_remove_in_time_is_asked_for_again_then_named(
    failures: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: one removal that failed (a busy engine) left the container running, and nothing said so.
    engine = _SlowEngine(failures)
    connection = DockerConnection(engine, "c0ffee", "tooltree-sbx-test", _Attached())  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="sandbox.docker_backend"):
        connection.kill()
    assert engine.asked == 2
    warned = [r.getMessage() for r in caplog.records if r.name == "sandbox.docker_backend"]
    if failures == 1:
        assert warned == []
    else:
        assert warned == [
            "could not remove sandbox container tooltree-sbx-test (container remove: the Docker engine did not answer "
            "in time); `tooltree sandbox prune` removes it"
        ]


class _GatedEngine(_SlowEngine):
    """An engine whose removal of a container takes until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(0)
        self.removing, self.release = threading.Event(), threading.Event()

    def remove_container(self, container: str) -> None:
        self.asked += 1
        self.removing.set()
        self.release.wait(30)


def test_a_second_kill_returns_only_once_the_first_ones_removal_is_done() -> None:
    # Before: a kill that found a removal under way (the channel's reader had started one) returned at once, with
    # the container still running; a HardeningError could leave it behind for a moment, seen by the leak check.
    engine = _GatedEngine()
    connection = DockerConnection(engine, "c0ffee", "tooltree-sbx-test", _Attached())  # type: ignore[arg-type]
    first = threading.Thread(target=connection.kill)
    first.start()
    try:
        assert engine.removing.wait(10)
        second_done = threading.Event()
        second = threading.Thread(target=lambda: (connection.kill(), second_done.set()))
        second.start()
        assert not second_done.wait(0.5), "the second kill returned while the container was still being removed"
    finally:
        engine.release.set()
    first.join(10)
    assert second_done.wait(10) and engine.asked == 1
