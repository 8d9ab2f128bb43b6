"""``tooltree search QUERY``: find tools in a generated tree.

``--json`` prints a list of records, one per hit, best first: the records ``tool_tree.search.search_records`` gives
a script (``name``, the qualified name a script imports; ``server`` and ``tool``, the MCP names; ``path``;
``summary``; ``signature``; ``score``), ``--detail`` deciding how much of each (`json_records`), and ``meaning_only``.

Exit codes: 0 results printed (possibly none matched), 2 bad arguments, no tree or no usable index, 4 the results
could not be printed (standard output on a full disk, a terminal that takes only ASCII), as `exec` and `agent` say
it; 70, as in every command, an unexpected error (`tooltree_cli.main`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# Kept in step with tool_tree.search (a test checks): importing it here would slow every `tooltree` command.
DETAILS = ("name", "summary", "full")
MIN_LIMIT, MAX_LIMIT = 1, 50


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``search`` subcommand; its handler is ``run``."""
    parser = subparsers.add_parser(
        "search",
        help="find tools in a generated tree",
        description="Rank the tree's tools for a query (BM25 over names, descriptions and parameters, fused with "
        "embedding similarity when the tree stores embeddings), or match a regular expression against names and "
        "descriptions.",
    )
    parser.add_argument("query", help="what the tool should do, in words (or a pattern with --regex)")
    parser.add_argument("--tree", type=Path, default=Path("tree"), help="the generated tree (default: ./tree)")
    parser.add_argument(
        "--detail",
        choices=DETAILS,
        default="summary",
        help="name: qualified names; summary: name, description and signature (default); full: stub text",
    )
    parser.add_argument("--limit", type=int, default=5, help=f"number of results, {MIN_LIMIT}-{MAX_LIMIT} (default: 5)")
    parser.add_argument(
        "--regex",
        action="store_true",
        help="treat QUERY as a regular expression (RE2: no backreferences or lookaround)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list, one record per tool: name (to import), server, tool (MCP names), path, score, "
        "meaning_only (no tool had a word of the query); with --detail summary (default) or full, also summary "
        "and signature; with full, also stub (its text)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run a search; print the hits to stdout, or one error line to stderr.

    Returns:
        0 on success, 2 on a bad limit, detail or regex, no tree at ``--tree``, or a missing or corrupt index, 4 when
        the results could not be printed.
    """
    from tool_tree.search import SearchError, check_detail, load_index, meaning_only_note, render_hits
    from tooltree_cli.output import EXIT_NOT_PRINTED, error, json_text, not_printed, terminal_text

    tree: Path = args.tree
    if (problem := tree_problem(tree)) is not None:
        error(problem)
        return 2
    try:
        detail = check_detail(args.detail)
        if args.json:
            rows = json_records(tree, args.query, detail=detail, limit=args.limit, regex=args.regex)
            text = json_text(rows) + "\n"
        else:
            index = load_index(tree)
            hits = index.search(args.query, limit=args.limit, regex=args.regex)
            # A stub of a tree from elsewhere or edited by hand may hold escape sequences (`--detail full` prints it
            # whole): before, written to the terminal as they were (OSC 52 set the clipboard, others cleared the
            # screen).
            found = meaning_only_note(index, args.query, hits, regex=args.regex) + render_hits(tree, hits, detail)
            text = terminal_text(found) + ("" if hits else "\n")
    except SearchError as e:  # `tooltree: error:`, as every command's (before: `tooltree search: error:`)
        error(str(e))
        return 2
    try:
        # `print`: a standard output closed (`>&-`, sys.stdout None) takes nothing, as every command's print does
        # (before: "unexpected", exit 70, an AttributeError of `sys.stdout.write`)
        print(text, end="", flush=True)
    except BrokenPipeError:  # the reader left: said as every command says it
        raise
    except (OSError, UnicodeEncodeError) as e:  # a full disk, a terminal that takes only ASCII: before, exit 70
        not_printed("the results", e)
        return EXIT_NOT_PRINTED
    return 0


def tree_problem(tree: Path) -> str | None:
    """Why there is no tree at ``tree`` to search (no such folder, a file, a folder holding neither a manifest nor a
    search index), or None. Before: each was "<tree>/search_index.json: no search index; run `tooltree generate-tree`
    to build it", as if the tree were there without its index (a mistyped ``--tree`` read as a tree to regenerate)."""
    from tool_tree.search import INDEX_FILE
    from tool_tree.tree import MANIFEST_FILE, enclosing_tree

    where = "pass --tree with the folder `tooltree generate-tree` wrote (default: ./tree)"
    try:
        if not tree.exists():
            return f"{tree}: no tree there (no such folder); {where}"
        if not tree.is_dir():
            return f"{tree}: no tree there (a file, not a folder); {where}"
        if not (tree / MANIFEST_FILE).exists() and not (tree / INDEX_FILE).exists() and (top := enclosing_tree(tree)):
            return f"{tree}: a folder inside a tree, not a tree itself: pass --tree {top}"
        if not (tree / MANIFEST_FILE).exists() and not (tree / INDEX_FILE).exists():
            return f"{tree}: no tree there (no {MANIFEST_FILE} nor {INDEX_FILE}); {where}, or generate one there"
    except OSError as e:  # a parent that may not be searched
        return f"{tree}: cannot reach it: {e.strerror or e}"
    return None


def json_records(tree: Path, query: str, *, detail: str, limit: int, regex: bool) -> list[dict[str, Any]]:
    """The hits as ``--json`` prints them: `tool_tree.search.search_records`, what a script's ``search_tools`` gets,
    cut or grown to ``detail`` (``name``: without ``summary`` and ``signature``; ``full``: with ``stub``, the stub's
    text, null when missing), each with ``meaning_only``: true when no tool has a word of the query, so every hit
    was found by embedding similarity alone (what the text output's "the nearest by meaning" note says) and its
    score, relative to the other hits', says nothing of a match. Before: the MCP names alone (``my-shop``,
    ``get-item``), nothing to import, ``--detail`` ignored, and no sign of that note: a guess and a word match
    could both score 0.0.

    Raises:
        SearchError: bad limit, blank query, rejected regex, or a missing or corrupt index.
    """
    from tool_tree.search import load_index, meaning_only, search_records

    records = search_records(tree, query, limit=limit, regex=regex, stub=detail == "full")
    only = meaning_only(load_index(tree), query, bool(records), regex=regex)  # the index just searched (cached)
    for record in records:
        if detail == "name":
            del record["summary"], record["signature"]
        record["meaning_only"] = only
    return records
