"""The ``local`` pre-filter on data it was not calibrated on: admission recall, catalog share, latency, cost.

    OPENBLAS_NUM_THREADS=1 TOOLTREE_CORPORA=/path/to/corpora .venv/bin/python bench/prefilter_recall.py [--latency]

1. MetaTool, held-out half (split by tool, see ``_prefilter_data``; the weights and threshold
   come from the other half, ``prefilter_calibrate.py``): for each query, the tools whose
   probability reaches the threshold; recall = needed tools admitted / needed tools, catalog
   share = admitted / tools in the half. Also a threshold sweep (the trade-off).
2. BFCL's held-out turns (``search_sets.bfcl``, when ``bfcl-eval`` is installed): 162 tools in 12
   servers, users' turn-by-turn requests; needs met by a tool above the threshold, and the share
   of the catalog above it (no siblings), over the same threshold sweep.
3. The 527-tool LiveMCPBench catalog, generated into a tree from snapshots (with embeddings):
   the multi-step tasks of ``prefilter_tasks_527.json`` (written for this benchmark; each need
   lists the tools that can meet it) but the 3 that repeat a tuning task of the tool search
   (``_prefilter_data.REPEATED_TASKS``: 37 of 40), through the real `PreFilter` + `LocalFilter` (siblings
   ``named`` and ``server``). Recall counts needs met. The same for the 64 tasks worded as users word
   them (``search_sets.USER_TASKS``, each half on its own; siblings ``named``), at the default
   threshold and four others.
4. Latency of one decision (``PreFilter.decide``) for 527 tools: every task 3 times with a new
   text each time (median, p90), with embeddings and lexical only; and ``score_tools`` alone on
   one text, for comparison. ``--latency`` runs only this part (and updates it in the JSON).
5. Cost vs saving per request: tokens of the tools array with every tool (direct) and with the
   admitted ones (filtered), against the filter's own cost — the local one spends no tokens; the
   ``claude`` one is run against the fake Messages API with its verdicts scripted as the task's
   first choices, so its tokens (and the simulated prompt cache) follow the same approximation.

Writes bench/out/prefilter_recall.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from _common import OUT, print_table, write_json
from _prefilter_data import metatool_halves, prefilter_tasks, raw_scores
from agent_tasks import generate
from generate_tree import livemcpbench_snapshots
from search_sets import BFCL_PIP, USER_TASKS, bfcl

from agent.prefilter import ClaudeFilter, LocalFilter, PreFilter, load_catalog
from agent.prefilter.claude import VERDICT_TOOL
from agent.prefilter.local import CLAUSES, combined
from agent.prefilter.local import calibration as calibration_of
from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.tokens import APPROXIMATION, tools_tokens
from agent.toolsets.direct import native_tools
from tool_tree.search import ToolScores, build_index, load_index, score_tools
from tool_tree.tree import Manifest

SWEEP = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def metatool_held_out() -> dict[str, Any]:
    _, half = metatool_halves()
    index = build_index(half.docs, embeddings=True)
    names = [t for _, t in score_tools(index, ["x"], meaning=False)[0].tools]
    col = {n: i for i, n in enumerate(names)}
    texts: list[str] = []
    groups: list[list[int]] = []
    for q, _ in half.queries:
        parts = index.units(q, CLAUSES)
        groups.append(list(range(len(texts), len(texts) + len(parts))))
        texts += parts
    out: dict[str, Any] = {"tools": len(names), "queries": len(half.queries), "single": half.singles}
    for label, meaning in (("hybrid", True), ("lexical", False)):
        lex, cos = raw_scores(index, texts, meaning=meaning, cache=f"metatool-{half.name}")
        tools = [("", n) for n in names]
        model = index.dense.model if meaning and index.dense is not None else None
        evidence = [
            ToolScores(t, tools, lex[i].tolist(), cos[i].tolist() if cos is not None else None, model)
            for i, t in enumerate(texts)
        ]
        calibration = calibration_of(evidence[0])
        p = np.array([combined([evidence[i] for i in g]) for g in groups])
        y = np.zeros_like(p)
        for qi, (_, gold) in enumerate(half.queries):
            for g in gold:
                y[qi, col[g]] = 1.0
        rows = []
        for t in sorted({*SWEEP, calibration.threshold}):
            admitted = p >= t
            hit = admitted & (y > 0)
            rows.append({
                "threshold": t,
                "default": t == calibration.threshold,
                "recall": float(hit.sum() / y.sum()),
                "recall_single": float(hit[: half.singles].sum() / y[: half.singles].sum()),
                "recall_multi": float(hit[half.singles :].sum() / max(1, y[half.singles :].sum())),
                "catalog_share": float(admitted.mean()),
                "admitted_mean": float(admitted.sum(axis=1).mean()),
            })  # fmt: skip
        k = max(1, round(0.1 * len(names)))
        top10 = p >= np.sort(p, axis=1)[:, -k][:, None]
        out[label] = {"sweep": rows, "recall_at_10pct_share": float((top10 & (y > 0)).sum() / y.sum())}
    return out


def bfcl_held_out() -> dict[str, Any] | None:
    """The classifier on BFCL's held-out turns (``search_sets.bfcl``: 162 tools in 12 servers, never used
    to calibrate): needs met by a tool above the threshold, and the share of the catalog above it
    (siblings not added, as on MetaTool). None when ``bfcl-eval`` is not installed."""
    catalog = bfcl()
    if catalog is None:
        return None
    turns = catalog.sets["held turns"].queries
    index = build_index(catalog.docs, embeddings=True)
    keys = [f"{server}.{tool}" for server, tool in score_tools(index, ["x"], meaning=False)[0].tools]
    col = {k: i for i, k in enumerate(keys)}
    texts: list[str] = []
    groups: list[list[int]] = []
    for q, _ in turns:
        parts = index.units(q, CLAUSES)
        groups.append(list(range(len(texts), len(texts) + len(parts))))
        texts += parts
    out: dict[str, Any] = {"tools": len(keys), "turns": len(turns), "needs": sum(len(n) for _, n in turns)}
    for label, meaning in (("hybrid", True), ("lexical", False)):
        lex, cos = raw_scores(index, texts, meaning=meaning, cache="bfcl-held")
        model = index.dense.model if meaning and index.dense is not None else None
        evidence = [
            ToolScores(t, [("", k) for k in keys], lex[i].tolist(), cos[i].tolist() if cos is not None else None, model)
            for i, t in enumerate(texts)
        ]
        calibration = calibration_of(evidence[0])
        p = np.array([combined([evidence[i] for i in g]) for g in groups])
        rows = []
        for t in sorted({*SWEEP, calibration.threshold}):
            admitted = p >= t
            met = sum(any(admitted[qi, col[k]] for k in need) for qi, (_, needs) in enumerate(turns) for need in needs)
            rows.append({
                "threshold": t,
                "default": t == calibration.threshold,
                "recall": met / out["needs"],
                "catalog_share": float(admitted.mean()),
                "admitted_mean": float(admitted.sum(axis=1).mean()),
            })  # fmt: skip
        out[label] = {"sweep": rows}
    return out


def tree527(work: Path) -> Path:
    livemcpbench_snapshots(work / "snap527")
    return generate(None, work / "tree527", snapshots=work / "snap527", embeddings="on")


def user_tasks() -> dict[str, list[dict[str, Any]]]:
    """The search benchmark's tasks worded as users word them (``search_sets.USER_TASKS``), by half, as
    ``catalog527`` takes them. The pre-filter was never calibrated on either half."""
    data = json.loads(USER_TASKS.read_text(encoding="utf-8"))
    return {half: [{"task": t["query"], "needs": t["needs"]} for t in data[half]] for half in ("tuning", "held_out")}


def catalog527(
    tree: Path, siblings: str, threshold: float | None = None, tasks: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    if tasks is None:
        tasks = prefilter_tasks()
    catalog = load_catalog(tree, Manifest.load(tree))
    f = PreFilter(LocalFilter(tree), catalog, siblings=siblings, threshold=threshold)  # type: ignore[arg-type]
    runs = []
    for task in tasks:
        f.start()
        step = f.decide(user(task["task"]))
        admitted = set(f.admitted)
        met = [any(k in admitted for k in need) for need in task["needs"]]
        missed = [n for n, m in zip(task["needs"], met, strict=True) if not m]
        runs.append({"task": task["task"], "needs": len(met), "met": sum(met), "admitted": len(admitted),
                     "above": step.above, "share": len(admitted) / len(f.catalog), "missed": missed,
                     "seconds": step.seconds, "fail_open": step.fail_open})  # fmt: skip
    return runs


def latency(tree: Path, lexical: bool, tasks: list[dict[str, Any]]) -> dict[str, float]:
    old = os.environ.get("TOOLTREE_SEARCH_EMBEDDINGS")
    if lexical:
        os.environ["TOOLTREE_SEARCH_EMBEDDINGS"] = "0"
    try:
        f = PreFilter(LocalFilter(tree), load_catalog(tree, Manifest.load(tree)))
        f.start()
        f.decide(user("warm up: load the index and the model"))
        times = []
        for round_ in range(3):
            for task in tasks:
                f.start()
                t0 = time.perf_counter()
                step = f.decide(user(f"{task['task']} ({round_})"))
                times.append(time.perf_counter() - t0)
                assert step.asked and not step.fail_open, step.fail_open
        index = load_index(tree)
        evidence = []
        for task in tasks:  # the search side alone: one text (no clauses), every tool's scores
            t0 = time.perf_counter()
            score_tools(index, [task["task"]])
            evidence.append(time.perf_counter() - t0)
    finally:
        if old is None:
            os.environ.pop("TOOLTREE_SEARCH_EMBEDDINGS", None)
        else:
            os.environ["TOOLTREE_SEARCH_EMBEDDINGS"] = old
    ordered = sorted(times)
    return {
        "median_ms": 1000 * statistics.median(ordered),
        "p90_ms": 1000 * ordered[int(0.9 * (len(ordered) - 1))],
        "one_text_evidence_median_ms": 1000 * statistics.median(evidence),
    }


def cost(tree: Path, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """Tools-array tokens with every tool vs the admitted ones, and what the claude filter costs."""
    manifest = Manifest.load(tree)
    names, definitions = native_tools(tree, manifest)
    by_key = {f"{e.server}.{e.tool}": d for d, e in ((d, names[d["name"]]) for d in definitions)}
    full = tools_tokens(definitions)
    f = PreFilter(LocalFilter(tree), load_catalog(tree, manifest))
    saved = []
    for task in tasks:
        f.start()
        f.decide(user(task["task"]))
        saved.append(full - tools_tokens([by_key[k] for k in f.admitted]))
    catalog = load_catalog(tree, manifest)
    key_to_name = {t.key: t.name for t in catalog}
    scripted = []
    for task in tasks:
        verdicts = [{"tool": key_to_name[n[0]], "needed": True, "probability": 0.9} for n in task["needs"]]
        scripted.append(reply(tool_use(VERDICT_TOOL, {"verdicts": verdicts})))
    usage = []
    with FakeMessagesAPI(scripted, min_cache_tokens=2048) as api:  # Haiku's minimum cacheable prompt
        claude = ClaudeFilter(api.client())
        for task in tasks:
            usage.append(claude.classify(task["task"], catalog).usage)
    first, later = usage[0], usage[1:]
    return {
        "full_tools_tokens": full,
        "saved_per_request_median": statistics.median(saved),
        "saved_per_request_min": min(saved),
        "claude_first_call": vars(first),
        "claude_later_call_median": {k: statistics.median(getattr(u, k) for u in later) for k in vars(first)},
    }


def print_latency(speed: dict[str, dict[str, float]]) -> None:
    print_table(
        "Latency of one decision, 527 tools (new text each time)",
        ["evidence", "median", "p90", "score_tools, one text (median)"],
        [
            [k, f"{v['median_ms']:.1f} ms", f"{v['p90_ms']:.1f} ms", f"{v['one_text_evidence_median_ms']:.1f} ms"]
            for k, v in speed.items()
        ],
    )


def latency_only() -> int:
    """Only the latency part (rerun it when the machine is quiet); updates it in the JSON."""
    tasks = prefilter_tasks()
    with tempfile.TemporaryDirectory(prefix="tooltree-prefilter-") as tmp:
        tree = tree527(Path(tmp))
        speed = {"hybrid": latency(tree, False, tasks), "lexical": latency(tree, True, tasks)}
    print_latency(speed)
    path = OUT / "prefilter_recall.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    write_json("prefilter_recall.json", {**data, "latency": speed})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--latency", action="store_true", help="only the per-request latency of the classifier")
    if parser.parse_args().latency:
        return latency_only()
    print(f"tokens: {APPROXIMATION}")
    held = metatool_held_out()
    for label in ("hybrid", "lexical"):
        rows = [[f"{r['threshold']:g}" + (" (default)" if r["default"] else ""), f"{r['recall']:.3f}",
                 f"{r['recall_single']:.3f}", f"{r['recall_multi']:.3f}", f"{100 * r['catalog_share']:.1f} %",
                 f"{r['admitted_mean']:.1f}"] for r in held[label]["sweep"]]  # fmt: skip
        print_table(
            f"MetaTool held-out half ({held['tools']} tools, {held['queries']} queries), {label}; recall when showing "
            f"the top 10 %: {held[label]['recall_at_10pct_share']:.3f}",
            ["threshold", "recall", "single", "multi", "catalog shown", "tools admitted"],
            rows,
        )
    turns = bfcl_held_out()
    if turns is None:
        print(f"BFCL held-out turns left out: bfcl-eval is not installed ({BFCL_PIP})")
    else:
        for label in ("hybrid", "lexical"):
            rows = [[f"{r['threshold']:g}" + (" (default)" if r["default"] else ""), f"{r['recall']:.3f}",
                     f"{100 * r['catalog_share']:.1f} %", f"{r['admitted_mean']:.1f}"]
                    for r in turns[label]["sweep"]]  # fmt: skip
            print_table(
                f"BFCL held-out turns ({turns['tools']} tools, {turns['turns']} turns, {turns['needs']} needs), "
                f"{label}; siblings not added",
                ["threshold", "recall", "catalog shown", "tools admitted"],
                rows,
            )
    tasks527 = prefilter_tasks()
    with tempfile.TemporaryDirectory(prefix="tooltree-prefilter-") as tmp:
        tree = tree527(Path(tmp))
        by_siblings = {s: catalog527(tree, s, None, tasks527) for s in ("named", "server")}
        sweep = {t: catalog527(tree, "named", t, tasks527) for t in SWEEP}
        users = {
            (half, t): catalog527(tree, "named", t, tasks)
            for half, tasks in user_tasks().items()
            for t in (None, 0.002, 0.005, 0.01, 0.02)
        }
        speed = {"hybrid": latency(tree, False, tasks527), "lexical": latency(tree, True, tasks527)}
        costs = cost(tree, tasks527)
    rows = []
    for s, runs in by_siblings.items():
        needs, met = sum(r["needs"] for r in runs), sum(r["met"] for r in runs)
        share = statistics.mean(r["share"] for r in runs)
        admitted = [r["admitted"] for r in runs]
        above = statistics.median(r["above"] for r in runs)
        rows.append([s, f"{met / needs:.3f} ({met}/{needs})", f"{100 * share:.1f} %",
                     f"{statistics.median(admitted):.0f}", f"{max(admitted)}", f"{above:.0f}"])  # fmt: skip
    print_table(
        f"527-tool catalog, {len(tasks527)} multi-step tasks (needs met by an admitted tool)",
        [
            "siblings",
            "recall",
            "catalog shown (mean)",
            "admitted (median)",
            "admitted (max)",
            "above threshold (median)",
        ],
        rows,
    )
    rows = []
    for t, runs in sweep.items():
        needs, met = sum(r["needs"] for r in runs), sum(r["met"] for r in runs)
        rows.append([f"{t:g}", f"{met / needs:.3f}", f"{100 * statistics.mean(r['share'] for r in runs):.1f} %"])
    print_table("527-tool catalog, other thresholds (siblings named; not used to choose the default)",
                ["threshold", "recall", "catalog shown"], rows)  # fmt: skip
    rows = []
    for (half, t), runs in users.items():
        needs, met = sum(r["needs"] for r in runs), sum(r["met"] for r in runs)
        share = statistics.mean(r["share"] for r in runs)
        rows.append([half, "default" if t is None else f"{t:g}", f"{met / needs:.3f} ({met}/{needs})",
                     f"{100 * share:.1f} %", f"{statistics.median(r['admitted'] for r in runs):.0f}"])  # fmt: skip
    print_table(
        "527-tool catalog, tasks worded as users word them (siblings named; never used to calibrate)",
        ["half", "threshold", "recall", "catalog shown (mean)", "admitted (median)"],
        rows,
    )
    print_latency(speed)
    c = costs
    first, later = c["claude_first_call"], c["claude_later_call_median"]
    print_table(
        "Per request: tools-array tokens saved vs what the filter costs",
        ["", "tokens"],
        [
            ["tools array, every tool (direct)", f"{c['full_tools_tokens']:,}"],
            ["saved by the local filter (median / min)",
             f"{c['saved_per_request_median']:,} / {c['saved_per_request_min']:,}"],
            ["local filter cost", "0"],
            ["claude filter, first call: input + cache write + output",
             f"{first['input_tokens']:,} + {first['cache_creation_input_tokens']:,} + {first['output_tokens']:,}"],
            ["claude filter, later calls (median): input + cache read + output",
             f"{later['input_tokens']:,} + {later['cache_read_input_tokens']:,} + {later['output_tokens']:,}"],
        ],
    )  # fmt: skip
    data = {"token_count": APPROXIMATION, "metatool_held_out": held, "bfcl_held_out": turns,
            "catalog527": by_siblings, "catalog527_sweep": sweep,
            "catalog527_user_tasks": {f"{half} {t or 'default'}": runs for (half, t), runs in users.items()},
            "latency": speed, "cost": costs}  # fmt: skip
    write_json("prefilter_recall.json", data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
