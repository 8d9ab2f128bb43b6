"""The tool-search experiments' table of recall (``bench/search_recall.py``'s ``print_cells``): a row a variant, its
R@1/R@5/R@10 per set, its mean R@5 and, where the experiment gives them, its verdict."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
RESULTS = {
    "plain BM25": {
        "MetaTool tune single": {"R@1": 0.25, "R@5": 0.5, "R@10": 0.75, "needs": 4},
        "BFCL tune turns": {"R@1": 0.5, "R@5": 0.5, "R@10": 1.0, "needs": 2},
    },
    "hybrid default": {
        "MetaTool tune single": {"R@1": 0.5, "R@5": 0.75, "R@10": 1.0, "needs": 4},
        "BFCL tune turns": {"R@1": 0.5, "R@5": 1.0, "R@10": 1.0, "needs": 2},
    },
}


@pytest.fixture
def search_recall(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(sys, "path", [str(BENCH), *sys.path])  # the module adds to sys.path; undone after
    return importlib.import_module("search_recall")


def test_a_row_gives_each_sets_recall_and_the_mean_r5_and_the_sizes_come_last(
    search_recall: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    search_recall.print_cells(RESULTS, 16, 18)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "",
        "variant          | MetaTool tune sing |    BFCL tune turns |   mean",
        "plain BM25       |  0.250/0.500/0.750 |  0.500/0.500/1.000 | 0.500",
        "hybrid default   |  0.500/0.750/1.000 |  0.500/1.000/1.000 | 0.875",
        "cells: R@1/R@5/R@10; sizes: MetaTool tune single 4 needs, BFCL tune turns 2 needs",
    ]


def test_verdicts_follow_the_mean_under_their_heading_and_a_row_without_one_ends_empty(
    search_recall: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    search_recall.print_cells(RESULTS, 16, 20, {"hybrid default": "candidate (+0.1250)"}, "rule")
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith(" |   mean | rule")
    assert lines[2].endswith(" | 0.500 | ")
    assert lines[3] == "hybrid default   |    0.500/0.750/1.000 |    0.500/1.000/1.000 | 0.875 | candidate (+0.1250)"
