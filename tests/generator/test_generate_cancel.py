"""`generate(..., cancel=Cancel())`: stopped from another thread mid-discovery, it closes every server it
started and writes nothing (what `tooltree serve` does with its background refresh when serving ends)."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from generator.cancel import Cancel, GenerateCancelled
from generator.generate import generate
from tests.support import RAW_SERVER, alive, wait_until
from tool_tree.config import Config, ServerConfig


def _raw(tmp_path: Path, name: str, **spec: object) -> ServerConfig:
    path = tmp_path / f"{name}.json"
    tools = [{"name": f"{name}_tool", "inputSchema": {"type": "object"}}]
    path.write_text(json.dumps({"pages": [tools], **spec}), encoding="utf-8")
    return ServerConfig(name=name, command=sys.executable, args=(str(RAW_SERVER), str(path)), timeout=300)


def test_a_cancelled_generation_closes_its_servers_and_writes_nothing(tmp_path: Path) -> None:
    pid_file = tmp_path / "hung.pid"
    config = Config(
        servers=(_raw(tmp_path, "fine"), _raw(tmp_path, "hung", behavior="hang_on_list", pid_file=str(pid_file)))
    )
    tree = tmp_path / "tree"
    cancel = Cancel()
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(generate(config, tree, cancel=cancel, embeddings="off", jobs=2))
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until(pid_file.exists, "the hung server to start")
    pid = int(pid_file.read_text(encoding="utf-8"))
    assert alive(pid)
    cancel.set()
    thread.join(timeout=60)
    assert not thread.is_alive(), "generate did not stop when cancelled"
    assert len(outcome) == 1 and isinstance(outcome[0], GenerateCancelled), outcome
    assert not alive(pid)
    assert not tree.exists() or not any(tree.iterdir())


def test_a_cancel_set_before_the_run_stops_it_before_any_server_starts(tmp_path: Path) -> None:
    pid_file = tmp_path / "fine.pid"
    config = Config(servers=(_raw(tmp_path, "fine", pid_file=str(pid_file)),))
    cancel = Cancel()
    cancel.set()
    try:
        generate(config, tmp_path / "tree", cancel=cancel, embeddings="off")
    except GenerateCancelled:
        pass
    else:
        raise AssertionError("generate ran to the end though it was cancelled before it began")
    assert not (tmp_path / "tree" / "manifest.json").exists()
