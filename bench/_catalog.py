"""Configs of many small Python MCP servers (`bench/servers/catalog_server.py`), each serving one
server's tools of the 527-tool LiveMCPBench catalog (70 servers), repeated and renamed as needed."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import ROOT, corpus

SERVER = ROOT / "bench" / "servers" / "catalog_server.py"


def catalog_servers() -> list[dict[str, Any]]:
    """One entry per server of the catalog: name, description, raw tools."""
    data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    out = []
    for entry in data:
        for name, body in entry["tools"].items():
            out.append({"name": name, "description": entry.get("description", ""), "tools": body.get("tools", [])})
    return out


def write_config(folder: Path, count: int, *, extra_tools: Sequence[dict[str, Any]] = ()) -> tuple[Path, list[str]]:
    """``count`` servers and a tooltree.yaml in ``folder`` starting them; returns the config and the server names.

    ``extra_tools`` are served by every server besides its catalog tools.
    """
    base = catalog_servers()
    lines = ["servers:"]
    names = []
    for i in range(count):
        spec = dict(base[i % len(base)])
        spec["name"] = f"{spec['name']}-{i // len(base)}" if i >= len(base) else spec["name"]
        spec["tools"] = [*spec["tools"], *extra_tools]
        path = folder / f"server{i:03d}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        name = f"s{i:03d}-{spec['name']}"
        names.append(name)
        lines += [
            f"  {name}:",
            f"    command: {json.dumps(sys.executable)}",
            f"    args: [{json.dumps(str(SERVER))}, {json.dumps(str(path))}]",
        ]
    config = folder / "tooltree.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config, names
