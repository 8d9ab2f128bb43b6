"""Tool search over a generated tree: a persisted BM25F index, a regex mode, and rendering.

The index is built when the tree is generated (``write_index``) and stored beside the
manifest as ``search_index.json``, so a query only loads it and sums precomputed impacts.
``search_tools`` is the single implementation behind every surface: the ``tooltree search``
command, the agent's ``search_tools`` tool and ``search_tools(...)`` inside a sandbox script.

Stdlib only at import; regex mode imports ``re2`` (google-re2, a dependency) when it runs, and
the optional hybrid ranking (``_dense``) imports numpy only when it runs.
"""

from __future__ import annotations

from tool_tree.search._blas import on_this_thread
from tool_tree.search._dense import EmbeddingNotice, Progress
from tool_tree.search._docs import SearchDoc, docs_from_tree
from tool_tree.search._errors import SearchError
from tool_tree.search._index import INDEX_FILE, MAX_LIMIT, MIN_LIMIT, SearchHit, SearchIndex, build_index, check_limit
from tool_tree.search._mode import (
    EMBEDDINGS_ENV,
    EMBEDDINGS_MODES,
    EmbeddingsMode,
    embedding_model,
    embeddings_advice,
    embeddings_mode,
)
from tool_tree.search._rank import RankingConfig
from tool_tree.search._regex import MAX_PATTERN
from tool_tree.search._render import (
    DETAILS,
    MAX_RESULT_CHARS,
    Detail,
    check_detail,
    load_index,
    meaning_only,
    meaning_only_note,
    render_hits,
    search_records,
    search_tools,
)
from tool_tree.search._scores import ToolScores, score_tools
from tool_tree.search._static import has_static
from tool_tree.search._store import index_embeds_with, index_matches_manifest, index_splits_words_as_now, write_index
from tool_tree.search._text import split_words, stem_word, tokens

__all__ = [
    "DETAILS",
    "EMBEDDINGS_ENV",
    "EMBEDDINGS_MODES",
    "INDEX_FILE",
    "MAX_LIMIT",
    "MAX_PATTERN",
    "MAX_RESULT_CHARS",
    "MIN_LIMIT",
    "Detail",
    "EmbeddingNotice",
    "EmbeddingsMode",
    "Progress",
    "RankingConfig",
    "SearchDoc",
    "SearchError",
    "SearchHit",
    "SearchIndex",
    "ToolScores",
    "build_index",
    "check_detail",
    "check_limit",
    "docs_from_tree",
    "embedding_model",
    "embeddings_advice",
    "embeddings_mode",
    "has_static",
    "index_embeds_with",
    "index_matches_manifest",
    "index_splits_words_as_now",
    "load_index",
    "meaning_only",
    "meaning_only_note",
    "on_this_thread",
    "render_hits",
    "score_tools",
    "search_records",
    "search_tools",
    "split_words",
    "stem_word",
    "tokens",
    "write_index",
]
