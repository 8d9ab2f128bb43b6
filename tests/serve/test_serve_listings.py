"""`tooltree serve` bounds the listings of the servers of all its client sessions together
(``serve.max_listing_values``, `tool_tree.held_values.HeldValues.shared`).

Each client session starts its own servers, and each server's listing is kept for the session's life. Before, a
session's servers were bounded (5,000,000 JSON values, about 700 MB parsed) but the sessions were not: the 16 sessions
``serve.max_sessions`` allows held 16 times it.

Client sessions' `Runtime`s, made as serve makes them (`ToolServer._runtime`, as `SessionRegistry` calls it), call
tests/servers/raw_server.py, whose listing is 1,990 values; a bound of 3,000 holds one session's. No sandbox is
started.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.bridge import ToolCallRefused
from sandbox.config import SandboxConfig
from tests.support import REPO
from tool_tree.config import ConfigError
from tool_tree.held_values import MAX_SERVE_HELD_VALUES
from tooltree_cli.common import load
from tooltree_cli.main import main as cli

RAW = REPO / "tests" / "servers" / "raw_server.py"


def _config(folder: Path, serve: str) -> Path:
    spec = folder / "dense.json"
    # One tool (``echo`` answers its arguments) in a listing of 1,990 values.
    spec.write_text(json.dumps({"pages": [[{"name": "echo", "inputSchema": {"type": "object", "x": [{}] * 1_985}}]]}))
    config = folder / "tooltree.yaml"
    args = ", ".join(json.dumps(a) for a in (str(RAW), str(spec)))
    config.write_text(
        f"servers:\n  dense:\n    command: {json.dumps(sys.executable)}\n    args: [{args}]\n"
        f"serve:\n  warm: 0\n{serve}",
        encoding="utf-8",
    )
    return config


def test_the_listings_of_all_client_sessions_are_bounded_together_and_an_ended_session_gives_its_back(
    tmp_path: Path,
) -> None:
    config_path = _config(tmp_path, "  max_listing_values: 3000\n")
    tree = tmp_path / "tree"
    assert cli(["generate-tree", "--config", str(config_path), "--out", str(tree), "--embeddings", "off"]) == 0
    config = load(str(config_path))
    app = ToolServer(config, tree, settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
    assert app.listings.limit == 3_000
    with app._runtime("first") as first:
        assert first.call_tool("dense", "echo", {"n": 1})["content"] == [{"type": "text", "text": '{"n": 1}'}]
        assert app.listings.held == 1_990
        with app._runtime("second") as second, pytest.raises(ToolCallRefused) as caught:
            second.call_tool("dense", "echo", {"n": 2})  # its server's listing would take all sessions' past 3,000
        said = str(caught.value)
        assert "held of the servers of all client sessions past 3,000 JSON values" in said, said
        assert "the limit for one `tooltree serve` (serve.max_listing_values)" in said, said
        assert app.listings.held == 1_990
        assert first.call_tool("dense", "echo", {"n": 3})["content"] == [{"type": "text", "text": '{"n": 3}'}]
    assert app.listings.held == 0  # the first session ended: its server's listing was given back
    with app._runtime("third") as third:
        assert third.call_tool("dense", "echo", {"n": 4})["content"] == [{"type": "text", "text": '{"n": 4}'}]
        assert app.listings.held == 1_990


def test_the_setting_defaults_to_twice_one_runs_bound_and_a_wrong_one_names_file_line_and_key(tmp_path: Path) -> None:
    config = load(str(_config(tmp_path, "")))
    assert ServeSettings.from_config(config).max_listing_values == MAX_SERVE_HELD_VALUES == 10_000_000
    path = _config(tmp_path, "  max_listing_values: many\n")
    with pytest.raises(ConfigError, match=f"^{path}:7: serve.max_listing_values: "):
        load(str(path))


def test_client_sessions_share_one_copy_of_a_tools_stored_definition_let_go_with_the_last(tmp_path: Path) -> None:
    # Each session's bridge reads the tool's definition from the tree to check its arguments. Before, each kept its
    # own copy: a schema of 800,000 values cost about 55 MB in every session that called it.
    import gc

    from sandbox import stored_definitions

    config_path = _config(tmp_path, "")
    tree = tmp_path / "tree"
    assert cli(["generate-tree", "--config", str(config_path), "--out", str(tree), "--embeddings", "off"]) == 0
    config = load(str(config_path))
    app = ToolServer(config, tree, settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
    (entry,) = (t for t in app.toolset.manifest.tools if t.tool == "echo")
    with app._runtime("first") as first, app._runtime("second") as second:
        for runtime in (first, second):
            assert runtime.call_tool("dense", "echo", {"n": 1})["content"] == [{"type": "text", "text": '{"n": 1}'}]
        stored = first.bridge._definition(entry)
        assert stored is not None and len(stored["inputSchema"]["x"]) == 1_985
        assert second.bridge._definition(entry) is stored
        del stored
    del first, second
    gc.collect()
    assert not [key for key in stored_definitions._definitions if key[1:3] == ("dense", "echo")]
    assert not [key for key in stored_definitions._snapshots if key[1] == "dense"]
