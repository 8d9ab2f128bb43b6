"""Helpers shared by test modules (fixtures live in conftest.py; plain functions live here)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from tests.docker_cli import EngineWithCLI
    from tool_tree.config import ServerConfig

REPO = Path(__file__).resolve().parents[1]
# The owner label of every container and volume a test run creates. Unique per run, so the engine
# fixture's clean-up at the end of one run never removes another run's live sandboxes.
TEST_OWNER = os.environ.get("TOOLTREE_TEST_OWNER") or f"tooltree-test-{os.getpid()}"
os.environ["TOOLTREE_TEST_OWNER"] = TEST_OWNER  # worker processes of the same run share it
SAMPLE_SERVERS = REPO / "examples" / "sample_servers"


_RUN_OWNERS: set[str] = set()
"""The owners `run_owner` made in this process."""


def run_owner(part: str) -> str:
    """An owner label of this run's for one test's containers and volumes (``conftest.owner``, a serve process's):
    `TEST_OWNER`, a dash and ``part`` (a uuid, a serve's mark), which `is_test_owner` counts as this run's from now on.
    """
    owner = f"{TEST_OWNER}-{part}"
    _RUN_OWNERS.add(owner)
    return owner


def is_test_owner(owner: str) -> bool:
    """Whether ``owner`` (a ``tooltree.owner`` label) is this run's: `TEST_OWNER`, or one `run_owner` made. Exact, not
    by prefix: a run of owner ``tooltree-test`` leaves the volumes of a run of ``tooltree-test-2`` alone (before, its
    clean-up removed them, while that run used them)."""
    return owner == TEST_OWNER or owner in _RUN_OWNERS


def made_since(created: str, since: float) -> bool:
    """Whether an engine's time (RFC 3339, as it lists a volume's ``CreatedAt``) is at ``since`` (a `time.time`) or
    later; False for an empty or unreadable one."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(created).timestamp() >= since
    except ValueError:
        return False


def sample_config_yaml(*names: str) -> str:
    """A ``servers:`` section starting the named sample servers over stdio with this interpreter."""
    lines = ["servers:"]
    for name in names:
        script = SAMPLE_SERVERS / f"{name}.py"
        lines += [f"  {name}:", f"    command: {json.dumps(sys.executable)}", f"    args: [{json.dumps(str(script))}]"]
    return "\n".join(lines) + "\n"


def sample_server_configs(*names: str) -> list[ServerConfig]:
    """The named sample servers as `ServerConfig`s, started over stdio with this interpreter (a `BackgroundPool`'s)."""
    from tool_tree.config import ServerConfig

    return [
        ServerConfig(name=name, command=sys.executable, args=(str(SAMPLE_SERVERS / f"{name}.py"),)) for name in names
    ]


def sample_project(folder: Path, *names: str, **sandbox: object) -> tuple[Path, Path]:
    """``folder``/tooltree.yaml starting the named sample servers, its ``sandbox:`` section holding ``sandbox`` (e.g.
    ``timeout=60``; none without), and ``folder``/tree, the tree the real CLI generates from it: the config and the
    tree."""
    from tooltree_cli.main import main

    config = folder / "tooltree.yaml"
    section = "".join(f"  {key}: {value}\n" for key, value in sandbox.items())
    config.write_text(sample_config_yaml(*names) + (f"sandbox:\n{section}" if section else ""), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie counts as gone: its parent already died)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def in_thread(action: Callable[[], object]) -> tuple[threading.Event, list[BaseException]]:
    """Run ``action`` in a daemon thread: an event set once it has ended, and what it raised (if anything)."""
    done, errors = threading.Event(), []

    def run() -> None:
        try:
            action()
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, errors


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    """Poll ``condition`` (an observable fact, such as a process list) until it holds; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def exec_killed_after(
    docker: EngineWithCLI, project: tuple[Path, Path], folder: Path, script: str, calls: int, *options: str
) -> int:
    """`tooltree exec` (``main``, in this process) of ``script`` on ``project`` (its config and tree) with ``options``,
    its audit log in ``folder``, whose container is killed through the engine once the log shows ``calls`` tool
    calls: the exit status. The container is found by the test label: set TOOLTREE_SANDBOX_OWNER to `TEST_OWNER`."""
    from tooltree_cli.main import main

    config, tree = project
    path, audit = folder / "script.py", folder / "audit.jsonl"
    path.write_text(script, encoding="utf-8")

    def made() -> bool:
        lines = audit.read_text(encoding="utf-8").splitlines() if audit.exists() else []
        return sum(1 for line in lines if line.strip()) >= calls

    def killed() -> None:
        wait_until(made, f"the script's {calls} call(s)", 60.0)
        (name,) = docker.text(["ps", "--quiet", "--filter", f"label=tooltree.owner={TEST_OWNER}"]).split()
        docker.text(["kill", name])

    killer = threading.Thread(target=killed)
    killer.start()
    try:
        return main(["exec", str(path), "--config", str(config), "--tree", str(tree), "--audit", str(audit), *options])
    finally:
        killer.join(60.0)


CAP_DAC_OVERRIDE = 1


def overrides_permissions() -> bool:
    """Whether this process ignores file permissions (root with ``CAP_DAC_OVERRIDE``, as on CI)."""
    with open("/proc/self/status", encoding="ascii") as f:
        effective = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    return bool(effective >> CAP_DAC_OVERRIDE & 1)


def ran_where_permissions_bind(test: str) -> bool:
    """Whether ``test`` (a node id, ``f"{__file__}::<name>"``) was run again, and passed, in a pytest of its own without
    the capabilities that make file permissions not bind: True when this process has them (root, as on CI, where a
    test of a refusal the permissions make would otherwise check nothing), False when permissions bind here and the
    test's own body is to run. Skips without ``capsh`` (libcap2-bin, which `.ci/run` installs)."""
    import shlex
    import shutil
    import subprocess

    if not overrides_permissions():
        return False
    capsh = shutil.which("capsh")
    if capsh is None:
        pytest.skip("permissions do not bind this process and capsh (libcap2-bin) is not installed")
    inner = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
    drop = "cap_dac_override,cap_dac_read_search,cap_fowner"
    done = subprocess.run([capsh, f"--drop={drop}", "--", "-c", shlex.join(inner)], capture_output=True, text=True)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    return True


def require_embeddings(problem: str) -> NoReturn:
    """Skip the test because ``problem`` (a part of `make embeddings` is missing); under ``REQUIRE_EMBEDDINGS=1``, as
    on CI, where `make embeddings` installed it all, fail instead: a test CI skips is a test that never runs."""
    if os.environ.get("REQUIRE_EMBEDDINGS") == "1":
        pytest.fail(f"REQUIRE_EMBEDDINGS=1 but {problem}")
    pytest.skip(problem, allow_module_level=True)


def import_numpy() -> Any:
    """numpy (the ``embeddings`` extra), or a skip (a failure under ``REQUIRE_EMBEDDINGS=1``) without it."""
    try:
        import numpy
    except ModuleNotFoundError:
        require_embeddings("numpy (the embeddings extra) is not installed (make embeddings)")
    return numpy


def write_tiny_bert(root: Path, words: list[str]) -> Path:
    """A random 1-layer BERT in sentence-transformers layout at ``root``: enough to exercise the embedding
    code path (``TOOLTREE_EMBEDDING_MODEL`` can name it). Skips the test when numpy is not installed (fails under
    REQUIRE_EMBEDDINGS=1, see `require_embeddings`)."""
    np = import_numpy()
    root.mkdir(parents=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    dim, inter = 8, 16
    config: dict[str, Any] = {
        "hidden_size": dim,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": inter,
    }
    config |= {"max_position_embeddings": 64, "layer_norm_eps": 1e-12, "_name_or_path": "tiny-bert"}
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    rng = np.random.default_rng(7)
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (len(vocab), dim),
        "embeddings.position_embeddings.weight": (64, dim),
        "embeddings.token_type_embeddings.weight": (2, dim),
        "embeddings.LayerNorm.weight": (dim,),
        "embeddings.LayerNorm.bias": (dim,),
    }
    p = "encoder.layer.0"
    for name in ("query", "key", "value"):
        shapes[f"{p}.attention.self.{name}.weight"] = (dim, dim)
        shapes[f"{p}.attention.self.{name}.bias"] = (dim,)
    shapes |= {
        f"{p}.attention.output.dense.weight": (dim, dim),
        f"{p}.attention.output.dense.bias": (dim,),
        f"{p}.attention.output.LayerNorm.weight": (dim,),
        f"{p}.attention.output.LayerNorm.bias": (dim,),
        f"{p}.intermediate.dense.weight": (inter, dim),
        f"{p}.intermediate.dense.bias": (inter,),
        f"{p}.output.dense.weight": (dim, inter),
        f"{p}.output.dense.bias": (dim,),
        f"{p}.output.LayerNorm.weight": (dim,),
        f"{p}.output.LayerNorm.bias": (dim,),
    }
    _write_safetensors(root / "model.safetensors", {name: rng.normal(0, 0.5, shape) for name, shape in shapes.items()})
    return root


def install_tiny_model(root: Path, words: list[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny random BERT (`write_tiny_bert`) at ``root`` as the installed model, alone (whether or not the static
    companion is installed), no encoder of an earlier test reused. The embeddings' mode is the caller's to set."""
    from tool_tree.search import _dense

    write_tiny_bert(root, words)
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(root))
    monkeypatch.setenv("TOOLTREE_EMBEDDING_STATIC", "0")
    monkeypatch.setattr(_dense, "_encoder", None)
    monkeypatch.setattr(_dense, "_encoder_error", None)
    return root


def _write_safetensors(path: Path, tensors: dict[str, Any]) -> None:
    header: dict[str, Any] = {}
    blobs: list[bytes] = []
    offset = 0
    for name, array in tensors.items():
        blob = array.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header).encode("utf-8")
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))


def write_tiny_static(root: Path, words: list[str]) -> Path:
    """A ``wordllama`` package under ``root`` (put ``root`` on ``sys.path``) holding a random 4-column
    table and a word-level tokenizer definition: the static companion's code path with ``tokenizers``
    doing the cutting. Skips the test when numpy or tokenizers is not installed, fails under
    REQUIRE_EMBEDDINGS=1 (``make embeddings`` installs both)."""
    np = import_numpy()
    try:
        import tokenizers  # noqa: F401
    except ModuleNotFoundError:
        require_embeddings("tokenizers is not installed (make embeddings)")
    package = root / "wordllama"
    (package / "weights").mkdir(parents=True)
    (package / "tokenizers").mkdir()
    (package / "__init__.py").write_text("raise ImportError('tooltree reads the files, never imports this')\n")
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    table = np.random.default_rng(11).normal(0, 1, (len(vocab), 4))
    _write_safetensors(package / "weights" / "l2_supercat_256.safetensors", {"embedding.weight": table})
    definition = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    (package / "tokenizers" / "l2_supercat_tokenizer_config.json").write_text(json.dumps(definition))
    return root


def require_install(stamp: Path, what: str, hint: str) -> None:
    """Skip the test when ``stamp`` (an installer's stamp file) is missing; under REQUIRE_REAL_SERVERS=1, fail."""
    import pytest

    if not stamp.is_file():
        message = f"{what} are not installed in {stamp.parent}: {hint}"
        if os.environ.get("REQUIRE_REAL_SERVERS") == "1":
            pytest.fail(message)
        pytest.skip(message)


class ServeProcess:
    """``tooltree serve --http ...`` started as a subprocess; `url` once it listens (read from its stderr).

    Raises (on construction):
        RuntimeError: it exited, or printed no URL within ``wait`` seconds.
    """

    def __init__(self, argv: list[str], env: dict[str, str], *, wait: float = 180.0) -> None:
        import re
        import subprocess
        import threading

        self.proc = subprocess.Popen(argv, env=env, cwd=REPO, text=True, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
        self.url = ""
        self.stderr_lines: list[str] = []
        found = threading.Event()
        stream = self.proc.stderr
        assert stream is not None

        def read() -> None:
            for line in stream:
                self.stderr_lines.append(line)
                match = re.search(r"(http://\S+/mcp)", line)
                if match and not self.url:
                    self.url = match.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(wait) or not self.url:
            self.stop()
            raise RuntimeError("tooltree serve --http did not start:\n" + "".join(self.stderr_lines[-30:]))

    def stop(self) -> int:
        """SIGTERM, then its exit status (killed if it does not stop within 90 s); its pipe is closed."""
        code = stop_process(self.proc, 90)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code


def stop_process(proc: Any, grace: float) -> int:
    """SIGTERM to ``proc`` (a ``subprocess.Popen``) if it runs, then its exit status: SIGKILL if it has not exited
    within ``grace`` seconds (then waited for at most 30 s more)."""
    import subprocess

    if proc.poll() is None:
        proc.terminate()
    try:
        return int(proc.wait(timeout=grace))
    except subprocess.TimeoutExpired:
        proc.kill()
        return int(proc.wait(timeout=30))


def count_model_loads(monkeypatch: Any, *, wait: float = 1.0) -> list[int]:
    """Count the embedding model loads from now on (none is loaded yet): each appends to the list.

    Each load waits up to ``wait`` seconds for a second one to start, so concurrent first queries
    that each load the model (the bug) overlap and are all counted.
    """
    import threading

    from tool_tree.search import _dense

    loads: list[int] = []
    rival = threading.Event()
    real_encoder = _dense.Encoder

    class CountingEncoder(real_encoder):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            loads.append(1)
            if len(loads) > 1:
                rival.set()
            rival.wait(wait)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_dense, "Encoder", CountingEncoder)
    monkeypatch.setattr(_dense, "_encoder", None)
    monkeypatch.setattr(_dense, "_encoder_error", None)
    return loads


RAW_SERVER = REPO / "tests" / "servers" / "raw_server.py"


def hung_server_yaml(folder: Path, *, timeout: float) -> tuple[str, Path]:
    """A ``servers:`` entry (``hung``) for `tests/servers/raw_server.py` that never answers tools/list,
    and the file it writes its pid to when it starts."""
    pid_file = folder / "hung.pid"
    spec = folder / "hung.json"
    spec.write_text(json.dumps({"behavior": "hang_on_list", "pid_file": str(pid_file)}), encoding="utf-8")
    entry = (
        f"  hung:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(RAW_SERVER))}, {json.dumps(str(spec))}]\n    timeout: {timeout:g}\n"
    )
    return entry, pid_file


def raw_server_config(folder: Path, spec: dict[str, Any]) -> Path:
    """``folder``/tooltree.yaml with one server, ``raw``: `tests/servers/raw_server.py` following ``spec`` (written
    to ``folder``/raw.json)."""
    path = folder / "raw.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    config = folder / "tooltree.yaml"
    config.write_text(
        f"servers:\n  raw:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(RAW_SERVER))}, {json.dumps(str(path))}]\n",
        encoding="utf-8",
    )
    return config


def hostile_text_config(folder: Path, *args: str) -> Path:
    """``folder``/tooltree.yaml with one server, ``hostile``: `tests/servers/hostile_text_server.py` given ``args``."""
    config = folder / "tooltree.yaml"
    argv = ", ".join(json.dumps(a) for a in (str(REPO / "tests" / "servers" / "hostile_text_server.py"), *args))
    config.write_text(f"servers:\n  hostile:\n    command: {json.dumps(sys.executable)}\n    args: [{argv}]\n",
                      encoding="utf-8")  # fmt: skip
    return config


def raw_server_tree(folder: Path, tools: list[dict[str, Any]], **server: Any) -> tuple[Path, Any]:
    """A tree generated (by the real CLI) from `tests/servers/raw_server.py` offering ``tools``, and the
    `ServerConfig` that starts that server (``server`` adds its fields, e.g. ``timeout``)."""
    from tool_tree.config import ServerConfig
    from tooltree_cli.main import main

    config = raw_server_config(folder, {"pages": [tools]})
    spec = folder / "raw.json"
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    return tree, ServerConfig(name="raw", command=sys.executable, args=(str(RAW_SERVER), str(spec)), **server)


def in_a_fork(child: Callable[[], str], timeout: float = 30.0) -> str:
    """What ``child()`` returns (or raises, as ``"Type: message"``) when run in a forked child, within ``timeout``
    seconds: the pipe it writes to is waited on (its end comes when the child exits); a child that hangs is
    killed and fails the test. The child leaves without running the parent's clean-up."""
    import select
    import signal

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            outcome = child()
        except BaseException as e:
            outcome = f"{type(e).__name__}: {e}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([read], [], [], left)[0]:
            chunk = os.read(read, 4096)
            if not chunk:  # the child exited
                os.waitpid(pid, 0)
                return b"".join(chunks).decode()
            chunks.append(chunk)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child hung for {timeout:g} s")
    finally:
        os.close(read)


def run_on_tree(tree: Path, config: Path, source: str, filename: str) -> dict[str, Any]:
    """Run ``source`` (a script importing the stubs of ``tree``) in this process, its calls going to the servers of
    ``config`` for real; the script's globals. The tree's ``servers`` package is forgotten after."""
    from tool_tree.config import load_config
    from tool_tree.pool import BackgroundPool
    from tool_tree.runtime import set_transport

    sys.path.insert(0, str(tree))
    try:
        namespace: dict[str, Any] = {}
        with BackgroundPool(load_config(config).enabled_servers) as pool:
            previous = set_transport(pool.call)
            try:
                exec(compile(source, filename, "exec"), namespace)
            finally:
                set_transport(previous)
        return namespace
    finally:
        sys.path.remove(str(tree))
        for name in [m for m in sys.modules if m == "servers" or m.startswith("servers.")]:
            del sys.modules[name]


@contextlib.asynccontextmanager
async def asgi_over_http(app: Any, **config: Any) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a free local port for the block (``config``: more `uvicorn.Config` settings);
    yields its ``/mcp`` URL. Connections made before uvicorn is up wait in the socket's backlog: nothing to wait for."""
    import anyio
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        web = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))
        async with anyio.create_task_group() as tg:
            tg.start_soon(web.serve, [sock])
            try:
                yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
            finally:
                web.should_exit = True
