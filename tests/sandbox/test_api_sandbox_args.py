"""`Sandbox`'s other arguments, as a developer gets them wrong: each refused by name before anything is sent to the
sandbox or changed on the host, and a sync `execute` on the thread its tool calls need.

Run against a `PipeSupervisor` (a real session and channel, the supervisor's side played by the test): the first
frame the supervisor reads after the mistakes is the correct request that follows them.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from sandbox import Sandbox, SandboxConfig, SessionError
from sandbox.bridge import FunctionBridge
from tests.sandbox.test_sandbox_misuse import NeverLaunched
from tests.security.test_bridge_input import PipeBackend, PipeSupervisor
from tool_tree.config import parse_config


def no_tools(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "unused"}]}


@pytest.fixture
def session() -> Iterator[tuple[Sandbox, PipeSupervisor]]:
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools))
    sb.start()
    yield sb, peer
    sb.kill()


def next_request(peer: PipeSupervisor, answer: dict[str, Any]) -> tuple[threading.Thread, list[dict[str, Any]]]:
    """Read the next frame the host sends and answer it with ``answer``, on a thread."""
    seen: list[dict[str, Any]] = []

    def play() -> None:
        request = peer.read()
        seen.append(request)
        peer.send({"id": request["id"], "result": answer})

    player = threading.Thread(target=play)
    player.start()
    return player, seen


def test_wrong_paths_and_counts_of_the_file_methods_and_reset_are_refused_unsent(
    session: tuple[Sandbox, PipeSupervisor], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: read_file(None) and list_files(None) were AttributeErrors; max_bytes="5" a TypeError from a slice after
    # the request was sent; a negative max_bytes or limit went to the sandbox (list_files(limit=-1) answered []);
    # reset(workspace="no") emptied the workspace; save_workspace("") saved into the working folder.
    sb, peer = session
    monkeypatch.chdir(tmp_path)
    mistakes: list[tuple[type[Exception], str, Any]] = [
        (
            TypeError,
            r"^path must be a str or Path \(a path in the workspace\), got NoneType",
            lambda: sb.read_file(None),
        ),
        (TypeError, r"^path must be a str or Path .*got bytes b'a'", lambda: sb.list_files(b"a")),
        (
            TypeError,
            r"^max_bytes must be a whole number, at least 1, got str '5'",
            lambda: sb.read_file("a", max_bytes="5"),
        ),
        (ValueError, r"^max_bytes must be at least 1, got -1$", lambda: sb.read_file("a", max_bytes=-1)),
        (ValueError, r"^limit must be at least 1, got 0$", lambda: sb.list_files("", limit=0)),
        (
            TypeError,
            r"^limit must be a whole number.*got bool True$",
            lambda: sb.list_files("", limit=True),
        ),
        (TypeError, r"^workspace must be True or False, got str 'no'$", lambda: sb.reset(workspace="no")),
        (ValueError, r"^dest is an empty path; name a folder", lambda: sb.save_workspace("")),
        (TypeError, r"^dest must be a folder's path \(str or Path\) or None, got int 3$", lambda: sb.save_workspace(3)),
    ]
    for error, message, mistake in mistakes:
        with pytest.raises(error, match=message):
            mistake()
    player, seen = next_request(peer, {"data": base64.b64encode(b"ok").decode(), "size": 2})
    assert sb.read_file("/workspace/a", max_bytes=10) == b"ok"
    player.join(30)
    assert [(r["method"], r["params"]) for r in seen] == [("workspace.read", {"path": "a", "max_bytes": 10})]
    assert list(tmp_path.iterdir()) == []  # nothing saved into the working folder


def test_the_file_methods_take_a_path_as_they_take_a_str(session: tuple[Sandbox, PipeSupervisor]) -> None:
    # Before: read_file(Path("notes/a.txt")) was refused, "path must be a str", though a workspace and a tree are
    # taken as a Path.
    sb, peer = session
    player, seen = next_request(peer, {"data": base64.b64encode(b"ok").decode(), "size": 2})
    assert sb.read_file(Path("/workspace/notes/a.txt"), max_bytes=10) == b"ok"
    player.join(30)
    player, more = next_request(peer, {"entries": [{"name": "a.txt", "type": "file", "size": 2}], "total": 1})
    assert sb.list_files(PurePosixPath("notes")) == [{"name": "a.txt", "type": "file", "size": 2}]
    player.join(30)
    player, last = next_request(peer, {"entries": [], "total": 0})
    assert sb.list_folder(Path(".")) == ([], 0)
    player.join(30)
    assert [(r["method"], r["params"]) for r in seen + more + last] == [
        ("workspace.read", {"path": "notes/a.txt", "max_bytes": 10}),
        ("workspace.list", {"path": "notes", "limit": 1000}),
        ("workspace.list", {"path": "", "limit": 1000}),
    ]


def test_an_empty_workspace_is_refused_rather_than_taken_as_the_working_folder() -> None:
    # Before: Sandbox(workspace="") restored the working folder into the sandbox and merged the sandbox's
    # workspace back into it on close.
    with pytest.raises(ValueError, match=r'^workspace is an empty path; name a folder \("\." for the working'):
        Sandbox(NeverLaunched(), workspace="")
    with pytest.raises(TypeError, match=r"^workspace must be a folder's path \(str or Path\) or None, got int 5$"):
        Sandbox(NeverLaunched(), workspace=5)  # type: ignore[arg-type]
    assert Sandbox(NeverLaunched(), workspace=".").workspace == Path(".")  # the working folder, said so


def test_an_empty_tree_is_refused_rather_than_taken_as_the_working_folder(tmp_path: Path) -> None:
    # Before: Sandbox(tree=""), SandboxPool(tree="") and Runtime(config, "") took the working folder as the tree (an
    # unset variable's ""): used when it held a manifest, else refused only at start, as ".: not a tree".
    from sandbox import DockerBackend, SandboxPool
    from sandbox.host import Runtime

    empty = r'^tree is an empty path; name the tree\'s folder \("tree", as generate-tree writes it\)'
    for make in (
        lambda: Sandbox(tree=""),
        lambda: SandboxPool(tree=""),
        lambda: DockerBackend(tree=""),
        lambda: Runtime(parse_config("servers: {}\n"), ""),
    ):
        with pytest.raises(ValueError, match=empty):
            make()
    assert DockerBackend(tree=".").tree == Path(".")  # the working folder, said so


def test_a_config_that_is_not_a_sandbox_config_is_a_type_error_naming_the_fix() -> None:
    # Before: AttributeError: 'dict' object has no attribute 'image' (or 'Config' object ... for tooltree's Config).
    with pytest.raises(TypeError, match=r"^config must be a SandboxConfig or None, got dict \{'memory': '1g'\}$"):
        Sandbox(config={"memory": "1g"})  # type: ignore[arg-type]
    tooltree_config = parse_config("servers: {}\n", environ={})
    with pytest.raises(TypeError, match=r"^config must be a SandboxConfig \(a tooltree\.yaml's: SandboxConfig\.from"):
        Sandbox(config=tooltree_config)  # type: ignore[arg-type]
    assert Sandbox(NeverLaunched(), config=SandboxConfig()).config is not None


def test_a_sync_execute_on_the_thread_running_the_tool_loop_is_refused_at_once() -> None:
    # Before: the script's tool calls were scheduled on the loop that execute blocked, so the script waited until
    # its timeout and came back "timed out" (8 s with timeout: 8), having done nothing.
    peer = PipeSupervisor()

    async def inside_the_loop() -> None:
        sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools), tool_loop=asyncio.get_running_loop())
        sb.start()
        try:
            with pytest.raises(SessionError, match=r"^execute was called on the thread that runs tool_loop.*aexecute"):
                sb.execute("print(1)", timeout=1)
        finally:
            sb.kill()

    asyncio.run(inside_the_loop())


def test_a_host_call_whose_arguments_are_not_a_dict_is_refused_as_invalid_arguments(tmp_path: Path) -> None:
    # Before: Runtime.call_tool("crm", "list_leads", None) was "TypeError: object of type 'NoneType' has no len()",
    # where its docstring names ToolCallRefused.
    from sandbox.bridge import ToolCallRefused
    from sandbox.mcp_bridge import McpBridge
    from tests.sandbox.conftest import write_sample_tree
    from tool_tree.pool import ServerPool

    bridge = McpBridge(write_sample_tree(tmp_path), ServerPool([]))
    for wrong in (None, [1], "limit=3"):
        with pytest.raises(ToolCallRefused) as refused:
            asyncio.run(bridge.call_tool("crm", "list_leads", wrong))  # type: ignore[arg-type]
        assert refused.value.code == "invalid_arguments"
        assert refused.value.message == (
            f"invalid arguments: expected a dict of the tool's arguments by name ({{}} for none), "
            f"got {type(wrong).__name__}"
        )


def test_code_or_a_filename_that_utf8_cannot_encode_is_a_value_error_and_nothing_is_sent(
    session: tuple[Sandbox, PipeSupervisor],
) -> None:
    # Before: a SessionError ("cannot send execute to the sandbox: 'utf-8' codec can't encode ..."), which execute's
    # docstring gives for a closed or broken session; this one was fine.
    sb, peer = session
    with pytest.raises(ValueError, match=r"^code cannot be sent: it has '\\udc80' at position 7, which UTF-8 cannot"):
        sb.execute("print('\udc80')")
    with pytest.raises(ValueError, match=r"^filename cannot be sent: it has '\\udcff' at position 0"):
        sb.execute("print(1)", filename="\udcff.py")
    player, seen = next_request(peer, {"data": "", "size": 0})
    assert sb.read_file("a") == b""
    player.join(30)
    assert [r["method"] for r in seen] == ["workspace.read"]


def test_an_output_listener_that_is_not_callable_is_a_type_error_and_nothing_is_sent(
    session: tuple[Sandbox, PipeSupervisor],
) -> None:
    # Before: taken; the script ran, and each piece of its output failed in the listener, logged with a traceback.
    sb, peer = session
    with pytest.raises(TypeError, match=r"^on_output must be a function \(stream, data, skipped\) or None, got str$"):
        sb.execute("print(1)", on_output="print")  # type: ignore[arg-type]
    player, seen = next_request(peer, {"data": "", "size": 0})
    assert sb.read_file("a") == b""
    player.join(30)
    assert [r["method"] for r in seen] == ["workspace.read"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"config": 3}, r"^config: expected a SandboxConfig or None, got int$"),
        ({"tree": 3}, r"^tree: expected the tree's folder as a str or a path, or None, got int$"),
    ],
)
def test_a_docker_backend_given_a_config_or_tree_of_another_kind_names_it(kwargs: dict[str, Any], message: str) -> None:
    # Before: DockerBackend(3) was an AttributeError ('int' object has no attribute 'image'), naming no argument.
    from sandbox import DockerBackend

    with pytest.raises(TypeError, match=message):
        DockerBackend(**kwargs)  # refused before the engine is looked for


def test_search_in_a_session_whose_bridge_offers_none_says_the_bridge_decides() -> None:
    from sandbox.bridge import ToolCallRefused

    with pytest.raises(ToolCallRefused, match=r"its bridge \(FunctionBridge\) offers none \(an McpBridge over a tree"):
        FunctionBridge(no_tools).search_tools("crm")


def test_a_sessions_searches_and_validations_are_charged_to_its_channels_request_budget(
    session: tuple[Sandbox, PipeSupervisor],
) -> None:
    # One account of what a script's requests cost the host: the reader's charges, its searches and its validations.
    sb, _ = session
    assert sb._channel is not None and sb._calls.account is sb._channel.budget
