"""The tool-search benchmark's catalogs (``bench/search_sets.py``): their tools load as a tree's search index does."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tool_tree.search import SearchDoc, SearchIndex, build_index

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


def _words(text: str) -> set[str]:
    return set(text.lower().replace(",", " ").replace(".", " ").split())


def test_no_held_out_task_of_the_527_tool_catalog_repeats_a_tuning_task(
    search_sets: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The catalog's tools come from the shared corpora, absent here: a tool for every name the task files need.
    named = {
        tool
        for path in (search_sets.TASKS, search_sets.USER_TASKS, search_sets.PREFILTER_TASKS)
        for part in json.loads(path.read_text(encoding="utf-8")).values()
        if isinstance(part, list)
        for task in part
        for need in task["needs"]
        for tool in need
    }
    docs = [
        SearchDoc(server=k.split(".")[0], package="p", tool=k.split(".", 1)[1], function="f", path="", description="")
        for k in named
    ]
    monkeypatch.setattr(search_sets, "livemcpbench_docs", lambda: docs)

    sets = search_sets.livemcpbench().sets
    second = next(name for name in sets if "pre-filter" in name)  # the pre-filter benchmark's tasks
    tuning = [
        (_words(q), sorted(map(sorted, n))) for s in ("tune tasks", "tune user tasks") for q, n in sets[s].queries
    ]
    for held in ("held tasks", "held user tasks", second):
        for query, needs in sets[held].queries:
            words = _words(query)
            repeated = [
                w for w, n in tuning if n == sorted(map(sorted, needs)) and len(w & words) >= 0.4 * len(w | words)
            ]
            assert not repeated, f"{held}: {query!r} repeats a tuning task"
    assert [len(sets[s].queries) for s in ("held tasks", "held user tasks", second)] == [30, 29, 37]
    assert "Find train tickets from Beijing to Shanghai for tomorrow." in dict(sets["tune tasks"].queries)
