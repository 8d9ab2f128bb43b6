"""`generate-tree` and search on catalogs bigger or stranger than the 10,000-tool benchmark.

    python bench/scale_shapes.py [--shapes one_server,many_servers,...] [--scale 1.0]

Each shape is written as snapshots (the real LiveMCPBench schemas where a real schema fits), then
``generate-tree --from-snapshot --embeddings off`` runs twice in its own process: fresh and as a
no-op rerun, each timed with its peak resident set (of the process and its render workers). Then:
the sizes of what the model reads (``servers/INDEX.md``, the largest per-server ``README.md``) and of
``manifest.json`` and ``search_index.json``, and lexical search in-process (index load, query p50 and
max over ten queries, three times each). ``--scale`` multiplies every count (0.1 for a quick run).

Shapes (counts at ``--scale 1``):

- ``one_server``: 50,000 tools in one server (the generator keeps the first 20,000);
- ``many_servers``: 3,000 servers of 5 tools;
- ``wide``: 100 tools of 2,000 properties each;
- ``deep``: 100 tools whose input nests objects 60 levels deep;
- ``enum``: 100 tools with an enum of 10,000 values;
- ``long_descriptions``: 1,000 tools with a 50,000-character description each (no sentence end);
- ``colliding_names``: 20,000 tools whose names differ only in a character that is not ASCII, so
  every one maps to the same identifier (``get_item``, ``get_item_2``, …).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import ROOT, corpus, print_table, write_json

sys.path.insert(0, str(ROOT))

WORDS = ["alpha", "beta", "gamma", "delta", "record", "file", "issue", "user", "channel", "message", "invoice", "order"]
QUERIES = [
    "send a message to a channel",
    "create an invoice for a customer and email it",
    "get the weather forecast",
    "list files in a directory",
    "search github issues",
    "translate text",
    "record",
    "get item",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "file " * 50,
]


def real_tools() -> list[dict[str, Any]]:
    data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    return [t for e in data for body in e["tools"].values() for t in body.get("tools", [])]


def _write(dest: Path, server: str, tools: list[dict[str, Any]], description: str = "") -> None:
    info = {"description": description} if description else {}
    snap = {"server": server, "info": info, "tools": tools}
    (dest / f"{server}.json").write_text(json.dumps(snap), encoding="utf-8")


def one_server(dest: Path, scale: float) -> None:
    real = real_tools()
    tools = [{**real[i % len(real)], "name": f"{real[i % len(real)]['name']}_{i}"} for i in range(int(50_000 * scale))]
    _write(dest, "big", tools, "A very big server.")


def many_servers(dest: Path, scale: float) -> None:
    real = real_tools()
    for s in range(int(3_000 * scale)):
        tools = [real[(5 * s + i) % len(real)] for i in range(5)]
        words = f"{WORDS[s % len(WORDS)]} and {WORDS[7 * s % len(WORDS)]}"
        _write(dest, f"srv{s:04d}", tools, f"Server {s} for {words} management; it does many things.")


def wide(dest: Path, scale: float) -> None:
    props = {f"field_{j}_{WORDS[j % len(WORDS)]}": {"type": "string", "description": f"Field {j}"} for j in range(2000)}
    schema = {"type": "object", "properties": props, "required": list(props)[:10]}
    count = int(100 * scale)
    tools = [{"name": f"wide_{i}", "description": "Many parameters.", "inputSchema": schema} for i in range(count)]
    _write(dest, "wide", tools)


def deep(dest: Path, scale: float) -> None:
    schema: dict[str, Any] = {"type": "string"}
    for d in range(60):
        props = {f"level{d}": schema, "note": {"type": "string"}}
        schema = {"type": "object", "description": f"level {d}", "properties": props, "required": [f"level{d}"]}
    root = {"type": "object", "properties": {"root": schema}}
    _write(dest, "deep", [{"name": f"deep_{i}", "inputSchema": root} for i in range(int(100 * scale))])


def enum(dest: Path, scale: float) -> None:
    tools = [
        {
            "name": f"enum_{i}",
            "description": "A big enum.",
            "inputSchema": {
                "type": "object",
                "properties": {"code": {"type": "string", "enum": [f"CODE_{i}_{v:05d}" for v in range(10_000)]}},
                "required": ["code"],
            },
        }
        for i in range(int(100 * scale))
    ]
    _write(dest, "enums", tools)


def long_descriptions(dest: Path, scale: float) -> None:
    rnd = random.Random(1)
    real = real_tools()
    tools = []
    for i in range(int(1_000 * scale)):
        text = " ".join(rnd.choice(WORDS) for _ in range(9_000))[:50_000]
        tools.append({**real[i % len(real)], "name": f"{real[i % len(real)]['name']}_{i}", "description": text})
    _write(dest, "longdesc", tools)


def colliding_names(dest: Path, scale: float) -> None:
    tools = [
        {"name": f"get_item_{chr(0x4E00 + i)}", "description": f"Get item {i}.", "inputSchema": {"type": "object"}}
        for i in range(int(20_000 * scale))
    ]
    _write(dest, "collide", tools)


SHAPES: dict[str, Callable[[Path, float], None]] = {
    f.__name__: f for f in (one_server, many_servers, wide, deep, enum, long_descriptions, colliding_names)
}


def timed(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes, the largest of the process and its children) of one run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryFile() as err:  # not a pipe: nothing reads it until the process has ended
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 3):
            err.seek(0)
            sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{err.read().decode('utf-8', 'replace')[-3000:]}")
    return seconds, usage.ru_maxrss * 1024


def search_times(tree: Path) -> dict[str, float]:
    from tool_tree.search import SearchIndex

    start = time.perf_counter()
    index = SearchIndex.load(tree)
    load = time.perf_counter() - start
    times = []
    for _ in range(3):
        for q in QUERIES:
            start = time.perf_counter()
            index.search(q, limit=5)
            times.append(time.perf_counter() - start)
    return {"load_ms": load * 1000, "p50_ms": statistics.median(times) * 1000, "max_ms": max(times) * 1000}


def measure(name: str, work: Path, scale: float) -> dict[str, Any]:
    snapshots, tree = work / f"snap-{name}", work / f"tree-{name}"
    snapshots.mkdir()
    SHAPES[name](snapshots, scale)
    argv = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--embeddings", "off"]
    argv += ["--from-snapshot", str(snapshots), "--out", str(tree)]
    fresh, fresh_rss = timed(argv)
    noop, noop_rss = timed(argv)
    readmes = [len(p.read_text(encoding="utf-8")) for p in (tree / "servers").glob("*/README.md")]
    manifest = json.loads((tree / "manifest.json").read_text(encoding="utf-8"))
    return {
        "shape": name,
        "servers": len(manifest["servers"]),
        "tools": len(manifest["tools"]),
        "fresh_s": fresh,
        "fresh_rss_mb": fresh_rss / 2**20,
        "noop_s": noop,
        "noop_rss_mb": noop_rss / 2**20,
        "index_md_chars": len((tree / "servers" / "INDEX.md").read_text(encoding="utf-8")),
        "largest_readme_chars": max(readmes),
        "manifest_mb": (tree / "manifest.json").stat().st_size / 2**20,
        "search_index_mb": (tree / "search_index.json").stat().st_size / 2**20,
        "search": search_times(tree),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of: {', '.join(SHAPES)}")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every count (0.1 for a quick run)")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="tooltree-scale-") as tmp:
        for name in args.shapes.split(","):
            results.append(measure(name, Path(tmp), args.scale))
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print_table(
        f"generate-tree --from-snapshot --embeddings off, whole process (scale {args.scale:g})",
        ["shape", "servers", "tools", "fresh s", "peak MB", "no-op s", "INDEX.md", "largest README", "index MB",
         "load ms", "query p50 / max ms"],
        [
            [r["shape"], r["servers"], r["tools"], f"{r['fresh_s']:.2f}", f"{r['fresh_rss_mb']:.0f}",
             f"{r['noop_s']:.2f}", r["index_md_chars"], r["largest_readme_chars"], f"{r['search_index_mb']:.1f}",
             f"{r['search']['load_ms']:.0f}", f"{r['search']['p50_ms']:.2f} / {r['search']['max_ms']:.2f}"]
            for r in results
        ],
    )  # fmt: skip
    write_json("scale_shapes.json", {"scale": args.scale, "results": results})


if __name__ == "__main__":
    main()
