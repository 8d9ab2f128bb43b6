"""A word every tool of a tree has (the name of a server of 1,000 tools): it weighs 0 once its impact is rounded in
the stored index, and a search for it still finds its tools, through the shared search and `tooltree search`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tool_tree.test_search import write_tree
from tool_tree.search import SearchIndex, search_records, search_tools
from tooltree_cli.main import main

VERBS = ("archive", "create", "delete", "export")
TOOLS = 1000
"""Enough tools that a word all of them have rounds to an impact of 0 (its idf is under 0.0005)."""


def _catalog() -> dict[str, Any]:
    tools = [
        {
            "name": f"{VERBS[i % len(VERBS)]}_item_{i:04d}",
            "description": f"{VERBS[i % len(VERBS)].capitalize()} the item numbered {i} in the workspace.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string", "description": "Item id."}}},
        }
        for i in range(TOOLS)
    ]
    return {"servers": [{"name": "acme", "description": "", "tools": tools}]}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("common") / "tree", _catalog())


def _in_tie_order(tools: list[str]) -> list[str]:
    return sorted(tools)


def test_the_word_weighs_zero_in_the_stored_index(tree: Path) -> None:
    # What the searches below stand on: every tool has "acme" (its server) and "workspace", each weighing 0.
    postings = {t: p for t, p in SearchIndex.load(tree)._postings.items() if t in ("acm", "workspac")}
    assert {t: (len(ids), set(imps)) for t, (ids, imps) in postings.items()} == {
        "acm": (TOOLS, {0.0}),
        "workspac": (TOOLS, {0.0}),
    }


@pytest.mark.parametrize("query", ["acme", "acme workspace", "acme workspace, then acme workspace again"])
def test_a_word_every_tool_has_finds_them_in_the_order_of_their_names(tree: Path, query: str) -> None:
    # Before: no record, and "No tools matched 'acme'." (the last query is ranked as two clauses and fused).
    records = search_records(tree, query, limit=50)  # a script's search_tools, and serve's
    every = _in_tie_order([f"{VERBS[i % len(VERBS)]}_item_{i:04d}" for i in range(TOOLS)])
    assert [r["tool"] for r in records] == every[:50]
    assert {r["score"] for r in records} == {0.0}
    assert search_tools(tree, query, detail="name") == "".join(f"acme.{t}\n" for t in every[:5])


def test_the_other_words_of_the_query_rank_first_and_the_rest_follow_in_the_order_of_their_names(tree: Path) -> None:
    exported = [f"export_item_{i:04d}" for i in range(3, TOOLS, len(VERBS))]
    alone = [(r["tool"], r["score"]) for r in search_records(tree, "export", limit=50)]
    assert [t for t, _ in alone] == exported[:50] and all(s > 0.0 for _, s in alone)
    # the words that weigh something rank as they did; the tools reached by the others alone follow at 0 (before:
    # left out, so a query of 7 and "acme" found the one tool of 7 and no other)
    assert [(r["tool"], r["score"]) for r in search_records(tree, "export acme", limit=50)] == alone
    others = _in_tie_order([f"{VERBS[i % len(VERBS)]}_item_{i:04d}" for i in range(TOOLS) if i != 7])
    records = search_records(tree, "7 acme", limit=4)
    assert [r["tool"] for r in records] == ["export_item_0007", *others[:3]]
    assert records[0]["score"] > 0.0 and [r["score"] for r in records[1:]] == [0.0] * 3


def test_tooltree_search_prints_the_tools_of_the_word(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "No tools matched 'acme'.", exit 0.
    assert main(["search", "acme", "--tree", str(tree), "--detail", "name", "--limit", "3"]) == 0
    assert capsys.readouterr().out == "acme.archive_item_0000\nacme.archive_item_0004\nacme.archive_item_0008\n"
