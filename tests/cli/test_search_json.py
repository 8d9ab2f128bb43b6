"""`tooltree search --json` (`tooltree_cli.search_cmd`): what a script gets, on a tree the real CLI generated from a
real server (`tests/servers/raw_server.py`) whose names are not Python's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import RAW_SERVER, install_tiny_model
from tool_tree.search import EMBEDDINGS_ENV
from tooltree_cli.main import main

TOOLS = [
    {
        "name": "get-item",
        "description": "Fetch one item by its id. Returns it whole.",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    },
    {"name": "list-orders", "description": "List the orders of a customer.", "inputSchema": {"type": "object"}},
]


def shop_tree(tmp_path: Path, embeddings: str = "off") -> Path:
    """A tree of one server, ``my-shop``, offering ``get-item`` and ``list-orders``."""
    spec = tmp_path / "shop.json"
    spec.write_text(json.dumps({"pages": [TOOLS]}), encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  my-shop:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(RAW_SERVER))}, {json.dumps(str(spec))}]\n",
        encoding="utf-8",
    )
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", embeddings]) == 0
    return tree


def search_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["search", *args, "--json"]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return rows


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny random BERT as the installed model, embeddings in auto mode (the suite turns them off)."""
    root = install_tiny_model(tmp_path / "model", ["item", "fetch", "order", "list", "customer", "##s"], monkeypatch)
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    return root


def test_json_gives_the_name_to_import_beside_the_mcp_names_with_summary_and_signature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: {"server": "my-shop", "tool": "get-item", "path": …, "score": …}: nothing a script can import.
    tree = shop_tree(tmp_path)
    rows = search_json(capsys, "fetch item", "--tree", str(tree), "--limit", "1")
    assert rows == [
        {
            "name": "my_shop.get_item",
            "server": "my-shop",
            "tool": "get-item",
            "path": "servers/my_shop/get_item.py",
            "summary": "Fetch one item by its id.",
            "signature": "def get_item(*, id: str) -> ToolResult",
            "score": rows[0]["score"],
            "meaning_only": False,
        }
    ]
    assert isinstance(rows[0]["score"], float) and rows[0]["score"] > 0


def test_json_follows_detail_name_leaving_out_the_text_and_full_adding_the_stub(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: --detail was ignored under --json, every level gave {server, tool, path, score}.
    tree = shop_tree(tmp_path)
    names = search_json(capsys, "fetch item", "--tree", str(tree), "--limit", "1", "--detail", "name")
    assert names == [
        {
            "name": "my_shop.get_item",
            "server": "my-shop",
            "tool": "get-item",
            "path": "servers/my_shop/get_item.py",
            "score": names[0]["score"],
            "meaning_only": False,
        }
    ]
    full = search_json(capsys, "fetch item", "--tree", str(tree), "--limit", "1", "--detail", "full")
    stub = (tree / "servers/my_shop/get_item.py").read_text(encoding="utf-8")
    assert full == [
        {**names[0], "summary": "Fetch one item by its id.", "signature": "def get_item(*, id: str) -> ToolResult"}
        | {"stub": stub}
    ]
    (tree / "servers/my_shop/get_item.py").unlink()
    missing = search_json(capsys, "fetch item", "--tree", str(tree), "--limit", "1", "--detail", "full")
    assert (missing[0]["stub"], missing[0]["signature"]) == (None, None)


def test_json_marks_hits_that_only_embeddings_found_as_the_text_output_notes_them(
    tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the text output said "No tool has the words of 'zzqqxx'; the nearest by meaning:" and --json said
    # nothing of it; a guess and a word match could both score 0.0.
    tree = shop_tree(tmp_path, embeddings="on")
    capsys.readouterr()
    assert main(["search", "zzqqxx", "--tree", str(tree), "--detail", "name", "--limit", "2"]) == 0
    assert capsys.readouterr().out.startswith("No tool has the words of 'zzqqxx'; the nearest by meaning:\n")
    guessed = search_json(capsys, "zzqqxx", "--tree", str(tree), "--limit", "2")
    assert sorted(r["name"] for r in guessed) == ["my_shop.get_item", "my_shop.list_orders"]
    assert [r["meaning_only"] for r in guessed] == [True, True]
    matched = search_json(capsys, "fetch item", "--tree", str(tree), "--limit", "2")
    assert matched[0]["name"] == "my_shop.get_item" and [r["meaning_only"] for r in matched] == [False, False]
    pattern = search_json(capsys, "item", "--regex", "--tree", str(tree), "--limit", "2")
    assert [(r["name"], r["meaning_only"]) for r in pattern] == [("my_shop.get_item", False)]
