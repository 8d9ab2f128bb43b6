"""Each server's own description as evidence for its tools, in the hybrid; tried on the tuning sets.

All server evidence tried before was lexical, or dense as the mean of a server's tool vectors
(bench/RESULTS.md). Here the server's description itself is used, with the default ranking and the
combined vectors (MiniLM + WordLlama, as ``make embeddings`` installs them):

- ``A β``: dense server evidence — each server's description (after its name in words) embedded
  once by the same encoder; a text's cosine to each server vector, z-scored over the servers, is
  added with weight β to each of that server's tools' fused hybrid score (then shifted positive
  again). Servers of one tool, or without a description, are left out. It is applied wherever the
  hybrid fuses (``_dense.fuse_units``): to the whole query's row and to each clause's, before the
  clauses are fused by best rank;
- ``B``: the server description's first sentence (at most 200 characters) appended to each tool's
  embedded text (``_dense.embed_text``), the catalogs re-embedded;
- ``C β``: A and B together.

MetaTool's tools are each their own server without a description, so every variant leaves it as
it is (its columns show that). Against the hybrid default and plain BM25 in the same run; R@1 / R@5
/ R@10 per set. ``--sets held`` runs the held-out sets instead (once, for a variant that won on
the tuning sets; ``--variants`` names which).

Run:  OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/search_server_text.py [--sets tune] [--step 16]
      (reuses bench/search_recall.py's cache of query embeddings; BFCL's sets need ``bfcl-eval``;
      writes bench/out/search_server_text[_held].json)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_recall as sr
from _common import patched, write_json
from search_sets import livemcpbench, metatool, with_bfcl

import tool_tree.search._index as index_module
from tool_tree.search import SearchDoc, SearchIndex, _dense
from tool_tree.search._dense import MAX_EMBED_CHARS, embed_text
from tool_tree.search._text import split_words
from tool_tree.text import first_sentence

MODEL = "minilm-l6+wordllama"
BETAS = (0.05, 0.1, 0.2, 0.3)
SERVER_SENTENCE = 200
"""Characters of the server description's first sentence that variant B appends."""

REAL_FUSE_UNITS = _dense.fuse_units
REAL_WITH_VECTORS = sr.with_vectors

TOOL_CACHE: dict[str, Any] = {}
"""Tool texts' vectors across variants (default and B texts differ, so one cache holds both)."""


def server_text(server: str, description: str) -> str:
    """What variant A embeds for a server: its name in words, then its description."""
    return f"{' '.join(split_words(server))}: {description[:MAX_EMBED_CHARS]}"


def text_with_server(doc: SearchDoc) -> str:
    """Variant B's embedded text of a tool: the default's, then its server description's first sentence."""
    text = embed_text(doc)
    sentence = first_sentence(doc.server_description, SERVER_SENTENCE) if doc.server_description.strip() else ""
    return f"{text} {sentence}" if sentence else text


class ServerEvidence:
    """Variant A's state: per index (keyed by its tool matrix) each tool's server and the servers' vectors."""

    def __init__(self) -> None:
        self.beta = 0.0
        self.by_matrix: dict[int, tuple[Any, Any]] = {}
        self.server_vectors: dict[str, Any] = {}
        self.tools_per_server: dict[str, int] = {}

    def register(self, index: SearchIndex, docs: list[SearchDoc], encoder: Any) -> None:
        """Embed the servers of ``index`` that qualify (two tools or more, a description) and remember them."""
        described = {d.server: d.server_description for d in docs}
        counts: dict[str, int] = {}
        for e in index.entries:
            counts[e.server] = counts.get(e.server, 0) + 1
        servers = sorted(s for s, n in counts.items() if n >= 2 and described.get(s, "").strip())
        texts = [server_text(s, described[s]) for s in servers]
        todo = [t for t in texts if t not in self.server_vectors]
        if todo:
            self.server_vectors.update(zip(todo, encoder.encode(todo), strict=True))
        place = {s: i for i, s in enumerate(servers)}
        server_of = np.array([place.get(e.server, -1) for e in index.entries], dtype=np.int64)
        matrix = np.stack([self.server_vectors[t] for t in texts]).astype(np.float32) if texts else None
        assert index.dense is not None
        self.by_matrix[id(index.dense.matrix())] = (server_of, matrix)
        self.tools_per_server.update({s: counts[s] for s in servers})

    def fuse_units(self, lexical: list[dict[int, float]], matrix: Any, vectors: Any, alpha: float) -> Any:
        """The default's fused rows, each plus β · z(cosine to the tool's server) for tools of a qualifying server."""
        fused = REAL_FUSE_UNITS(lexical, matrix, vectors, alpha)
        server_of, servers = self.by_matrix[id(matrix)]
        if self.beta <= 0.0 or servers is None or len(servers) < 2:
            return fused
        covered = server_of >= 0
        for row, vector in zip(fused, vectors, strict=True):
            cos = (servers @ vector).astype(np.float64)
            sd = cos.std()
            if sd <= 0.0:
                continue
            z = (cos - cos.mean()) / sd
            row[covered] += self.beta * z[server_of[covered]]
            row -= row.min()  # positive again: tools scored 0 are dropped
            row += 1e-6
        return fused


@contextmanager
def variant(evidence: ServerEvidence, beta: float, server_sentence: bool) -> Iterator[None]:
    """Rank with server evidence at ``beta`` (0: none) and, with ``server_sentence``, variant B's tool texts."""

    def with_vectors(index: SearchIndex, docs: Any, encoder: Any, _: dict[str, Any]) -> SearchIndex:
        index = REAL_WITH_VECTORS(index, docs, encoder, TOOL_CACHE)
        evidence.register(index, list(docs), encoder)
        return index

    patches = {
        (sr, "with_vectors"): with_vectors,
        (sr, "embed_text"): text_with_server if server_sentence else embed_text,
        (index_module, "fuse_units"): evidence.fuse_units,
    }
    evidence.beta = beta
    try:
        with patched(patches):
            yield
    finally:
        evidence.beta = 0.0


VARIANTS: dict[str, tuple[float, bool]] = {
    "hybrid default": (0.0, False),
    **{f"A β={b}": (b, False) for b in BETAS},
    "B server sentence": (0.0, True),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sets", choices=("tune", "held"), default="tune")
    parser.add_argument("--step", type=int, default=16, help="use every STEP-th MetaTool single-tool row")
    parser.add_argument("--variants", nargs="*", help="only these variants (labels as printed), besides the default")
    parser.add_argument("--c-beta", type=float, help="β of variant C (A and B); default: A's best tuning mean")
    args = parser.parse_args()
    catalogs = with_bfcl([metatool(args.step), livemcpbench()])
    evidence = ServerEvidence()
    print(f"sets {args.sets}, MetaTool single rows every {args.step}; R@5 per set")
    results: dict[str, dict[str, dict[str, float]]] = {}
    base, _ = sr.evaluate(catalogs, [("plain BM25", sr.BASELINE, None)], args.sets)
    results.update(base)

    def run(label: str, beta: float, server_sentence: bool) -> None:
        with variant(evidence, beta, server_sentence):
            row, _ = sr.evaluate(catalogs, [(label, sr.DEFAULT, MODEL)], args.sets)
        results.update(row)

    chosen = dict(VARIANTS)
    if args.variants is not None:
        chosen = {k: v for k, v in VARIANTS.items() if k == "hybrid default" or k in args.variants}
    for label, (beta, server_sentence) in chosen.items():
        run(label, beta, server_sentence)

    def mean(label: str) -> float:
        return sr.mean_r5(results[label])

    a_labels = [k for k in results if k.startswith("A β=")]
    c_beta = args.c_beta
    if c_beta is None and a_labels:
        c_beta = VARIANTS[max(a_labels, key=mean)][0]
    if c_beta is not None and (args.variants is None or any(v.startswith("C") for v in args.variants)):
        run(f"C β={c_beta}", c_beta, True)

    sr.print_cells(results, 22, 24)
    servers = evidence.tools_per_server
    print(f"servers with evidence (two tools or more, a description): {len(servers)}, {sum(servers.values())} tools")
    report = {"sets": args.sets, "step": args.step, "c_beta": c_beta, "results": results,
              "means_R@5": {label: round(mean(label), 4) for label in results}, "servers": servers}  # fmt: skip
    write_json(f"search_server_text{'_held' if args.sets == 'held' else ''}.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
