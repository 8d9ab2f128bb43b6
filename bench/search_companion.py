"""The grid that chose the static companion's weight and the hybrid's lexical weight, on the tuning sets.

The hybrid search concatenates MiniLM's unit vector with WordLlama's scaled by ``sqrt(w)``
(``tool_tree.search._static``), so the cosine is ``(cos_minilm + w · cos_static) / (1 + w)``. Each
variant here builds that concatenation from the two models' cached vectors for one ``w`` and ranks
with the default ranking at one lexical weight ``alpha`` (``RankingConfig.dense_alpha``), beside
MiniLM alone and WordLlama alone at the same ``alpha``.

Run:  .venv/bin/python bench/search_companion.py [--step 4] [--weights 0.25,0.35,0.5,0.75,1,1.5,2]
      [--alphas 0.1,0.15,0.2,0.3] [--sets tune]
      (reads ../shared/corpora; writes bench/out/search_companion.json)
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import search_models
import search_recall as sr
from _common import write_json
from search_sets import livemcpbench, metatool, with_bfcl


class Concatenated:
    """MiniLM's and WordLlama's vectors side by side, the second scaled by ``sqrt(weight)``."""

    def __init__(self, first: Any, second: Any, weight: float) -> None:
        self.first, self.second, self.weight = first, second, weight
        self.model_id, self.dim = f"minilm+wordllama*{weight}@bench", first.dim + second.dim

    def encode(self, texts: list[str], **_: Any) -> Any:
        a, b = self.first.encode(texts), self.second.encode(texts)
        return np.concatenate([a, np.sqrt(self.weight) * b], axis=1) / np.sqrt(1.0 + self.weight)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--step", type=int, default=4, help="use every STEP-th MetaTool single-tool row")
    parser.add_argument("--weights", default="0.25,0.35,0.5,0.75,1,1.5,2")
    parser.add_argument("--alphas", default="0.1,0.15,0.2,0.3")
    parser.add_argument("--sets", choices=("tune", "held", "all"), default="tune")
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    alphas = [float(a) for a in args.alphas.split(",")]
    by_name = {c.name: c for c in search_models.CANDIDATES}
    for name in ("minilm-l6", "wordllama-256"):
        why = search_models.missing(by_name[name])
        if why is not None:
            print(f"{name}: {why}")
            return 2
    variants: list[sr.Variant] = [("lexical default", sr.DEFAULT, None)]
    for alpha in alphas:
        cfg = replace(sr.DEFAULT, dense_alpha=alpha)
        variants += [(f"MiniLM alone, alpha {alpha:g}", cfg, "minilm-l6")]
        variants += [(f"WordLlama alone, alpha {alpha:g}", cfg, "wordllama-256")]
        variants += [(f"MiniLM + WordLlama w={w:g}, alpha {alpha:g}", cfg, f"combo-{w:g}") for w in weights]
    catalogs = with_bfcl([metatool(args.step), livemcpbench()])
    # the combinations are built from the two models' own cached query vectors (their tools'
    # vectors are computed per catalog, as for any model)
    texts = sr.unit_texts(catalogs, variants)
    parts = []
    for name in ("minilm-l6", "wordllama-256"):
        inner = search_models.load(by_name[name])
        parts.append(sr.CachedEncoder(inner, sr.embed_all(inner, name, texts)[0]))
    combos = {f"combo-{w:g}": search_models.Candidate(f"combo-{w:g}", "", "numpy") for w in weights}
    sr.CANDIDATES = [*search_models.CANDIDATES, *combos.values()]
    sr.missing = lambda c: None if c.name in combos else search_models.missing(c)
    sr.load = lambda c: Concatenated(*parts, float(c.name[6:])) if c.name in combos else search_models.load(c)
    print(f"sets {args.sets}, MetaTool single rows every {args.step}")
    results, notes = sr.evaluate(catalogs, variants, args.sets)
    sr.print_table(results)
    for path in sr.OUT.glob("embed_combo-*.npz"):  # the parts' caches hold everything needed
        path.unlink()
    write_json("search_companion.json", {"sets": args.sets, "step": args.step, "results": results, "models": notes})
    return 0


if __name__ == "__main__":
    sys.exit(main())
