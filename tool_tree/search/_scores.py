"""Per-tool evidence for a query: every tool's lexical score and, when the index has embeddings,
its cosine similarity to the query, for callers that judge each tool on its own (the agent's
pre-filter) instead of taking the top of a ranking.

Built on the index as loaded (``load_index``): ``SearchIndex.scores`` for BM25F, the stored
vectors (``SearchIndex.dense``) and the process-wide encoder for the meaning side. Several
queries (e.g. the clauses of one request) are embedded in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tool_tree.search._dense import embed_queries
from tool_tree.search._index import MAX_QUERY, SearchIndex
from tool_tree.search._mode import embeddings_mode


@dataclass(frozen=True)
class ToolScores:
    """The evidence of every tool of an index for one query, in index order."""

    query: str
    tools: list[tuple[str, str]]
    """``(server, tool)`` of each position (shared by the results of one call)."""
    lexical: list[float]
    """BM25F score of each tool (0.0 when it shares no term with the query)."""
    meaning: list[float] | None
    """Cosine similarity of each tool's embedding to the query's; None without embeddings."""
    model: str | None = None
    """The model id of the vectors behind ``meaning`` (the index's); None without embeddings."""


def score_tools(index: SearchIndex, queries: Sequence[str], *, meaning: bool = True) -> list[ToolScores]:
    """Every tool's evidence for each of ``queries``.

    The meaning side is used when ``meaning`` is true, the index stores vectors, embeddings are
    not turned off (``TOOLTREE_SEARCH_EMBEDDINGS=0``) and the encoder that made them is installed.

    Raises:
        SearchError: ``meaning`` is asked for, the index has vectors, but the encoder cannot be
            loaded or is another model than the one that made them (the message says which); or
            ``TOOLTREE_SEARCH_EMBEDDINGS`` has an unknown value.
    """
    n = len(index)
    tools = [(e.server, e.tool) for e in index.entries]
    texts = [q[:MAX_QUERY] for q in queries]
    lexical: list[list[float]] = []
    for text in texts:
        row = [0.0] * n
        for d, s in index.scores(text).items():
            row[d] = s
        lexical.append(row)
    dense = index.dense
    cosines: list[list[float]] | None = None
    if meaning and dense is not None and texts and embeddings_mode() != "off":
        matrix, vectors = embed_queries(dense, texts)
        cosines = (vectors @ matrix.T).tolist()
    model = dense.model if cosines is not None and dense is not None else None
    return [
        ToolScores(text, tools, lexical[i], cosines[i] if cosines is not None else None, model)
        for i, text in enumerate(texts)
    ]
