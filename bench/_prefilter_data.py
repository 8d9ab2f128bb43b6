"""Data of the pre-filter benchmarks: MetaTool split by tool, and the evidence of queries, cached.

The split is the tool search's (``search_sets.held_out_tool``): a MetaTool tool belongs to the
calibration half when the first byte of the SHA-256 of its name is even, else to the held-out
half, so the pre-filter is calibrated on the half the search's defaults were tuned on. A
single-tool query goes with its tool; a multi-tool query goes to a half only when all its tools
are in that half (the others are not used). Each half is searched as a catalog of its own tools
only.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from _common import OUT, corpus
from search_sets import _ident, held_out_tool

from tool_tree.search import SearchDoc

__all__ = ["Half", "metatool_halves", "raw_scores"]


@dataclass
class Half:
    name: str
    docs: list[SearchDoc]
    queries: list[tuple[str, list[str]]]
    """``(query, the tools it needs)``: single-tool queries first, then multi-tool ones."""
    singles: int


def calibration_half(tool: str) -> bool:
    return not held_out_tool(tool)


SINGLES = 2500
"""Single-tool queries used per half: every query's SHA-256 orders them and the first 2,500 are
taken (embedding all ~10,000 per half takes tens of minutes on the shared 2-core machine)."""


def metatool_halves(singles: int = SINGLES) -> tuple[Half, Half]:
    """(calibration half, held-out half); ``singles`` single-tool queries each, and every multi-tool one."""
    described: dict[str, str] = json.loads(corpus("metatool", "plugin_des.json").read_text(encoding="utf-8"))
    with corpus("metatool", "all_clean_data.csv").open(encoding="utf-8", newline="") as f:
        single = [(row["Query"], row["Tool"]) for row in csv.DictReader(f)]
    multi = [
        (i["query"], list(i["tool"]))
        for i in json.loads(corpus("metatool", "multi_tool_query_golden.json").read_text(encoding="utf-8"))
    ]
    halves = []
    for name, side in (("calibration", True), ("held-out", False)):
        tools = {t for t in described if calibration_half(t) == side}
        docs = [
            SearchDoc(server=t, package=_ident(t), tool=t, function=_ident(t), path="", description=described[t])
            for t in sorted(tools)
        ]
        seen: set[str] = set()
        queries: list[tuple[str, list[str]]] = []
        for q, t in sorted(single, key=lambda qt: hashlib.sha256(qt[0].encode("utf-8")).digest()):
            if t in tools and q not in seen and len(queries) < singles:
                seen.add(q)
                queries.append((q, [t]))
        n_single = len(queries)
        for q, ts in multi:
            if ts and all(t in tools for t in ts) and q not in seen:
                seen.add(q)
                queries.append((q, sorted(set(ts))))
        halves.append(Half(name, docs, queries, n_single))
    return halves[0], halves[1]


def raw_scores(index: Any, texts: list[str], *, meaning: bool, cache: str) -> tuple[Any, Any]:
    """``(lexical, cosine or None)``: arrays (texts, tools) of every text's evidence, cached in
    ``bench/out/cache/<cache>-<hash>.npz`` (embedding ten thousand queries takes minutes here).

    The hash covers the texts and the whole index (its ranking settings, postings and vectors), so
    a change of the search's ranking never reads evidence computed under the old one."""
    import numpy as np

    from tool_tree.search import score_tools

    digest = hashlib.sha256(json.dumps([texts, meaning]).encode("utf-8"))
    digest.update(index.to_json().encode("utf-8"))
    key = digest.hexdigest()[:16]
    path = OUT / "cache" / f"{cache}-{key}.npz"
    if path.exists():
        data = np.load(path)
        return data["lex"], (data["cos"] if meaning else None)
    lex, cos = [], []
    for start in range(0, len(texts), 256):
        for s in score_tools(index, texts[start : start + 256], meaning=meaning):
            lex.append(s.lexical)
            if s.meaning is not None:
                cos.append(s.meaning)
    lex_a = np.asarray(lex, dtype=np.float32)
    cos_a = np.asarray(cos, dtype=np.float32) if meaning else np.zeros((0,), np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, lex=lex_a, cos=cos_a)
    return lex_a, (cos_a if meaning else None)
