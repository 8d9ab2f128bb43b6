"""Fit the ``local`` pre-filter's logistic calibration on the calibration half of MetaTool.

    OPENBLAS_NUM_THREADS=1 TOOLTREE_CORPORA=/path/to/corpora .venv/bin/python bench/prefilter_calibrate.py

Every (query, tool) pair of the calibration half (MetaTool split by tool, see
``_prefilter_data``) is one example: its `agent.prefilter.local.FEATURES` for the query against a
catalog of that half's tools, and whether the query needs the tool. Weights are fitted by
Newton's method on the log loss (a small ridge on all weights but the bias), once with the
embeddings' evidence and once lexical only (and once lexical under
``search_recall.LEXICAL_TUNED``, BM25F's constants of the tuning sets, a variant not the default); the default
threshold is the highest that admits ≥ 95 % of the needed tools on this half (each tool keeps its highest
probability over the query and its clauses, cut by ``SearchIndex.units`` as in use; one variant judges the whole
query only). The weights are fitted on whole queries. Prints the weights to paste into
``agent/prefilter/local.py`` and writes ``bench/out/prefilter_calibration.json``. The held-out half is read only to
check (``_prefilter_data.apart``) that the calibration half shares none of its tools and query texts; MetaTool's texts
that are queries of both halves (``search_sets.DOUBLED``) are left out of both.

The hybrid weights belong to the embedding model installed: with MiniLM and its static companion
(``make embeddings``) they are ``HYBRID_STATIC``; with ``TOOLTREE_EMBEDDING_STATIC=0`` (MiniLM
alone) they are ``HYBRID``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from _common import print_table, write_json
from _prefilter_data import Half, apart, metatool_halves, raw_scores
from search_recall import LEXICAL_TUNED

from agent.prefilter.local import CLAUSES, FEATURES, features
from tool_tree.search import SearchIndex, ToolScores, build_index, score_tools
from tool_tree.search._query import SPLITTERS

TARGET_RECALL = 0.95
RIDGE = 1e-3


def feature_tensors(
    index: SearchIndex, half: Half, *, meaning: bool, splitters: Sequence[str]
) -> tuple[Any, Any, dict[str, list[list[int]]]]:
    """(features of every text (texts, tools, f), labels (queries, tools), for each clause splitter
    of ``_query.SPLITTERS``: query → rows of its whole text and its clauses)."""
    names = [t for _, t in score_tools(index, ["x"], meaning=False)[0].tools]
    col = {n: i for i, n in enumerate(names)}
    texts: list[str] = []
    row: dict[str, int] = {}

    def at(text: str) -> int:
        if text not in row:
            row[text] = len(texts)
            texts.append(text)
        return row[text]

    groups = {s: [[at(u) for u in index.units(q, s)] for q, _ in half.queries] for s in splitters}
    x = feature_array(index, texts, meaning=meaning, cache=f"metatool-{half.name}")
    y = np.zeros((len(half.queries), len(names)))
    for qi, (_, gold) in enumerate(half.queries):
        for g in gold:
            y[qi, col[g]] = 1.0
    return x, y, groups


def feature_array(index: SearchIndex, texts: list[str], *, meaning: bool, cache: str) -> Any:
    """(texts, tools, features), from the evidence `raw_scores` cached."""
    lex, cos = raw_scores(index, texts, meaning=meaning, cache=cache)
    names = score_tools(index, ["x"], meaning=False)[0].tools
    rows = [
        features(ToolScores(t, names, lex[i].tolist(), cos[i].tolist() if cos is not None else None))
        for i, t in enumerate(texts)
    ]
    return np.asarray(rows, dtype=np.float64)


def fit(x: Any, y: Any) -> Any:
    w = np.zeros(x.shape[1])
    ridge = np.full(x.shape[1], RIDGE)
    ridge[0] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) / len(y) + ridge * w
        h = (x * (p * (1 - p))[:, None]).T @ x / len(y) + np.diag(ridge) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(h, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def admitted_probabilities(x: Any, groups: list[list[int]], w: Any) -> Any:
    """(queries, tools): each tool's highest probability over its query's whole text and clauses."""
    p = 1.0 / (1.0 + np.exp(-(x @ w)))
    return np.stack([p[g].max(axis=0) for g in groups])


def pick_threshold(p: Any, y: Any) -> float:
    """The highest threshold (4 decimals, rounded down) that admits `TARGET_RECALL` of the needed tools."""
    needed = p[y > 0]
    ordered = np.sort(needed)[::-1]
    k = int(np.ceil(TARGET_RECALL * len(ordered))) - 1
    return float(np.floor(ordered[k] * 1e4) / 1e4)


def report(p: Any, y: Any, t: float, singles: int) -> dict[str, float]:
    admitted = p >= t
    hit = admitted & (y > 0)
    return {
        "recall": float(hit.sum() / (y > 0).sum()),
        "recall_multi": float(hit[singles:].sum() / max(1, (y[singles:] > 0).sum())),
        "catalog_share": float(admitted.mean()),
        "mean_predicted_of_admitted": float(p[admitted].mean()) if admitted.any() else 0.0,
        "precision_of_admitted": float((admitted & (y > 0)).sum() / max(1, admitted.sum())),
    }


def main() -> int:
    argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0]).parse_args()  # --help; no options
    cal, held = metatool_halves()
    apart(cal, held)  # nothing fitted here is judged in prefilter_recall.py
    del held
    print(f"calibration half: {len(cal.docs)} tools, {len(cal.queries)} queries ({cal.singles} single-tool)")
    t0 = time.perf_counter()
    index = build_index(cal.docs, embeddings=True)
    print(f"index with embeddings built in {time.perf_counter() - t0:.1f} s")
    out: dict[str, Any] = {"features": FEATURES, "target_recall": TARGET_RECALL}
    rows = []
    f = {name: i for i, name in enumerate(FEATURES)}
    every = list(range(len(FEATURES)))
    # the evidence: hybrid, lexical, and lexical under BM25F's constants of the tuning sets (not default)
    indexes = {"hybrid": index, "lexical": index, "lexical tuned": build_index(cal.docs, LEXICAL_TUNED)}
    lexical = [f["bias"], f["lex_z"], f["lex_rel"], f["lex_on"]]
    variants = {  # (evidence, features used, how a query is cut into clauses: a key of SPLITTERS)
        "hybrid (default)": ("hybrid", every, CLAUSES),
        "hybrid, z-scores only": ("hybrid", [f["bias"], f["lex_z"], f["cos_z"]], CLAUSES),
        "hybrid, no z-scores": ("hybrid", [f["bias"], f["lex_rel"], f["lex_on"], f["cos"], f["cos_gap"]], CLAUSES),
        "hybrid, cosine only": ("hybrid", [f["bias"], f["cos_z"], f["cos"], f["cos_gap"]], CLAUSES),
        **{f"hybrid, clauses {s!r}": ("hybrid", every, s) for s in SPLITTERS if s != CLAUSES},
        "lexical (default without embeddings)": ("lexical", lexical, CLAUSES),
        "lexical, BM25F of the tuning sets (not default)": ("lexical tuned", lexical, CLAUSES),
    }
    cache: dict[str, tuple[Any, Any, dict[str, list[list[int]]]]] = {}
    for name, (evidence, cols, splitter) in variants.items():
        meaning = evidence == "hybrid"
        if evidence not in cache:
            t0 = time.perf_counter()
            cache[evidence] = feature_tensors(indexes[evidence], cal, meaning=meaning, splitters=list(SPLITTERS))
            print(f"features ({evidence}) in {time.perf_counter() - t0:.1f} s")
        x, y, by_splitter = cache[evidence]
        groups = by_splitter[splitter]
        whole = np.array([g[0] for g in groups])
        xs = x[whole][:, :, cols].reshape(-1, len(cols))
        w_sub = fit(xs, y.reshape(-1))
        w = np.zeros(len(FEATURES))
        w[cols] = w_sub
        p = admitted_probabilities(x, groups, w)
        # Lexical evidence cannot reach a tool that shares no word with the query (a fifth of MetaTool's):
        # its threshold admits 95 % of the needed tools that do share one.
        reachable = y * (x[whole][:, :, f["lex_on"]] > 0) if not meaning else y
        t = pick_threshold(p, reachable)
        r = report(p, y, t, cal.singles)
        out[name] = {"weights": [round(float(v), 4) for v in w], "threshold": t, **r}
        rows.append([name, " ".join(f"{v:+.3f}" for v in w), f"{t:.4f}", f"{r['recall']:.3f}",
                     f"{r['recall_multi']:.3f}", f"{100 * r['catalog_share']:.1f} %",
                     f"{r['precision_of_admitted']:.3f}"])  # fmt: skip
    print_table(
        f"Calibration half (weights over {', '.join(FEATURES)})",
        ["variant", "weights", "threshold", "recall", "multi-tool recall", "catalog shown", "precision"],
        rows,
    )
    write_json("prefilter_calibration.json", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
