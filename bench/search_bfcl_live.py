"""Tool search on BFCL's live functions and requests: real users' words over a catalog of ~1,100 tools.

The set (``_bfcl_live``) stands in for the project's held-out intent-query set (many REST-style tools,
users' requests): 1,093 requests of BFCL's ``live_multiple``, ``live_parallel_multiple`` and
``live_parallel`` categories over every function the live categories offer, split by the SHA-256 of
the request into a tuning and a held-out half. Two catalogs: every distinct (name, description)
(1,122 tools), and one tool per name (528). Ranked, on both halves: plain BM25, the lexical default,
the hybrid default (MiniLM + WordLlama, as ``make embeddings`` installs them), and both defaults
without clauses. No setting is chosen here; the defaults are ranked as they are.

Besides the table: per need, the rank of its first tool under each ranking (up to 50), the needs the
defaults lose against plain BM25 at 5, and examples of them.

Query and tool embeddings are computed once and cached in ``bench/out/embed_bfcl_live_<model>.npz``
(keyed by text, checked against the model id, as ``search_recall`` caches its queries').

Run:  OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/search_bfcl_live.py
      (needs ``bfcl-eval``; writes bench/out/search_bfcl_live.json)
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import search_recall as sr
from _bfcl_live import LiveSet, live
from _common import write_json
from search_models import CANDIDATES, load, missing
from search_sets import BFCL_PIP, KS, Catalog, recall

from tool_tree.search import SearchError, _dense, build_index
from tool_tree.search._dense import embed_text

MODEL = "minilm-l6+wordllama"
DEPTH = 50
"""Ranks are recorded up to this depth (``SearchIndex.search``'s largest limit); deeper counts as missed."""
VARIANTS: list[sr.Variant] = [
    ("plain BM25", sr.BASELINE, None),
    ("lexical default", sr.DEFAULT, None),
    ("lexical without clauses", replace(sr.DEFAULT, clauses="none"), None),
    ("lexical, BM25F of the tuning sets (not default)", sr.LEXICAL_TUNED, None),
    ("hybrid default", sr.DEFAULT, MODEL),
    ("hybrid without clauses", replace(sr.DEFAULT, clauses="none"), MODEL),
]
DEFAULTS = ("lexical default", "hybrid default")
EXAMPLES = 5


def encoder_for(catalogs: list[Catalog]) -> tuple[sr.CachedEncoder | None, dict[str, Any], dict[str, Any]]:
    """The cached encoder of ``MODEL`` (None when not installed), tool-text vectors, and notes."""
    candidate = next(c for c in CANDIDATES if c.name == MODEL)
    why = missing(candidate)
    if why is not None:
        return None, {}, {"skipped": why}
    inner = load(candidate)
    tools = [embed_text(d) for c in catalogs for d in c.docs]
    texts = sr.unit_texts(catalogs, VARIANTS) + tools
    vectors, seconds, count = sr.embed_all(inner, f"bfcl_live_{MODEL}", texts)
    notes = {"embedded": count, "embed_s": round(seconds, 1), "tool_texts": len(set(tools))}
    return sr.CachedEncoder(inner, vectors), {t: vectors[t] for t in tools}, notes


def rankings(
    catalog: Catalog, cfg: Any, encoder: sr.CachedEncoder | None, tools: dict[str, Any]
) -> dict[str, list[str]]:
    """The first ``DEPTH`` tool keys of every query of ``catalog``."""
    index = build_index(catalog.docs, cfg)
    if encoder is not None:
        index = sr.with_vectors(index, catalog.docs, encoder, tools)
        _dense._encoder = encoder  # type: ignore[assignment]  # answers from the cache
    out: dict[str, list[str]] = {}
    try:
        for qs in catalog.sets.values():
            for query, _ in qs.queries:
                if query not in out:
                    try:
                        out[query] = [f"{h.server}.{h.tool}" for h in index.search(query, limit=DEPTH)]
                    except SearchError:
                        out[query] = []
    finally:
        _dense._encoder = None
    return out


def first_rank(ranked: list[str], need: list[str]) -> int | None:
    """The 1-based rank of the need's first tool in ``ranked``, or None beyond ``DEPTH``."""
    places = [ranked.index(t) for t in need if t in ranked]
    return min(places) + 1 if places else None


def run(live_set: LiveSet, encoder: sr.CachedEncoder | None, tools: dict[str, Any]) -> dict[str, Any]:
    catalog = live_set.catalog
    table: dict[str, dict[str, dict[str, float]]] = {}
    ranked: dict[str, dict[str, list[str]]] = {}
    for label, cfg, model in VARIANTS:
        if model is not None and encoder is None:
            continue
        t0 = time.perf_counter()
        ranked[label] = rankings(catalog, cfg, encoder if model else None, tools)
        table[label] = {name: recall(lambda q, r=ranked[label]: r[q][:10], qs) for name, qs in catalog.sets.items()}
        cells = " ".join(f"{row['R@5']:.3f}" for row in table[label].values())
        print(f"  {catalog.name}: {label:28s} {cells}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    needs: list[dict[str, Any]] = []
    for set_name, qs in catalog.sets.items():
        for query, query_needs in qs.queries:
            for need in query_needs:
                ranks = {label: first_rank(r[query], need) for label, r in ranked.items()}
                needs.append({"set": set_name, "category": live_set.category_of[query], "query": query,
                              "of": len(query_needs), "need": need, "ranks": ranks})  # fmt: skip
    return {"table": table, "multi": multi(needs, list(ranked)), "needs": needs, "losses": losses(needs, ranked)}


def multi(needs: list[dict[str, Any]], labels: list[str]) -> dict[str, dict[str, Any]]:
    """Recall@k over the needs of the queries with two needs or more, both halves together (there are few)."""
    chosen = [n for n in needs if n["of"] > 1]
    return {
        label: {"needs": len(chosen), **{f"R@{k}": sum(_at(n["ranks"][label], k) for n in chosen) / max(1, len(chosen))
                                         for k in KS}}
        for label in labels
    }  # fmt: skip


def _at(rank: int | None, k: int) -> bool:
    return rank is not None and rank <= k


def losses(needs: list[dict[str, Any]], ranked: dict[str, dict[str, list[str]]]) -> dict[str, Any]:
    """Per default and half: needs in plain BM25's first 5 but not the default's (lost), and the other way (won);
    then examples of lost needs (ordered by the SHA-256 of the query, so a rerun shows the same ones)."""
    out: dict[str, Any] = {}
    for label in DEFAULTS:
        if label not in ranked:
            continue
        lost = [n for n in needs if _at(n["ranks"]["plain BM25"], 5) and not _at(n["ranks"][label], 5)]
        won = [n for n in needs if _at(n["ranks"][label], 5) and not _at(n["ranks"]["plain BM25"], 5)]
        by_half = {
            half: {"lost": sum(n["set"] == half for n in lost), "won": sum(n["set"] == half for n in won)}
            for half in ("tune queries", "held queries")
        }
        lost.sort(key=lambda n: hashlib.sha256(n["query"].encode("utf-8")).hexdigest())
        examples = [{**n, f"top 3, {label}": ranked[label][n["query"]][:3]} for n in lost[:EXAMPLES]]
        out[label] = {"by_half": by_half, "examples": examples}
    return out


def show(result: dict[str, Any], name: str) -> None:
    table = result["table"]
    base = table["plain BM25"]
    print(f"\n{name}: R@5 (R@1 / R@10) per need; * = below plain BM25 on that half")
    halves = list(base)
    print(f"{'variant':28s} | " + " | ".join(f"{h} ({base[h]['queries']} q, {base[h]['needs']} needs)" for h in halves))
    for label, row in table.items():
        cells = []
        for h in halves:
            r = row[h]
            star = "*" if r["R@5"] < base[h]["R@5"] - 1e-9 else " "
            cells.append(f"{r['R@5']:.3f}{star} ({r['R@1']:.3f} / {r['R@10']:.3f})".ljust(len(h) + 20))
        print(f"{label:28s} | " + " | ".join(cells))
    several = result["multi"]
    cells = ", ".join(f"{label} {r['R@5']:.3f}" for label, r in several.items())
    print(f"queries of two needs or more ({several['plain BM25']['needs']} needs, both halves), R@5: {cells}")
    for label, info in result["losses"].items():
        counts = ", ".join(f"{h}: lost {c['lost']}, won {c['won']}" for h, c in info["by_half"].items())
        print(f"\n{label} against plain BM25 at 5 — {counts}")
        for n in info["examples"]:
            ranks = ", ".join(f"{k} {v if v is not None else f'>{DEPTH}'}" for k, v in n["ranks"].items())
            print(f"  [{n['set']}] {n['query'][:160]!r}\n    need {n['need'][:3]}: {ranks}")
            print(f"    {label} top 3: {n[f'top 3, {label}']}")


def main() -> None:
    sets = [s for s in (live(), live(by_name=True)) if s is not None]
    if not sets:
        sys.exit(f"bfcl-eval is not installed ({BFCL_PIP})")
    catalogs = [s.catalog for s in sets]
    t0 = time.perf_counter()
    encoder, tools, notes = encoder_for(catalogs)
    print(f"embeddings ({MODEL}): {notes} in {time.perf_counter() - t0:.0f} s", flush=True)
    report: dict[str, Any] = {"ks": list(KS), "depth": DEPTH, "model": MODEL, "embeddings": notes, "catalogs": {}}
    for s in sets:
        c = s.catalog
        counts = {
            "tools": len(c.docs),
            "servers": s.servers,
            "queries": sum(len(q.queries) for q in c.sets.values()),
            "needs": sum(q.needs for q in c.sets.values()),
            "queries with one need": s.one_need_queries,
            **{f"{name} (queries, needs)": [len(q.queries), q.needs] for name, q in c.sets.items()},
        }
        print(f"\n{c.name}: {counts}", flush=True)
        result = run(s, encoder, tools)
        show(result, c.name)
        report["catalogs"][c.name] = {"counts": counts, **result}
    write_json("search_bfcl_live.json", report)


if __name__ == "__main__":
    main()
