"""The tool-search benchmark's catalogs (``bench/search_sets.py``): their tools load as a tree's search index does."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tool_tree.search import SearchIndex, build_index

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def search_sets(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(sys, "path", [str(BENCH), *sys.path])  # its imports are bench's own modules; undone after
    return importlib.import_module("search_sets")


def test_a_server_and_tool_named_with_a_leading_digit_make_an_index_that_loads(search_sets: ModuleType) -> None:
    tool = {"name": "9-day-forecast", "description": "Forecast the weather.", "inputSchema": {"type": "object"}}
    doc = search_sets._tool_doc("12306-mcp", tool, "Train tickets.")
    assert (doc.package, doc.function, doc.path) == (
        "server_12306_mcp",
        "tool_9_day_forecast",
        "servers/server_12306_mcp/tool_9_day_forecast.py",
    )
    index = SearchIndex.from_json(build_index([doc], embeddings=False).to_json())
    assert [(h.server, h.tool) for h in index.search("weather forecast")] == [("12306-mcp", "9-day-forecast")]
