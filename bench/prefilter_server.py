"""Server evidence for the ``local`` pre-filter: does a tool's server's standing help, on data not used to fit it?

    OPENBLAS_NUM_THREADS=1 TOOLTREE_CORPORA=/path/to/corpora .venv/bin/python bench/prefilter_server.py

An experiment; it changes no default. The ``local`` classifier judges each tool on its own evidence
(`agent.prefilter.local.FEATURES`). In a catalog with many tools per server, a needed tool's server
usually holds other tools near the top too; this adds five features per tool, from the same
`score_tools` evidence of the same text:

- ``srv_lex_z``, ``srv_cos_z``: the best BM25F and cosine z-scores among the *other* tools of its
  server (0 when it is alone);
- ``srv_log_rank``: log(1 + the server's rank among servers by its best tool), the best tool by the
  default model's score (``HYBRID_STATIC``), the tool itself included;
- ``srv_log_size``: log(tools of its server); ``srv_alone``: 1 when it is the only one.

MetaTool has one tool per "server", so there these features say nothing new; the model is fitted on
the union of three sources of tuning data, each weighing the same in total (every example of a
source weighs 1 / that source's needs): MetaTool's calibration half (as ``prefilter_calibrate.py``:
2,500 single-tool queries and the multi-tool ones), the 527-tool LiveMCPBench catalog's tuning
tasks (the 20 of ``search_sets.TASKS`` and the users' tuning half, 35), and BFCL's tuning turns
(``search_sets.bfcl``; 12 API classes as servers). A need that several tools can meet has one
positive example, the acceptable tool the default model ranks highest; its other acceptable tools
are left out of the fit (neither needed nor not). Fitted by Newton's method on the weighted log loss
(``prefilter_calibrate``'s ridge); the threshold is the highest that meets 95 % of the needs on the
same weighted union (a need is met when one of its tools reaches it).

Then once on held-out data, against the default calibration (``HYBRID_STATIC``, its threshold) in
the same run: MetaTool's held-out half, BFCL's held-out turns (siblings not added, as
``prefilter_recall.py``), and on the 527-tool catalog the pre-filter's 40 tasks, the 30 held-out
tasks of ``search_sets.TASKS`` and the users' held-out half (siblings off, and ``named`` through the
real `PreFilter`). Also, for each set, the share each model shows at the threshold that gives 95 %
recall on that very set (a comparison of the evidence, not a usable threshold), and the latency of
one decision (`PreFilter.decide`, 527 tools) with each model. Needs the embeddings (``make
embeddings``, with the static companion) and ``bfcl-eval``. Writes bench/out/prefilter_server.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from _common import print_table, write_json
from _prefilter_data import TASKS, metatool_halves
from prefilter_calibrate import RIDGE, TARGET_RECALL, feature_array
from prefilter_recall import catalog527, tree527, user
from search_sets import TASKS as LIVEMCP_TASKS
from search_sets import USER_TASKS, bfcl

from agent.prefilter import LocalFilter, PreFilter, load_catalog
from agent.prefilter.base import CatalogTool, Verdicts
from agent.prefilter.local import CLAUSES, FEATURES, HYBRID_STATIC, features
from tool_tree.search import build_index, load_index, score_tools
from tool_tree.tree import Manifest

SERVER_FEATURES = ("srv_lex_z", "srv_cos_z", "srv_log_rank", "srv_log_size", "srv_alone")
LEX_Z, COS_Z = FEATURES.index("lex_z"), FEATURES.index("cos_z")
DEFAULT = np.asarray(HYBRID_STATIC.weights)


@dataclass
class Set:
    """Queries over one catalog, with their evidence: ``x`` (texts, tools, `FEATURES` + `SERVER_FEATURES`)."""

    name: str
    keys: list[str]
    queries: list[tuple[str, list[list[str]]]]
    x: Any

    @property
    def needs(self) -> int:
        return sum(len(n) for _, n in self.queries)


def server_features(x: Any, servers: Sequence[str]) -> Any:
    """(texts, tools, `SERVER_FEATURES`) from the base features ``x`` (texts, tools, `FEATURES`)."""
    names = sorted(set(servers))
    of = np.array([names.index(s) for s in servers])
    out = np.zeros((*x.shape[:2], len(SERVER_FEATURES)))
    logit = x @ DEFAULT
    best = np.zeros((x.shape[0], len(names)))
    for si in range(len(names)):
        cols = np.flatnonzero(of == si)
        best[:, si] = logit[:, cols].max(axis=1)
        out[:, cols, 3] = np.log(len(cols))
        if len(cols) == 1:
            out[:, cols, 4] = 1.0
            continue
        for f, c in ((0, LEX_Z), (1, COS_Z)):
            v = x[:, cols, c]
            top = v.argmax(axis=1)
            first = v.max(axis=1)
            second = np.sort(v, axis=1)[:, -2]
            other = np.repeat(first[:, None], len(cols), axis=1)
            other[np.arange(len(v)), top] = second
            out[:, cols, f] = other
    rank = np.argsort(np.argsort(-best, axis=1, kind="stable"), axis=1)
    out[:, :, 2] = np.log1p(rank[:, of])
    return out


def evidence(index: Any, name: str, keys: list[str], queries: list[tuple[str, list[list[str]]]]) -> Set:
    """A `Set` of ``queries`` (whole texts) against ``index``, whose tools are ``keys`` in index order."""
    assert CLAUSES == "none", "the server model is fitted on whole requests"
    servers = [s for s, _ in score_tools(index, ["x"], meaning=False)[0].tools]
    base = feature_array(index, [q for q, _ in queries], meaning=True, cache=f"server-{name}")
    return Set(name, keys, queries, np.concatenate([base, server_features(base, servers)], axis=2))


def sigmoid(z: Any) -> Any:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))


def probabilities(s: Set, w: Any) -> Any:
    """(texts, tools); ``w`` over the base features alone or over base + server features."""
    return sigmoid(s.x[:, :, : len(w)] @ w)


def need_values(s: Set, p: Any) -> Any:
    """Each need's best probability over the tools that can meet it (flat, query by query)."""
    col = {k: i for i, k in enumerate(s.keys)}
    return np.array([max(p[qi, col[k]] for k in need) for qi, (_, needs) in enumerate(s.queries) for need in needs])


def labels(s: Set) -> tuple[Any, Any]:
    """(y, mask): per (text, tool), 1 for the tool of each need the default model ranks highest; its other
    acceptable tools masked out of the fit."""
    col = {k: i for i, k in enumerate(s.keys)}
    p = probabilities(s, DEFAULT)
    y = np.zeros(p.shape)
    mask = np.ones(p.shape)
    for qi, (_, needs) in enumerate(s.queries):
        for need in needs:
            cols = [col[k] for k in need]
            mask[qi, cols] = 0.0
            y[qi, max(cols, key=lambda c: p[qi, c])] = 1.0
    mask[y > 0] = 1.0
    return y, mask


def fit(x: Any, y: Any, weight: Any) -> Any:
    """``prefilter_calibrate.fit`` with a weight per example."""
    w = np.zeros(x.shape[1])
    ridge = np.full(x.shape[1], RIDGE)
    ridge[0] = 0.0
    total = weight.sum()
    for _ in range(100):
        p = sigmoid(x @ w)
        grad = x.T @ (weight * (p - y)) / total + ridge * w
        h = (x * (weight * p * (1 - p))[:, None]).T @ x / total + np.diag(ridge) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(h, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def pick_threshold(values: Any, weights: Any) -> float:
    """The highest threshold (4 decimals, rounded down) meeting `TARGET_RECALL` of the weighted needs."""
    order = np.argsort(-values)
    covered = np.cumsum(weights[order]) / weights.sum()
    k = int(np.searchsorted(covered, TARGET_RECALL - 1e-12))
    return float(np.floor(values[order][k] * 1e4) / 1e4)


def measure(s: Set, p: Any, t: float) -> dict[str, float]:
    """Needs met and catalog share above ``t`` (no siblings), and the share at 95 % recall on this set."""
    v = need_values(s, p)
    oracle = float(np.sort(v)[::-1][int(np.ceil(TARGET_RECALL * len(v))) - 1])
    return {"threshold": t, "recall": float((v >= t).mean()), "share": float((p >= t).mean()),
            "share_at_95": float((p >= oracle).mean())}  # fmt: skip


class ServerFilter(LocalFilter):
    """The ``local`` classifier with the server features and the weights fitted here."""

    def __init__(self, tree: Path, weights: Any, threshold: float) -> None:
        super().__init__(tree)
        self.weights, self.threshold = weights, threshold
        self.default_threshold = threshold

    def classify(self, text: str, catalog: Sequence[CatalogTool]) -> Verdicts:
        index = load_index(self.tree)
        scores = score_tools(index, index.units(text, CLAUSES))[0]
        base = np.asarray(features(scores))[None]
        x = np.concatenate([base, server_features(base, [s for s, _ in scores.tools])], axis=2)
        p = sigmoid(x[0] @ self.weights)
        keys = {(t.server, t.tool): t.key for t in catalog}
        out = {keys[st]: float(v) for st, v in zip(scores.tools, p, strict=True) if st in keys}
        return Verdicts(out, note="lexical + embeddings + server", threshold=self.threshold)


def named(tree: Path, classifier: Any, tasks: list[dict[str, Any]]) -> dict[str, float]:
    """Needs met and catalog share through the real `PreFilter`, siblings ``named`` (as ``prefilter_recall``)."""
    if isinstance(classifier, ServerFilter):
        catalog = load_catalog(tree, Manifest.load(tree))
        f = PreFilter(classifier, catalog, siblings="named")
        met = needs = 0
        shares = []
        for task in tasks:
            f.start()
            f.decide(user(task["task"]))
            admitted = set(f.admitted)
            met += sum(any(k in admitted for k in need) for need in task["needs"])
            needs += len(task["needs"])
            shares.append(len(admitted) / len(f.catalog))
        return {"recall": met / needs, "share": statistics.mean(shares)}
    runs = catalog527(tree, "named", None, tasks)
    return {"recall": sum(r["met"] for r in runs) / sum(r["needs"] for r in runs),
            "share": statistics.mean(r["share"] for r in runs)}  # fmt: skip


def latency(tree: Path, server: ServerFilter, tasks: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """`PreFilter.decide` on a new text, 527 tools: each task 3 times per model, the models alternating."""
    catalog = load_catalog(tree, Manifest.load(tree))
    filters = {"default": PreFilter(LocalFilter(tree), catalog), "server": PreFilter(server, catalog)}
    for f in filters.values():
        f.start()
        f.decide(user("warm up: load the index and the model"))
    times: dict[str, list[float]] = {k: [] for k in filters}
    for round_ in range(3):
        for task in tasks:
            for k, f in filters.items():
                f.start()
                t0 = time.perf_counter()
                step = f.decide(user(f"{task['task']} ({round_})"))
                times[k].append(time.perf_counter() - t0)
                assert step.asked and not step.fail_open, step.fail_open
    out = {}
    for k, ts in times.items():
        ordered = sorted(ts)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        out[k] = {"median_ms": 1000 * statistics.median(ordered), "p90_ms": 1000 * p90}
    return out


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]).parse_args()  # --help; no options
    t_start = time.perf_counter()
    cal, held = metatool_halves()
    metatool = {}
    for half in (cal, held):
        index = build_index(half.docs, embeddings=True)
        keys = [t for _, t in score_tools(index, ["x"], meaning=False)[0].tools]
        queries = [(q, [[t] for t in g]) for q, g in half.queries]
        metatool[half.name] = evidence(index, f"metatool-{half.name}", keys, queries)
    turns = bfcl()
    if turns is None:
        raise SystemExit("bfcl-eval is not installed (see search_sets.BFCL_PIP)")
    index = build_index(turns.docs, embeddings=True)
    keys = [f"{s}.{t}" for s, t in score_tools(index, ["x"], meaning=False)[0].tools]
    bfcl_sets = {n: evidence(index, f"bfcl-{n}", keys, turns.sets[f"{n} turns"].queries) for n in ("tune", "held")}
    livemcp = json.loads(LIVEMCP_TASKS.read_text(encoding="utf-8"))
    users = json.loads(USER_TASKS.read_text(encoding="utf-8"))
    tasks527 = {
        "tuning (LiveMCPBench 20 + users' 35)": [*livemcp["tuning"], *users["tuning"]],
        "pre-filter's 40 tasks": json.loads(TASKS.read_text(encoding="utf-8"))["tasks"],
        "LiveMCPBench held-out 30": livemcp["held_out"],
        "users' held-out half (29)": users["held_out"],
    }
    tasks527 = {k: [{"task": t.get("query") or t["task"], "needs": t["needs"]} for t in v] for k, v in tasks527.items()}
    out: dict[str, Any] = {"features": [*FEATURES, *SERVER_FEATURES], "target_recall": TARGET_RECALL}
    with tempfile.TemporaryDirectory(prefix="tooltree-prefilter-server-") as tmp:
        tree = tree527(Path(tmp))
        index = load_index(tree)
        catalog = load_catalog(tree, Manifest.load(tree))
        key_of = {(t.server, t.tool): t.key for t in catalog}
        keys = [key_of[st] for st in score_tools(index, ["x"], meaning=False)[0].tools]
        sets527 = {
            name: evidence(index, f"527-{i}", keys, [(t["task"], t["needs"]) for t in tasks])
            for i, (name, tasks) in enumerate(tasks527.items())
        }
        print(f"evidence of every set in {time.perf_counter() - t_start:.0f} s")

        tuning = {"MetaTool calibration half": [metatool["calibration"]],
                  "527-tool catalog, tuning tasks": [next(iter(sets527.values()))],
                  "BFCL tuning turns": [bfcl_sets["tune"]]}  # fmt: skip
        xs, ys, ws, values_w = [], [], [], []
        for sets in tuning.values():
            needs = sum(s.needs for s in sets)
            for s in sets:
                y, mask = labels(s)
                keep = mask.reshape(-1) > 0
                xs.append(s.x.reshape(-1, s.x.shape[2])[keep])
                ys.append(y.reshape(-1)[keep])
                ws.append(np.full(keep.sum(), 1.0 / needs))
                values_w.append(np.full(s.needs, 1.0 / needs))
        w = fit(np.concatenate(xs), np.concatenate(ys), np.concatenate(ws))
        values = np.concatenate([need_values(s, probabilities(s, w)) for sets in tuning.values() for s in sets])
        threshold = pick_threshold(values, np.concatenate(values_w))
        out["weights"] = dict(zip(out["features"], (round(float(v), 4) for v in w), strict=True))
        out["threshold"] = threshold
        out["weighting"] = "each source's examples weigh 1 / its needs (the three sources weigh the same)"
        print_table(
            f"Server model, fitted on the tuning union (threshold {threshold:.4f})",
            ["feature", "weight"],
            [[k, f"{v:+.3f}"] for k, v in out["weights"].items()],
        )
        models = {"default (HYBRID_STATIC)": (DEFAULT, HYBRID_STATIC.threshold), "server features": (w, threshold)}
        sets_all = {**{f"MetaTool {n} half": s for n, s in metatool.items()},
                    **{f"527: {n}": s for n, s in sets527.items()},
                    **{f"BFCL {n} turns": s for n, s in bfcl_sets.items()}}  # fmt: skip
        results: dict[str, Any] = {}
        rows = []
        for name, s in sets_all.items():
            results[name] = {}
            for model, (weights, t) in models.items():
                r = measure(s, probabilities(s, weights), t)
                if name.startswith("527:"):
                    classifier = LocalFilter(tree) if weights is DEFAULT else ServerFilter(tree, weights, t)
                    r["named"] = named(tree, classifier, tasks527[name.removeprefix("527: ")])
                results[name][model] = r
                role = "tuning" if "tun" in name or "calibration" in name else "held out"
                sib = f"{r['named']['recall']:.3f} / {100 * r['named']['share']:.1f} %" if "named" in r else ""
                rows.append([name, role, model, f"{t:.4f}", f"{r['recall']:.3f}", f"{100 * r['share']:.1f} %", sib,
                             f"{100 * r['share_at_95']:.1f} %"])  # fmt: skip
        print_table(
            "Recall (needs met) and catalog share, default vs server features",
            ["set", "role", "model", "threshold", "recall, siblings off", "share", "named: recall / share",
             "share at 95 % recall on this set"],
            rows,
        )  # fmt: skip
        out["sets"] = {
            n: {"tools": len(s.keys), "queries": len(s.queries), "needs": s.needs} for n, s in sets_all.items()
        }
        out["results"] = results
        speed = latency(tree, ServerFilter(tree, w, threshold), tasks527["pre-filter's 40 tasks"])
    print_table(
        "Latency of one decision, 527 tools (new text each time; the two models alternate)",
        ["model", "median", "p90"],
        [[k, f"{v['median_ms']:.1f} ms", f"{v['p90_ms']:.1f} ms"] for k, v in speed.items()],
    )
    out["latency"] = speed
    write_json("prefilter_server.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
