"""`Runtime`, `SandboxConfig.from_config` and `SandboxPool` (its `wait_ready` and `acquire` too) given arguments of the
wrong type or size, as the Python API allows: a `TypeError` or `ValueError` naming the parameter, raised when the object
is made (or the method called).

Before, ``Runtime(config, tree, audit=b"audit.jsonl")`` (or ``123``, or ``True``) was ignored: no audit line was
written and nothing said so; a wrong ``sandbox_pool`` failed at first use (``'int' object has no attribute
'backend'``); a wrong ``tree`` or ``workspace`` gave ``os.fspath``'s message, naming no parameter;
``SandboxConfig.from_config("tooltree.yaml")`` raised ``AttributeError: 'str' object has no attribute 'section'``;
and ``SandboxPool(size=1_000_000)`` was taken, to start containers until the engine or the host gave out.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sandbox import SandboxConfig, SandboxPool, SessionError
from sandbox.backend import Connection, SandboxBackend
from sandbox.host import Runtime
from sandbox.mcp_bridge import AuditLog
from sandbox.pool import MAX_SIZE
from tests.support import raw_server_tree
from tool_tree.config import Config, load_config

NO_SERVERS = Config(servers=())


class FsPath:
    """A path-like object that is not a `Path` (what ``os.PathLike`` allows)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


@pytest.mark.parametrize("audit", [b"audit.jsonl", 123, True, io.StringIO()])
def test_an_audit_that_is_neither_a_path_nor_an_audit_log_is_a_type_error_naming_audit(
    audit: object, tmp_path: Path
) -> None:
    said = (
        r"audit: expected the path \(str or os.PathLike\) of a file to append audit lines to, or an AuditLog "
        rf"\(AuditLog\(stream\) writes to a stream\), or None, got {type(audit).__name__} "
    )
    with pytest.raises(TypeError, match=said):
        Runtime(NO_SERVERS, tmp_path, audit=audit)  # type: ignore[arg-type]


def test_an_audit_path_given_as_any_path_like_gets_one_line_per_call(tmp_path: Path) -> None:
    # Before: only a str or a Path was taken; any other path-like was dropped, and no line written.
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    log = tmp_path / "audit.jsonl"
    with Runtime(load_config(tmp_path / "tooltree.yaml"), tree, audit=FsPath(log)) as runtime:  # type: ignore[arg-type]
        assert runtime.call_tool("raw", "echo", {})["content"]
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [(line["server"], line["tool"], line["outcome"]) for line in lines] == [("raw", "echo", "ok")]


@pytest.mark.parametrize("sandbox_config", [{"memory": "1g"}, NO_SERVERS])
def test_a_sandbox_config_that_is_not_a_sandbox_config_is_a_type_error_naming_it(
    sandbox_config: object, tmp_path: Path
) -> None:
    said = rf"sandbox_config: expected a SandboxConfig .*, or None, got {type(sandbox_config).__name__} "
    with pytest.raises(TypeError, match=said):
        Runtime(NO_SERVERS, tmp_path, sandbox_config=sandbox_config)  # type: ignore[arg-type]


@pytest.mark.parametrize("sandbox_pool", [123, SandboxConfig(owner="test")])
def test_a_sandbox_pool_that_is_not_a_sandbox_pool_is_a_type_error_when_the_runtime_is_made(
    sandbox_pool: object, tmp_path: Path
) -> None:
    said = rf"sandbox_pool: expected a SandboxPool, or None, got {type(sandbox_pool).__name__} "
    with pytest.raises(TypeError, match=said):
        Runtime(NO_SERVERS, tmp_path, sandbox_pool=sandbox_pool)  # type: ignore[arg-type]


@pytest.mark.parametrize("tree", [None, 123])
def test_a_tree_that_is_not_a_path_is_a_type_error_naming_tree(tree: object) -> None:
    said = rf"tree: expected the path \(str or os.PathLike\) of a generated tree's folder, got {type(tree).__name__} "
    with pytest.raises(TypeError, match=said):
        Runtime(NO_SERVERS, tree)  # type: ignore[arg-type]


@pytest.mark.parametrize("workspace", [123, b"workspace"])
def test_a_workspace_that_is_not_a_path_is_a_type_error_naming_workspace(workspace: object, tmp_path: Path) -> None:
    said = r"workspace: expected the path \(str or os.PathLike\) of a host folder or None, "
    said += f"got {type(workspace).__name__} "
    with pytest.raises(TypeError, match=said):
        Runtime(NO_SERVERS, tmp_path, workspace=workspace)  # type: ignore[arg-type]


def test_arguments_of_the_documented_types_are_taken(tmp_path: Path) -> None:
    shared = AuditLog(io.StringIO())
    settings = SandboxConfig(owner="test")
    tree: Any = FsPath(tmp_path)  # an os.PathLike, which the signature's `str | Path` leaves out
    workspace: Any = FsPath(tmp_path / "ws")
    runtime = Runtime(NO_SERVERS, tree, workspace=workspace, audit=shared, sandbox_config=settings)
    assert (runtime.tree, runtime.workspace, runtime.audit_path) == (tmp_path, tmp_path / "ws", None)
    assert runtime.sandbox_config is settings


@pytest.mark.parametrize("config", ["tooltree.yaml", Path("tooltree.yaml"), {"sandbox": {}}])
def test_sandbox_config_from_a_path_is_a_type_error_saying_to_load_the_config_first(config: object) -> None:
    said = (
        r"config: expected a tool_tree.config.Config \(load_config\(path\) reads a tooltree.yaml\) or None, "
        rf"got {type(config).__name__} "
    )
    with pytest.raises(TypeError, match=said):
        SandboxConfig.from_config(config)  # type: ignore[arg-type]


def test_sandbox_config_from_no_config_is_still_the_defaults_with_the_overrides() -> None:
    assert SandboxConfig.from_config(None, memory="1g") == SandboxConfig(memory="1g")


class NoLaunches(SandboxBackend):
    """A backend for a pool that is made but never started."""

    config = SandboxConfig(owner="test")

    def prepare(self) -> None:
        raise AssertionError("not started in these tests")

    def launch(self, session_id: str) -> Connection:
        raise AssertionError("not started in these tests")

    def verify_ready(self, connection: Connection, status: Mapping[str, Any]) -> None:
        raise AssertionError("not started in these tests")


@pytest.mark.parametrize("size", [MAX_SIZE + 1, 1_000_000])
def test_a_pool_size_above_the_maximum_is_a_value_error_naming_the_limit(size: int) -> None:
    said = rf"size: at most {MAX_SIZE} warm sandboxes \(each is a started container holding its memory limit\), "
    with pytest.raises(ValueError, match=said + f"got {size}: use a smaller size"):
        SandboxPool(NoLaunches(), size=size)


def test_a_pool_of_the_maximum_size_is_taken_and_holds_what_tooltree_serve_may_keep_warm() -> None:
    from agent.serve.settings import MAX_WARM

    assert SandboxPool(NoLaunches(), size=MAX_SIZE).size == MAX_SIZE
    assert MAX_WARM <= MAX_SIZE


@pytest.mark.parametrize("tree", [123, b"tree"])
def test_a_sandbox_or_agent_given_a_tree_that_is_not_a_path_names_the_argument(tree: object) -> None:
    from agent import Agent
    from sandbox import Sandbox
    from tool_tree.config import parse_config

    with pytest.raises(TypeError, match=r"^tree must be the path \(str or os.PathLike\) of a tree or None, got "):
        Sandbox(tree=tree)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^tree: expected the path \(str or os.PathLike\) of a tree, got "):
        Agent(parse_config("servers: {}\n", environ={}), tree=tree)  # type: ignore[arg-type]


def test_an_argument_whose_repr_fails_or_holds_escapes_still_gets_the_type_error() -> None:
    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("boom")

    class Loud:
        def __repr__(self) -> str:
            return "\x1b[2Jloud\nline"

    with pytest.raises(TypeError, match=r"got Hostile \(a Hostile whose repr failed\)"):
        SandboxConfig.from_config(Hostile())  # type: ignore[arg-type]
    with pytest.raises(TypeError) as info:
        SandboxConfig.from_config(Loud())  # type: ignore[arg-type]
    assert "\x1b" not in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match=r"got \(an integer too long to print\)"):
        SandboxPool(size=10**5000)


def test_a_sandbox_pool_of_another_tree_is_a_value_error_naming_both_trees(tmp_path: Path) -> None:
    # Before: taken; the scripts imported the pool's tree's stubs and every call was refused as "not in this
    # tree's manifest", the runtime's.
    mine, other = tmp_path / "tree", tmp_path / "other"
    pool = SandboxPool(config=SandboxConfig(owner="test"), tree=other, size=1)  # made, never started
    said = rf"^sandbox_pool: its sandboxes run the tree {other}, not {mine}, whose manifest says which tools "
    with pytest.raises(ValueError, match=said):
        Runtime(NO_SERVERS, mine, sandbox_pool=pool)
    mine.mkdir()
    (tmp_path / "link").symlink_to(mine)
    same = SandboxPool(config=SandboxConfig(owner="test"), tree=tmp_path / "link", size=1)
    assert Runtime(NO_SERVERS, str(mine), sandbox_pool=same).sandbox_pool is same  # the same folder, named otherwise
    assert Runtime(NO_SERVERS, mine, sandbox_pool=SandboxPool(NoLaunches(), size=1)).sandbox_pool is not None


def test_a_sandbox_backend_is_checked_as_a_pool_is(tmp_path: Path) -> None:
    # `tooltree serve` without warm sandboxes gives its sessions' runtimes one backend (`Runtime(sandbox_backend=)`).
    from sandbox.docker_backend import DockerBackend

    mine, other = tmp_path / "tree", tmp_path / "other"
    backend = DockerBackend(SandboxConfig(owner="test"), tree=other)  # made, never prepared
    with pytest.raises(ValueError, match=rf"^sandbox_backend: its sandboxes run the tree {other}, not {mine}, "):
        Runtime(NO_SERVERS, mine, sandbox_backend=backend)
    with pytest.raises(ValueError, match=r"^sandbox_pool and sandbox_backend: give one"):
        Runtime(NO_SERVERS, mine, sandbox_backend=NoLaunches(), sandbox_pool=SandboxPool(NoLaunches(), size=1))
    with pytest.raises(TypeError, match=r"^sandbox_backend: expected a SandboxBackend, or None, got SandboxConfig"):
        Runtime(NO_SERVERS, mine, sandbox_backend=SandboxConfig(owner="test"))  # type: ignore[arg-type]
    assert Runtime(NO_SERVERS, mine, sandbox_backend=(shared := NoLaunches())).sandbox_backend is shared


BAD_WAITS = [
    ({"timeout": "5"}, TypeError, "timeout must be a number of seconds (int or float), got str '5'"),
    ({"timeout": None}, TypeError, "timeout must be a number of seconds (int or float), got NoneType None"),
    ({"timeout": True}, TypeError, "timeout must be a number of seconds (int or float), got bool True"),
    ({"timeout": -1}, ValueError, "timeout must be at least 0 and at most 604800 seconds (a week), got -1"),
    ({"timeout": math.nan}, ValueError, "timeout must be at least 0 and at most 604800 seconds (a week), got nan"),
    ({"timeout": math.inf}, ValueError, "timeout must be at least 0 and at most 604800 seconds (a week), got inf"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        *BAD_WAITS,
        ({"count": "2"}, TypeError, "count must be a whole number, at least 1, got str '2'"),
        ({"count": 1.0}, TypeError, "count must be a whole number, at least 1, got float 1.0"),
        ({"count": 0}, ValueError, "count must be at least 1, got 0"),
    ],
    ids=["str", "none", "bool", "negative", "nan", "inf", "count-str", "count-float", "count-zero"],
)
def test_a_pools_wait_ready_refuses_a_bad_count_or_timeout_by_name(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    # Before: a str was "'<' not supported between instances of 'str' and 'int'" or "unsupported operand type(s)",
    # a NaN timeout spun the CPU for ever, a negative one failed as "did not warm ... in -1 s".
    pool = SandboxPool(NoLaunches(), size=1)  # not started: the arguments are refused before that is said
    with pytest.raises(error) as info:
        pool.wait_ready(**kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kwargs", "error", "message"), BAD_WAITS, ids=["str", "none", "bool", "negative", "nan", "inf"]
)
def test_a_pools_acquire_refuses_a_bad_timeout_by_name_before_starting_the_pool(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    pool = SandboxPool(NoLaunches(), size=1)  # its prepare() fails the test: acquire would start it
    with pytest.raises(error) as info:
        pool.acquire(**kwargs)
    assert str(info.value) == message
    assert not pool.closed


def test_a_pools_wait_takes_a_timeout_of_0_and_a_count_above_its_size() -> None:
    pool = SandboxPool(NoLaunches(), size=1)
    with pytest.raises(SessionError, match=r"^the pool is not started"):
        pool.wait_ready(count=5, timeout=0)  # a count above the size is the size
