"""`tool_tree.runtime._sendable`: the one rule by which the host and the sandbox find a call's arguments unsendable."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox._supervisor import limits
from tool_tree import sendable
from tool_tree.runtime._sendable import first_refused


def nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


CASES = {
    "nan_inside": {"text": "x", "rows": [1, {"v": float("nan")}]},
    "infinity": {"a": 1, "b": float("-inf")},
    "long_number": {"a": "ok", "n": {"k": [10**5000]}},
    "negative_long_number": {"n": -(10**4300)},
    "deep": {"a": 1, "deep": nested(250)},
    "deep_tuples": {"deep": {"k": nested(250, ())}},
    "second_of_two": {"a": [1.5, True, None, "nan"], "b": [float("inf")], "c": float("nan")},
}


def test_the_first_value_refused_is_named_with_its_path_in_the_order_the_arguments_are_given() -> None:
    found = first_refused({"a": [0, {"k": float("nan")}], "b": float("inf")}, max_depth=20)
    assert found is not None and (found.name, found.path, found.too_deep) == ("a", "a[1]['k']", False)
    found = first_refused({"a": [[[0]]], "b": [[[[0]]]]}, max_depth=4)  # the arguments object is level 1
    assert found is not None and (found.name, found.path, found.too_deep) == ("b", "b[0][0][0]", True)
    assert first_refused({"a": [[0]], "n": 10**4299, "f": 1e308, "b": True}, max_depth=4) is None


def test_a_path_too_long_to_show_keeps_its_first_and_last_subscripts_whole() -> None:
    found = first_refused({"deep": nested(300)}, max_depth=198)
    assert found is not None and found.path.startswith("deep[0][0]") and found.path.endswith("[0][0]")
    assert "…" in found.path and len(found.path) <= 85 and "[…" not in found.path and "…]" not in found.path


@pytest.mark.parametrize("arguments", CASES.values(), ids=CASES.keys())
def test_the_host_and_the_sandbox_refuse_the_same_arguments_naming_the_same_one(arguments: dict[str, Any]) -> None:
    # Before: the sandbox's check of long numbers (limits.long_number) was a copy of the host's walk
    # (sendable._named), free to drift from it; both now follow first_refused, which the image holds.
    refused = first_refused(arguments, sendable.MAX_ARGUMENT_DEPTH)
    assert refused is not None
    host = sendable.unsendable(arguments)
    sandbox = limits.refused_argument(arguments, sendable.MAX_ARGUMENT_DEPTH)
    assert host is not None and host.startswith(f"argument {refused.name!r} ")
    assert sandbox is not None and f"argument {refused.name!r}" in sandbox
    assert (" nest" in host) == (" nest" in sandbox) == refused.too_deep
