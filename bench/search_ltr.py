"""A learnt re-ranking of the hybrid default's first candidates, fitted on the union of the tuning halves.

Every ranking tried so far was hand-weighted; the one learnt change (``search_adapter``, a map on the query
vector) learnt MetaTool's tools and lost elsewhere. Here a small linear model re-orders only the first
``depth`` tools of the default hybrid ranking (MiniLM + WordLlama, clause fusion by best rank), from a few
features per (query, tool) that say nothing about which tool it is, so that what it learns could carry to
another catalog:

- ``rank``: log(1 + the tool's place in the default ranking), 0-based — the default itself;
- ``lex_z``, ``cos_z``: the whole query's BM25F and cosine scores, z-scored over the catalog (the default's
  fused score of a one-unit query is ``0.15 · lex_z + 0.85 · cos_z`` plus a per-query shift, which a ranking
  within one query ignores, so the score itself is not a feature; of a query of several clauses it is
  ``max(1 / (10 + whole rank), 0.8 / (10 + best clause rank))``, carried by the two ranks);
- ``whole_rank``: log(1 + its place in the whole query's hybrid ranking);
- ``clause_rank``: log(1 + its best place over the query's clauses' hybrid rankings; the whole query's place
  when the query has no clauses) — the clause fusion's evidence;
- ``server_rank``: log(1 + its server's place among servers, by each server's best tool in the default);
  ``server_size``: log(number of the server's tools); ``in_server``: log(1 + the number of its server's
  tools ranked above it) — crowding by one server's near-identical tools;
- ``name``: the share of the tool name's (stemmed) words that the query holds.

The model scores a candidate ``w · x`` (features standardised over the training examples) and ranks by it,
ties by the default's order; tools below ``depth`` keep their places. Two losses, both over each need
(a need with no acceptable tool among the candidates is left out of the fit): ``listwise`` — the softmax
probability of the need's acceptable tools among them and the query's tools that meet no need (another
need's tools are not counted against it); ``pairwise`` — logistic loss of every (acceptable, meeting-no-need)
pair, each need's pairs weighing one need. Each tuning set weighs the same in total (its needs weigh
1 / its covered needs), as ``prefilter_server`` weighed its sources. The L2 penalty pulls ``w`` towards the
default (the rank feature's weight alone, fitted first), so a strong penalty gives back the default's order.

Settings (loss × feature set × depth × penalty) are chosen by **leave-one-tuning-set-out**: fitted on four of
the five tuning sets (MetaTool single every ``--step``-th row, MetaTool multi, LiveMCPBench's 20 tasks, the
users' 35 tasks, BFCL's turns), measured on the fifth; the setting with the best mean R@5 over the five
left-out figures wins, so the choice says whether it carries to a set it was not fitted on (three of the
folds leave a set out whose catalog the others still hold; leave-one-catalog-out is reported for the chosen
setting too). The chosen setting is then fitted on all five and measured on them, and the rule applied
(the mean R@5 of the tuning sets above the default's, above plain BM25 on each — here on the
left-out figures as well as the fitted ones, ``GATE``). Since the best of 96 left-out means is itself a
choice made on those figures, a nested run reports what the whole procedure gives a set it never saw: for
each set, the setting chosen by leave-one-set-out over the other four, fitted on them, measured on it.
Beside them: the needs the fitted model brings into / pushes out of the first five, and the median time of a
query's candidates' features after its default ranking (Python, unvectorised). ``--held`` measures the
held-out halves once, with the model fitted on the tuning union — and only when the rule is met; otherwise it
says so and runs nothing held out.

This module computes the candidates' features and runs the experiment; ``_ltr_model`` holds the model: the
features' names and sets, the settings' grid, the two losses and their fit, the places after a re-ranking
and the ways of leaving sets out.

Run:  OPENBLAS_NUM_THREADS=1 TOOLTREE_CORPORA=../shared/corpora .venv/bin/python bench/search_ltr.py [--held]
      (needs ``make embeddings`` and ``bfcl-eval``; reuses bench/search_recall.py's cache of query embeddings;
      writes bench/out/search_ltr.json)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_recall as sr
from _common import print_table, write_json
from _ltr_model import (
    FEATURE_SETS,
    FEATURES,
    MAX_DEPTH,
    EvalSet,
    Query,
    Setting,
    fit,
    leave_out,
    nested,
    recall,
    settings,
    won_lost,
)
from search_models import CANDIDATES, load, missing
from search_sets import Catalog, livemcpbench, metatool, with_bfcl

from tool_tree.search import SearchIndex, _dense, build_index
from tool_tree.search._dense import fuse_by_rank, fuse_units, query_vectors
from tool_tree.search._text import tokens

MODEL = "minilm-l6+wordllama"
TUNING = (
    ("MetaTool", "tune single"),
    ("MetaTool", "tune multi"),
    ("LiveMCPBench", "tune tasks"),
    ("LiveMCPBench", "tune user tasks"),
    ("BFCL", "tune turns"),
)
HELD = (
    ("MetaTool", "held single"),
    ("MetaTool", "held multi"),
    ("LiveMCPBench", "held tasks"),
    ("LiveMCPBench", "held user tasks"),
    ("LiveMCPBench", "held tasks, pre-filter's"),
    ("BFCL", "held turns"),
)
GATE = ("left out (leave-one-set-out)", "fitted on all five")
"""The figures the rule is applied to (the others are reported beside them)."""
TIMES: list[tuple[float, float]] = []
"""Seconds of each query's default ranking (vectors from the cache) and of its candidates' features after it."""


def only(catalogs: Sequence[Catalog], wanted: Sequence[tuple[str, str]]) -> list[Catalog]:
    """``catalogs`` with only the ``wanted`` (catalog, set) pairs (the rest are neither embedded nor ranked)."""
    out = []
    for c in catalogs:
        sets = {n: qs for n, qs in c.sets.items() if (c.name, n) in wanted}
        if sets:
            out.append(Catalog(c.name, c.docs, sets))
    return out


def ranks_of(rows: Any) -> Any:
    """Each tool's 0-based place in each row's order (by score, ties by tool number), as ``fuse_by_rank`` orders."""
    order = np.argsort(-rows, axis=1, kind="stable")
    places = np.empty_like(order)
    np.put_along_axis(places, order, np.arange(rows.shape[1])[None, :].repeat(len(rows), axis=0), axis=1)
    return places


def zscore(row: Any) -> Any:
    sd = row.std()
    return (row - row.mean()) / sd if sd > 0 else np.zeros_like(row)


class Featurizer:
    """The default hybrid ranking of one catalog's index, step by step, and the candidates' features."""

    def __init__(self, index: SearchIndex) -> None:
        self.index = index
        entries = index.entries
        self.server_of = np.array(index._server_of)
        self.server_size = np.array([len(index._server_tools[s]) for s in index._server_of], dtype=float)
        self.name_terms = [set(tokens(e.tool, stem=True)) for e in entries]
        self.keys = {f"{e.server}.{e.tool}": d for d, e in enumerate(entries)}
        self.tie = index._tie_order()

    def default(self, query: str) -> tuple[Any, Any, Any, int]:
        """(final scores, the units' hybrid rows, the whole query's BM25F and cosine rows, number of units), as
        ``SearchIndex._rank`` makes them."""
        cfg = self.index.config
        units = self.index.units(query)
        lexical = [self.index.lexical(u) for u in units]
        assert self.index.dense is not None, "the benchmark's index carries the tools' vectors"
        found = query_vectors(self.index.dense, units)
        assert found is not None, "the benchmark's encoder answers from its cache"
        matrix, vectors = found
        hybrid = fuse_units(lexical, matrix, vectors, cfg.dense_alpha)
        weights = [1.0] + [cfg.clause_weight] * (len(units) - 1)
        final = hybrid[0] if len(units) == 1 else fuse_by_rank(hybrid, weights, cfg.fusion_k)
        lex = np.zeros(len(self.tie))
        for d, s in lexical[0].items():
            lex[d] = s
        cos = (matrix @ vectors[0]).astype(np.float64)
        return final, hybrid, np.stack([lex, cos]), len(units)

    def query(self, text: str, needs: list[list[str]]) -> Query:
        t0 = time.perf_counter()
        final, hybrid, whole, n_units = self.default(text)
        t1 = time.perf_counter()
        order = np.lexsort((self.tie, -final))
        place = np.empty(len(order), dtype=int)
        place[order] = np.arange(len(order))
        cand = order[:MAX_DEPTH]
        unit_places = ranks_of(hybrid)
        clause_place = unit_places[1:].min(axis=0) if n_units > 1 else unit_places[0]
        servers = self.server_of
        best_of_server: dict[int, int] = {}
        for d in order:
            best_of_server.setdefault(int(servers[d]), int(place[d]))
        server_place = {s: i for i, s in enumerate(best_of_server)}  # insertion order = by best tool
        q_terms = set(tokens(text, stem=True))
        x = np.zeros((len(cand), len(FEATURES)))
        seen: dict[int, int] = {}
        lex_z, cos_z = zscore(whole[0]), zscore(whole[1])
        for i, d in enumerate(cand.tolist()):
            s = int(servers[d])
            name = self.name_terms[d]
            x[i] = (
                np.log1p(i),
                lex_z[d],
                cos_z[d],
                np.log1p(unit_places[0][d]),
                np.log1p(clause_place[d]),
                np.log1p(server_place[s]),
                np.log(self.server_size[d]),
                np.log1p(seen.get(s, 0)),
                len(name & q_terms) / len(name) if name else 0.0,
            )
            seen[s] = seen.get(s, 0) + 1
        TIMES.append((t1 - t0, time.perf_counter() - t1))
        pos = {int(d): i for i, d in enumerate(cand.tolist())}
        tools = [[self.keys[k] for k in need] for need in needs]
        in_cand = [[pos[d] for d in need if d in pos] for need in tools]
        other = np.ones(len(cand), dtype=bool)
        for positions in in_cand:
            other[positions] = False
        return Query(x, in_cand, [int(min(place[d] for d in need)) for need in tools], other)


def evidence(catalogs: Sequence[Catalog], encoder: Any, wanted: Sequence[tuple[str, str]]) -> dict[str, EvalSet]:
    """The candidates and features of every query of the ``wanted`` sets, under the hybrid default."""
    out: dict[str, EvalSet] = {}
    cache: dict[str, Any] = {}
    _dense._encoder = encoder
    try:
        for catalog in catalogs:
            index = sr.with_vectors(build_index(catalog.docs, sr.DEFAULT), catalog.docs, encoder, cache)
            f = Featurizer(index)
            for name, qs in catalog.sets.items():
                if (catalog.name, name) in wanted:
                    label = f"{catalog.name} {name}"
                    out[label] = EvalSet(label, [f.query(q, needs) for q, needs in qs.queries])
    finally:
        _dense._encoder = None
    return out


def encoder_for(catalogs: Sequence[Catalog]) -> sr.CachedEncoder:
    candidate = next(c for c in CANDIDATES if c.name == MODEL)
    why = missing(candidate)
    if why is not None:
        raise SystemExit(f"{MODEL}: {why}")
    inner = load(candidate)
    vectors, seconds, count = sr.embed_all(inner, MODEL, sr.unit_texts(catalogs, [("hybrid", sr.DEFAULT, MODEL)]))
    print(f"query units: {count} embedded ({seconds:.0f} s), the rest from the cache")
    return sr.CachedEncoder(inner, vectors)


def references(catalogs: Sequence[Catalog], prefix: str) -> dict[str, dict[str, dict[str, float]]]:
    """Plain BM25 and the hybrid default through ``SearchIndex.search`` (``search_recall.evaluate``)."""
    variants: list[sr.Variant] = [("plain BM25", sr.BASELINE, None), ("hybrid default", sr.DEFAULT, MODEL)]
    results, _ = sr.evaluate(catalogs, variants, prefix)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--step", type=int, default=16, help="use every STEP-th MetaTool single-tool row")
    parser.add_argument("--held", action="store_true", help="measure the held-out halves (only if the rule is met)")
    args = parser.parse_args()
    t_start = time.perf_counter()
    every = with_bfcl([metatool(args.step), livemcpbench()])
    if len(every) < 3:
        raise SystemExit("BFCL's tuning turns are one of the tuning sets: install bfcl-eval")
    catalogs = only(every, TUNING)
    print(f"tuning sets, MetaTool single rows every {args.step}")
    refs = references(catalogs, "tune")
    encoder = encoder_for(catalogs)
    t0 = time.perf_counter()
    tuning = evidence(catalogs, encoder, TUNING)
    evidence_s = time.perf_counter() - t0
    ranking_ms, features_ms = (1000 * float(np.median(t)) for t in zip(*TIMES, strict=True))
    labels = list(tuning)
    bm25 = {label: refs["plain BM25"][label]["R@5"] for label in labels}
    default = {label: recall(tuning[label], None) for label in labels}
    for label in labels:  # the step-by-step default is the default
        assert abs(default[label]["R@5"] - refs["hybrid default"][label]["R@5"]) < 1e-9, label
        assert abs(default[label]["R@10"] - refs["hybrid default"][label]["R@10"]) < 1e-9, label
    default_mean = float(np.mean([default[label]["R@5"] for label in labels]))

    t0 = time.perf_counter()
    loso: dict[Setting, dict[str, float]] = {}
    for setting in settings():
        loso[setting] = leave_out(tuning, setting, [[label] for label in labels])
    select_s = time.perf_counter() - t0

    def mean(row: dict[str, float]) -> float:
        return float(np.mean([row[label] for label in labels]))

    chosen = max(loso, key=lambda s: (mean(loso[s]), -s.depth, s.penalty))
    catalogs_of = [[label for label in labels if label.startswith(c.name)] for c in catalogs]
    loco = leave_out(tuning, chosen, catalogs_of)
    model = fit(list(tuning.values()), chosen)
    fitted = {label: recall(tuning[label], model) for label in labels}
    fitted_r5 = {label: r["R@5"] for label, r in fitted.items()}
    changed = {label: won_lost(tuning[label], model) for label in labels}
    t0 = time.perf_counter()
    whole = nested(tuning)
    nested_s = time.perf_counter() - t0
    checks = {
        "left out (leave-one-set-out)": loso[chosen],
        "left out (leave-one-catalog-out)": loco,
        "fitted on all five": fitted_r5,
        "nested (the choice, too, made without the set)": {label: r5 for label, (_, r5) in whole.items()},
    }
    rule = {
        name: {"mean": mean(row), "gain": mean(row) - default_mean,
               "above BM25 on each": all(row[label] > bm25[label] for label in labels)}
        for name, row in checks.items()
    }  # fmt: skip
    met = all(rule[k]["gain"] > 1e-9 and rule[k]["above BM25 on each"] for k in GATE)

    short = {label: label.replace("LiveMCPBench ", "").replace("MetaTool ", "MT ") for label in labels}
    rows = [["plain BM25", *(f"{bm25[label]:.3f}" for label in labels), f"{mean(bm25):.3f}"]]
    rows.append(["hybrid default", *(f"{default[label]['R@5']:.3f}" for label in labels), f"{default_mean:.3f}"])
    for name, row in checks.items():
        rows.append([f"chosen, {name}", *(f"{row[label]:.3f}" for label in labels), f"{mean(row):.3f}"])
    print_table(f"R@5, tuning sets; chosen setting: {chosen.label}", ["ranking", *short.values(), "mean"], rows)
    ranked = sorted(loso, key=lambda s: -mean(loso[s]))
    print_table(
        "Leave-one-tuning-set-out R@5 (each set measured by the model fitted on the other four), best 12 and worst 3",
        ["setting", *short.values(), "mean", "− default"],
        [[s.label, *(f"{loso[s][label]:.3f}" for label in labels), f"{mean(loso[s]):.3f}",
          f"{mean(loso[s]) - default_mean:+.4f}"] for s in [*ranked[:12], *ranked[-3:]]],
    )  # fmt: skip
    print_table(
        "Needs brought into / pushed out of the first five by the chosen model fitted on all five",
        ["set", "won", "lost"],
        [[short[label], *changed[label]] for label in labels],
    )
    print_table("Nested: the setting each set's left-out model was chosen with", ["set", "setting", "R@5"],
                [[short[label], setting, f"{r5:.3f}"] for label, (setting, r5) in whole.items()])  # fmt: skip
    weights = dict(zip(FEATURE_SETS[chosen.features], (round(float(v), 4) for v in model.w), strict=True))
    print_table("Weights of the chosen model fitted on all five (standardised features)", ["feature", "weight"],
                [[k, f"{v:+.3f}"] for k, v in weights.items()])  # fmt: skip
    for name, r in rule.items():
        print(f"  {name}: mean {r['mean']:.4f} ({r['gain']:+.4f} against the default), "
              f"above BM25 on each: {r['above BM25 on each']}")  # fmt: skip
    verdict = "meets the rule" if met else "does not meet the rule"
    print(f"decision: {verdict}")

    report: dict[str, Any] = {
        "step": args.step,
        "features": FEATURES,
        "feature_sets": FEATURE_SETS,
        "settings_tried": len(loso),
        "reference_R@5": {"plain BM25": bm25, "hybrid default": {k: v["R@5"] for k, v in default.items()}},
        "hybrid default": default,
        "leave_one_set_out": {s.label: {**loso[s], "mean": mean(loso[s])} for s in ranked},
        "chosen": chosen.label,
        "chosen_checks": checks,
        "fitted_recall": fitted,
        "fitted_won_lost_at_5": changed,
        "nested": whole,
        "ms_per_query": {
            "default ranking (cached vectors)": round(ranking_ms, 2),
            "candidates' features after it": round(features_ms, 2),
        },
        "weights": weights,
        "rule": rule,
        "decision": verdict,
    }
    if args.held and not met:
        print("held-out halves not run: the rule is not met")
        report["held"] = "not run: the rule is not met"
    elif args.held:
        held_catalogs = only(every, HELD)
        held_refs = references(held_catalogs, "held")
        held = evidence(held_catalogs, encoder_for(held_catalogs), HELD)
        report["held"] = {
            label: {"plain BM25": held_refs["plain BM25"][label]["R@5"], "hybrid default": recall(s, None),
                    "re-ranked": recall(s, model), "won_lost_at_5": won_lost(s, model)}
            for label, s in held.items()
        }  # fmt: skip
        for label, r in report["held"].items():  # the step-by-step default is the default here too
            assert abs(r["hybrid default"]["R@5"] - held_refs["hybrid default"][label]["R@5"]) < 1e-9, label
        cells = [[k, f"{r['plain BM25']:.3f}", f"{r['hybrid default']['R@5']:.3f}", f"{r['re-ranked']['R@5']:.3f}",
                  f"{r['re-ranked']['R@1']:.3f} / {r['re-ranked']['R@10']:.3f}", "{} / {}".format(*r["won_lost_at_5"]),
                  r["re-ranked"]["needs"]] for k, r in report["held"].items()]  # fmt: skip
        print_table("R@5, held-out halves (run once, the chosen model fitted on the tuning union)",
                    ["set", "plain BM25", "hybrid default", "re-ranked", "re-ranked R@1 / R@10", "won / lost",
                     "needs"], cells)  # fmt: skip
        held_means = [float(np.mean([r[k] if k == "plain BM25" else r[k]["R@5"] for r in report["held"].values()]))
                      for k in ("plain BM25", "hybrid default", "re-ranked")]  # fmt: skip
        print("  means: plain BM25 {:.4f}, hybrid default {:.4f}, re-ranked {:.4f}".format(*held_means))
    report["seconds"] = {"evidence": round(evidence_s, 1), "selection": round(select_s, 1),
                         "nested": round(nested_s, 1), "total": round(time.perf_counter() - t_start, 1)}  # fmt: skip
    print(f"\nper query (median): default ranking {ranking_ms:.2f} ms (cached vectors), candidates' features "
          f"{features_ms:.2f} ms after it")  # fmt: skip
    print(f"{len(loso)} settings × {len(labels)} folds in {select_s:.0f} s; nested {nested_s:.0f} s; "
          f"total {report['seconds']['total']:.0f} s")  # fmt: skip
    write_json("search_ltr.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
