"""The stub runtime's sentinel: an argument left out is not sent, ``None`` is sent as null."""

import copy
import pickle
from collections.abc import Iterator
from typing import Any

import pytest

from tool_tree.runtime import NOT_GIVEN, NotGiven, call_tool, set_transport

Sent = list[dict[str, Any]]


@pytest.fixture
def sent() -> Iterator[Sent]:
    calls: Sent = []

    def transport(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments)
        return {"content": [{"type": "text", "text": "ok"}]}

    previous = set_transport(transport)
    yield calls
    set_transport(previous)


def test_call_tool_leaves_out_not_given_arguments_and_sends_none(sent: Sent) -> None:
    call_tool("s", "t", {"a": 1, "b": NOT_GIVEN, "c": None, "d": NotGiven()})
    call_tool("s", "t", {"a": 1})
    assert sent == [{"a": 1, "c": None}, {"a": 1}]


def test_only_top_level_arguments_are_left_out(sent: Sent) -> None:
    call_tool("s", "t", {"nested": {"x": None}})
    assert sent == [{"nested": {"x": None}}]


def test_not_given_is_falsy_reads_as_its_name_and_survives_copies() -> None:
    assert not NOT_GIVEN and repr(NOT_GIVEN) == "NOT_GIVEN"
    assert copy.deepcopy(NOT_GIVEN) is NOT_GIVEN
    assert pickle.loads(pickle.dumps(NOT_GIVEN)) is NOT_GIVEN
    assert NotGiven.__module__ == "tool_tree.runtime"


def test_parallel_takes_calls_as_arguments_or_a_list_and_refuses_what_it_cannot_call(sent: Sent) -> None:
    # Before: a list of lambdas failed "'list' object is not callable"; calls written without lambda: ran one
    # after another as parallel's arguments, then failed "'ToolResult' object is not callable".
    from tool_tree.runtime import parallel

    calls = [lambda i=i: call_tool("s", "t", {"i": i}).text for i in range(3)]
    assert parallel(*calls) == ["ok"] * 3 and parallel(calls) == ["ok"] * 3
    assert sorted(a["i"] for a in sent) == [0, 0, 1, 1, 2, 2]
    made = call_tool("s", "t", {"i": 9})
    with pytest.raises(TypeError, match=r"^parallel: argument 2 is a ToolResult, not a function to call: pass each"):
        parallel(calls[0], made)
    assert len(sent) == 7  # nothing more ran


@pytest.mark.parametrize(
    ("max_workers", "error", "said"),
    [
        ("2", TypeError, r"^parallel: max_workers must be a whole number, got str '2'$"),
        (1.5, TypeError, r"^parallel: max_workers must be a whole number, got float 1\.5$"),
        (True, TypeError, r"^parallel: max_workers must be a whole number, got bool True$"),
        (0, ValueError, r"^parallel: max_workers must be at least 1 \(calls at once\), got 0$"),
    ],
)
def test_parallel_refuses_a_max_workers_that_is_no_count_before_any_call(
    sent: Sent, max_workers: object, error: type[Exception], said: str
) -> None:
    # Before: "'<' not supported between instances of 'int' and 'str'", and 1.5 was taken.
    from tool_tree.runtime import parallel

    with pytest.raises(error, match=said):
        parallel(lambda: call_tool("s", "t", {}), max_workers=max_workers)  # type: ignore[arg-type]
    assert sent == []


def test_call_tool_sends_extra_arguments_and_refuses_one_that_is_a_parameters_key(sent: Sent) -> None:
    call_tool("s", "t", {"from": NOT_GIVEN, "q": 1}, {"note": 2})
    with pytest.raises(TypeError, match=r"^s\.t: \*\*arguments holds 'from', the wire name of the parameter from_"):
        call_tool("s", "t", {"from": NOT_GIVEN}, {"from": "b"}, {"from": "from_"})
    assert sent == [{"q": 1, "note": 2}]
