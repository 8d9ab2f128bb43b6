"""The tool-search benchmark's catalogs (``bench/search_sets.py``): their tools load as a tree's search index does,
and no query text is in both the tuning and the held-out sets."""

from __future__ import annotations

import csv
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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


def _metatool(root: Path, search_sets: ModuleType, shared: str) -> tuple[list[str], list[str]]:
    """A small MetaTool: two tools a half, ``shared`` asked of a tuning tool and (spaces aside) of a held-out one."""
    names = [f"tool{i}" for i in range(1000)]
    tune = [n for n in names if not search_sets.held_out_tool(n)][:2]
    held = [n for n in names if search_sets.held_out_tool(n)][:2]
    folder = root / "metatool"
    folder.mkdir(parents=True)
    (folder / "plugin_des.json").write_text(json.dumps({t: f"The tool {t}." for t in tune + held}), encoding="utf-8")
    rows = [(f"Ask {t} something.", t) for t in tune + held] + [(shared, tune[0]), (shared + " ", held[1])]
    with (folder / "all_clean_data.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Query", "Tool"])
        writer.writerows(rows)
    multi = [{"query": "Use both held-out tools.", "tool": held}, {"query": "Use both others.", "tool": tune}]
    (folder / "multi_tool_query_golden.json").write_text(json.dumps(multi), encoding="utf-8")
    return tune, held


def test_a_metatool_text_asked_of_both_halves_is_left_out_of_both_and_the_bench_says_how_many_rows(
    search_sets: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = "What's the weather like today?"
    tune, held = _metatool(tmp_path, search_sets, shared)
    monkeypatch.setattr(search_sets, "corpus", lambda *parts: tmp_path.joinpath(*parts))
    monkeypatch.setattr(search_sets, "DOUBLED", (shared,))

    sets = search_sets.metatool().sets

    assert sorted(q for q, _ in sets["tune single"].queries) == sorted(f"Ask {t} something." for t in tune)
    assert sorted(q for q, _ in sets["held single"].queries) == sorted(f"Ask {t} something." for t in held)
    assert [q for q, _ in sets["tune multi"].queries] == ["Use both others."]
    assert [q for q, _ in sets["held multi"].queries] == ["Use both held-out tools."]
    out = capsys.readouterr().out
    assert "MetaTool: 2 rows left out (1 in tune single, 1 in held single), their text a query of both" in out
    assert "(search_sets.DOUBLED: 1)" in out


def test_the_search_sets_refuse_metatool_data_whose_texts_in_both_halves_are_not_the_ones_listed(
    search_sets: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _metatool(tmp_path, search_sets, "What movies are currently playing in theaters?")
    monkeypatch.setattr(search_sets, "corpus", lambda *parts: tmp_path.joinpath(*parts))
    monkeypatch.setattr(search_sets, "DOUBLED", ("What's the weather like today?",))

    with pytest.raises(SystemExit, match="What movies are currently playing in theaters") as raised:
        search_sets.metatool(step=2)  # the texts in both are found on every row, whatever the step
    assert 'unlisted, ["What\'s the weather like today?"] listed but not in both' in str(raised.value)


def test_a_held_out_turn_whose_text_is_a_tuning_turn_is_refused_unless_listed(search_sets: ModuleType) -> None:
    def turns() -> dict[str, Any]:
        tune = [("List the files.", [["fs.ls"]]), ("Go up.", [["fs.cd"]])]
        held = [("List the files. ", [["fs.ls"]])]
        return {
            "tune turns": search_sets.QuerySet("tune turns", tune),
            "held turns": search_sets.QuerySet("held turns", held),
        }

    with pytest.raises(SystemExit, match=r"BFCL's texts in both .* \['List the files.'\] unlisted"):
        search_sets.leave_out("BFCL", turns(), (), "search_sets.DOUBLED_BFCL", search_sets.in_both(turns()))
    sets = turns()
    search_sets.leave_out("BFCL", sets, ("List the files.",), "search_sets.DOUBLED_BFCL", search_sets.in_both(sets))
    assert [q for q, _ in sets["tune turns"].queries] == ["Go up."] and not sets["held turns"].queries


def test_the_pre_filter_benchmarks_leave_out_the_search_benchmarks_list(search_sets: ModuleType) -> None:
    data = importlib.import_module("_prefilter_data")
    assert data.DOUBLED is search_sets.DOUBLED and len(search_sets.DOUBLED) == 6
