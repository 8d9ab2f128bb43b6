"""The sandbox benchmarks (bench/soak.py and its cases, bench/serve.py) label their sandboxes with the owner the
environment names, as every command does, so that runs on one engine remove only their own."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_soak_counts_and_removes_the_sandboxes_of_the_owner_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import _hostile
    import soak

    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", "someone-else")
    assert _hostile.soak_owner() == "someone-else"
    assert soak.label() == "tooltree.owner=someone-else"
    monkeypatch.delenv("TOOLTREE_SANDBOX_OWNER")
    assert _hostile.soak_owner() == "tooltree-soak"
    assert soak.label() == "tooltree.owner=tooltree-soak"


def test_the_serve_benchmark_runs_and_removes_the_sandboxes_of_the_owner_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import serve

    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", "someone-else")
    assert serve.owner() == "someone-else"
    assert serve.env()["TOOLTREE_SANDBOX_OWNER"] == "someone-else"  # the served sandboxes'
    monkeypatch.delenv("TOOLTREE_SANDBOX_OWNER")
    assert serve.owner() == "tooltree-bench-serve"
    assert serve.env()["TOOLTREE_SANDBOX_OWNER"] == "tooltree-bench-serve"
