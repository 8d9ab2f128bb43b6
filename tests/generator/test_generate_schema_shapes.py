"""Shapes real MCP servers emit that the plainer tests do not: a tool known only by its title (MCP
2025-06-18), a model referenced through a lone ``allOf`` (pydantic v1, FastAPI), extra keys declared by
``patternProperties``. Real servers: the official SDK's ``MCPServer`` and the raw JSON-RPC server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.render import render_stub
from tests.generator.test_generate import raw_server, run_cli
from tool_tree.config import load_config
from tool_tree.pool import BackgroundPool
from tool_tree.runtime import set_transport

REPO = Path(__file__).resolve().parents[2]
TITLED = REPO / "tests" / "servers" / "titled_server.py"
MYPY = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]


def tree_of(folder: Path, name: str, script: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The tree `generate-tree` writes in ``folder`` for one server: ``script`` run with this Python."""
    config = folder / "c.yaml"
    args = f"[{json.dumps(str(script))}]"
    config.write_text(f"servers:\n  {name}:\n    command: {json.dumps(sys.executable)}\n    args: {args}\n", "utf-8")
    out = folder / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    return out


def test_a_tool_with_only_a_title_is_summarised_by_it_in_the_readme_and_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tree_of(tmp_path, "titled", TITLED, capsys)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert {t["tool"]: t["summary"] for t in manifest["tools"]} == {
        "ping_hosts": "Ping every host on the network",  # the tool's own title
        "flush_cache": "Flush the cache",  # the title in its annotations
    }
    readme = (out / "servers/titled/README.md").read_text(encoding="utf-8")
    assert "- ping_hosts — Ping every host on the network\n" in readme
    assert "- flush_cache — Flush the cache\n" in readme
    assert "(no description)" not in readme
    stub = (out / "servers/titled/ping_hosts.py").read_text(encoding="utf-8")
    assert stub.startswith('"""titled.ping_hosts — Ping every host on the network\n')


def _address_tool() -> dict[str, Any]:
    """pydantic v1 and FastAPI wrap a reference in ``allOf`` to give it a description (here, recursively)."""
    address = {
        "title": "Address",
        "type": "object",
        "properties": {
            "street": {"title": "Street", "type": "string"},
            "forward_to": {
                "title": "Forward To",
                "description": "Where mail goes next.",
                "allOf": [{"$ref": "#/definitions/Address"}],
            },
        },
        "required": ["street"],
    }
    return {
        "name": "ship",
        "inputSchema": {
            "title": "ShipArguments",
            "type": "object",
            "definitions": {"Address": address},
            "properties": {
                "billing": {"description": "Billing address.", "allOf": [{"$ref": "#/definitions/Address"}]},
                "shipping": {"allOf": [{"$ref": "#/definitions/Address"}], "nullable": True},
                "home": {"$ref": "#/definitions/Address"},
            },
            "required": ["billing"],
        },
    }


def test_a_model_referenced_through_a_lone_all_of_is_its_one_typeddict(tmp_path: Path) -> None:
    stub = render_stub(server="shop", tool=_address_tool(), function="ship")
    assert stub.warnings == []
    assert stub.source.count("(TypedDict):") == 1
    assert "class Address(TypedDict):" in stub.source
    assert "    forward_to: NotRequired[Address]\n" in stub.source
    assert "billing: Address," in stub.source
    assert "shipping: Address | None | NotGiven = NOT_GIVEN," in stub.source
    assert "home: Address | NotGiven = NOT_GIVEN," in stub.source
    assert "billing: Billing address." in stub.source
    (tmp_path / "ship.py").write_text(stub.source, encoding="utf-8")
    (tmp_path / "use.py").write_text(
        "from ship import ship\n"
        "ship(billing={'street': 'a', 'forward_to': {'street': 'b', 'forward_to': {'street': 'c'}}}, shipping=None)\n",
        encoding="utf-8",
    )
    env = {**os.environ, "MYPYPATH": str(REPO)}
    checked = subprocess.run([*MYPY, "use.py", "ship.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


def test_keys_matching_pattern_properties_are_further_arguments_sent_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = {
        "name": "label",
        "inputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string"}},
            "patternProperties": {"^x-": {"type": "integer"}, "^tag_": {"type": "string"}},
            "additionalProperties": False,
            "required": ["id"],
        },
    }
    config = tmp_path / "c.yaml"
    config.write_text("servers:\n" + raw_server(tmp_path, "echo", {"pages": [[labels]]}), encoding="utf-8")
    out = tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    source = (out / "servers/echo/label.py").read_text(encoding="utf-8")
    assert "def label(*, id: str, **arguments: int | str) -> ToolResult:" in source
    assert "keys matching '^x-', '^tag_'" in source
    sys.path.insert(0, str(out))
    try:
        from servers.echo import label  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "servers" or m.startswith("servers.")]:
            del sys.modules[name]
    with BackgroundPool(load_config(config).enabled_servers) as pool:
        previous = set_transport(pool.call)
        try:
            sent = label(id="r1", **{"x-priority": 2, "tag_color": "red"}).json()
        finally:
            set_transport(previous)
    assert sent == {"id": "r1", "x-priority": 2, "tag_color": "red"}
