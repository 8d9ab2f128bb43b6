"""The pre-filter benchmarks' data (``bench/_prefilter_data.py``): what was tuned on stays out of held-out figures."""

from __future__ import annotations

import csv
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def data(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(sys, "path", [str(BENCH), *sys.path])  # its imports are bench's own modules; undone after
    return importlib.import_module("_prefilter_data")


def test_the_repeated_tasks_listed_are_the_pre_filter_tasks_that_repeat_a_tuning_task_of_the_search(
    data: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = importlib.import_module("search_sets")
    livemcp = json.loads(sets.TASKS.read_text(encoding="utf-8"))
    users = json.loads(sets.USER_TASKS.read_text(encoding="utf-8"))
    tuning = [
        sets.QuerySet("tune tasks", [(t["query"], t["needs"]) for t in livemcp["tuning"]]),
        sets.QuerySet("tune user tasks", [(t["query"], t["needs"]) for t in users["tuning"]]),
    ]
    tasks = json.loads(data.TASKS.read_text(encoding="utf-8"))["tasks"]
    repeated = [t["task"] for t in tasks if sets.repeats(t["task"], t["needs"], tuning)]
    assert sorted(repeated) == sorted(data.REPEATED_TASKS) and len(repeated) == 3

    kept = data.prefilter_tasks()
    assert len(tasks) == 40 and len(kept) == 37
    assert not {t["task"] for t in kept} & set(data.REPEATED_TASKS)
    assert "37 of 40; 3 left out, each repeating a tuning task of the tool search" in capsys.readouterr().out


def _tool_in(data: ModuleType, calibration: bool, taken: set[str]) -> str:
    names = (f"tool{i}" for i in range(1000))
    name = next(n for n in names if data.calibration_half(n) == calibration and n not in taken)
    taken.add(name)
    return name


def _corpora(root: Path, data: ModuleType, shared: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A small MetaTool: two tools a half, one query text asked of both halves (``shared``), and others asked of one."""
    taken: set[str] = set()
    cal = [_tool_in(data, True, taken) for _ in range(2)]
    held = [_tool_in(data, False, taken) for _ in range(2)]
    folder = root / "metatool"
    folder.mkdir(parents=True)
    described = {t: f"The tool {t}." for t in cal + held}
    (folder / "plugin_des.json").write_text(json.dumps(described), encoding="utf-8")
    rows = [(f"Ask {t} something.", t) for t in cal + held]
    rows += [(shared[0], cal[0]), (shared[0] + " ", held[1])]  # spaces aside, the same text, in both halves
    with (folder / "all_clean_data.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["Query", "Tool"])
        writer.writerows(rows)
    multi = [{"query": "Use both held-out tools.", "tool": held}, {"query": "Use both others.", "tool": cal}]
    (folder / "multi_tool_query_golden.json").write_text(json.dumps(multi), encoding="utf-8")
    return cal, held


def test_a_query_text_of_both_metatool_halves_is_left_out_of_both_and_the_bench_says_how_many_rows(
    data: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = ("What's the weather like today?",)
    cal_tools, held_tools = _corpora(tmp_path, data, shared)
    monkeypatch.setattr(data, "corpus", lambda *parts: tmp_path.joinpath(*parts))
    monkeypatch.setattr(data, "DOUBLED", shared)

    cal, held = data.metatool_halves()

    for half, tools in ((cal, cal_tools), (held, held_tools)):
        texts = [q.strip() for q, _ in half.queries]
        assert shared[0] not in texts
        assert sorted(texts[: half.singles]) == sorted(f"Ask {t} something." for t in tools)
        assert len(texts) == half.singles + 1  # the multi-tool query of the half
        assert half.dropped == 1
    out = capsys.readouterr().out
    assert "MetaTool calibration half: 1 rows left out (1 of them among the queries drawn without the list)" in out
    assert "MetaTool held-out half: 1 rows left out" in out
    data.apart(cal, held)  # nothing of one half is in the other


def test_the_bench_refuses_metatool_data_whose_texts_in_both_halves_are_not_the_ones_listed(
    data: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _corpora(tmp_path, data, ("What movies are currently playing in theaters?",))
    monkeypatch.setattr(data, "corpus", lambda *parts: tmp_path.joinpath(*parts))
    monkeypatch.setattr(data, "DOUBLED", ("What's the weather like today?",))

    with pytest.raises(SystemExit, match="What movies are currently playing in theaters") as raised:
        data.metatool_halves()
    assert "unlisted" in str(raised.value)


def test_halves_that_share_a_query_text_are_refused_as_calibration_data(data: ModuleType) -> None:
    cal = data.Half("calibration", [], [("Find a hotel. ", ["a"])], 1)
    held = data.Half("held-out", [], [("Find a hotel.", ["b"])], 1)
    with pytest.raises(SystemExit, match="the calibration half holds held-out data"):
        data.apart(cal, held)
