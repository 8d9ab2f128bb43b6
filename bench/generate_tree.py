"""Benchmark `generate-tree`: whole-process times and the size of what the model reads first.

    python bench/generate_tree.py [--runs 5] [--live]

- 527 real tools (``livemcpbench/tools.json``) rendered from snapshot; target ≤ 1 s.
- 10,000 synthetic tools (the 527 real schemas repeated across 20 servers); target ≤ 10 s.
- a no-op rerun of the 527-tool tree; target ≤ 0.3 s.
- ``--live``: generation against the six real servers vs the slowest single server's connect+list.
- sizes: characters of all tool definitions vs ``INDEX.md`` and the per-server READMEs.

Every run above passes ``--embeddings off``, so the numbers stay comparable whether or not the
embedding model is installed. The cost of embeddings is measured on its own, when the model is
installed: a fresh 527-tool tree and the sample servers' tree with ``--embeddings on`` vs ``off``,
and a no-op rerun with embeddings (vectors are reused, the model is not loaded).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, corpus, positive_int, print_table, summary, time_process, write_json

sys.path.insert(0, str(ROOT))
from tests.support import sample_config_yaml


def livemcpbench_snapshots(dest: Path, copies: int = 1) -> int:
    """Write one snapshot file per server of the corpus (``copies`` times, renamed); returns the tool count."""
    data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    dest.mkdir(parents=True, exist_ok=True)
    count = 0
    for copy in range(copies):
        for entry in data:
            for server_name, body in entry["tools"].items():
                name = server_name if copies == 1 else f"{server_name}-{copy}"
                tools = body.get("tools", [])
                info: dict[str, Any] = {"description": entry.get("description", "")}
                snap = {"server": name, "info": info, "tools": tools}
                (dest / f"{name}.json").write_text(json.dumps(snap), encoding="utf-8")
                count += len(tools)
    return count


def synthetic_snapshots(dest: Path, target: int = 10_000) -> int:
    """About ``target`` tools: the real schemas renamed and spread over 20 servers."""
    data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    real = [t for e in data for body in e["tools"].values() for t in body.get("tools", [])]
    dest.mkdir(parents=True, exist_ok=True)
    per_server = target // 20
    for s in range(20):
        tools = []
        for i in range(per_server):
            t = dict(real[(s * per_server + i) % len(real)])
            t["name"] = f"{t['name']}_{s}_{i}"
            tools.append(t)
        (dest / f"synthetic{s}.json").write_text(
            json.dumps({"server": f"synthetic{s}", "info": {}, "tools": tools}), encoding="utf-8"
        )
    return per_server * 20


def cli(*args: str, embeddings: str = "off") -> list[str]:
    return [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--embeddings", embeddings, *args]


def sizes(tree: Path, snapshots: Path) -> dict[str, int]:
    definitions = 0
    for snap in snapshots.glob("*.json"):
        for tool in json.loads(snap.read_text(encoding="utf-8"))["tools"]:
            definitions += len(json.dumps(tool, ensure_ascii=False))
    index = len((tree / "servers" / "INDEX.md").read_text(encoding="utf-8"))
    readmes = sum(len(p.read_text(encoding="utf-8")) for p in (tree / "servers").glob("*/README.md"))
    return {"definitions_chars": definitions, "index_chars": index, "readmes_chars": readmes}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--live", action="store_true", help="also time the six real servers (make real-servers)")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        snap527 = work / "snap527"
        n527 = livemcpbench_snapshots(snap527)
        tree = work / "tree527"

        def fresh() -> list[float]:
            times = []
            for _ in range(args.runs):
                shutil.rmtree(tree, ignore_errors=True)
                times += time_process(cli("--from-snapshot", str(snap527), "--out", str(tree)), 1)
            return times

        t = summary(fresh())
        results["render_527"] = {"tools": n527, **t}
        rows.append([f"render {n527} tools from snapshot", f"{t['median']:.3f}", f"{t['p90']:.3f}", "≤ 1 s"])

        t = summary(time_process(cli("--from-snapshot", str(snap527), "--out", str(tree)), args.runs))
        results["noop_527"] = t
        rows.append(["no-op rerun (527 tools)", f"{t['median']:.3f}", f"{t['p90']:.3f}", "≤ 0.3 s"])
        results["sizes_527"] = sizes(tree, snap527)

        snap10k = work / "snap10k"
        n10k = synthetic_snapshots(snap10k)
        tree10k = work / "tree10k"
        times = []
        for _ in range(max(1, args.runs // 2)):
            shutil.rmtree(tree10k, ignore_errors=True)
            times += time_process(cli("--from-snapshot", str(snap10k), "--out", str(tree10k)), 1)
        t = summary(times)
        results["render_10k"] = {"tools": n10k, **t}
        rows.append([f"render {n10k} synthetic tools", f"{t['median']:.3f}", f"{t['p90']:.3f}", "≤ 10 s"])

        if args.live:
            results["live"] = live(work, args.runs)
            lv = results["live"]
            rows.append(
                [
                    "live: six real servers (all)",
                    f"{lv['all']['median']:.3f}",
                    f"{lv['all']['p90']:.3f}",
                    "≤ slowest + 0.5 s",
                ]
            )
            rows.append([f"live: slowest single ({lv['slowest']})", f"{lv['slowest_median']:.3f}", "", ""])

        results["embeddings"] = embeddings(work, snap527, max(1, args.runs // 2), rows)

    print_table("generate-tree (whole process, seconds)", ["case", "median", "p90", "target"], rows)
    s = results["sizes_527"]
    print_table(
        "what the model reads first (527 tools)",
        ["file", "characters", "% of all tool definitions"],
        [
            ["all tool definitions (JSON)", s["definitions_chars"], "100%"],
            ["servers/INDEX.md", s["index_chars"], f"{100 * s['index_chars'] / s['definitions_chars']:.2f}%"],
            ["all per-server READMEs", s["readmes_chars"], f"{100 * s['readmes_chars'] / s['definitions_chars']:.2f}%"],
        ],
    )
    write_json("generate_tree.json", results)


def embeddings(work: Path, snap527: Path, runs: int, rows: list[list[Any]]) -> dict[str, Any]:
    """Fresh generation with and without tool embeddings, and a no-op rerun with them (adds rows)."""
    from tool_tree.search import SearchError
    from tool_tree.search._encoder import model_info

    try:
        model = model_info()
    except SearchError as e:
        print(f"embedding costs not measured: {e}")
        return {"skipped": str(e)}
    sample = work / "sample"
    config = work / "sample.yaml"
    config.write_text(sample_config_yaml("docs", "crm", "media"), encoding="utf-8")
    time_process(cli("--config", str(config), "--out", str(sample)), 1)
    out: dict[str, Any] = {"model": model.model_id}
    for name, snapshots in (("sample", sample / "snapshots"), ("527", snap527)):
        tree = work / f"emb-{name}"
        for mode in ("off", "on"):
            times = []
            for _ in range(runs):
                shutil.rmtree(tree, ignore_errors=True)
                times += time_process(cli("--from-snapshot", str(snapshots), "--out", str(tree), embeddings=mode), 1)
            t = summary(times)
            out[f"{name}_{mode}"] = t
            tools = len(json.loads((tree / "manifest.json").read_text(encoding="utf-8"))["tools"])
            rows.append(
                [f"embeddings {mode}: fresh {name} tree ({tools} tools)", f"{t['median']:.3f}", f"{t['p90']:.3f}", ""]
            )
        t = summary(time_process(cli("--from-snapshot", str(snapshots), "--out", str(tree), embeddings="on"), runs))
        out[f"{name}_noop_on"] = t
        rows.append([f"embeddings on: no-op rerun ({name})", f"{t['median']:.3f}", f"{t['p90']:.3f}", ""])
    return out


def live(work: Path, runs: int) -> dict[str, Any]:
    import os

    env = dict(os.environ)
    env.setdefault("TOOLTREE_REAL_SERVERS", str(ROOT / ".real-servers"))
    config = ROOT / "tests" / "real_servers.yaml"
    tree = work / "live"
    all_times = time_process(cli("--config", str(config), "--out", str(tree)), runs, env=env)
    names = ["everything", "filesystem", "memory", "git", "time", "fetch"]
    singles = {}
    for n in names:
        singles[n] = summary(
            time_process(cli("--config", str(config), "--out", str(work / f"live-{n}"), "--server", n), runs, env=env)
        )["median"]
    slowest = max(singles, key=lambda k: singles[k])
    return {
        "all": summary(all_times),
        "singles": singles,
        "slowest": slowest,
        "slowest_median": singles[slowest],
        "measured_at": time.strftime("%Y-%m-%d"),
    }


if __name__ == "__main__":
    main()
