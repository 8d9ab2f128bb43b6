"""`tooltree serve` regenerates a server's part of the tree on its notice that its prompts or resources changed only
when serve offers that list (``serve: prompts``, ``serve: resources``); a notice of tools always.

Before, the server pool's listener was told the server and not which list, so a prompts notice regenerated the
server's part of the tree (starting the server once more) also with ``serve: prompts: false``, where nothing serve
offers could change.

The regeneration starts from `ToolServer.on_tools_changed` (where `tooltree serve` hooks `tooltree_cli.serve_follow`):
a client session's `Runtime`, made as serve makes it, calls tests/servers/growing_server.py (a real SDK server over
stdio), which says the list changed before it answers, so the hook has been told, or not, when the call returns.
No sandbox is started. The whole way, from the notice to a listing client told, with the lists offered, is
tests/serve/test_follow_lists.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tests.support import REPO
from tooltree_cli.common import load
from tooltree_cli.main import main as cli

GROWING = REPO / "tests" / "servers" / "growing_server.py"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("offered")
    assert cli(["generate-tree", "--config", str(_config(folder, "")), "--out", str(folder / "tree"),
                "--embeddings", "off"]) == 0  # fmt: skip
    return folder / "tree"


def _config(folder: Path, serve: str) -> Path:
    config = folder / "tooltree.yaml"
    args = ", ".join(json.dumps(a) for a in (str(GROWING), str(folder / "added.json")))
    config.write_text(
        f"servers:\n  growing:\n    command: {json.dumps(sys.executable)}\n    args: [{args}]\n"
        f"serve:\n  warm: 0\n{serve}",
        encoding="utf-8",
    )
    return config


def _told_after_adding(tree: Path, folder: Path, serve: str, kind: str) -> list[str]:
    """What `ToolServer.on_tools_changed` was told once growing added a ``kind`` in a client session of a serve
    configured with ``serve``."""
    config = load(str(_config(folder, serve)))
    app = ToolServer(config, tree, settings=ServeSettings.from_config(config), sandbox_config=SandboxConfig())
    told: list[str] = []
    app.on_tools_changed.append(told.append)
    with app._runtime("test") as runtime:  # a client session's, as `SessionRegistry` makes it
        result = runtime.call_tool("growing", f"add_{kind}", {"name": "fresh"})
        assert result["content"] == [{"type": "text", "text": "added fresh"}]
        return told  # the notice came before the answer, read in the stream's order


@pytest.mark.parametrize(
    ("kind", "serve", "regenerated"),
    [
        ("prompt", "  prompts: false\n", False),
        ("prompt", "", True),
        ("prompt", "  resources: false\n", True),
        ("resource", "  resources: false\n", False),
        ("resource", "", True),
        ("resource", "  prompts: false\n", True),
        ("tool", "  prompts: false\n  resources: false\n", True),
    ],
)
def test_a_notice_of_a_list_regenerates_only_when_serve_offers_that_list(
    tree: Path, tmp_path: Path, kind: str, serve: str, regenerated: bool
) -> None:
    assert _told_after_adding(tree, tmp_path, serve, kind) == (["growing"] if regenerated else [])
