"""``tooltree search QUERY``: find tools in a generated tree.

Exit codes: 0 results printed (possibly none matched), 2 bad arguments or no usable index.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    parser.add_argument("--json", action="store_true", help="print a JSON list of {server, tool, path, score}")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run a search; print the hits to stdout, or one error line to stderr.

    Returns:
        0 on success, 2 on a bad limit, detail or regex, or a missing or corrupt index.
    """
    from tool_tree.search import SearchError, check_detail, load_index, meaning_only_note, render_hits
    from tooltree_cli.output import json_text

    tree: Path = args.tree
    try:
        detail = check_detail(args.detail)
        index = load_index(tree)
        hits = index.search(args.query, limit=args.limit, regex=args.regex)
    except SearchError as e:
        print(f"tooltree search: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        rows = [{"server": h.server, "tool": h.tool, "path": h.path, "score": h.score} for h in hits]
        sys.stdout.write(json_text(rows) + "\n")
    else:
        sys.stdout.write(meaning_only_note(index, args.query, hits, regex=args.regex) + render_hits(tree, hits, detail))
        if not hits:
            sys.stdout.write("\n")
    return 0
