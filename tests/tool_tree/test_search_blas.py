"""``_blas``: a query is embedded with one OpenBLAS thread when the machine is saturated, and the
process's thread count is put back afterwards."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import import_numpy, require_embeddings
from tests.tool_tree.test_search import tiny_model  # noqa: F401 - a fixture
from tool_tree.search import SearchDoc, _blas, _dense, build_index, score_tools


@pytest.fixture
def openblas() -> Iterator[tuple[Any, Any, Any]]:
    """numpy and OpenBLAS's ``(get, set)`` thread count, set to 2 for the test and put back after."""
    np = import_numpy()
    found = _blas.controls(np)
    if found is None:  # numpy's wheels (CI installs the pinned one) bundle OpenBLAS: there, not finding it is a failure
        require_embeddings("numpy's BLAS is not an OpenBLAS this process can find (nothing to limit)")
    get, set_ = found
    before = int(get())
    set_(2)
    yield np, get, set_
    set_(before)


def test_a_limited_call_runs_with_one_blas_thread_and_puts_the_count_back(openblas: tuple[Any, Any, Any]) -> None:
    np, get, _ = openblas
    with _blas.blas_threads(np, 1):
        assert get() == 1
    assert get() == 2
    with _blas.blas_threads(np, None):  # no limit asked: the setting stays
        assert get() == 2


def test_overlapping_limited_calls_put_the_count_back_only_when_the_last_ends(
    openblas: tuple[Any, Any, Any],
) -> None:
    np, get, _ = openblas
    first, second = _blas.blas_threads(np, 1), _blas.blas_threads(np, 1)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert get() == 1  # the second call is still running: it keeps its single thread
    second.__exit__(None, None, None)
    assert get() == 2


def test_the_count_is_put_back_when_the_body_raises(openblas: tuple[Any, Any, Any]) -> None:
    np, get, _ = openblas
    with pytest.raises(ValueError, match="boom"), _blas.blas_threads(np, 1):
        raise ValueError("boom")
    assert get() == 2


@pytest.mark.parametrize(("load", "cores", "expected"), [(2.0, 2, 1), (7.5, 2, 1), (1.9, 2, None), (3.0, 8, None)])
def test_a_query_gets_one_thread_only_when_the_load_reaches_the_cores(
    monkeypatch: pytest.MonkeyPatch, load: float, cores: int, expected: int | None
) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert _blas.query_threads() == expected


def test_queries_on_this_thread_get_one_blas_thread_whatever_the_load_and_other_threads_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    elsewhere: list[int | None] = []
    with _blas.on_this_thread():
        assert _blas.query_threads() == 1
        with _blas.on_this_thread():
            assert _blas.query_threads() == 1
        assert _blas.query_threads() == 1  # the inner block ends, the outer still holds
        other = threading.Thread(target=lambda: elsewhere.append(_blas.query_threads()))
        other.start()
        other.join()
    assert elsewhere == [None] and _blas.query_threads() is None


def test_without_a_load_average_the_blas_setting_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert _blas.query_threads() is None
    monkeypatch.delattr(os, "getloadavg")  # as on Windows
    assert _blas.query_threads() is None


@pytest.mark.usefixtures("tiny_model")
def test_query_embeddings_run_under_the_thread_policy_and_catalog_embeddings_do_not(
    openblas: tuple[Any, Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, get, _ = openblas
    docs = [SearchDoc("mail", "mail", "send_email", "send_email", "servers/mail/send_email.py", "Send an email.")]
    index = build_index(docs, embeddings=True)
    seen: list[int] = []
    encoder = _dense.get_encoder()
    real_forward = encoder._forward

    def forward(*args: Any) -> Any:
        seen.append(int(get()))
        return real_forward(*args)

    monkeypatch.setattr(encoder, "_forward", forward)
    monkeypatch.setattr(_dense, "query_threads", lambda: 1)
    index.search("send the email")  # the search's ranking
    score_tools(index, ["send the email"])  # the pre-filter's evidence
    build_index(docs, embeddings=True)  # embedding a catalog: no limit
    assert seen == [1, 1, 2] and get() == 2
    monkeypatch.setattr(_dense, "query_threads", lambda: None)
    index.search("send the email")
    assert seen[-1] == 2
