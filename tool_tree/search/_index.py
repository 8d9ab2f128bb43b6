"""The search index: built once per tree, stored as ``<tree>/search_index.json``, queried many times.

The file holds everything a query needs and nothing it has to recompute: one entry per
tool (names, path, one-line summary, the capped text that regex mode scans) and the BM25F
postings with precomputed impacts (see ``_rank``). Writing is deterministic: the same
catalog gives the same bytes, and an unchanged index is not rewritten.

Tool embeddings for the hybrid ranking (``_dense``) are stored too when the embeddings extra
is installed (``auto``, the default), or always (``on``, an error without the extra), or never
(``off``): see ``embedding_model``. ``TOOLTREE_SEARCH_EMBEDDINGS`` (``1``, ``0`` or ``auto``)
sets the mode when no argument does; ``0`` also keeps queries lexical.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from tool_tree.search._dense import DenseVectors, encode_docs, fuse
from tool_tree.search._docs import SearchDoc, docs_from_tree
from tool_tree.search._encoder import ModelInfo, model_info
from tool_tree.search._errors import SearchError
from tool_tree.search._rank import Postings, RankingConfig, doc_fields, impacts, related_terms, score
from tool_tree.search._text import first_sentence, one_line, tokens
from tool_tree.tree import SEARCH_INDEX_FILE

INDEX_FILE = SEARCH_INDEX_FILE
INDEX_FORMAT = "tooltree-search-index"
INDEX_VERSION = 1
EMBEDDINGS_ENV = "TOOLTREE_SEARCH_EMBEDDINGS"

EmbeddingsMode = Literal["auto", "on", "off"]
EMBEDDINGS_MODES: tuple[EmbeddingsMode, ...] = ("auto", "on", "off")
_MODE_NAMES: dict[str, EmbeddingsMode] = {"": "auto", "auto": "auto", "1": "on", "on": "on", "0": "off", "off": "off"}

logger = logging.getLogger(__name__)

MIN_LIMIT, MAX_LIMIT = 1, 50
MAX_QUERY = 2000
"""Characters of a query that are used; the rest is ignored."""
MAX_PATTERN = 200
"""Longest regex pattern accepted."""
MAX_REGEX_TEXT = 1000
"""Characters of each description that regex mode scans."""

_QUANTIFIER = re.compile(r"[*+]|\{\d*,?\d*\}")
_UNBOUNDED = re.compile(r"[*+]|\{\d*,\d*\}")


def has_nested_quantifier(pattern: str) -> bool:
    """Whether a repeated group contains a repeat itself: ``(a+)+``, ``(\\w*)*``, ``((ab)+)*``.

    Such patterns can backtrack exponentially in Python's ``re``, which has no timeout. The
    check is a heuristic (overlapping alternations such as ``(a|aa)+`` pass it); the caps on
    pattern and text length bound what is left.
    """
    stack: list[bool] = []  # per open group: does it contain a quantifier?
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
            continue
        if ch == "(":
            stack.append(False)
        elif ch == ")" and stack:
            inner = stack.pop()
            repeated = _UNBOUNDED.match(pattern, i + 1) is not None
            if inner and repeated:
                return True
            if stack and (inner or repeated):
                stack[-1] = True
        elif stack and _QUANTIFIER.match(pattern, i):
            stack[-1] = True
        i += 1
    return False


@dataclass(frozen=True)
class SearchHit:
    """One tool found by a search."""

    server: str
    """The configured server name."""
    tool: str
    """The original MCP tool name."""
    function: str
    """The stub's function (and module) name."""
    package: str
    """The Python package under ``servers/``."""
    path: str
    """The stub's path relative to the tree root."""
    score: float
    summary: str
    """The first sentence of the tool's description."""

    @property
    def qualified_name(self) -> str:
        """``<package>.<function>``, the name a script imports."""
        return f"{self.package}.{self.function}"


@dataclass(frozen=True)
class _Entry:
    server: str
    package: str
    tool: str
    function: str
    path: str
    summary: str
    text: str
    """What regex mode scans besides the names: the description, capped."""
    hash: str
    """Hash of the ``SearchDoc`` the entry was built from."""


_DOC_FIELDS = fields(SearchDoc)
_ENTRY_FIELDS = fields(_Entry)


def doc_hash(doc: SearchDoc) -> str:
    """A stable hash of everything the index takes from one tool."""
    # The same JSON as ``asdict(doc)`` gives (params' tuples become lists), without its deep copy.
    fields_ = {f.name: getattr(doc, f.name) for f in _DOC_FIELDS}
    payload = json.dumps(fields_, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def check_limit(limit: int) -> int:
    """Raises: SearchError: ``limit`` is not an integer from 1 to 50."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not MIN_LIMIT <= limit <= MAX_LIMIT:
        raise SearchError(f"limit must be an integer from {MIN_LIMIT} to {MAX_LIMIT}, got {limit!r}")
    return limit


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile a regex-mode pattern (case-insensitive).

    Raises:
        SearchError: the pattern is empty, longer than ``MAX_PATTERN``, has a nested
            quantifier, or does not compile (the message names the ``re`` error).
    """
    if not pattern:
        raise SearchError("regex pattern is empty")
    if len(pattern) > MAX_PATTERN:
        raise SearchError(f"regex pattern is {len(pattern)} characters; the limit is {MAX_PATTERN}")
    if has_nested_quantifier(pattern):
        raise SearchError(
            f"regex pattern {pattern!r} repeats a group that already repeats (like (a+)+), which can take "
            "exponential time; simplify it"
        )
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as e:
        raise SearchError(f"bad regex {pattern!r}: {e}") from None


class SearchIndex:
    """A ranked, persisted index over the tools of one tree."""

    def __init__(
        self,
        entries: list[_Entry],
        postings: Postings,
        related: dict[str, list[tuple[str, float]]],
        config: RankingConfig,
        dense: DenseVectors | None = None,
    ) -> None:
        self._entries = entries
        self._postings = postings
        self._related = related
        self._config = config
        self._dense = dense

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def config(self) -> RankingConfig:
        return self._config

    @property
    def dense(self) -> DenseVectors | None:
        """The stored tool embeddings, when the index was built with the embeddings extra."""
        return self._dense

    # --- queries ----------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 5, regex: bool = False) -> list[SearchHit]:
        """The best ``limit`` tools for ``query``, best first; ties are broken by server and tool name.

        When the index carries embeddings and the embeddings extra is installed, the BM25F
        ranking is fused with embedding similarity (see ``_dense``); otherwise, or with
        ``TOOLTREE_SEARCH_EMBEDDINGS=0``, BM25F alone ranks.
        In ``regex`` mode the query is a Python regular expression matched (case-insensitively)
        against tool names and descriptions; a match in a name ranks above one in a description.

        Raises:
            SearchError: the limit is not 1–50, the query is blank, the regex is rejected, or
                ``TOOLTREE_SEARCH_EMBEDDINGS`` has an unknown value.
        """
        check_limit(limit)
        if not query.strip():
            raise SearchError("query is empty")
        if regex:
            scores = self._regex_scores(query)
        else:
            scores = self.scores(query)
            if self._dense is not None and embeddings_mode() != "off":
                scores = fuse(scores, self._dense, query[:MAX_QUERY]) or scores
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], self._entries[kv[0]].server, self._entries[kv[0]].tool))
        return [self._hit(d, s) for d, s in ranked[:limit] if s > 0.0]

    def scores(self, query: str) -> dict[int, float]:
        """BM25F score of every tool that shares a term with ``query`` (by position in the index)."""
        terms = tokens(query[:MAX_QUERY], stem=self._config.stem)
        return score(terms, self._postings, self._related, self._config.expansion)

    def _regex_scores(self, pattern: str) -> dict[int, float]:
        compiled = compile_pattern(pattern)
        out: dict[int, float] = {}
        for d, e in enumerate(self._entries):
            s = 0.0
            # Each name form on its own, so ``^get_document$`` or ``^docs\.get_document$`` match.
            names = (e.tool, f"{e.server}.{e.tool}", e.function, f"{e.package}.{e.function}")
            if any(compiled.search(name) for name in names):
                s += 2.0
            if compiled.search(e.text):
                s += 1.0
            if s:
                out[d] = s
        return out

    def _hit(self, d: int, s: float) -> SearchHit:
        e = self._entries[d]
        return SearchHit(
            server=e.server,
            tool=e.tool,
            function=e.function,
            package=e.package,
            path=e.path,
            score=round(s, 4),
            summary=e.summary,
        )

    # --- persistence ------------------------------------------------------------------

    def to_json(self) -> str:
        """Deterministic JSON text of the index."""
        data = {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "config": asdict(self._config),
            "tools": [{f.name: getattr(e, f.name) for f in _ENTRY_FIELDS} for e in self._entries],  # flat: no asdict
            "postings": {t: [ids, imps] for t, (ids, imps) in sorted(self._postings.items())},
            "related": {t: [[r, s] for r, s in rel] for t, rel in sorted(self._related.items())},
            "dense": self._dense.to_data() if self._dense is not None else None,
        }
        return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str = INDEX_FILE) -> SearchIndex:
        """Raises: SearchError: the text is not a search index this version can read."""
        rebuild = "run `tooltree generate-tree` to rebuild it"
        try:
            data = json.loads(text)
        except ValueError as e:
            raise SearchError(f"{source}: corrupt search index ({e}); {rebuild}") from None
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
            raise SearchError(f"{source}: not a tooltree search index; {rebuild}")
        if data.get("version") != INDEX_VERSION:
            raise SearchError(
                f"{source}: search index version {data.get('version')!r} is not {INDEX_VERSION}; {rebuild}"
            )
        try:
            return cls._from_data(data)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SearchError(f"{source}: corrupt search index ({type(e).__name__}: {e}); {rebuild}") from None

    @classmethod
    def _from_data(cls, data: dict[str, Any]) -> SearchIndex:
        known = {f.name for f in fields(RankingConfig)}
        config = RankingConfig(**{k: v for k, v in data["config"].items() if k in known})
        entries = [_Entry(**{k: _str(v) for k, v in e.items()}) for e in data["tools"]]
        n = len(entries)
        postings: Postings = {}
        for term, (ids, imps) in data["postings"].items():
            # cheap checks only (this runs for every term at load): lengths and the id range
            if not ids or len(ids) != len(imps) or min(ids) < 0 or max(ids) >= n:
                raise ValueError(f"postings of {term!r} are malformed")
            postings[term] = (ids, imps)
        related = {str(t): [(str(r), float(s)) for r, s in rel] for t, rel in data["related"].items()}
        dense_data = data.get("dense")
        dense = DenseVectors.from_data(dense_data, n) if dense_data is not None else None
        return cls(entries, postings, related, config, dense)

    @classmethod
    def load(cls, tree: Path) -> SearchIndex:
        """Read ``<tree>/search_index.json``.

        Raises:
            SearchError: the index is missing, unreadable or corrupt.
        """
        path = tree / INDEX_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SearchError(f"{path}: no search index; run `tooltree generate-tree` to build it") from None
        except (OSError, UnicodeDecodeError) as e:
            raise SearchError(f"{path}: cannot read search index ({e})") from None
        return cls.from_json(text, source=str(path))


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def embeddings_mode(mode: str | None = None) -> EmbeddingsMode:
    """``mode``, or when it is None the ``TOOLTREE_SEARCH_EMBEDDINGS`` variable: ``1``/``on``,
    ``0``/``off``, or unset/``auto``.

    Raises:
        SearchError: the value is none of these.
    """
    value = os.environ.get(EMBEDDINGS_ENV, "") if mode is None else mode
    known = _MODE_NAMES.get(value.strip().lower())
    if known is None:
        where = f"{EMBEDDINGS_ENV}={value}" if mode is None else f"embeddings mode {value!r}"
        raise SearchError(f"{where}: expected 1 (on), 0 (off) or auto")
    return known


def embedding_model(mode: str | None = None) -> ModelInfo | None:
    """The model whose vectors an index built now stores, or None when it stores none.

    ``auto`` uses the model when numpy and a model are installed, ``on`` requires them, ``off``
    stores none; ``mode`` None reads ``TOOLTREE_SEARCH_EMBEDDINGS`` (see ``embeddings_mode``).
    Cheap: neither numpy nor the weights are loaded.

    Raises:
        SearchError: the mode is ``on`` and numpy or the model is missing (the message says what
            to install), or the mode is not a known value.
    """
    chosen = embeddings_mode(mode)
    if chosen == "off":
        return None
    try:
        return model_info()
    except SearchError:
        if chosen == "on":
            raise
        return None


def build_index(
    docs: list[SearchDoc],
    config: RankingConfig | None = None,
    *,
    embeddings: bool = False,
    reuse: dict[str, str] | None = None,
    on_embedding: Callable[[int], None] | None = None,
) -> SearchIndex:
    """Build the index of a catalog. The order of ``docs`` does not matter.

    With ``embeddings``, each tool's embedding is stored too (the embeddings extra); ``reuse``
    maps tool hashes to vectors of a previous index, which are kept instead of recomputed, and
    ``on_embedding`` is told how many tools need a new one before they are embedded.

    Raises:
        SearchError: ``embeddings`` is asked for but the extra is not installed or the model
            cannot be loaded.
    """
    cfg = config or RankingConfig()
    ordered = sorted(docs, key=lambda d: (d.server, d.tool, d.path))
    per_doc = [doc_fields(d, cfg) for d in ordered]
    entries = [
        _Entry(
            server=d.server,
            package=d.package,
            tool=d.tool,
            function=d.function,
            path=d.path,
            summary=first_sentence(d.description),
            text=one_line(d.description, MAX_REGEX_TEXT),
            hash=doc_hash(d),
        )
        for d in ordered
    ]
    dense = None
    if embeddings:
        dense = encode_docs(ordered, [e.hash for e in entries], model_info(), reuse or {}, on_embedding)
    return SearchIndex(entries, impacts(per_doc, cfg), related_terms(per_doc, cfg), cfg, dense)


def _reusable_vectors(path: Path, model: str) -> dict[str, str]:
    """``tool hash → vector`` from the index already at ``path``, if it used the same model."""
    try:
        previous = SearchIndex.from_json(path.read_text(encoding="utf-8"), source=str(path))
    except (OSError, UnicodeDecodeError, SearchError):
        return {}
    dense = previous.dense
    if dense is None or dense.model != model:
        return {}
    return {e.hash: v for e, v in zip(previous._entries, dense.encoded, strict=True)}


_STORED_MODEL = re.compile(r'"dense":(?:null|\{"dim":\d+,"model":("(?:[^"\\]|\\.)*"))')


def index_embeds_with(tree: Path, model_id: str | None) -> bool:
    """Whether the index of ``tree`` stores vectors of ``model_id`` (None: stores none).

    Reads only the head of the file: the index is written with sorted keys, so ``dense`` and
    its model come right after the small ``config``. False when the file is missing or unclear.
    """
    try:
        with (tree / INDEX_FILE).open("rb") as f:
            head = f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    found = _STORED_MODEL.search(head)
    if found is None:
        return False
    if found.group(1) is None:
        return model_id is None
    try:
        return model_id is not None and json.loads(found.group(1)) == model_id
    except ValueError:
        return False


def write_index(
    tree: Path, *, embeddings: str | None = None, on_embedding: Callable[[int], None] | None = None
) -> Path:
    """Build the index of the tree at ``tree`` and store it as ``<tree>/search_index.json``.

    The file is written atomically, and only when its content changes. ``embeddings`` is
    ``auto``, ``on`` or ``off`` (default: ``TOOLTREE_SEARCH_EMBEDDINGS``, else ``auto``; see
    ``embedding_model``). Vectors of tools whose text did not change are taken from the
    previous index, so the model is loaded only when some tool is new or changed. In ``auto``
    mode a model that is installed but cannot be loaded gives an index without vectors and a
    logged warning. ``on_embedding`` is told how many tools are about to be embedded.

    Raises:
        SearchError: the tree's manifest or a snapshot is missing or malformed, embeddings are
            ``on`` but the extra is not installed or the model cannot be loaded, or the file
            cannot be written.
    """
    path = tree / INDEX_FILE
    mode = embeddings_mode(embeddings)
    model = embedding_model(mode)
    docs = docs_from_tree(tree)
    try:
        reuse = _reusable_vectors(path, model.model_id) if model is not None else {}
        index = build_index(docs, embeddings=model is not None, reuse=reuse, on_embedding=on_embedding)
    except SearchError as e:
        if mode != "auto" or model is None:
            raise
        logger.warning("search index written without embeddings: %s", e)
        index = build_index(docs)
    text = index.to_json()
    try:
        if path.read_text(encoding="utf-8") == text:
            return path
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    except OSError as e:
        raise SearchError(f"{path}: cannot read the previous search index ({e})") from None
    tmp = path.with_name(f".{INDEX_FILE}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise SearchError(f"{path}: cannot write the search index ({e})") from None
    return path
