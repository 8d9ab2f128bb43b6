"""`tooltree serve` between a server's notice that its tools changed and its own regeneration of that server's part
of the tree (`tooltree_cli.serve_follow.Follow.due`): a call of a tool the server changed says that serve regenerates
it and when, not to regenerate the tree.

Real parts: `tooltree serve` over stdio in front of tests/servers/shifting_server.py, whose tools change on a call
(``shift``) and which says so; passthrough calls only (no sandbox is started).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.serve.raw_stdio import RawStdio
from tests.support import TEST_OWNER
from tooltree_cli.main import main

SHIFTING = Path(__file__).resolve().parents[1] / "servers" / "shifting_server.py"
NOW = "the tools, prompts and resources of shifting as they are now"


def _call(raw: RawStdio, request_id: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    raw.send({"id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    result = raw.wait_for(lambda m: m.get("id") == request_id, f"the result of {name}")["result"]
    assert isinstance(result, dict)
    return result


def _echo(*required: str) -> dict[str, object]:
    properties = {name: {"type": "string"} for name in required}
    return {"echo": {"type": "object", "properties": properties, "required": list(required)}}


def test_a_tool_the_server_changed_before_serve_regenerated_it_says_serve_is_regenerating_it(tmp_path: Path) -> None:
    # Before: "review the change (`tooltree generate-tree … --check --server shifting`) and regenerate the tree with
    # `tooltree generate-tree …`", though serve regenerates that part by itself (each server at most once per 30 s).
    config, tree = tmp_path / "tooltree.yaml", tmp_path / "tree"
    args = json.dumps([str(SHIFTING), str(tmp_path / "tools.json")])
    config.write_text(
        f"servers:\n  shifting:\n    command: {json.dumps(sys.executable)}\n    args: {args}\n"
        'serve:\n  warm: 0\n  passthrough: ["shifting.echo", "shifting.shift"]\n',
        encoding="utf-8",
    )
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree)]
    raw = RawStdio(argv, {"TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "PATH": "/usr/local/bin:/usr/bin:/bin"})
    try:
        raw.wait_for_stderr(f"{tree} is up to date")  # the refresh serve starts with
        raw.initialize()
        assert _call(raw, 2, "shifting__shift", {"tools": _echo("text")}).get("isError") is not True
        raw.wait_for_stderr(f"tooltree serve: sessions from now on get {NOW}")  # the first: a second after it said so
        assert _call(raw, 3, "shifting__shift", {"tools": _echo("text", "n")}).get("isError") is not True
        refused = _call(raw, 4, "shifting__echo", {"text": "x"})  # as the tree has it: not within 30 s of the first
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    said = json.dumps(refused)
    assert refused.get("isError") is True, refused
    assert "shifting.echo changed since the tree was generated: its parameters; tooltree serve is regenerating " in said
    assert "shifting's part of the tree, as the server said its tools changed (due in about " in said, said
    assert "generate-tree" not in said
