"""`tool_tree.sendable`: what a call's arguments may hold to reach a server, checked at a cost in their values."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tool_tree import sendable


class NoEncoding:
    """Stands in for the module's ``json``: the check of a few values must not encode them."""

    @staticmethod
    def dumps(*_: Any, **__: Any) -> str:
        raise AssertionError("a few values were encoded to JSON to be checked")


def test_a_few_values_are_checked_without_encoding_a_long_string_they_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: every call's arguments were encoded to JSON on the host to be checked, then again to be sent: a 1 MB
    # string cost 5-6 ms more of a call of 22 ms (its host and its server on one loaded machine).
    monkeypatch.setattr(sendable, "json", NoEncoding)
    assert sendable.unsendable({"text": "x" * 1_000_000, "rows": [{"id": 1, "score": 0.5}]}) is None
    assert anyio.run(sendable.checked, {"text": "x" * 1_000_000}) is None
    why = sendable.unsendable({"text": "x" * 1_000_000, "score": [float("nan")]})
    assert why is not None and why.startswith("argument 'score' holds nan, which JSON cannot carry")


def test_many_values_are_checked_in_c_and_still_named_when_one_fails() -> None:
    rows: list[Any] = [{"id": i, "score": i / 2} for i in range(sendable.SMALL_VALUES)]
    assert sendable.unsendable({"rows": rows}) is None
    rows[-1]["score"] = float("inf")
    why = sendable.unsendable({"a": 1, "rows": rows})
    assert why is not None and why.startswith("argument 'rows' holds inf, which JSON cannot carry")
