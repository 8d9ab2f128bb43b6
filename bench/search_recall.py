"""Tool-search quality and speed.

Quality: Recall@1/5/10 and MRR on MetaTool (199 tools, name + description only):
    - single-tool queries (``all_clean_data.csv``, 20,614 rows): the row's tool is the answer;
    - multi-tool queries (``multi_tool_query_golden.json``, 497 queries): each gold tool counts as
      one hit or miss, so Recall@k is the share of gold tools found in the first k.
Every ranking variant is measured in the same run against a plain BM25 baseline (one field:
name + description, no stemming, k1 = 1.2, b = 0.75).

The hybrid (BM25F fused with MiniLM embeddings; needs numpy and the model, ``make embeddings``)
is measured on the same queries in the same run. Its queries are embedded up front in batches
(the time is reported); each ranking then goes through ``SearchIndex.search`` as in use, with
the encoder answering from those vectors.

Speed, on the LiveMCPBench catalog (70 servers, 527 tools with real schemas): index build time
(with embeddings: encoding every tool), index size, load time, query latency p50/p90 (hybrid:
each query embedded on its own, as in use), model load time; build time and size for a
10,000-tool catalog made of copies.

Run:  .venv/bin/python bench/search_recall.py   (reads ../shared/corpora; writes bench/out/search_recall.json)
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tool_tree.search import RankingConfig, SearchDoc, SearchError, SearchIndex, build_index
from tool_tree.search._docs import description_of, params_of
from tool_tree.search._index import MAX_QUERY

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
OUT = ROOT / "bench" / "out" / "search_recall.json"

BASELINE = RankingConfig(plain=True, stem=False, k1=1.2, b=0.75)
DEFAULT = RankingConfig()
LEXICAL_VARIANTS: list[tuple[str, RankingConfig]] = [
    ("baseline: plain BM25 (name+desc)", BASELINE),
    ("plain BM25 + stemming", replace(BASELINE, stem=True)),
    ("BM25F fields, no stemming", replace(DEFAULT, stem=False)),
    ("BM25F fields, k1/b = 1.2/0.75", replace(DEFAULT, k1=1.2, b=0.75)),
    ("BM25F + lead-sentence boost", replace(DEFAULT, w_lead=1.0)),
    ("BM25F + catalog co-occurrence expansion", replace(DEFAULT, expansion=0.2)),
    ("default: BM25F + stemming", DEFAULT),
]
HYBRID = "hybrid: default + MiniLM (z-score fusion)"


def _ident(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") or "tool"


@dataclass
class Metrics:
    n: int = 0
    r1: int = 0
    r5: int = 0
    r10: int = 0
    rr: float = 0.0

    def add(self, ranked: Sequence[str], gold: str) -> None:
        self.n += 1
        if gold in ranked:
            k = ranked.index(gold)
            self.r1 += k < 1
            self.r5 += k < 5
            self.r10 += k < 10
            self.rr += 1.0 / (k + 1)

    def row(self) -> dict[str, float]:
        n = max(1, self.n)
        return {
            "n": self.n,
            "recall@1": self.r1 / n,
            "recall@5": self.r5 / n,
            "recall@10": self.r10 / n,
            "mrr@10": self.rr / n,
        }


def metatool() -> tuple[list[SearchDoc], list[tuple[str, str]], list[tuple[str, list[str]]]]:
    base = CORPORA / "metatool"
    described: dict[str, str] = json.loads((base / "plugin_des.json").read_text(encoding="utf-8"))
    docs = [
        SearchDoc(server=name, package=_ident(name), tool=name, function=_ident(name), path="", description=desc)
        for name, desc in described.items()
    ]
    with (base / "all_clean_data.csv").open(encoding="utf-8", newline="") as f:
        single = [(row["Query"], row["Tool"]) for row in csv.DictReader(f)]
    raw = json.loads((base / "multi_tool_query_golden.json").read_text(encoding="utf-8"))
    multi = [(item["query"], list(item["tool"])) for item in raw]
    return docs, single, multi


def livemcpbench() -> list[SearchDoc]:
    servers = json.loads((CORPORA / "livemcpbench" / "tools.json").read_text(encoding="utf-8"))
    docs: list[SearchDoc] = []
    for entry in servers:
        for server, listing in entry["tools"].items():
            for tool in listing["tools"]:
                docs.append(
                    SearchDoc(
                        server=server,
                        package=_ident(server),
                        tool=tool["name"],
                        function=_ident(tool["name"]),
                        path=f"servers/{_ident(server)}/{_ident(tool['name'])}.py",
                        description=description_of(tool),
                        params=params_of(tool),
                        server_description=entry.get("description", ""),
                    )
                )
    return docs


def evaluate(
    rank: Callable[[str], list[str]],
    single: Sequence[tuple[str, str]],
    multi: Sequence[tuple[str, list[str]]],
) -> dict[str, dict[str, float]]:
    cache: dict[str, list[str]] = {}

    def ranked(query: str) -> list[str]:
        if query not in cache:
            cache[query] = rank(query)
        return cache[query]

    s, m = Metrics(), Metrics()
    for query, gold in single:
        s.add(ranked(query), gold)
    for query, golds in multi:
        for gold in golds:
            m.add(ranked(query), gold)
    return {"single": s.row(), "multi": m.row()}


def ranker(index: SearchIndex) -> Callable[[str], list[str]]:
    def rank(query: str) -> list[str]:
        try:
            return [h.tool for h in index.search(query, limit=10)]
        except SearchError:
            return []

    return rank


def print_table(title: str, results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    head = f"{'variant':44s} | {'R@1':>6s} {'R@5':>6s} {'R@10':>6s} {'MRR':>6s} | {'multi R@5':>9s} {'R@10':>6s}"
    print(head)
    print("-" * len(head))
    for name, r in results.items():
        s, m = r["single"], r["multi"]
        print(
            f"{name:44s} | {s['recall@1']:6.3f} {s['recall@5']:6.3f} {s['recall@10']:6.3f} {s['mrr@10']:6.3f} |"
            f" {m['recall@5']:9.3f} {m['recall@10']:6.3f}"
        )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def speed(docs: list[SearchDoc], queries: list[str], embeddings: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"tools": len(docs)}
    t = time.perf_counter()
    index = build_index(docs, embeddings=embeddings)
    out["build_s"] = time.perf_counter() - t
    text = index.to_json()
    out["index_bytes"] = len(text.encode("utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        (tree / "search_index.json").write_text(text, encoding="utf-8")
        loads = []
        for _ in range(20):
            t = time.perf_counter()
            index = SearchIndex.load(tree)
            loads.append(time.perf_counter() - t)
    out["load_ms_p50"] = statistics.median(loads) * 1000
    index.search("warm up")
    lat = []
    for q in queries:
        t = time.perf_counter()
        index.search(q, limit=5)
        lat.append(time.perf_counter() - t)
    out["query_ms_p50"] = percentile(lat, 0.5) * 1000
    out["query_ms_p90"] = percentile(lat, 0.9) * 1000
    out["queries"] = len(queries)
    return out


def scaled(docs: list[SearchDoc], n: int) -> list[SearchDoc]:
    """``n`` tools made of copies of ``docs`` under renamed servers."""
    out: list[SearchDoc] = []
    copy = 0
    while len(out) < n:
        for d in docs[: n - len(out)]:
            out.append(replace(d, server=f"{d.server}_{copy}", package=f"{d.package}_{copy}"))
        copy += 1
    return out


def embeddings_available() -> str | None:
    from tool_tree.search._encoder import model_info

    try:
        model_info()
    except SearchError as e:
        return str(e)
    return None


def model_load_s() -> float:
    """Seconds to load the embedding model in a fresh ``Encoder`` (numpy already imported)."""
    from tool_tree.search._encoder import Encoder

    t = time.perf_counter()
    Encoder()
    return time.perf_counter() - t


def hybrid_ranker(
    docs: list[SearchDoc], queries: Sequence[str]
) -> tuple[Callable[[str], list[str]], float, Callable[[], None]]:
    """A ranker for the hybrid whose query embeddings are computed up front in batches; the seconds
    that took; and a function that puts the encoder back as it was."""
    import numpy as np

    from tool_tree.search._dense import get_encoder

    index = build_index(docs, embeddings=True)
    encoder = get_encoder()
    unique = sorted({q[:MAX_QUERY] for q in queries})
    t = time.perf_counter()
    vectors = dict(zip(unique, encoder.encode(unique), strict=True))
    seconds = time.perf_counter() - t
    encode = encoder.encode

    def cached(texts: list[str], **kwargs: Any) -> Any:
        if all(text in vectors for text in texts):
            return np.stack([vectors[text] for text in texts])
        return encode(texts, **kwargs)

    encoder.encode = cached  # type: ignore[method-assign]  # the bench only: answer from the batch

    def restore() -> None:
        del encoder.encode

    return ranker(index), seconds, restore


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=int, default=1, help="use every STEP-th single-tool row (default: all)")
    parser.add_argument("--no-dense", action="store_true", help="skip the embedding hybrid")
    args = parser.parse_args()
    if not CORPORA.is_dir():
        print(f"corpora not found at {CORPORA}", file=sys.stderr)
        return 2
    docs, single, multi = metatool()
    single_all = single[:: args.step]
    report: dict[str, Any] = {"corpus": "metatool", "tools": len(docs), "single_rows": len(single_all)}
    report["multi_queries"] = len(multi)
    report["multi_gold_tools"] = sum(len(g) for _, g in multi)

    results: dict[str, dict[str, dict[str, float]]] = {}
    for name, config in LEXICAL_VARIANTS:
        results[name] = evaluate(ranker(build_index(docs, config)), single_all, multi)

    missing = "skipped (--no-dense)" if args.no_dense else embeddings_available()
    title = f"MetaTool, {len(single_all)} single-tool rows, {len(multi)} multi-tool queries"
    if missing is None:
        t = time.perf_counter()
        queries = [q for q, _ in single_all] + [q for q, _ in multi]
        rank, encode_s, restore = hybrid_ranker(docs, queries)
        results[HYBRID] = evaluate(rank, single_all, multi)
        restore()  # latency below is measured with each query embedded on its own
        total_s = time.perf_counter() - t
        n = len({q[:MAX_QUERY] for q in queries})
        report["hybrid_time"] = {"queries": n, "encode_s": encode_s, "total_s": total_s}
        title += f"; hybrid: {n} queries embedded in {encode_s:.0f} s, {total_s:.0f} s in all"
    else:
        report["hybrid_skipped"] = missing
    print_table(title, results)
    if missing is not None:
        print(f"\nembedding hybrid not measured: {missing}")
    report["results"] = results

    catalog = livemcpbench()
    latency_queries = [q for q, _ in single[::41]][:500]
    report["speed"] = {"bm25": speed(catalog, latency_queries, embeddings=False)}
    if missing is None:
        report["speed"]["hybrid"] = speed(catalog, latency_queries, embeddings=True)
        report["speed"]["model_load_s"] = model_load_s()
    big = scaled(catalog, 10_000)
    t = time.perf_counter()
    big_index = build_index(big)
    report["speed"]["build_10000_s"] = time.perf_counter() - t
    report["speed"]["index_bytes_10000"] = len(big_index.to_json().encode("utf-8"))
    print(f"\nLiveMCPBench catalog: {len(catalog)} tools")
    for mode, r in report["speed"].items():
        if isinstance(r, dict):
            print(
                f"  {mode:7s} build {r['build_s'] * 1000:8.1f} ms  index {r['index_bytes'] / 1024:7.0f} KiB  "
                f"load p50 {r['load_ms_p50']:6.1f} ms  query p50 {r['query_ms_p50']:6.2f} ms  "
                f"p90 {r['query_ms_p90']:6.2f} ms  ({r['queries']} queries)"
            )
    if "model_load_s" in report["speed"]:
        print(f"  embedding model load: {report['speed']['model_load_s'] * 1000:.0f} ms")
    print(
        f"  10,000 tools (BM25F): build {report['speed']['build_10000_s']:.2f} s, "
        f"index {report['speed']['index_bytes_10000'] / 1024 / 1024:.1f} MiB"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
