"""Tools whose names are emoji or symbols alone: a plain search of symbols finds the tools whose names hold them as
written, with or without embeddings, through the shared search and `tooltree search`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import install_tiny_model
from tests.tool_tree.test_search import write_tree
from tool_tree.search import EMBEDDINGS_ENV, SearchError, SearchIndex, search_records, search_tools
from tooltree_cli.main import main

NAMES = {
    "🚀": "Launch the rocket to the moon.",
    "🚀🌙": "Plan a trip to the moon.",
    "⭐\ufe0f": "Star a repository.",  # the emoji as a keyboard writes it, with its variation selector
    "++": "Add two numbers.",
    "🔥🔥": "List the hot items of the week.",
    "✅ done": "Mark a task done.",
    "get_weather": "Weather forecast for a city.",
}


def _catalog() -> dict[str, Any]:
    tools = [
        {"name": name, "description": text, "inputSchema": {"type": "object", "properties": {}}}
        for name, text in NAMES.items()
    ]
    return {"servers": [{"name": "fun", "description": "", "tools": tools}]}


@pytest.fixture(params=["off", "on"])
def tree(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if request.param == "on":
        install_tiny_model(tmp_path / "model", ["rocket", "moon", "star", "weather", "##s"], monkeypatch)
        monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    tree = write_tree(tmp_path / "tree", _catalog(), embeddings=request.param)
    assert (SearchIndex.load(tree).dense is not None) == (request.param == "on")
    return tree


def _tools(tree: Path, query: str) -> list[str]:
    return [r["tool"] for r in search_records(tree, query)]


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("🚀", ["🚀", "🚀🌙"]),  # the whole name first, then a name that holds it
        ("🌙", ["🚀🌙"]),
        ("⭐", ["⭐\ufe0f"]),  # typed without the variation selector the name has
        ("⭐\ufe0f", ["⭐\ufe0f"]),
        ("+", ["++"]),
        ("🔥", ["🔥🔥"]),
        (" ✅ ", ["✅ done"]),
    ],
)
def test_a_query_of_symbols_finds_the_tools_whose_names_hold_them_with_or_without_embeddings(
    tree: Path, query: str, found: list[str]
) -> None:
    # Before: "no word to search by" for each but a whole name, which found its tool and, with embeddings, four more
    # "nearest by meaning".
    assert _tools(tree, query) == found
    text = search_tools(tree, query, detail="name")
    assert "by meaning" not in text and len(text.splitlines()) == len(found)


def test_symbols_in_no_tool_s_name_are_refused_saying_no_name_holds_them(tree: Path) -> None:
    said = "no word to search by in '🦄' (punctuation and words as common as 'the' or 'get' are left out)"
    with pytest.raises(SearchError, match=re.escape(f"{said}, and no tool's name holds it: say what the tool should")):
        search_tools(tree, "🦄")
    with pytest.raises(SearchError, match=r"^no word to search by in '_-' \(punctuation"):  # separators: every name's
        search_tools(tree, "_-")


def test_the_cli_prints_the_tools_a_symbol_finds_not_as_found_by_meaning(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["search", "🔥", "--tree", str(tree), "--detail", "name"]) == 0
    assert capsys.readouterr().out == f"{search_records(tree, '🔥🔥')[0]['name']}\n"
    assert main(["search", "🚀", "--tree", str(tree), "--detail", "name", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["tool"], r["score"], r["meaning_only"]) for r in rows] == [("🚀", 2.0, False), ("🚀🌙", 0.5, False)]
