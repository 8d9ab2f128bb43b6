"""`sandbox.call_limits`: what one call's arguments and a session's calls in flight may hold on the host."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox.call_limits import ArgumentsRefused, CallLimits, CallSize, InFlight, measure
from tool_tree.sendable import MAX_ARGUMENT_DEPTH

LIMITS = CallLimits(bytes=1000, nodes=50, depth=4, in_flight_bytes=2500, in_flight_nodes=120)


def nested(levels: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(levels - 1):
        value = [value]
    return {"a": value}


def test_a_call_within_the_limits_is_measured_in_values_and_utf8_json_bytes() -> None:
    arguments = {"name": "café", "tags": ["a", "b"], "nested": {"n": None, "f": 1.5, "t": True}}
    size = measure(arguments, LIMITS)
    assert size == CallSize(nodes=9, bytes=len(json.dumps(arguments, ensure_ascii=False).encode("utf-8")))
    assert measure({}, LIMITS) == CallSize(nodes=1, bytes=2)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"pad": [{}] * 49}, "the arguments hold more than 50 values"),
        ({"pad": [{}] * 10_000_000}, "the arguments hold more than 50 values"),  # refused before walking it
        ({"a": [[0] * 20, [0] * 20, [0] * 20]}, "the arguments hold more than 50 values"),
        ({"text": "x" * 1001}, "the arguments are over 1,000 bytes as JSON"),
        ({"text": "é" * 600}, "the arguments are over 1,000 bytes as JSON"),  # 600 characters, 1,200 bytes
        ({"k" * 1001: 1}, "the arguments are over 1,000 bytes as JSON"),
        (nested(5), "the arguments nest deeper than 4 levels"),
    ],
    ids=["objects", "ten_million_objects", "nested_arrays", "long_string", "multibyte", "long_key", "deep"],
)
def test_arguments_past_a_limit_are_refused_with_the_limit_named(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgumentsRefused) as info:
        measure(arguments, LIMITS)
    assert info.value.code == "arguments_too_large"
    assert info.value.message.startswith(message)


def test_arguments_too_deep_are_refused_naming_the_argument_and_where_in_it_the_limit_is_passed() -> None:
    # Before: "the arguments nest deeper than 4 levels", whichever of them did.
    with pytest.raises(ArgumentsRefused) as info:
        measure({"text": "x", "rows": [{"cells": [[1]]}]}, LIMITS)
    assert info.value.message == "the arguments nest deeper than 4 levels: argument 'rows' (at rows[0]['cells'][0])"


def test_arguments_at_the_limits_pass() -> None:
    assert measure({"pad": [0] * 48}, LIMITS).nodes == 50
    assert measure(nested(4), LIMITS).nodes == 5
    assert measure({"t": "x" * 991}, LIMITS).bytes == 1000  # {"t": "…"} around 991 characters


def test_the_encoding_that_counts_the_bytes_finds_out_whether_the_arguments_are_sendable_as_they_are() -> None:
    # One pass for what `tool_tree.sendable.unsendable` finds out again (before, the pool encoded and walked them a
    # second time); NaN and infinity are measured as before (JSON's NaN), refused later by the pool naming them.
    rows = {"rows": [{"id": i, "score": i * 1.5} for i in range(10)]}
    assert measure(rows, LIMITS).sendable and measure({}, LIMITS).sendable
    for odd in (float("nan"), float("-inf")):
        size = measure({"rows": [1, odd]}, LIMITS)
        assert not size.sendable and size.bytes == len(json.dumps({"rows": [1, odd]}))
    assert not measure(nested(4), CallLimits(depth=MAX_ARGUMENT_DEPTH + 1)).sendable  # deeper than unsendable walks
    assert measure(nested(4), CallLimits(depth=MAX_ARGUMENT_DEPTH)).sendable
    with pytest.raises(ArgumentsRefused, match=r"^argument 'n' holds a whole number of more than 4,300 digits"):
        measure({"n": 10**5000}, CallLimits())  # as before


@pytest.mark.parametrize("arguments", [{"s": "\ud800"}, {"o": object()}], ids=["lone_surrogate", "not_json"])
def test_arguments_that_are_not_utf8_json_are_invalid(arguments: dict[str, Any]) -> None:
    with pytest.raises(ArgumentsRefused) as info:
        measure(arguments, LIMITS)
    assert info.value.code == "invalid_arguments"


def test_calls_in_flight_are_bounded_together_and_freed_when_they_finish() -> None:
    flight = InFlight(LIMITS)
    big = CallSize(nodes=10, bytes=1000)
    flight.reserve(big)
    flight.reserve(big)
    with pytest.raises(ArgumentsRefused) as info:
        flight.reserve(big)  # 3,000 bytes together: over 2,500
    assert info.value.code == "too_much_in_flight" and "wait for some to finish" in info.value.message
    flight.release(big)
    flight.reserve(big)
    many = CallSize(nodes=101, bytes=10)
    with pytest.raises(ArgumentsRefused):
        flight.reserve(many)  # 121 values together: over 120
    flight.release(big)
    flight.release(big)
    flight.reserve(many)
    assert (flight.bytes, flight.nodes) == (10, 101)
