"""The benchmarks' shared helpers (``bench/_common.py``): the attributes an experiment stands in for are its own for
the ``with`` block alone."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def common(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(sys, "path", [str(BENCH), *sys.path])  # its imports are bench's own modules; undone after
    return importlib.import_module("_common")


class Index:
    rank = "real rank"


class Dense:
    fuse = "real fuse"


def test_patched_attributes_hold_in_the_block_and_are_set_back_after_it(common: ModuleType) -> None:
    with common.patched({(Index, "rank"): "stand-in rank", (Dense, "fuse"): "stand-in fuse"}):
        assert (Index.rank, Dense.fuse) == ("stand-in rank", "stand-in fuse")
    assert (Index.rank, Dense.fuse) == ("real rank", "real fuse")


def test_patched_attributes_are_set_back_when_the_block_raises(common: ModuleType) -> None:
    with pytest.raises(KeyError), common.patched({(Index, "rank"): "stand-in rank"}):
        assert Index.rank == "stand-in rank"
        raise KeyError("stop")
    assert Index.rank == "real rank"
