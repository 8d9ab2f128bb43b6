"""The search index: built once per tree, stored as ``<tree>/search_index.json``, queried many times.

The file holds everything a query needs and nothing it has to recompute: one entry per
tool (names, path, one-line summary, the capped text that regex mode scans) and the BM25F
postings with precomputed impacts (see ``_rank``). Writing is deterministic: the same
catalog gives the same bytes (``_store`` writes it, and only when it changes).

A query is ranked in up to three steps, each chosen on the tuning half of the benchmark data
(bench/RESULTS.md): BM25F, plus the evidence of the tool's server (``_rank.server_scores``);
fused with embedding similarity when the index stores tool embeddings (``_dense``, see
``_mode`` for when); and, for a query that asks for several things, the rankings of its
clauses fused with the whole query's (``_query``). Regex mode is ``_regex``. A query that is a tool's name puts that
tool first (``SearchIndex._named``).

(Over 400 lines: one class, `SearchIndex`, whose building, loading and each step of a query share its entries,
postings and settings.)
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import re
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from tool_tree.search._dense import (
    DenseVectors,
    EmbeddingNotice,
    best,
    encode_docs,
    fuse_by_rank,
    fuse_units,
    query_vectors,
)
from tool_tree.search._docs import SearchDoc
from tool_tree.search._encoder import _numpy, model_info
from tool_tree.search._errors import SearchError
from tool_tree.search._mode import embeddings_mode
from tool_tree.search._query import fuse_rankings, split_clauses
from tool_tree.search._rank import (
    Postings,
    RankingConfig,
    doc_fields,
    impacts,
    ranking_config,
    related_terms,
    score,
    server_scores,
)
from tool_tree.search._regex import MAX_REGEX_TEXT, regex_scores
from tool_tree.search._text import WORDS, one_line, shown_query, summary_line, tokens
from tool_tree.text import shown
from tool_tree.tree import SEARCH_INDEX_FILE, module_name, stub_path

INDEX_FILE = SEARCH_INDEX_FILE
INDEX_FORMAT = "tooltree-search-index"
INDEX_VERSION = 1

MIN_LIMIT, MAX_LIMIT = 1, 50
MAX_QUERY = 2000
"""Characters of a query that are used; the rest is ignored."""
MAX_IMPACT = 1e6
"""The largest impact an index may hold. One is at most idf × (k1 + 1): under 17 × 3 for ten million tools with the
default settings (10,000 tools: 14.7). Bounded, as the ranking settings (`_rank.MAX_SETTING`) and the related terms'
strengths (0 to 1) are, a query's sum of them stays far inside a float's range (before, an index edited by hand to
impacts of 1e308 gave ``"score": Infinity``, which no JSON reader takes)."""


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


MAX_NAME_QUERY = 300
"""The longest query `SearchIndex._named` reads as a name: a longer one names no tool."""
_NAME_SEPARATORS = re.compile(r"[\s_\-./:]+")


def name_key(text: str) -> str:
    """``text`` as a tool name is compared: lower case, each run of spaces, ``_``, ``-``, ``.``, ``/`` and ``:``
    one ``_``, none at either end (``get_record``, ``Get record`` and ``get-record`` are one name)."""
    return _NAME_SEPARATORS.sub("_", text.strip().lower()).strip("_")


_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f]")
_NAME_SEPARATOR_CHARS = " _-./:"


def literal_key(text: str) -> str:
    """``text`` as `SearchIndex.literal` compares a query of symbols with a tool's name: case folded, without
    variation selectors (``⭐\ufe0f``, the emoji as a keyboard writes it, and ``⭐`` are one name), each run of white
    space one space, none at either end."""
    return " ".join(_VARIATION_SELECTORS.sub("", text).casefold().split())


def symbols_only(query: str) -> str:
    """``query``'s `literal_key` when it has no letter or digit (no word can rank it) and holds more than name
    separators (``_``, ``-``, ``.``, …, which nearly every name has); "" otherwise."""
    if len(query) > MAX_NAME_QUERY or any(c.isalnum() for c in query):
        return ""
    key = literal_key(query)
    return key if key.strip(_NAME_SEPARATOR_CHARS) else ""


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
        # `shown`: a repr of at most 40 characters (an int past 4,300 digits has none: before, a ValueError)
        raise SearchError(f"limit must be an integer from {MIN_LIMIT} to {MAX_LIMIT}, got {shown(limit)}")
    return limit


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
        self._ties: Any = None
        self._names: dict[str, list[int]] | None = None
        self._literal_names: list[str] | None = None
        servers = {name: i for i, name in enumerate(sorted({e.server for e in entries}))}
        self._server_of = [servers[e.server] for e in entries]
        self._server_tools: list[list[int]] = [[] for _ in servers]
        for d, s in enumerate(self._server_of):
            self._server_tools[s].append(d)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def config(self) -> RankingConfig:
        return self._config

    @property
    def dense(self) -> DenseVectors | None:
        """The stored tool embeddings, when the index was built with the embeddings extra."""
        return self._dense

    @property
    def entries(self) -> list[_Entry]:
        """One entry per tool, in index order (the numbers ``scores`` and ``rank`` use)."""
        return self._entries

    # --- queries ----------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 5, regex: bool = False) -> list[SearchHit]:
        """The best ``limit`` tools for ``query``, best first; ties are broken by server and tool name. A tool that only
        words weighing 0 reach (a word every tool of a large catalog has) is found, with score 0, after the others.

        See ``rank`` for how a query is ranked. In ``regex`` mode the query is a regular
        expression (RE2 syntax, see ``_regex``) matched case-insensitively against tool names and
        descriptions; a match in a name ranks above one in a description.

        Raises:
            TypeError: ``query`` is not a string, or ``regex`` not a bool (``"no"`` would be true).
            SearchError: the limit is not 1–50, the query is blank or has no word to search by (`_check_words`), the
                regex is rejected or ran too long, or ``TOOLTREE_SEARCH_EMBEDDINGS`` has an unknown value.
        """
        check_limit(limit)
        if not isinstance(query, str):
            raise TypeError(f"query: expected a string, got {type(query).__name__}")
        if not isinstance(regex, bool):
            raise TypeError(f"regex: expected True or False, got {type(regex).__name__} {regex!r:.40}")
        if not query.strip():
            raise SearchError("query is empty")
        embeddings_mode()  # an unknown value is refused in every search (before: only on an index with vectors)
        if not regex:
            self._check_words(query)
        scores = regex_scores(query, self._entries) if regex else self._rank(query)
        if not isinstance(scores, dict):  # the hybrid's array over all tools
            return [self._hit(d, s) for d, s in best(scores, self._tie_order(), limit)]
        entries = self._entries
        # the first ``limit`` of the full order (best score, then server and tool name), without sorting all; each a
        # tool a word of the query reached, also at 0: a word that every tool of a large catalog has weighs 0 once
        # rounded (`_rank.impacts`), and before, searching it found none of them
        ranked = heapq.nsmallest(
            limit, scores.items(), key=lambda kv: (-kv[1], entries[kv[0]].server, entries[kv[0]].tool)
        )
        return [self._hit(d, s) for d, s in ranked]

    def _check_words(self, query: str) -> None:
        """Raises: SearchError: ``query`` has no term (only punctuation, or words as common as "the", which are left
        out), names no tool and is in no tool's name as written (`literal`). Before, the embeddings ranked it by
        meaning all the same (``???`` found five tools, noted as "nearest by meaning"), while without them it matched
        nothing: two answers, neither of use."""
        if not tokens(query[:MAX_QUERY], stem=self._config.stem) and not self.by_name(query):
            held = ", and no tool's name holds it" if symbols_only(query) else ""
            raise SearchError(
                f"no word to search by in {shown_query(query)} (punctuation and words as common as 'the' or "
                f"'get' are left out){held}: say what the tool should do, or search it as a regular expression"
            )

    def by_name(self, query: str) -> bool:
        """Whether ``query`` names a tool (`_named`) or, of symbols alone, is in a tool's name (`literal`): what it
        finds was not found by meaning."""
        return bool(self._named(query) or self.literal(query))

    def literal(self, query: str) -> dict[int, float]:
        """The tools whose MCP name holds ``query`` as written, when the query has no letter or digit (an emoji or
        symbols, which no word ranks: ``🚀``, ``⭐``, ``++``), each scored by the share of its name the query is (1 for
        the whole name), both read as `literal_key` reads them; empty for any other query. Before, such a name was
        found only whole or by ``--regex``: ``🔥`` in a tree holding ``🔥🔥`` was "no word to search by"."""
        key = symbols_only(query)
        if not key:
            return {}
        if self._literal_names is None:
            self._literal_names = [literal_key(e.tool[:MAX_REGEX_TEXT]) for e in self._entries]
        return {d: round(len(key) / len(name), 4) for d, name in enumerate(self._literal_names) if key in name}

    def rank(self, query: str) -> dict[int, float]:
        """The score of every tool the query reaches (by position in the index).

        The whole query and each of its clauses (``_query.split_clauses``) are scored by BM25F
        plus server evidence; when the index carries embeddings and the extra is installed (and
        ``TOOLTREE_SEARCH_EMBEDDINGS`` is not ``0``) each is fused with embedding similarity; a
        query of several clauses then fuses the rankings by reciprocal rank.

        Raises:
            SearchError: ``TOOLTREE_SEARCH_EMBEDDINGS`` has an unknown value.
        """
        scores = self._rank(query)
        if isinstance(scores, dict):
            return scores
        return {d: s for d, s in enumerate(scores.tolist()) if s > 0.0}

    def _rank(self, query: str) -> dict[int, float] | Any:
        """``rank``'s scores; in the hybrid a float64 array over all tools (0: not reached), which
        ``search`` takes its first results from without a Python step per tool. A query that is a tool's name (as
        `name_key` reads names) puts that tool first (`_named`); one of no letter or digit finds only the tools whose
        names hold it (`literal`): no word ranks it, and its embedding's nearest tools were guesses."""
        scores = self.literal(query) if symbols_only(query) else self._fused(query)
        named = self._named(query)
        if not named:
            return scores
        top = (max(scores.values(), default=0.0) if isinstance(scores, dict) else float(scores.max())) + 1.0
        for d in named:
            scores[d] = top
        return scores

    def _named(self, query: str) -> list[int]:
        """The tools ``query`` names: their tool name, ``server.tool``, stub function or ``package.function``, read as
        `name_key` reads them. Before, ranking alone placed them: ``get_record`` found ``search_records`` first, since
        both share "record" and the other's description said it more often."""
        key = name_key(query) if len(query) <= MAX_NAME_QUERY else ""
        if not key:
            return []
        if self._names is None:
            names: dict[str, list[int]] = {}
            for d, e in enumerate(self._entries):
                qualified = name_key(f"{e.package}.{e.function}")  # what a hit shows (`server_1password.get_record`)
                for name in {name_key(e.tool), name_key(f"{e.server}.{e.tool}"), name_key(e.function), qualified}:
                    names.setdefault(name, []).append(d)
            self._names = names
        return self._names.get(key, [])

    def _fused(self, query: str) -> dict[int, float] | Any:
        """The lexical and embedding evidence of ``query`` and its clauses, fused."""
        cfg = self._config
        units = self.units(query)
        rankings = [self.lexical(u) for u in units]
        weights = [1.0] + [cfg.clause_weight] * (len(units) - 1)
        if embeddings_mode() != "off" and self._dense is not None:  # an unknown value refused, vectors or not
            found = query_vectors(self._dense, units)
            if found is not None:
                matrix, vectors = found
                hybrid = fuse_units(rankings, matrix, vectors, cfg.dense_alpha)
                if len(units) == 1:
                    return hybrid[0]
                if cfg.fusion == "maxrank":
                    return fuse_by_rank(hybrid, weights, cfg.fusion_k)
                rankings = [dict(enumerate(row.tolist())) for row in hybrid]
        if len(rankings) == 1:
            return rankings[0]
        fused = fuse_rankings(rankings, weights, cfg.fusion_k, cfg.fusion)
        for d in rankings[0]:  # the tools the whole query reaches at 0 (no rank in the fusion), after all others
            fused.setdefault(d, 0.0)
        return fused

    def _tie_order(self) -> Any:
        """Each tool's place in the order of server and tool name (``search``'s tie-break), as an array."""
        if self._ties is None:
            entries = self._entries
            order = sorted(range(len(entries)), key=lambda d: (entries[d].server, entries[d].tool))
            ties = [0] * len(order)
            for place, d in enumerate(order):
                ties[d] = place
            self._ties = _numpy().asarray(ties, dtype=_numpy().int64)
        return self._ties

    def units(self, query: str, clauses: str | None = None) -> list[str]:
        """The texts ``rank`` scores for ``query``: the query (its first ``MAX_QUERY`` characters), then
        its clauses when it has several (``_query.split_clauses`` with the splitter ``clauses`` names,
        by default the index's ``clauses`` setting)."""
        text = query[:MAX_QUERY]
        return [text, *split_clauses(text, self._config.clauses if clauses is None else clauses)]

    def lexical(self, text: str) -> dict[int, float]:
        """BM25F scores of ``text`` plus, weighted by ``server_weight``, its servers' evidence."""
        cfg = self._config
        terms = tokens(text, stem=cfg.stem)
        scores = score(terms, self._postings, self._related, cfg.expansion)
        if cfg.server_weight > 0.0 and scores:
            for s, evidence in server_scores(terms, self._postings, self._server_of).items():
                boost = cfg.server_weight * evidence
                for d in self._server_tools[s]:
                    scores[d] = scores.get(d, 0.0) + boost
        return scores

    def scores(self, query: str) -> dict[int, float]:
        """BM25F score of every tool that shares a term with ``query`` (by position in the index)."""
        terms = tokens(query[:MAX_QUERY], stem=self._config.stem)
        return score(terms, self._postings, self._related, self._config.expansion)

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

    def resplit(self, docs: list[SearchDoc]) -> SearchIndex:
        """This index built anew from ``docs``, the tools it was built from, with the terms of this release's word
        splitter (`_text.WORDS`): its settings and its tools' vectors are kept (they do not depend on the splitter).

        Raises:
            ValueError: ``docs`` are not the tools it was built from.
        """
        fresh = build_index(docs, replace(self._config, words=WORDS))
        if [e.hash for e in fresh._entries] != [e.hash for e in self._entries]:
            raise ValueError("the tree's tools are not the ones the index was built from")
        return SearchIndex(fresh._entries, fresh._postings, fresh._related, fresh._config, self._dense)

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
        except RecursionError:  # a file written elsewhere, nesting arrays 100,000 deep (before: raised on)
            raise SearchError(f"{source}: corrupt search index (nested too deeply); {rebuild}") from None
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
            raise SearchError(f"{source}: not a tooltree search index; {rebuild}")
        if data.get("version") != INDEX_VERSION:
            raise SearchError(
                f"{source}: search index version {data.get('version')!r} is not {INDEX_VERSION}; {rebuild}"
            )
        try:
            return cls._from_data(data)
        # OverflowError: impacts too large to sum (``math.fsum``; before: exit 70)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise SearchError(f"{source}: corrupt search index ({type(e).__name__}: {e}); {rebuild}") from None

    @classmethod
    def _from_data(cls, data: dict[str, Any]) -> SearchIndex:
        config = ranking_config(data["config"])
        entries = [_Entry(**{k: _str(v) for k, v in e.items()}) for e in data["tools"]]
        for entry in entries:  # printed as they are (``crm.get_record``, the stub's path): no escape, no newline
            module_name(entry.package)
            module_name(entry.function)
            stub_path(entry.path)
        n = len(entries)
        postings: Postings = {}
        for term, (ids, imps) in data["postings"].items():
            # cheap checks only (this runs for every term at load): lengths, the id range, and, in C loops, whole ids
            # and finite impacts from 0 to `MAX_IMPACT` (an index written elsewhere: before, strings failed the search
            # with a TypeError, NaN made every search find nothing)
            if not ids or len(ids) != len(imps) or min(ids) < 0 or max(ids) >= n:
                raise ValueError(f"postings of {term!r} are malformed")
            if type(sum(ids)) is not int or not math.isfinite(math.fsum(imps)):
                raise ValueError(f"postings of {term!r} are malformed")
            if min(imps) < 0.0 or max(imps) > MAX_IMPACT:
                raise ValueError(f"postings of {term!r} hold impacts out of the range 0 to {MAX_IMPACT:g}")
            postings[term] = (ids, imps)
        related = {str(t): [(str(r), float(s)) for r, s in rel] for t, rel in data["related"].items()}
        if not all(0.0 <= s <= 1.0 for rel in related.values() for _, s in rel):  # NaN too
            raise ValueError("related terms have scores out of the range 0 to 1")
        dense_data = data.get("dense")
        dense = DenseVectors.from_data(dense_data, n) if dense_data is not None else None
        return cls(entries, postings, related, config, dense)

    @classmethod
    def load(cls, tree: Path) -> SearchIndex:
        """Read ``<tree>/search_index.json``.

        Raises:
            SearchError: the index is missing, unreadable or corrupt.
        """
        from tool_tree.search._store import index_text  # the file's reading is the store's, which builds on this

        return cls.from_json(index_text(tree), source=str(tree / INDEX_FILE))


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def build_index(
    docs: list[SearchDoc],
    config: RankingConfig | None = None,
    *,
    embeddings: bool = False,
    reuse: dict[str, str] | None = None,
    on_embedding: EmbeddingNotice | None = None,
) -> SearchIndex:
    """Build the index of a catalog. The order of ``docs`` does not matter.

    With ``embeddings``, each tool's embedding is stored too (the embeddings extra); ``reuse``
    maps tool hashes to vectors of a previous index, which are kept instead of recomputed, and
    ``on_embedding`` is told how many tools need a new one before they are embedded (and may
    return a callback told how many are done after each batch).

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
            summary=summary_line(d.description),
            text=one_line(d.description, MAX_REGEX_TEXT),
            hash=doc_hash(d),
        )
        for d in ordered
    ]
    dense = None
    if embeddings:
        dense = encode_docs(ordered, [e.hash for e in entries], model_info(), reuse or {}, on_embedding)
    return SearchIndex(entries, impacts(per_doc, cfg), related_terms(per_doc, cfg), cfg, dense)
