"""What a script gets from the real third-party servers' stubs, run in this process against the live servers.

The servers are installed by `make real-servers`; without them these tests skip (see conftest.py).
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.servers.content_server import png
from tests.support import run_on_tree
from tool_tree.config import load_config
from tooltree_cli.main import main

pytestmark = pytest.mark.real_servers

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tests" / "real_servers.yaml"


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory, real_servers_root: Path) -> tuple[Path, Path]:
    """A config and tree of server-memory alone, its graph in a file of its own."""
    environ = {**os.environ, "TOOLTREE_REAL_SERVERS": str(real_servers_root)}
    server = load_config(CONFIG, environ=environ).server("memory")
    folder = tmp_path_factory.mktemp("memory")
    config = folder / "mcp.json"
    entry = {"command": server.command, "env": {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")}, "concurrency": 1}
    config.write_text(json.dumps({"mcpServers": {"memory": entry}}), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


MEMORY_SCRIPT = """\
from servers.memory import create_entities, create_relations, read_graph
made = create_entities(entities=[{"name": "Alice", "entityType": "person", "observations": ["likes tea"]},
                                 {"name": "Bob", "entityType": "person", "observations": []}])
related = create_relations(relations=[{"from": "Alice", "to": "Bob", "relationType": "knows"}])
graph = read_graph()
shown = [str(made), str(related), str(graph)]
"""


def test_memory_results_print_as_their_dict_though_the_text_is_the_json_of_the_list_it_wraps(
    memory: tuple[Path, Path],
) -> None:
    # server-memory's text block is the JSON of the list its structured content wraps ({"entities": [...]}): the
    # same data. Before: each print added "[text '[\n  {\n    \"name\": \"Alice\",…' (185 characters): result.text]",
    # naming as more content what the dict already held.
    config, tree = memory
    ran: dict[str, Any] = run_on_tree(tree, config, MEMORY_SCRIPT, "memory.py")
    made, related, graph = ran["made"], ran["related"], ran["graph"]
    assert made["entities"][0] == {"name": "Alice", "entityType": "person", "observations": ["likes tea"]}
    assert related == {"relations": [{"from": "Alice", "to": "Bob", "relationType": "knows"}]}
    assert sorted(e["name"] for e in graph["entities"]) == ["Alice", "Bob"]
    assert json.loads(made.text) == made["entities"]  # the server's text is the list, not the dict
    assert ran["shown"] == [repr(dict(made)), repr(dict(related)), repr(dict(graph))]


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory, real_servers_root: Path) -> tuple[Path, Path, Path]:
    """A config and tree of server-filesystem alone, confined to a folder holding ``chart.png``."""
    environ = {**os.environ, "TOOLTREE_REAL_SERVERS": str(real_servers_root)}
    server = load_config(CONFIG, environ=environ).server("filesystem")
    folder = tmp_path_factory.mktemp("media")
    files = folder / "files"
    files.mkdir()
    (files / "chart.png").write_bytes(base64.b64decode(png(100, 80, 20_000)))
    config = folder / "mcp.json"
    entry = {"command": server.command, "args": [str(files)], "concurrency": 1}
    config.write_text(json.dumps({"mcpServers": {"filesystem": entry}}), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree, files / "chart.png"


def test_a_printed_media_file_shows_its_image_s_size_not_its_base64(media: tuple[Path, Path, Path]) -> None:
    # server-filesystem's read_media_file repeats the image's base64 in its structured content. Before: a print of
    # the result showed all of it, where a ToolResult's print shows `Image(image/png, N bytes)`.
    config, tree, image = media
    script = "from servers.filesystem import read_media_file\n"
    script += f"read = read_media_file(path={str(image)!r})\nshown = str(read)\n"
    ran: dict[str, Any] = run_on_tree(tree, config, script, "media.py")
    data = base64.b64encode(image.read_bytes()).decode()
    assert ran["read"]["content"][0]["data"] == data  # whole for the script
    assert data not in ran["shown"]
    assert f"<image/png, {image.stat().st_size:,} bytes as base64: result.images[0]>" in ran["shown"]
