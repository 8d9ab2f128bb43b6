"""`tooltree serve` follows a tree that a `tooltree generate-tree` of the user's regenerated while it serves, as it
follows its own refresh (tests/serve/test_refresh.py): from the next call on, new sessions get the regenerated tree
(manifest, stubs in the sandbox), and a session whose sandbox started before is told it keeps its tree."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent.serve.renewal import RENEWED, RENEWING, restored
from tests.serve.conftest import TOKEN, http_client
from tests.serve.raw_stdio import RawStdio
from tests.serve.test_refresh import DOCS, _argv, _call, _env, _setup, crm_tree
from tests.support import ServeProcess, sample_config_yaml
from tooltree_cli.main import main

pytestmark = pytest.mark.docker

__all__ = ["crm_tree"]  # the fixture, imported for the tests here
FILES = "so are the files in /workspace (serve runs without --workspace: nothing is saved)"


def _served(folder: Path, crm_tree: Path) -> tuple[RawStdio, Path, Path]:
    """`tooltree serve --no-regenerate` of the crm tree, whose config adds docs (not in the tree yet): the process,
    the config and the tree."""
    config, tree = _setup(folder, crm_tree, sample_config_yaml("crm", "docs"))
    argv = _argv(config, tree, "--no-regenerate")
    argv[argv.index("--warm") + 1] = "1"  # a warm sandbox, started on the tree of the start
    raw = RawStdio(argv, _env())
    raw.initialize()
    return raw, config, tree


def _regenerate(config: Path, tree: Path) -> None:
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    assert (tree / "servers" / "docs").is_dir()


def test_a_session_without_a_sandbox_yet_takes_the_tree_regenerated_by_generate_tree(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    # Before: search_tools showed docs' tools and the script could not import them (ModuleNotFoundError: the warm
    # sandbox mounted the tree of the start), in this session and in every one after it, with nothing said.
    raw, config, tree = _served(tmp_path, crm_tree)
    try:
        before = _call(raw, 2, "search_tools", {"query": "list documents", "detail": "name"})  # opens the session
        assert "docs." not in json.dumps(before)
        _regenerate(config, tree)
        ran = _call(raw, 3, "execute_python", {"code": DOCS})
        assert ran.get("isError") is not True, ran
        text = ran["content"][0]["text"]  # type: ignore[index]
        assert text.startswith("[this session runs on the tree as regenerated since this client connected: the index")
        assert "]\n\nlisted\n" in text and "docs.list_documents ok" in json.dumps(ran)
        raw.wait_for_stderr(f"{tree} was regenerated while serving: sessions from now on get it")
        assert raw.close_stdin() == 0
    finally:
        raw.close()


def test_a_session_whose_sandbox_started_before_generate_tree_keeps_its_tree_until_it_meets_what_changed(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    raw, config, tree = _served(tmp_path, crm_tree)
    try:
        assert _call(raw, 2, "execute_python", {"code": "kept = 41"}).get("isError") is not True
        _regenerate(config, tree)
        told = _call(raw, 3, "execute_python", {"code": "print(kept + 1)"})
        text = told["content"][0]["text"]  # type: ignore[index]
        assert text.startswith("[the tree was regenerated from the servers since this session's sandbox started")
        assert text.endswith("\n\n42")
        missed = json.dumps(_call(raw, 4, "execute_python", {"code": "from servers.docs import list_documents"}))
        renewed = _call(
            raw, 5, "execute_python", {"code": "from servers.docs import list_documents\nprint(globals().get('kept'))"}
        )
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    # Without --workspace too, the next call renews the session on the regenerated tree, and the script's failed
    # import said so and that its files are not kept. Before: "reconnect the client", which a model cannot do, and
    # each import failed until the client did.
    assert "No module named 'servers.docs'" in missed and "reconnect the client" not in missed
    assert json.dumps(RENEWING.format(restored=restored(None)))[1:-1] in missed, missed
    text = renewed["content"][0]["text"]  # type: ignore[index]
    assert renewed.get("isError") is not True and text.endswith("\n\nNone"), text  # imported; variables gone
    assert text.startswith(f"[{RENEWED.format(files=FILES)}]"), text


@pytest.mark.anyio
async def test_over_http_a_client_that_connects_after_generate_tree_gets_its_instructions(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    # Before: every client that connected after it got the instructions of the tree of the start (no docs).
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm", "docs"))
    argv = _argv(config, tree, "--no-regenerate", "--http", "--port", "0")
    served = ServeProcess(argv, {**_env(), "TOOLTREE_SERVE_TOKEN": TOKEN})
    try:
        async with http_client(served.url) as client:
            assert "docs" not in str(client.session.initialize_result.instructions)
        await anyio.to_thread.run_sync(_regenerate, config, tree)  # generate-tree runs an event loop of its own
        async with http_client(served.url) as client:
            instructions = str(client.session.initialize_result.instructions)
        assert "docs" in instructions and "crm" in instructions
    finally:
        assert served.stop() == 0
