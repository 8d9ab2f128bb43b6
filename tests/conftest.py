"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:  # `import mcp` takes a second; only the tests that start servers pay for it.
    from mcp import StdioServerParameters

    from sandbox import SandboxConfig
    from tests.docker_cli import EngineWithCLI

from tests.support import TEST_OWNER, is_test_owner, made_since, run_owner, stop_process

# Generated trees store no tool embeddings unless a test asks for them: with the model installed (as on
# CI) auto mode would load it and embed the catalog in every test that generates a tree, slowing the
# suite and making lexical ranking tests depend on what is installed. The embedding tests opt back in
# with monkeypatch.setenv(EMBEDDINGS_ENV, ...). Set here, so CLI subprocesses inherit it too.
os.environ["TOOLTREE_SEARCH_EMBEDDINGS"] = "0"

# Every container and volume a test creates carries this owner label, or one `run_owner` made from it (the `owner`
# fixture's, a serve process's); the engine fixture removes them. The tooltree commands a test runs, in this process
# or as its children, label theirs so too, unless the test names another owner: none takes the owner of a user's own
# runs.
TEST_LABEL = f"tooltree.owner={TEST_OWNER}"
USER_OWNER = os.environ.get("TOOLTREE_SANDBOX_OWNER") or "tooltree"
"""The owner of the user's own runs (`sandbox.config.default_owner` before this module set the variable)."""
os.environ["TOOLTREE_SANDBOX_OWNER"] = TEST_OWNER

SAMPLE_SERVERS = Path(__file__).resolve().parents[1] / "examples" / "sample_servers"


ENGINE_MARKERS = {"docker_engine": "docker", "podman_engine": "podman"}
"""The marker each engine fixture's tests carry."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that reaches `docker_engine` (or `podman_engine`), through any fixture, carries the ``docker`` (or
    ``podman``) marker, so ``-m 'not docker and not podman'`` leaves out all that need an engine (before, six did not:
    they ran there, and skipped or failed without an engine; the Podman tests had none). One without it fails the
    collection, named."""
    for fixture, marker in ENGINE_MARKERS.items():
        unmarked = [
            item.nodeid
            for item in items
            if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None
        ]
        if unmarked:
            raise pytest.UsageError(f"tests that use {fixture} lack @pytest.mark.{marker}: {', '.join(unmarked)}")
    if any(item.path.parent != Path(__file__).parent for item in items):
        # The SDK's stdio client binds ``errlog=sys.stderr`` when first imported: imported first by a test under
        # capsys, it kept that test's capture (no fileno), and a later test's `mcp.Client` of a stdio server failed
        # "fileno". Imported here, under pytest's own capture (a real file), it binds that for the whole run.
        import mcp.client.stdio  # noqa: F401


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) and async fixtures of any scope run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def sample_server_params() -> Callable[[str], StdioServerParameters]:
    """Start parameters for one of our sample servers over stdio: ``sample_server_params("crm")``.

    The names are ``docs``, ``crm`` and ``media`` (see examples/sample_servers/README.md).
    """

    def params(name: str) -> StdioServerParameters:
        from mcp import StdioServerParameters

        script = SAMPLE_SERVERS / f"{name}.py"
        if not script.is_file():
            raise ValueError(f"no sample server named {name!r} in {SAMPLE_SERVERS}")
        return StdioServerParameters(command=sys.executable, args=[str(script)])

    return params


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[EngineWithCLI]:
    """A reachable engine with the sandbox image built; cleans up labelled leftovers at the end.

    Without an engine, tests that use it are skipped, unless ``REQUIRE_DOCKER=1`` (as on CI),
    which turns a missing engine into a failure.
    """
    from sandbox.errors import EngineUnavailableError
    from sandbox.image import OWNER_LABEL, build_image
    from sandbox.prune import remove_containers
    from tests.docker_cli import EngineWithCLI

    docker = EngineWithCLI()
    try:
        docker.ping()
    except EngineUnavailableError as e:
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail(f"REQUIRE_DOCKER=1 but no Docker engine answers: {e}")
        pytest.skip(f"no Docker engine: {e}")
    build_image(docker)
    started = int(time.time())  # volumes' times are whole seconds
    yield docker
    # Every session closes its own container; one still here at the end is a leak to fix.
    leaked = remove_containers(docker, label=TEST_LABEL)
    # Tree volumes outlive their sessions by design (the next run of the same tree finds its copy): the run's own
    # go, so the engine is left as the run found it (a later run must not find this run's copies).
    volumes = docker.volume_entries(OWNER_LABEL)
    for volume in volumes:
        if is_test_owner(volume.labels[OWNER_LABEL]):
            docker.remove_volume(volume.name)
    user = USER_OWNER  # not SandboxConfig().owner: this module set the variable it reads to the test owner
    default = [
        v.name
        for v in volumes
        if v.labels[OWNER_LABEL] == user and not is_test_owner(user) and made_since(v.created, started)
    ]
    if leaked:
        pytest.fail(f"{leaked} sandbox container(s) outlived the tests that created them")
    if default:
        message = f"tests made volumes with a user's owner label {user!r}: {', '.join(sorted(default))}"
        if os.environ.get("REQUIRE_DOCKER") == "1":  # on a developer's machine their own runs may have made one
            pytest.fail(message)
        warnings.warn(message, stacklevel=1)


PODMAN_START_WAIT = 60.0
"""Seconds `podman_engine` waits for its service to answer."""


@pytest.fixture(scope="session")
def podman_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The ``DOCKER_HOST`` address of a Podman service of this run's own (``podman system service`` on a socket, with
    its storage in a temporary folder and no images): Podman's Docker-compatible API, as users point tooltree at it.

    Without ``podman`` on PATH, or when its service does not answer, tests that use it are skipped, unless
    ``REQUIRE_PODMAN=1``, which turns either into a failure.
    """
    import shutil
    import subprocess
    import time

    import docker

    from sandbox._docker import DockerEngine
    from sandbox.errors import EngineError

    def unavailable(reason: str) -> NoReturn:
        if os.environ.get("REQUIRE_PODMAN") == "1":
            pytest.fail(f"REQUIRE_PODMAN=1 but {reason}")
        pytest.skip(reason)

    podman = shutil.which("podman")
    if podman is None:
        unavailable("podman is not installed (Debian: apt-get install podman)")
    folder = tmp_path_factory.mktemp("podman")
    address = f"unix://{folder / 'podman.sock'}"
    options = ["--root", str(folder / "root"), "--runroot", str(folder / "run"), "--tmpdir", str(folder / "tmp")]
    options += ["--storage-driver", "vfs", "--events-backend", "file", "--cgroup-manager", "cgroupfs"]
    log = (folder / "service.log").open("wb")
    service = subprocess.Popen([podman, *options, "system", "service", "--time=0", address], stdout=log, stderr=log)
    log.close()
    try:
        deadline = time.monotonic() + PODMAN_START_WAIT
        while True:  # bounded wait until the service answers on its socket
            if service.poll() is not None:
                text = (folder / "service.log").read_text(errors="replace")[-2000:]
                unavailable(f"podman system service exited with status {service.returncode}: {text}")
            if (folder / "podman.sock").exists():
                engine = DockerEngine(docker.DockerClient(base_url=address, timeout=30))
                try:
                    engine.version()
                    break
                except EngineError:
                    pass
                finally:
                    engine.close()
            if time.monotonic() > deadline:
                unavailable(f"podman system service did not answer at {address} within {PODMAN_START_WAIT:g} s")
            time.sleep(0.05)
        yield address
    finally:
        stop_process(service, 30)


@pytest.fixture(scope="session", autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Fail the run if a server or helper process started by a test outlives the suite."""
    yield
    me = str(os.getpid())
    leftovers = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            leftovers.append(f"{stat.parent.name}: {cmdline[:120]}")
    if leftovers:
        pytest.fail("processes started by the tests are still running:\n" + "\n".join(leftovers))


@pytest.fixture
def sandbox_owner(monkeypatch: pytest.MonkeyPatch) -> str:
    """Sandboxes started in this process carry the test label (``TOOLTREE_SANDBOX_OWNER``), which the engine fixture
    removes and by which a test finds its containers; a module of such tests names it in ``pytestmark``."""
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    return TEST_OWNER


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Within the test, Ctrl-C (SIGINT, and `_thread.interrupt_main`) raises KeyboardInterrupt in this process, as at a
    terminal; the previous handler is back after it. A suite started as a shell's background job (``pytest … &``
    without job control) inherits SIGINT ignored, and Python then installs no handler: ``interrupt_main`` did
    nothing, and a test of a Ctrl-C waited out its script and failed "DID NOT RAISE KeyboardInterrupt"."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def owner(docker_engine: EngineWithCLI) -> Iterator[str]:
    """An owner label for this test's containers alone, for a tooltree process it starts (``TOOLTREE_SANDBOX_OWNER``;
    others may run meanwhile; `EngineWithCLI.owned` lists them); its leftovers removed after."""
    import uuid

    from sandbox.prune import remove_containers

    name = run_owner(uuid.uuid4().hex[:8])
    yield name
    remove_containers(docker_engine, label=f"tooltree.owner={name}")


@pytest.fixture(scope="session")
def test_config() -> SandboxConfig:
    from sandbox import SandboxConfig

    return SandboxConfig(owner=TEST_OWNER, timeout=20.0)


@pytest.fixture
def sample_http_server() -> Iterator[Callable[[str], str]]:
    """Start a sample server over Streamable HTTP: ``url = sample_http_server("crm")``; stopped after the test."""
    import socket
    import subprocess
    import time

    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> str:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, str(SAMPLE_SERVERS / f"{name}.py"), "--http", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        deadline = time.monotonic() + 30
        while True:  # bounded wait until the port accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return f"http://127.0.0.1:{port}/mcp"
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"the {name} sample server did not start over HTTP") from None
                time.sleep(0.05)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)
