"""Optional hybrid ranking: BM25F fused with sentence-embedding similarity.

When the tree is generated with embeddings (by default whenever the extra is installed; see
``_mode.embedding_model``), the index also stores one vector per tool
(float16, base64, in index order). A query is then embedded too, and the two rankings are
fused by z-score: each score list is standardised over the whole catalog and
``alpha · z(bm25) + (1 − alpha) · z(cosine)`` ranks the tools (alpha is ``RankingConfig.dense_alpha``).
Standardising makes the two scales comparable without a tuned constant per catalog. Lexical matching still decides
exact names; the embedding closes the vocabulary gap ("reschedule" vs "move").

Everything here needs the ``embeddings`` extra (see ``_encoder``); without it an index that
carries vectors is still searched, by BM25F alone.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tool_tree.search._blas import query_threads
from tool_tree.search._docs import MAX_NAME, SearchDoc, capped_params
from tool_tree.search._encoder import Encoder, ModelInfo, _numpy
from tool_tree.search._errors import SearchError
from tool_tree.search._mode import embeddings_advice
from tool_tree.search._text import split_words

logger = logging.getLogger(__name__)

MAX_EMBED_CHARS = 1000

_encoder: Encoder | None = None
_encoder_error: SearchError | None = None
_encoder_lock = threading.Lock()
"""Held while the model loads: concurrent first queries wait for one load instead of each loading it."""
_warned = False

Progress = Callable[[int], None]
"""Told how many of the tools being embedded are done (after each batch)."""
EmbeddingNotice = Callable[[int], "Progress | None"]
"""Told how many tools are about to be embedded; may return a ``Progress`` to follow the work."""


def embed_text(doc: SearchDoc) -> str:
    """The text of a tool that is embedded: its name in words, server, description, parameters (each
    capped as ``_docs`` says, then all at ``MAX_EMBED_CHARS``)."""
    params = ", ".join(" ".join(split_words(name)) for name, _ in capped_params(doc.params))
    name = split_words(doc.tool[:MAX_NAME])
    server = [w for w in split_words(doc.server) if w not in name]
    text = f"{' '.join(name)}{f' ({doc.server})' if server else ''}: {doc.description[:MAX_EMBED_CHARS]}"
    return (f"{text} Parameters: {params}." if params else text)[:MAX_EMBED_CHARS]


def get_encoder(model: ModelInfo | None = None) -> Encoder:
    """The process-wide encoder, loaded once (again only if ``model`` names another one).

    Raises:
        SearchError: numpy or the model is not installed (the message says what to install).
    """
    global _encoder, _encoder_error
    current = _encoder
    if current is not None and (model is None or current.model_id == model.model_id):
        return current
    with _encoder_lock:
        if _encoder is not None and model is not None and _encoder.model_id != model.model_id:
            _encoder, _encoder_error = None, None
        if _encoder is None:
            if _encoder_error is not None and model is None:
                raise _encoder_error
            try:
                _encoder = Encoder(model.path if model is not None else None)
            except SearchError as e:
                _encoder_error = e
                raise
        return _encoder


@dataclass
class DenseVectors:
    """One embedding per tool of an index, kept as base64 text until a query needs them."""

    model: str
    dim: int
    encoded: list[str]
    _matrix: Any = None

    def matrix(self) -> Any:
        """A ``(tools, dim)`` float32 array.

        Raises:
            SearchError: the stored vectors are not base64 of float16 values, do not have the stated dimension, or
                hold NaN or an infinity (an index written elsewhere: before, every score became NaN and no search
                found anything, unsaid).
        """
        if self._matrix is None:
            np = _numpy()
            try:
                rows = [np.frombuffer(base64.b64decode(v, validate=True), dtype="<f2") for v in self.encoded]
            except ValueError:  # binascii.Error is one; or bytes that are no whole float16 values (before: exit 70)
                raise SearchError("stored embeddings are not base64 of float16 values") from None
            if any(r.shape != (self.dim,) for r in rows):
                raise SearchError(f"stored embeddings are not {self.dim}-dimensional")
            matrix = np.stack(rows).astype(np.float32) if rows else np.zeros((0, self.dim), np.float32)
            if not np.isfinite(matrix).all():
                raise SearchError("stored embeddings hold NaN or infinite values")
            self._matrix = matrix
        return self._matrix

    def to_data(self) -> dict[str, Any]:
        return {"model": self.model, "dim": self.dim, "vectors": self.encoded}

    @classmethod
    def from_data(cls, data: dict[str, Any], n_tools: int) -> DenseVectors:
        """Raises: ValueError: the data does not describe one vector per tool."""
        vectors = data["vectors"]
        if not isinstance(vectors, list) or len(vectors) != n_tools or not all(isinstance(v, str) for v in vectors):
            raise ValueError(f"dense vectors do not match the {n_tools} tools")
        return cls(model=str(data["model"]), dim=int(data["dim"]), encoded=vectors)


def encode_docs(
    docs: list[SearchDoc],
    hashes: list[str],
    model: ModelInfo,
    reuse: dict[str, str],
    on_embedding: EmbeddingNotice | None = None,
) -> DenseVectors:
    """Vectors for ``docs``, taking those whose hash is in ``reuse`` from there (incremental rebuild).

    The model is loaded only when some tool has no vector to reuse; ``on_embedding`` is told
    how many tools are about to be embedded (it is not called when none is), and the ``Progress``
    it may return is told how many are done after each batch.

    Raises:
        SearchError: the model cannot be loaded.
    """
    missing = [i for i, h in enumerate(hashes) if h not in reuse]
    progress = on_embedding(len(missing)) if missing and on_embedding is not None else None
    texts = [embed_text(docs[i]) for i in missing]
    fresh = get_encoder(model).encode(texts, on_progress=progress) if missing else None
    encoded: list[str] = []
    new = dict(zip(missing, range(len(missing)), strict=True))
    for i, h in enumerate(hashes):
        if i in new and fresh is not None:
            encoded.append(base64.b64encode(fresh[new[i]].astype("<f2").tobytes()).decode("ascii"))
        else:
            encoded.append(reuse[h])
    return DenseVectors(model=model.model_id, dim=model.dim, encoded=encoded)


def embed_queries(dense: DenseVectors, queries: Sequence[str]) -> tuple[Any, Any]:
    """The stored tool matrix and the embeddings of ``queries`` (one row each).

    Queries are embedded with one BLAS thread when the machine is saturated (``_blas.query_threads``).
    An index embedded by the sentence encoder alone is answered by it alone, also when the static
    companion has been installed since (``Encoder.model_ids``).

    Raises:
        SearchError: the embedding model cannot be loaded, or is not the one the index was built with, or the
            stored vectors are unusable (`DenseVectors.matrix`) or not of the model's dimension (an index written
            elsewhere naming the model: before, a ValueError out of the matrix product).
    """
    encoder = get_encoder()
    if dense.model not in encoder.model_ids:
        raise SearchError(f"the index was embedded with {dense.model}, but {encoder.model_id} is installed")
    matrix = dense.matrix()
    vectors = encoder.encode(list(queries), threads=query_threads(), model_id=dense.model)
    if vectors.shape[-1] != matrix.shape[1]:
        raise SearchError(f"stored embeddings are {matrix.shape[1]}-dimensional, {dense.model}'s {vectors.shape[-1]}")
    return matrix, vectors


def query_vectors(dense: DenseVectors, queries: Sequence[str]) -> tuple[Any, Any] | None:
    """``embed_queries``, or None (logged once) when the embedding model cannot be used here."""
    global _warned
    try:
        return embed_queries(dense, queries)
    except SearchError as e:
        if not _warned:
            logger.warning("tool search falls back to BM25 only: %s; %s", e, embeddings_advice())
            _warned = True
        return None


def fuse(lexical: dict[int, float], matrix: Any, vector: Any, alpha: float) -> dict[int, float]:
    """Hybrid scores of every tool: ``alpha · z(lexical) + (1 − alpha) · z(cosine)``, shifted positive."""
    return dict(enumerate(fuse_units([lexical], matrix, vector[None], alpha)[0].tolist()))


def fuse_units(lexical: Sequence[dict[int, float]], matrix: Any, vectors: Any, alpha: float) -> Any:
    """``fuse`` of several texts at once (a query and its clauses): a ``(texts, tools)`` float64 array whose
    row i holds ``fuse(lexical[i], matrix, vectors[i], alpha)``'s scores, bit for bit."""
    np = _numpy()
    lex = np.zeros((len(lexical), matrix.shape[0]), dtype=np.float64)
    for row, scores in zip(lex, lexical, strict=True):
        if scores:
            found = len(scores)
            row[np.fromiter(scores.keys(), np.int64, found)] = np.fromiter(scores.values(), np.float64, found)
    # one matrix-vector product per text, as ``fuse`` did: a matrix product would wake OpenBLAS's threads,
    # which wait for a core when the machine is busy (``_blas``)
    cos = np.stack([matrix @ v for v in vectors]).astype(np.float64)
    fused = _z(np, lex)
    fused *= alpha
    fused += (1.0 - alpha) * _z(np, cos)
    # shift so every score is positive: callers drop tools scored 0
    fused -= fused.min(axis=1, keepdims=True)
    fused += 1e-6
    return fused


def _z(np: Any, rows: Any) -> Any:
    """Each row standardised (0 where it is constant)."""
    sd = rows.std(axis=1, keepdims=True)
    out = rows - rows.mean(axis=1, keepdims=True)
    flat = sd[:, 0] <= 0
    sd[flat] = 1.0
    out /= sd
    out[flat] = 0.0
    return out


def fuse_by_rank(scores: Any, weights: Sequence[float], k: float) -> Any:
    """``_query.fuse_rankings(..., how="maxrank")`` over the rows of ``scores`` (``fuse_units``), as one array
    over the tools (0: reached by none): each tool keeps its best ``weight / (k + rank)``, a row's rank
    ordered by score, ties by tool number."""
    np = _numpy()
    fused = np.zeros(scores.shape[1], dtype=np.float64)
    ranks = np.arange(1, scores.shape[1] + 1, dtype=np.float64)
    ranks += k
    for row, weight in zip(scores, weights, strict=True):
        if weight <= 0.0:
            continue
        order = np.argsort(-row, kind="stable")  # stable: ties keep tool order
        order = order[: int(np.count_nonzero(row > 0.0))]  # the tools the row reaches, a prefix of its order
        fused[order] = np.maximum(fused[order], weight / ranks[: len(order)])
    return fused


def best(scores: Any, tie: Any, limit: int) -> list[tuple[int, float]]:
    """The first ``limit`` tools with a positive score, by score, then by ``tie`` (each tool's place in the
    catalog's order of server and tool name): ``(tool, score)``."""
    np = _numpy()
    order = np.lexsort((tie, -scores))[:limit]
    return [(d, s) for d, s in zip(order.tolist(), scores[order].tolist(), strict=True) if s > 0.0]
