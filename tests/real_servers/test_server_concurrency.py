"""``servers.NAME.concurrency``: the real memory server reads, changes and writes one file per call, so calls in
flight at once lose one another's writes; ``concurrency: 1`` makes them take turns and none is lost."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox.host import Runtime
from tool_tree.config import ConfigError, load_config
from tooltree_cli.main import main

pytestmark = pytest.mark.real_servers

CALLS = 20


def _stored_entities(real_servers_root: Path, tmp_path: Path, concurrency: str) -> int:
    command = real_servers_root / "node" / "node_modules" / ".bin" / "mcp-server-memory"
    graph = tmp_path / f"graph-{concurrency or 'default'}.jsonl"
    server = f"servers:\n  memory:\n    command: {json.dumps(str(command))}\n    timeout: 60\n"
    server += f"    env: {{MEMORY_FILE_PATH: {json.dumps(str(graph))}}}\n{concurrency}"
    path = tmp_path / "tooltree.yaml"
    path.write_text(server, encoding="utf-8")
    tree = tmp_path / f"tree-{bool(concurrency)}"
    assert main(["generate-tree", "--config", str(path), "--out", str(tree), "--embeddings", "off"]) == 0
    with Runtime(load_config(path, environ=dict(os.environ)), tree) as runtime:

        def create(n: int) -> bool:
            entity = {"name": f"e{n}", "entityType": "test", "observations": [f"made by call {n}"]}
            return runtime.call_tool("memory", "create_entities", {"entities": [entity]})["isError"] is False

        with ThreadPoolExecutor(CALLS) as pool:
            assert all(pool.map(create, range(CALLS)))
        graph_text = json.dumps(runtime.call_tool("memory", "read_graph", {}))
    return sum(f'"e{n}"' in graph_text.replace('\\"', '"') for n in range(CALLS))


def test_one_call_at_a_time_keeps_every_write_of_a_server_that_is_not_safe_to_call_at_once(
    real_servers_root: Path, tmp_path: Path
) -> None:
    assert _stored_entities(real_servers_root, tmp_path, "    concurrency: 1\n") == CALLS


def test_a_concurrency_that_is_not_a_whole_number_from_1_is_an_error_naming_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "tooltree.yaml"
    for bad in ("0", "2.5", "true", "2000"):
        path.write_text(f"servers:\n  crm:\n    command: python\n    concurrency: {bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError) as raised:
            load_config(path)
        assert str(raised.value).startswith(f"{path}:4: servers.crm.concurrency: expected a whole number from 1 to")
