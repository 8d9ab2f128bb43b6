"""Field-weighted BM25 (BM25F) with precomputed impacts, plus catalog-mined query expansion.

Building turns every (term, tool) pair into one number, its *impact*: the BM25F score the
term contributes to the tool. A query is then only a sum of impacts over the postings of its
terms, so nothing about the catalog is recomputed per query.

BM25F (Robertson, Zaragoza & Taylor 2004): the term frequencies of the fields are
length-normalised per field, weighted and summed into one pseudo-frequency, which is then
saturated once::

    tf'(t, d) = Σ_f w_f · tf_f(t, d) / (1 − b + b · len_f(d) / avglen_f)
    impact(t, d) = idf(t) · tf' · (k1 + 1) / (k1 + tf')

Query expansion is mined from the catalog itself: two terms are related when the tools whose
text contains one tend to contain the other (normalised co-occurrence over tools). A query
term then also matches, at a discount, the tools that carry its related terms. Nothing comes
from outside the catalog, so it adapts to any set of servers.

The defaults were chosen on the tuning half of the benchmark data only (MetaTool split by
tool, and multi-step tasks over a 527-tool catalog) and are reported on the held-out half:
``bench/RESULTS.md``, "Tool search". Stemming and separate fields carry most of the lexical
gain over plain BM25; co-occurrence expansion and a lead-sentence boost did not help and stay off
(``expansion = 0``, ``w_lead = 0``), and so does server evidence (``server_weight = 0``).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from tool_tree.search._docs import MAX_DESCRIPTION, MAX_NAME, SearchDoc, capped_params
from tool_tree.search._query import FUSIONS, SPLITTERS
from tool_tree.search._text import WORDS, tokens
from tool_tree.text import first_sentence


@dataclass(frozen=True)
class RankingConfig:
    """The knobs of the ranking; the defaults are what ``build_index`` uses."""

    stem: bool = True
    k1: float = 2.0
    b: float = 0.5
    w_name: float = 3.0
    """Tool name (split into words)."""
    w_server: float = 1.0
    """Server name and package."""
    w_lead: float = 0.0
    """First sentence of the description, counted on top of ``w_description`` (0: not indexed)."""
    w_description: float = 1.0
    w_params: float = 0.2
    """Parameter names and descriptions."""
    w_server_description: float = 0.2
    expansion: float = 0.0
    """Weight of mined related terms relative to the query term itself (0 turns it off)."""
    expansion_terms: int = 5
    """How many related terms each term may expand to."""
    expansion_min_df: int = 2
    plain: bool = False
    """Baseline: one field (name + description), no field weights; ``stem`` still applies."""
    server_weight: float = 0.0
    """Weight of server evidence (see ``server_scores``) added to each tool's score (0 turns it off)."""
    clauses: str = "chains"
    """How a query is cut into clauses ranked on their own: a key of ``_query.SPLITTERS``."""
    clause_weight: float = 0.8
    """Weight of each clause's ranking in the fusion, relative to the whole query's (1.0)."""
    fusion: str = "maxrank"
    """How the rankings of a query's clauses are fused: a name in ``_query.FUSIONS``."""
    fusion_k: float = 10.0
    """The ``k`` of reciprocal-rank fusion: higher flattens the difference between ranks."""
    dense_alpha: float = 0.15
    """Weight of the lexical ranking in the hybrid (the rest goes to embedding similarity)."""
    words: int = WORDS
    """The word splitter the index's terms come from (`_text.WORDS`; an index that records none is of 1, which cut a
    word at each letter outside ASCII): ``generate-tree`` rebuilds an index of another."""

    def weight(self, field: str) -> float:
        return float(getattr(self, f"w_{field}"))


_KINDS = {bool: "true or false", int: "a whole number", float: "a finite number", str: "a string"}
MAX_SETTING = 1e6
"""The largest number setting (weights, ``fusion_k``) an index may hold: none reaches 20 (with `_index.MAX_IMPACT`,
what keeps a query's scores finite)."""


def ranking_config(data: dict[str, Any]) -> RankingConfig:
    """The ranking settings an index was built with, each of its default's type (a hand-edited index
    would otherwise fail mid-query).

    Raises:
        ValueError: a setting is of another type, not finite, or names no splitter or fusion.
    """
    if not isinstance(data, dict):
        raise ValueError("config is not an object")
    values: dict[str, Any] = {}
    for f in fields(RankingConfig):
        if f.name not in data:
            continue
        value, default = data[f.name], f.default
        if isinstance(default, (bool, str, int)):
            ok = type(value) is type(default)
        else:  # a float: a whole number is one too, and it must be finite
            ok = type(value) in (int, float) and math.isfinite(value)
        if not ok:
            raise ValueError(f"config.{f.name} is {value!r}, not {_KINDS[type(default)]}")
        if isinstance(default, float) and not 0.0 <= value <= MAX_SETTING:  # before: 1e300 summed past a float's range
            raise ValueError(f"config.{f.name} is {value!r}, not from 0 to {MAX_SETTING:g}")
        values[f.name] = float(value) if isinstance(default, float) else value
    values.setdefault("words", 1)  # written before the splitter had a version
    config = RankingConfig(**values)
    if config.clauses not in SPLITTERS:
        raise ValueError(f"config.clauses is {config.clauses!r}, not one of {', '.join(sorted(SPLITTERS))}")
    if config.fusion not in FUSIONS:
        raise ValueError(f"config.fusion is {config.fusion!r}, not one of {', '.join(FUSIONS)}")
    return config


def _lead(description: str) -> str:
    return first_sentence(description, limit=1_000)


def doc_fields(doc: SearchDoc, config: RankingConfig) -> dict[str, list[str]]:
    """The terms of each field of one tool, each field capped as ``_docs`` says."""
    stem = config.stem
    name = doc.tool[:MAX_NAME]
    description = doc.description[:MAX_DESCRIPTION]
    if config.plain:
        return {"description": tokens(f"{name} {description}", stem=stem)}
    server_words = doc.server if doc.package.lower() == doc.server.lower() else f"{doc.server} {doc.package}"
    fields = {
        "name": tokens(name, stem=stem),
        "server": tokens(server_words, stem=stem),
        "description": tokens(description, stem=stem),
        "params": tokens(" ".join(f"{n} {d}" for n, d in capped_params(doc.params)), stem=stem),
        "server_description": tokens(doc.server_description[:MAX_DESCRIPTION], stem=stem),
    }
    if config.w_lead:
        fields["lead"] = tokens(_lead(description), stem=stem)
    return fields


def idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


Postings = dict[str, tuple[list[int], list[float]]]
"""``term → (doc numbers, impacts)``, doc numbers ascending."""


def impacts(fields: Sequence[dict[str, list[str]]], config: RankingConfig) -> Postings:
    """The postings of all docs: every term's impact on every doc that contains it."""
    n = len(fields)
    names = sorted({f for doc in fields for f in doc})
    avglen = {f: max(1e-9, sum(len(doc.get(f, ())) for doc in fields) / max(1, n)) for f in names}
    weights = {f: 1.0 if config.plain else config.weight(f) for f in names}
    pseudo: dict[str, dict[int, float]] = defaultdict(dict)
    for d, doc in enumerate(fields):
        for f, terms in doc.items():
            if not terms or weights[f] == 0.0:
                continue
            norm = weights[f] / (1.0 - config.b + config.b * len(terms) / avglen[f])
            for term, tf in Counter(terms).items():
                slot = pseudo[term]
                slot[d] = slot.get(d, 0.0) + tf * norm
    out: Postings = {}
    for term in sorted(pseudo):
        postings = pseudo[term]
        w = idf(n, len(postings))
        ids = sorted(postings)
        out[term] = (ids, [round(w * postings[d] * (config.k1 + 1.0) / (config.k1 + postings[d]), 3) for d in ids])
    return out


def related_terms(fields: Sequence[dict[str, list[str]]], config: RankingConfig) -> dict[str, list[tuple[str, float]]]:
    """Mine ``term → [(related term, strength)]`` from co-occurrence of terms across tools.

    Strength is the cosine of the two terms' tool-incidence vectors (how much the sets of tools
    that use them overlap), so a term is related to another when they are used by largely the
    same tools. Terms used by a single tool carry no evidence and are left out, as are terms so
    common they appear in more than a tenth of the catalog.
    """
    if config.expansion <= 0.0 or config.expansion_terms <= 0:
        return {}
    n = len(fields)
    max_df = max(config.expansion_min_df, n // 10)
    doc_sets: list[set[str]] = []
    for doc in fields:
        doc_sets.append({t for f, terms in doc.items() if f not in ("server_description",) for t in terms})
    df = Counter(t for terms in doc_sets for t in terms)
    usable = {t for t, c in df.items() if config.expansion_min_df <= c <= max_df and len(t) > 2 and not t.isdigit()}
    co: dict[str, Counter[str]] = defaultdict(Counter)
    for terms in doc_sets:
        kept = sorted(t for t in terms if t in usable)
        for i, a in enumerate(kept):
            for b in kept[i + 1 :]:
                co[a][b] += 1
                co[b][a] += 1
    out: dict[str, list[tuple[str, float]]] = {}
    for a in sorted(co):
        scored = [(b, c / math.sqrt(df[a] * df[b])) for b, c in co[a].items() if c >= 2]
        scored.sort(key=lambda x: (-x[1], x[0]))
        best = [(b, round(s, 4)) for b, s in scored[: config.expansion_terms] if s >= 0.3]
        if best:
            out[a] = best
    return out


def server_scores(query_terms: Iterable[str], postings: Postings, server_of: Sequence[int]) -> dict[int, float]:
    """Evidence for each server (by number): the sum over query terms of the best impact any of its
    tools has for the term. A server whose tools together cover the query scores high even when no
    single tool does, so its tersely described tools can still rank. The server's name and
    description are fields of every tool, so they count here too.
    """
    out: dict[int, float] = defaultdict(float)
    empty: tuple[list[int], list[float]] = ([], [])
    for term in set(query_terms):
        best: dict[int, float] = {}
        ids, imps = postings.get(term, empty)
        for d, imp in zip(ids, imps, strict=True):
            s = server_of[d]
            if imp > best.get(s, 0.0):
                best[s] = imp
        for s, imp in best.items():
            out[s] += imp
    return out


def score(
    query_terms: Iterable[str],
    postings: Postings,
    related: dict[str, list[tuple[str, float]]],
    expansion: float,
) -> dict[int, float]:
    """Sum the impacts of the query's terms (and, discounted, of their related terms)."""
    q = Counter(query_terms)
    scores: dict[int, float] = defaultdict(float)
    empty: tuple[list[int], list[float]] = ([], [])
    for term, qtf in q.items():
        wq = 1.0 + math.log(qtf)
        ids, imps = postings.get(term, empty)
        for d, imp in zip(ids, imps, strict=True):
            scores[d] += wq * imp
        if expansion > 0.0:
            for rel, strength in related.get(term, ()):
                if rel in q:
                    continue
                ids, imps = postings.get(rel, empty)
                for d, imp in zip(ids, imps, strict=True):
                    scores[d] += wq * expansion * strength * imp
    return scores
