"""What the model reads: search hits rendered at one of three detail levels.

- ``name``: one qualified name per line (``crm.update_record``);
- ``summary``: the qualified name and one-line description, then the stub function's
  signature, read from the stub with ``ast`` (never imported or run);
- ``full``: the text of each stub.

``search_tools`` is the single implementation behind the CLI, the agent's ``search_tools`` tool
and the ``search_tools(...)`` call inside a sandbox script. What one call can make the host do
is bounded: at most ``MAX_CONCURRENT`` searches run at once in a process (the others wait up to
``QUEUE_TIMEOUT_S``, then fail), and a rendered result is at most ``MAX_RESULT_CHARS`` long.
"""

from __future__ import annotations

import ast
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from tool_tree.regenerate import regenerate_command
from tool_tree.search._docs import docs_from_tree
from tool_tree.search._errors import SearchError
from tool_tree.search._index import INDEX_FILE, SearchHit, SearchIndex, build_index, check_limit
from tool_tree.search._regex import shown_pattern
from tool_tree.search._store import built_for, index_text, manifest_hash
from tool_tree.search._text import WORDS, one_line, shown_query
from tool_tree.text import shown
from tool_tree.tree import MANIFEST_FILE, Manifest, TreeError, read_in_tree

Detail = Literal["name", "summary", "full"]
DETAILS: tuple[str, ...] = get_args(Detail)

MAX_CONCURRENT = 2
"""Searches that run at once in one process (the machine's cores, not the number of callers)."""
QUEUE_TIMEOUT_S = 10.0
"""Seconds a search waits for its turn before it fails."""
MAX_RESULT_CHARS = 64_000
"""Longest rendered result; the hits that do not fit are named in a last line instead."""
MAX_STUB_BYTES = 2_000_000
"""The largest stub read (and parsed for its signature): the generator writes none over 500,000 characters
(``generator.render.MAX_SOURCE``), 2 MB at most in UTF-8. Before, a stub of a tree written elsewhere was read and
parsed whatever its size: one of 40 MB cost a `tooltree search` 89 s and 19 GB."""

_FileId = tuple[int, int, int, int] | None
_cache: dict[Path, tuple[tuple[_FileId, _FileId], SearchIndex]] = {}
_cache_lock = threading.Lock()
_gate = threading.BoundedSemaphore(MAX_CONCURRENT)
_T = TypeVar("_T")
logger = logging.getLogger(__name__)


def _bounded(work: Callable[[], _T]) -> _T:
    """Run ``work`` as one of at most ``MAX_CONCURRENT`` searches.

    Raises:
        SearchError: no turn came within ``QUEUE_TIMEOUT_S`` seconds.
    """
    if not _gate.acquire(timeout=QUEUE_TIMEOUT_S):
        raise SearchError(f"tool search is busy ({MAX_CONCURRENT} searches running for {QUEUE_TIMEOUT_S:g} s); retry")
    try:
        return work()
    finally:
        _gate.release()


def check_detail(detail: str) -> Detail:
    """Raises: SearchError: ``detail`` is not one of ``name``, ``summary``, ``full``."""
    if detail == "name":
        return "name"
    if detail == "summary":
        return "summary"
    if detail == "full":
        return "full"
    raise SearchError(f"detail must be one of {', '.join(DETAILS)}, got {shown(detail)}")  # (before: all of it)


def _read_stub(tree: Path, hit: SearchHit) -> str | None:
    """The text of a hit's stub, or None when it is missing, unreadable, no ``.py`` file in the tree (the index may
    name any path), reached through a link, or over `MAX_STUB_BYTES`."""
    if not hit.path.endswith(".py"):
        return None
    try:
        return read_in_tree(tree, hit.path, MAX_STUB_BYTES).decode("utf-8")
    except (OSError, ValueError):  # ValueError: a path out of the tree, or UnicodeDecodeError
        return None


def signature(source: str, function: str) -> str | None:
    """``def f(*, a: int, b: str = ...) -> T`` of the top-level function ``function`` in ``source``.

    An optional parameter of a stub (``b: str | NotGiven = NOT_GIVEN``: left out of the call unless given) is shown as
    a stub file shows a parameter with a default, ``b: str = ...``: the same meaning in fewer tokens (before: 20
    characters more a parameter, in every signature a prompt or a search result shows).
    """
    try:
        module = ast.parse(source)
        for node in module.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function:
                prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
                returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
                return f"{prefix} {node.name}({_parameters(node.args, _runtime_names(module))}){returns}"
    # RecursionError and MemoryError: nesting past the parser's stack, or past `ast.unparse`'s recursion (a stub
    # edited or written elsewhere; before, `tooltree search` exit 70, a script's search "failed on the host")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return None


def _runtime_names(module: ast.Module) -> tuple[str, str]:
    """The names ``module`` gives ``NotGiven`` and ``NOT_GIVEN`` of ``tool_tree.runtime`` (a stub renames them when
    a parameter or type takes the name)."""
    names = {"NotGiven": "NotGiven", "NOT_GIVEN": "NOT_GIVEN"}
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module == "tool_tree.runtime":
            for alias in node.names:
                if alias.name in names:
                    names[alias.name] = alias.asname or alias.name
    return names["NotGiven"], names["NOT_GIVEN"]


def _parameters(args: ast.arguments, runtime: tuple[str, str]) -> str:
    """``args`` as ``ast.unparse`` writes them, but each ``T | NotGiven = NOT_GIVEN`` as ``T = ...``, and a default
    of an annotated parameter spaced as PEP 8 writes it."""
    not_given, sentinel = runtime

    def one(arg: ast.arg, default: ast.expr | None) -> str:
        annotation = arg.annotation
        shown = None if default is None else ast.unparse(default)
        if isinstance(default, ast.Name) and default.id == sentinel:
            shown = "..."
            if (
                isinstance(annotation, ast.BinOp)
                and isinstance(annotation.op, ast.BitOr)
                and isinstance(annotation.right, ast.Name)
                and annotation.right.id == not_given
            ):
                annotation = annotation.left
        text = arg.arg if annotation is None else f"{arg.arg}: {ast.unparse(annotation)}"
        if shown is not None:
            text += f"={shown}" if annotation is None else f" = {shown}"
        return text

    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    parts: list[str] = []
    for i, (arg, default) in enumerate(zip(positional, [*defaults, *args.defaults], strict=True)):
        parts.append(one(arg, default))
        if i == len(args.posonlyargs) - 1:
            parts.append("/")
    if args.vararg is not None:
        parts.append("*" + one(args.vararg, None))
    elif args.kwonlyargs:
        parts.append("*")
    parts += [one(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    if args.kwarg is not None:
        parts.append("**" + one(args.kwarg, None))
    return ", ".join(parts)


def render_hits(tree: str | os.PathLike[str], hits: list[SearchHit], detail: Detail) -> str:
    """Render ``hits`` (of the tree folder ``tree``) for the model at the given detail level.

    Raises:
        SearchError: ``detail`` is not one of ``name``, ``summary``, ``full``.
    """
    detail = check_detail(detail)
    tree = Path(tree)
    if not hits:
        return "No tools matched."
    if detail == "name":
        return "\n".join(h.qualified_name for h in hits) + "\n"
    blocks: list[str] = []
    for h in hits:
        source = _read_stub(tree, h)
        if detail == "full":
            body = source if source is not None else f"# {h.path}: stub missing; regenerate the tree\n"
            blocks.append(f"# ── {h.path} ──\n{body.rstrip()}\n")
            continue
        summary = one_line(h.summary, 200) or "(no description)"
        sig = signature(source, h.function) if source is not None else None
        sig_line = sig or "(signature unavailable: stub missing or unreadable)"
        lines = [f"{h.qualified_name} — {summary}", f"    {sig_line}", f"    {h.path}"]
        blocks.append("\n".join(lines) + "\n")
    return _capped(blocks, hits)


def _capped(blocks: list[str], hits: Sequence[SearchHit]) -> str:
    """The blocks joined, up to ``MAX_RESULT_CHARS``; the hits left out are named in a last line."""
    limit = MAX_RESULT_CHARS
    out: list[str] = []
    size = 0
    for i, block in enumerate(blocks):
        if size + len(block) + 1 > limit:
            rest = ", ".join(h.qualified_name for h in hits[i:])
            room = max(0, limit - size - 200)
            if not out and room:  # the first block alone is too long: show its head
                out.append(block[:room] + "\n# … (cut)\n")
                rest = ", ".join(h.qualified_name for h in hits[i + 1 :])
            if rest:
                out.append(f"[not shown, the result is capped at {limit} characters: {one_line(rest, 160)}]\n")
            break
        out.append(block)
        size += len(block) + 1
    return "\n".join(out)


def load_index(tree: str | os.PathLike[str]) -> SearchIndex:
    """The index of the tree folder ``tree``, reloaded only when the file on disk (or the tree's manifest) changes.

    An index built from another manifest than the tree's (a generation interrupted or failed after
    writing the manifest, or still writing the index) would miss the tools added since and find
    the ones removed. It is not used: the tree's tools are indexed in memory instead, by their
    words only (no embeddings), and a warning says to run ``tooltree generate-tree``. An index
    that records no manifest (written by an older tooltree) is used as it is while it holds the tools the manifest
    names. One of an older word splitter is searched with its tools split anew (`_resplit`).

    Raises:
        SearchError: the index is missing, unreadable or corrupt, or it disagrees with the tree and
            the tree's manifest or a snapshot is missing or malformed.
    """
    tree = Path(tree)
    path = tree.resolve() / INDEX_FILE  # the tree's folder, not the index, may be a link (`read_in_tree`)
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        raise SearchError(f"{path}: no search index; run `tooltree generate-tree` to build it") from None
    except OSError as e:
        raise SearchError(f"{path}: cannot read search index ({e})") from None
    key = (_identity(st), _identity(path.with_name(MANIFEST_FILE)))
    with _cache_lock:  # one load per file change, however many callers arrive at once
        cached = _cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        text = index_text(path.parent)
        index = SearchIndex.from_json(text, source=str(path))
        stored = built_for(text)
        if _stale(stored, index, path.parent):
            index = _index_of_tree(path)
        elif index.config.words != WORDS:
            index = _resplit(index, path)
        _cache[path] = (key, index)
        return index


def _stale(stored: str | None, index: SearchIndex, tree: Path) -> bool:
    """Whether ``index`` (built from the manifest whose hash is ``stored``) is not the index of ``tree``: built from
    another manifest; or, recording none (an older release's), holding other tools than the tree's manifest names,
    or other stubs for them (before: used as it was, so a run of that release interrupted after its manifest found
    tools the tree no longer had). A manifest that cannot be read leaves an index that records none as it is."""
    if stored is not None:
        return stored != manifest_hash(tree)
    try:
        manifest = Manifest.load(tree)
    except TreeError:
        return False
    return {(e.server, e.tool, e.path) for e in index.entries} != {(t.server, t.tool, t.path) for t in manifest.tools}


def _identity(file: os.stat_result | Path) -> _FileId:
    """What tells one version of a file from the next (each is written anew or replaced); None: no file. With its
    change time, which no one sets: a file rewritten in place to its size and modification time is another version."""
    try:
        st = file if isinstance(file, os.stat_result) else os.stat(file, follow_symlinks=False)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)


def _index_of_tree(path: Path) -> SearchIndex:
    """The tools of the tree holding the index at ``path`` (built from another manifest), indexed in memory.

    Raises:
        SearchError: the tree's manifest or a snapshot is missing or malformed.
    """
    regenerate = f"rebuild it with {regenerate_command(path.parent)}"  # before: `tooltree generate-tree` alone
    try:
        index = build_index(docs_from_tree(path.parent))
    except SearchError as e:
        raise SearchError(f"{path}: built from another {MANIFEST_FILE} than the tree's; {regenerate} ({e})") from None
    logger.warning(
        "%s: built from another %s than the tree's (its generation was interrupted or failed, or is still "
        "writing it); searching the tree's %d tools by their words only until you %s",
        path, MANIFEST_FILE, len(index), regenerate,
    )  # fmt: skip
    return index


def _resplit(index: SearchIndex, path: Path) -> SearchIndex:
    """``index`` (at ``path``), of an older release's word splitter, with its tools' words split as this release
    splits them (`SearchIndex.resplit`), and a warning to run ``tooltree generate-tree`` to store that; ``index`` as it
    is when the tree's tools cannot be read. Before, such an index was searched as it was until generate-tree ran:
    a query's "résumé" found none of the tools whose text has it (they were indexed as "r é sum é")."""
    regenerate = f"rebuild it with {regenerate_command(path.parent)}"
    older = "written by an older tooltree, which cut words at letters outside ASCII"
    try:
        fresh = index.resplit(docs_from_tree(path.parent))
    except (SearchError, ValueError) as e:
        logger.warning("%s: %s (its tools cannot be read anew: %s); %s", path, older, e, regenerate)
        return index
    logger.warning("%s: %s; searching its tools split anew until you %s", path, older, regenerate)
    return fresh


def search_tools(
    tree: str | os.PathLike[str], query: str, *, detail: Detail | str = "summary", limit: int = 5, regex: bool = False
) -> str:
    """Search the tools of the tree folder ``tree`` and render the hits: what the agent tool and the sandbox
    call return.

    Raises:
        TypeError: ``tree`` is not a path, ``query`` not a string, or ``regex`` not a bool.
        SearchError: bad ``detail`` or ``limit``, blank query, rejected regex, or a missing or
            corrupt index.
    """
    level = check_detail(detail)
    check_limit(limit)
    tree = tree_path(tree)

    def run() -> str:
        index = load_index(tree)
        hits = index.search(query, limit=limit, regex=regex)
        if not hits:
            return (
                f"No tools matched {shown_pattern(query)}. (regex mode)"
                if regex
                else f"No tools matched {shown_query(query)}."
            )
        return meaning_only_note(index, query, hits, regex=regex) + render_hits(tree, hits, level)

    return _bounded(run)


def tree_path(tree: object) -> Path:
    """``tree`` (a str or a path) as a `Path`.

    Raises:
        TypeError: it is neither (before: ``os.fspath``'s error, naming no argument).
    """
    if not isinstance(tree, str | os.PathLike):
        raise TypeError(f"tree: expected the tree's folder as a str or a path, got {type(tree).__name__}")
    return Path(tree)


def meaning_only_note(index: SearchIndex, query: str, hits: Sequence[SearchHit], *, regex: bool = False) -> str:
    """A first line for hits that only the embeddings found (no word of the query is in any
    tool's text), so a reader weighs them as guesses; empty otherwise."""
    if not meaning_only(index, query, bool(hits), regex=regex):
        return ""
    return f"No tool has the words of {shown_query(query)}; the nearest by meaning:\n\n"


def meaning_only(index: SearchIndex, query: str, found: bool, *, regex: bool = False) -> bool:
    """Whether a search that ``found`` hits found them by embedding similarity alone: no tool has a word of
    ``query``, and it neither names a tool nor is in one's name (`SearchIndex.by_name`; before, ``🚀`` found the tool
    of that name "by meaning") (a regex search matches text, never meaning)."""
    return found and not regex and not index.scores(query) and not index.by_name(query)


def search_records(
    tree: str | os.PathLike[str], query: str, *, limit: int = 5, regex: bool = False, stub: bool = False
) -> list[dict[str, Any]]:
    """The same search as ``search_tools``, as JSON-ready records (for ``search_tools`` in a script).

    Each record: ``name`` (the qualified name a script imports), ``server``, ``tool`` (the
    original MCP name), ``path``, ``summary``, ``signature`` (or None) and ``score``; with ``stub``, also
    ``stub``: the stub's text (None when it is missing or unreadable).

    Raises:
        TypeError: ``tree`` is not a path, ``query`` not a string, or ``regex`` not a bool.
        SearchError: bad ``limit``, blank query, rejected regex, or a missing or corrupt index.
    """
    check_limit(limit)
    tree = tree_path(tree)
    hits = _bounded(lambda: load_index(tree).search(query, limit=limit, regex=regex))
    records: list[dict[str, Any]] = []
    for h in hits:
        source = _read_stub(tree, h)
        records.append(
            {
                "name": h.qualified_name,
                "server": h.server,
                "tool": h.tool,
                "path": h.path,
                "summary": h.summary,
                "signature": signature(source, h.function) if source is not None else None,
                "score": h.score,
            }
        )
        if stub:
            records[-1]["stub"] = source
    return records
