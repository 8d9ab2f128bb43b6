"""`tooltree serve` follows a server that says its tools changed: it regenerates that server's part of the tree.

Before, a tool a server added while serve ran stayed out of the tree (no stub, not found by search, not callable)
until serve was restarted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.docker_cli import EngineWithCLI
from tests.serve.raw_stdio import RawStdio
from tests.support import TEST_OWNER
from tooltree_cli.main import main

pytestmark = pytest.mark.docker

GROWING = Path(__file__).resolve().parents[1] / "servers" / "growing_server.py"
NOW = "the tools, prompts and resources of growing as they are now"


def _call(raw: RawStdio, request_id: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    raw.send({"id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    result = raw.wait_for(lambda m: m.get("id") == request_id, f"the result of {name}")["result"]
    assert isinstance(result, dict)
    return result


def _serve_growing(
    tmp_path: Path, tree: Path, *extra: str, eras: tuple[str, ...] = (), owner: str = TEST_OWNER
) -> RawStdio:
    """`tooltree serve` over stdio of a tree generated from the growing server, which adds a tool when its
    passthrough ``growing__add_tool`` is called; with ``eras`` ``("--both-eras",)`` it speaks 2026-07-28 too. Its
    sandboxes and tree volumes are ``owner``'s."""
    config = tmp_path / "tooltree.yaml"
    args = ", ".join(json.dumps(arg) for arg in (str(GROWING), str(tmp_path / "added.json"), *eras))
    config.write_text(
        f"servers:\n  growing:\n    command: {json.dumps(sys.executable)}\n    args: [{args}]\n", encoding="utf-8"
    )
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            "--warm", "0", "--passthrough", "growing.add_tool", *extra]  # fmt: skip
    return RawStdio(argv, {"TOOLTREE_SANDBOX_OWNER": owner, "PATH": "/usr/local/bin:/usr/bin:/bin"})


@pytest.mark.parametrize("eras", [(), ("--both-eras",)], ids=["legacy", "2026-07-28"])
def test_a_tool_the_server_adds_while_serving_gets_a_stub_is_found_and_runs(
    docker_engine: object, tmp_path: Path, eras: tuple[str, ...]
) -> None:
    # A server of both eras speaks 2026-07-28 to serve (`protocol: auto`), where it says its tools changed only on a
    # `subscriptions/listen` stream: before, serve opened none, and the tool stayed out of the tree.
    tree = tmp_path / "tree"
    raw = _serve_growing(tmp_path, tree, eras=eras)
    try:
        raw.wait_for_stderr(f"{tree} is up to date")  # the refresh serve starts with (the first regeneration waits)
        raw.initialize()
        added = _call(raw, 2, "growing__add_tool", {"name": "fresh"})
        assert added["content"] == [{"type": "text", "text": "added fresh"}]
        said = "growing says its tools, prompts or resources changed"  # `Follow` keeps the server, not which list
        raw.wait_for_stderr(f"tooltree serve: {said}; regenerating its part of {tree} …")
        raw.wait_for_stderr(f"tooltree serve: sessions from now on get {NOW}")
        assert (tree / "servers" / "growing" / "fresh.py").is_file()
        found = json.dumps(_call(raw, 3, "search_tools", {"query": "fresh", "detail": "name"}))
        assert "growing.fresh" in found
        # This client session had no sandbox yet: it now runs on the regenerated tree.
        ran = _call(raw, 4, "execute_python", {"code": "from servers.growing import fresh\nprint(fresh())"})
        assert ran.get("isError") is not True and "fresh ran" in json.dumps(ran), ran
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    log = "".join(raw.stderr)
    assert log.count("says its tools, prompts or resources changed") == 1, log


def test_a_session_whose_sandbox_predates_the_tool_gets_a_new_one_on_the_next_call_with_its_files(
    docker_engine: object, tmp_path: Path
) -> None:
    # Before: a script of a session whose sandbox had started before the regeneration could not import the new tool,
    # and was told to reconnect the client, which a model cannot do.
    from agent.serve.renewal import RENEWED, RENEWING, restored

    tree, workspace = tmp_path / "tree", tmp_path / "ws"
    workspace.mkdir()
    raw = _serve_growing(tmp_path, tree, "--workspace", str(workspace))
    try:
        raw.wait_for_stderr(f"{tree} is up to date")
        raw.initialize()
        first = _call(raw, 2, "execute_python", {"code": "x = 1\nopen('kept.txt', 'w').write('from the first')"})
        assert first.get("isError") is not True, first
        _call(raw, 3, "growing__add_tool", {"name": "fresh"})
        raw.wait_for_stderr(f"tooltree serve: sessions from now on get {NOW}")
        stale = json.dumps(_call(raw, 4, "execute_python", {"code": "from servers.growing import fresh"}))
        assert "No module named 'servers.growing.fresh'" in stale or "cannot import name 'fresh'" in stale, stale
        assert json.dumps(RENEWING.format(restored=restored(workspace)))[1:-1] in stale
        code = "from servers.growing import fresh\nprint(fresh(), open('kept.txt').read(), globals().get('x'))"
        again = _call(raw, 5, "execute_python", {"code": code})
        said = json.dumps(again)
        assert again.get("isError") is not True and "fresh ran from the first None" in said, said
        assert json.dumps(RENEWED.format(files=f"files saved into {workspace} remain"))[1:-1] in said
        assert raw.close_stdin() == 0
    finally:
        raw.close()


@pytest.mark.parametrize("warm", ["1", "0"], ids=["warm", "a-backend-per-session"])
def test_a_regeneration_leaves_only_the_new_trees_copy_once_the_sandbox_on_the_old_one_ends(
    docker_engine: EngineWithCLI, tmp_path: Path, owner: str, warm: str
) -> None:
    # The sandboxes mount a copy of the tree in a volume (and a record finds it). Before: each regeneration that
    # changed the tree left the old copy and its record on the engine for good, two volumes more every time serve
    # followed its servers, until a `tooltree sandbox prune`; without warm sandboxes still after that was fixed for
    # them (each session's sandbox had a backend of its own, which never saw the regeneration), and now one backend
    # serves every session's sandbox, as the pool's does.
    from sandbox.docker_backend import TREE_VOLUME_PREFIX

    label = f"tooltree.owner={owner}"
    tree = tmp_path / "tree"
    raw = _serve_growing(tmp_path, tree, "--warm", warm, owner=owner)
    try:
        raw.wait_for_stderr(f"{tree} is up to date")
        raw.initialize()
        ran = _call(raw, 2, "execute_python", {"code": "print(1)"})  # a sandbox on the tree as generated
        assert ran.get("isError") is not True, ran
        old = docker_engine.volumes(label)
        _call(raw, 3, "growing__add_tool", {"name": "fresh"})
        raw.wait_for_stderr(f"tooltree serve: sessions from now on get {NOW}")
        copy = next(name for name in old if name.startswith(TREE_VOLUME_PREFIX))
        assert copy in docker_engine.volumes(label)  # the session's sandbox mounts it
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    left = docker_engine.volumes(label)
    assert (len(old), len(left), set(old) & set(left)) == (2, 2, set()), (old, left)
