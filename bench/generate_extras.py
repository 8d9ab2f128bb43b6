"""Benchmark the costs generate-tree and serve took on with the API-change report, prompts and resources, passthrough.

    python bench/generate_extras.py [--runs 3] [--tools 10000] [--servers 200]

All on synthetic snapshots (no server is started, nothing from the network; ``--embeddings off``):

- the API-change report (`generator.api_changes`): a tree of ``--tools`` tools over 4 servers regenerated from
  snapshots with (a) nothing changed, (b) a new optional parameter in every tool, (c) a new required parameter in
  every tool (breaking). Each regeneration runs in its own process, on a fresh copy of the tree: the ``generate()``
  call's time, the comparison's (the ``api_changes`` call generate makes), the peak resident set of the process
  (``os.wait4``) and of its largest forked worker, with the comparison forked (`generator.workers.forked_map`) or
  serial (``PARALLEL_THRESHOLD`` raised for the comparison only; rendering stays forked). Median of ``--runs``,
  the cases and modes interleaved;
- prompts and resources (`tool_tree.snapshot_lists`): the snapshot's bytes and a fresh generation's time for a
  server of 20 tools with none vs 1,000 prompts, 1,000 resources and 20 templates; and serve reading them back
  (`agent.serve.upstream_lists.UpstreamExtras` built from the tree) for ``--servers`` servers with none, 20 and 200
  of each per server;
- serve's passthrough start (`agent.serve.passthrough.Passthrough`) on the ``--servers``-server tree, 9 tools from
  3 servers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import ROOT, positive_int, print_table, write_json

sys.path.insert(0, str(ROOT))

CASES = ("unchanged", "optional", "breaking")
MODES = ("forked", "serial")
VERBS = ["get", "list", "create", "update", "delete", "search", "export", "archive"]
NOUNS = ["record", "invoice", "file", "issue", "user", "channel", "message", "order"]


# ---- synthetic snapshots ------------------------------------------------------------------------------------------


def tool(i: int, change: str = "unchanged") -> dict[str, Any]:
    """A tool of five parameters of several types; ``change`` adds an optional or a required parameter."""
    props: dict[str, Any] = {
        "query": {"type": "string", "description": "What to look for."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many."},
        "mode": {"type": "string", "enum": ["fast", "full"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
        "since": {"type": "string", "format": "date-time"},
    }
    required = ["query"]
    if change == "optional":
        props["note"] = {"type": "string", "description": "A note kept with it."}
    elif change == "breaking":
        props["reason"] = {"type": "string", "description": "Why."}
        required.append("reason")
    name = f"{VERBS[i % len(VERBS)]}_{NOUNS[i // len(VERBS) % len(NOUNS)]}_{i}"
    return {
        "name": name,
        "description": f"{VERBS[i % len(VERBS)].capitalize()} a {NOUNS[i // len(VERBS) % len(NOUNS)]} (number {i}).",
        "inputSchema": {"type": "object", "properties": props, "required": required},
    }


def lists(server: str, count: int) -> dict[str, list[dict[str, Any]]]:
    """``count`` prompts and resources and ``count // 50`` templates (at least one when ``count``), as listed."""
    if not count:
        return {}
    prompts = [
        {
            "name": f"prompt_{i}",
            "description": f"Write a summary of item {i} for the weekly report.",
            "arguments": [
                {"name": "topic", "description": "What it is about", "required": True},
                {"name": "tone", "description": "formal or casual"},
            ],
        }
        for i in range(count)
    ]
    resources = [
        {
            "uri": f"{server}://docs/{i}",
            "name": f"doc_{i}",
            "description": f"Document {i} of the {server} knowledge base.",
            "mimeType": "text/markdown",
        }
        for i in range(count)
    ]
    templates = [
        {"uriTemplate": f"{server}://items{i}/{{id}}", "name": f"item_{i}", "description": "An item by its id."}
        for i in range(max(1, count // 50))
    ]
    return {"prompts": prompts, "resources": resources, "resourceTemplates": templates}


def write_snapshot(dest: Path, server: str, tools: list[dict[str, Any]], extra_lists: int = 0) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    snap = {"server": server, "info": {"description": f"The {server} server."}, **lists(server, extra_lists)}
    snap["tools"] = tools
    (dest / f"{server}.json").write_text(json.dumps(snap), encoding="utf-8")


def api_snapshots(work: Path, total: int) -> dict[str, Path]:
    per_server = total // 4
    out = {}
    for case in CASES:
        folder = work / f"snap-{case}"
        for s in range(4):
            write_snapshot(folder, f"svc{s}", [tool(s * per_server + i, case) for i in range(per_server)])
        out[case] = folder
    return out


# ---- 1. the API-change report, one regeneration per process ---------------------------------------------------------


def child(tree: str, snapshots: str, mode: str) -> None:
    """Regenerate ``tree`` from ``snapshots`` and print what it took (run by `regenerate` in its own process)."""
    import generator.generate as gen
    import generator.workers as workers

    timed: dict[str, Any] = {"compare_s": 0.0, "threads": 0}
    real = gen.api_changes

    def api_changes(*args: Any, **kwargs: Any) -> Any:
        timed["threads"] = threading.active_count()  # forked_map forks only from a single thread
        threshold = workers.PARALLEL_THRESHOLD
        if mode == "serial":
            workers.PARALLEL_THRESHOLD = sys.maxsize
        start = time.perf_counter()
        try:
            found = real(*args, **kwargs)
        finally:
            timed["compare_s"] += time.perf_counter() - start
            workers.PARALLEL_THRESHOLD = threshold
        return found

    gen.api_changes = api_changes  # type: ignore[assignment]
    start = time.perf_counter()
    result = gen.generate(None, tree, snapshots=snapshots, embeddings="off")
    timed["run_s"] = time.perf_counter() - start
    assert not result.failed and result.report is not None, result
    timed["changes"] = len(result.api_changes)
    timed["breaking"] = sum(c.breaking for c in result.api_changes)
    timed["workers_rss"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps(timed))


def regenerate(template: Path, work: Path, snapshots: Path, mode: str) -> dict[str, Any]:
    tree = work / "run"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(template, tree)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    argv = [sys.executable, __file__, "--child", str(tree), str(snapshots), mode]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"{' '.join(argv)} failed:\n{err.read().decode('utf-8', 'replace')[-3000:]}")
        out.seek(0)
        found: dict[str, Any] = json.loads(out.read().decode().strip().splitlines()[-1])
    return {**found, "process_s": wall, "rss": usage.ru_maxrss * 1024}


def api_report(work: Path, total: int, runs: int) -> dict[str, Any]:
    from generator.generate import generate

    snaps = api_snapshots(work, total)
    template = work / "template"
    generate(None, template, snapshots=snaps["unchanged"], embeddings="off")
    got: dict[str, list[dict[str, Any]]] = {f"{c}/{m}": [] for c in CASES for m in MODES}
    for r in range(runs):
        for case in CASES:
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                got[f"{case}/{mode}"].append(regenerate(template, work, snaps[case], mode))
                print(f"run {r + 1}/{runs} {case} {mode}: {got[f'{case}/{mode}'][-1]}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"tools": total, "servers": 4, "runs": runs, "cases": {}}
    for key, samples in got.items():
        med = {k: statistics.median(s[k] for s in samples) for k in ("run_s", "compare_s", "process_s", "rss")}
        med["workers_rss"] = statistics.median(s["workers_rss"] for s in samples)
        med["changes"], med["breaking"] = samples[0]["changes"], samples[0]["breaking"]
        med["threads"] = max(s["threads"] for s in samples)
        med["compare_share"] = statistics.median(s["compare_s"] / s["run_s"] for s in samples)
        out["cases"][key] = {**med, "samples": samples}
    return out


# ---- 2. prompts and resources ---------------------------------------------------------------------------------------


def extras_generate(work: Path, runs: int) -> dict[str, Any]:
    from generator.generate import generate

    tools = [tool(i) for i in range(20)]
    got: dict[int, list[float]] = {0: [], 1000: []}
    size: dict[int, int] = {}
    for count in got:
        write_snapshot(work / f"snap-lists{count}", "docs", tools, count)
    for r in range(runs):
        for count in got if r % 2 == 0 else list(got)[::-1]:
            tree = work / f"tree-lists{count}"
            shutil.rmtree(tree, ignore_errors=True)
            start = time.perf_counter()
            result = generate(None, tree, snapshots=work / f"snap-lists{count}", embeddings="off")
            got[count].append(time.perf_counter() - start)
            assert not result.failed
            size[count] = (tree / "snapshots" / "docs.json").stat().st_size
    return {
        str(c): {"snapshot_bytes": size[c], "generate_s": statistics.median(t), "samples": t} for c, t in got.items()
    }


def many_servers_tree(work: Path, servers: int, per_server: int) -> Path:
    from generator.generate import generate

    snaps, tree = work / f"snap-many{per_server}", work / f"tree-many{per_server}"
    for s in range(servers):
        write_snapshot(snaps, f"srv{s:03d}", [tool(5 * s + i) for i in range(5)], per_server)
    assert not generate(None, tree, snapshots=snaps, embeddings="off").failed
    return tree


def serve_extras(trees: dict[int, Path], servers: int, runs: int) -> dict[str, Any]:
    from agent.serve.upstream_lists import UpstreamExtras
    from tool_tree.config import Config, ServerConfig

    config = Config(servers=tuple(ServerConfig(name=f"srv{s:03d}", command="-") for s in range(servers)))
    got: dict[int, list[float]] = {n: [] for n in trees}
    offered: dict[int, tuple[int, int, int]] = {}
    for r in range(runs):
        for n in trees if r % 2 == 0 else list(trees)[::-1]:
            start = time.perf_counter()
            extras = UpstreamExtras(config, trees[n], prompts=True, resources=True)
            got[n].append(time.perf_counter() - start)
            offer = extras.offer
            offered[n] = (len(offer.prompts), len(offer.resources), len(offer.templates))
    return {
        str(n): {
            "per_server": n,
            "offered": offered[n],
            "snapshots_bytes": sum(p.stat().st_size for p in (trees[n] / "snapshots").glob("*.json")),
            "build_s": statistics.median(t),
            "samples": t,
        }
        for n, t in got.items()
    }


# ---- 3. passthrough start -------------------------------------------------------------------------------------------


def passthrough_start(tree: Path, servers: int, runs: int) -> dict[str, Any]:
    from agent.serve.passthrough import Passthrough

    chosen = sorted({0, servers // 2, servers - 1})
    names = [f"srv{s:03d}.{tool(5 * s + i)['name']}" for s in chosen for i in range(3)]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        passthrough = Passthrough(tree, names)
        times.append(time.perf_counter() - start)
        assert len(passthrough.definitions) == len(names), passthrough.definitions
    return {"tools": len(names), "from_servers": len(chosen), "start_s": statistics.median(times), "samples": times}


# ---- the table ------------------------------------------------------------------------------------------------------


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(*sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=3, help="repeats of each regeneration (median)")
    parser.add_argument("--tools", type=positive_int, default=10_000, help="tools of the API-change tree (4 servers)")
    parser.add_argument("--servers", type=positive_int, default=200, help="servers of the serve trees")
    args = parser.parse_args()
    load = os.getloadavg()
    results: dict[str, Any] = {"load_before": load, "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="tooltree-extras-") as tmp:
        work = Path(tmp)
        results["api_changes"] = api_report(work, args.tools, args.runs)
        results["lists_generate"] = extras_generate(work, max(5, args.runs))
        trees = {n: many_servers_tree(work, args.servers, n) for n in (0, 20, 200)}
        results["serve_extras"] = serve_extras(trees, args.servers, max(5, args.runs))
        results["passthrough"] = passthrough_start(trees[0], args.servers, 21)
    results["load_after"] = os.getloadavg()

    api = results["api_changes"]
    rows = []
    for case in CASES:
        for mode in MODES:
            c = api["cases"][f"{case}/{mode}"]
            rows.append([case, mode, f"{c['changes']} ({c['breaking']})", f"{c['run_s']:.2f}", f"{c['compare_s']:.2f}",
                         f"{100 * c['compare_share']:.0f}%", f"{c['rss'] / 2**20:.0f}",
                         f"{c['workers_rss'] / 2**20:.0f}", c["threads"]])  # fmt: skip
    print_table(
        f"API-change report: {api['tools']} tools, 4 servers, regenerated from snapshot (median of {api['runs']})",
        ["case", "comparison", "changes (breaking)", "run s", "compare s", "share", "peak MB", "worker MB",
         "threads"],
        rows,
    )  # fmt: skip
    lg = results["lists_generate"]
    print_table(
        "a server of 20 tools: snapshot and fresh generate (in-process, median)",
        ["prompts / resources", "snapshot bytes", "generate s"],
        [[f"{n} / {n}", lg[n]["snapshot_bytes"], f"{lg[n]['generate_s']:.3f}"] for n in lg],
    )
    se = results["serve_extras"]
    print_table(
        f"serve reading them back: UpstreamExtras from a {args.servers}-server tree (median)",
        ["per server", "offered (prompts, resources, templates)", "snapshots MB", "build ms"],
        [
            [n, se[n]["offered"], f"{se[n]['snapshots_bytes'] / 2**20:.1f}", f"{1000 * se[n]['build_s']:.1f}"]
            for n in se
        ],
    )
    pt = results["passthrough"]
    print_table(
        f"passthrough start: Passthrough(tree, 9 names) on a {args.servers}-server tree (median of 21)",
        ["tools", "from servers", "start ms"],
        [[pt["tools"], pt["from_servers"], f"{1000 * pt['start_s']:.1f}"]],
    )
    print(f"\nload average before {load[0]:.2f}, after {results['load_after'][0]:.2f} ({os.cpu_count()} cores)")
    write_json("generate_extras.json", results)


if __name__ == "__main__":
    main()
