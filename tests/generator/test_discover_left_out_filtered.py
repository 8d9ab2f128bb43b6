"""A malformed tool that the server's ``include``/``exclude`` leaves out of the tree is not warned about.

Before: ``generate-tree`` warned ``left out tool 'x', malformed: …`` for every malformed tool a server listed, also
one the user had already excluded (or not included), each run: a warning about a tool they had chosen not to have.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from generator.discover import discover_one
from tool_tree.config import ServerConfig

RAW = Path(__file__).resolve().parents[1] / "servers" / "raw_server.py"
_OBJECT = {"type": "object", "properties": {}}
TOOLS = [
    {"name": "get_user", "description": "Get a user.", "inputSchema": _OBJECT},
    {"name": "get_broken", "description": "An output schema without a type.", "inputSchema": _OBJECT,
     "outputSchema": {"$ref": "#/$defs/R", "$defs": {"R": {"type": "object"}}}},
    {"name": "admin_broken", "description": "No input schema."},
]  # fmt: skip


def _warnings(tmp_path: Path, **filters: tuple[str, ...]) -> list[str]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pages": [TOOLS]}), encoding="utf-8")
    server = ServerConfig(name="svc", command=sys.executable, args=(str(RAW), str(spec)), timeout=20, **filters)
    found = anyio.run(discover_one, server)
    assert found.ok, found.error
    return found.warnings


def test_every_malformed_tool_is_named_without_filters(tmp_path: Path) -> None:
    warned = _warnings(tmp_path)
    assert len(warned) == 2
    assert warned[0].startswith("svc: left out tool 'get_broken', malformed: outputSchema.type")
    assert warned[1].startswith("svc: left out tool 'admin_broken', malformed: inputSchema")


def test_a_malformed_tool_the_filters_leave_out_is_not_named(tmp_path: Path) -> None:
    assert _warnings(tmp_path, include=("get_user",)) == []
    warned = _warnings(tmp_path, exclude=("admin_*",))
    assert len(warned) == 1 and warned[0].startswith("svc: left out tool 'get_broken', malformed")
