"""A pre-filtered agent on a synthetic catalog of 8,020 tools that no default was tuned on.

    python bench/filtered_scale.py [--folder DIR] [--runs 2] [--scale 1.0]

Writes 22 servers as specs of ``tests/servers/raw_server.py`` (a fixed seed): one of 4,000 tools with 2,000-character
descriptions and 30 properties each, 20 that share the same 200 tool names, one of 20 tools with 100,000-character
descriptions; a quarter of the names hold CJK, Arabic, Hebrew, Cyrillic, emoji, full-width or combining characters.
Then ``generate-tree --embeddings off`` (timed, with its peak resident set), and ``--runs`` times, each in a fresh
process, the making of ``Agent(config, tree=..., mode="filtered", prefilter="local")``: what a ``tooltree agent --mode
filtered`` run does before its first request (snapshots read, schemas checked, the pre-filter's catalog and siblings
built). ``--scale`` multiplies every tool count (0.1 for a quick run). Prints a table and writes
``bench/out/filtered_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, positive_int, print_table, write_json

RAW_SERVER = ROOT / "tests" / "servers" / "raw_server.py"
WORDS = (  # noqa: SIM905 (a list of 35 words, written as text)
    "alpha beta gamma delta record file issue user channel message invoice order customer ticket weather forecast "
    "calendar event email draft payment refund shipment warehouse inventory report export import sync search filter "
    "sort archive restore backup"
).split()
SCRIPTS = ["数据", "検索", "파일", "ملف", "קובץ", "🚀", "📦", "Ωmega", "данные", "ﷺ", "ａｂｃ", "e\u0301", "\u200f"]
MAKE_AGENT = """
import sys, time
start = time.perf_counter()
from agent import Agent
from tool_tree.config import load_config
Agent(load_config(sys.argv[1]), tree=sys.argv[2], mode="filtered", prefilter="local")
print(time.perf_counter() - start)
"""


def catalog(folder: Path, scale: float) -> int:
    """Write the servers' specs and a config naming them into ``folder``; the number of tools."""
    rng = random.Random(7)

    def text(chars: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(max(chars // 7, 1))).capitalize() + "."

    def schema(properties: int) -> dict[str, object]:
        props: dict[str, object] = {}
        for i in range(properties):
            kind = rng.choice(["string", "integer", "boolean", "array", "object"])
            prop: dict[str, object] = {"type": kind, "description": text(200)}
            if kind == "array":
                prop["items"] = {"type": "object", "properties": {"id": {"type": "string"}, "n": {"type": "number"}}}
            if kind == "string" and i % 3 == 0:
                prop["enum"] = [f"v{j}" for j in range(20)]
            props[f"{rng.choice(WORDS)}_{i}"] = prop
        return {"type": "object", "properties": props, "required": list(props)[:3]}

    def name(i: int) -> str:
        base = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{i}"
        return f"{rng.choice(SCRIPTS)}_{base}{rng.choice(SCRIPTS)}" if i % 4 == 0 else base

    def count(n: int) -> int:
        return max(round(n * scale), 1)

    specs = folder / "specs"
    specs.mkdir(parents=True, exist_ok=True)
    servers: dict[str, list[dict[str, object]]] = {}
    servers["big"] = [
        {"name": name(i), "description": text(2000), "inputSchema": schema(30)} for i in range(count(4000))
    ]
    common = [name(i) for i in range(count(200))]
    for s in range(20):
        servers[f"s{s:02d}"] = [{"name": n, "description": text(600), "inputSchema": schema(8)} for n in common]
    servers["huge"] = [
        {"name": f"huge_{i}" if i % 2 else f"巨大_{i}", "description": text(100_000), "inputSchema": schema(5)}
        for i in range(20)
    ]
    lines = ["servers:"]
    for server, tools in servers.items():
        spec = specs / f"{server}.json"
        spec.write_text(json.dumps({"pages": [tools[i : i + 500] for i in range(0, len(tools), 500)]}), "utf-8")
        lines.append(f"  {server}: {{command: {sys.executable}, args: [{RAW_SERVER}, {spec}], timeout: 300}}")
    (folder / "tooltree.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sum(len(tools) for tools in servers.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, help="where the catalog and its tree go (default: a temporary folder)")
    parser.add_argument("--runs", type=positive_int, default=2)
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="filtered-scale-") as scratch:
        folder = args.folder or Path(scratch)
        tools = catalog(folder, args.scale)
        config, tree = folder / "tooltree.yaml", folder / "tree"
        argv = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--config", str(config), "--out", str(tree)]
        start = time.perf_counter()
        subprocess.run([*argv, "--embeddings", "off"], check=True, capture_output=True, cwd=ROOT)
        generate_s = time.perf_counter() - start
        generate_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        made = []
        for _ in range(args.runs):
            run = [sys.executable, "-c", MAKE_AGENT, str(config), str(tree)]
            proc = subprocess.run(run, check=True, capture_output=True, text=True, cwd=ROOT)
            made.append(float(proc.stdout.strip().splitlines()[-1]))
    rows = [
        ["generate-tree --embeddings off", f"{generate_s:.1f} s", f"peak {generate_peak / 2**20:,.0f} MiB"],
        ["Agent(mode='filtered', prefilter='local') made", f"median {statistics.median(made):.1f} s",
         ", ".join(f"{m:.1f}" for m in made)],
    ]  # fmt: skip
    print_table(f"A filtered agent over {tools:,} synthetic tools (scale {args.scale:g})", ["step", "time", ""], rows)
    write_json(
        "filtered_scale.json",
        {"tools": tools, "scale": args.scale, "generate_s": generate_s, "generate_peak_bytes": generate_peak,
         "agent_made_s": made},
    )  # fmt: skip


if __name__ == "__main__":
    main()
