"""The real server-filesystem behind a tree generated before ``exclude: [write_file]``: no file is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from tool_tree.config import load_config
from tooltree_cli.main import main

pytestmark = pytest.mark.real_servers


def test_the_real_filesystem_server_writes_no_file_through_a_tool_the_config_now_excludes(
    real_servers_root: Path, tmp_path: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    command = real_servers_root / "node" / "node_modules" / ".bin" / "mcp-server-filesystem"
    server = f"servers:\n  filesystem:\n    command: {json.dumps(str(command))}\n    args: [{json.dumps(str(files))}]\n"
    server += "    timeout: 60\n"
    generated_from = tmp_path / "generated-from.yaml"
    generated_from.write_text(server, encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(generated_from), "--out", str(tree), "--embeddings", "off"]) == 0
    path = tmp_path / "tooltree.yaml"
    path.write_text(server + "    exclude: [write_file]\n", encoding="utf-8")
    with Runtime(load_config(path, environ=dict(os.environ)), tree) as runtime:
        with pytest.raises(ToolCallRefused) as info:
            runtime.call_tool("filesystem", "write_file", {"path": str(files / "x.txt"), "content": "hi"})
        assert info.value.message.startswith("filesystem.write_file is left out by servers.filesystem.exclude in ")
        assert not (files / "x.txt").exists()
        listed = runtime.call_tool("filesystem", "list_directory", {"path": str(files)})
        assert listed["isError"] is False
