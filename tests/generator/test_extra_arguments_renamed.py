"""A stub that takes ``**arguments`` beside parameters renamed from their wire names (``from`` → ``from_``): a key of
``**arguments`` that is such a wire name is refused, naming the parameter to pass, as Python refuses a keyword given
twice; every other call sends the arguments it was given."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from generator.render import render_stub
from generator.stub_check import check_stub
from generator.stub_signature import compare, signature
from tool_tree.runtime import set_transport

TOOL = {
    "name": "find",
    "inputSchema": {
        "type": "object",
        "properties": {"from": {"type": "string"}, "user-id": {"type": "integer"}, "q": {"type": "string"}},
        "additionalProperties": True,
    },
}


@pytest.fixture
def sent() -> Iterator[list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def transport(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(dict(arguments))
        return {"content": [{"type": "text", "text": "ok"}]}

    previous = set_transport(transport)
    yield calls
    set_transport(previous)


def _find() -> Any:
    stub = render_stub(server="s", tool=TOOL, function="find")
    assert stub.warnings == []
    assert check_stub(stub.source, function="find", server="s", tool="find") is None
    namespace: dict[str, Any] = {"__name__": "servers.s.find"}
    exec(compile(stub.source, "<find>", "exec"), namespace)
    return namespace["find"]


def test_a_key_of_arguments_that_is_a_renamed_parameters_wire_name_is_refused_naming_the_parameter(
    sent: list[dict[str, Any]],
) -> None:
    find = _find()
    with pytest.raises(TypeError, match=r"'from', the wire name of the parameter from_: pass it as from_="):
        find(from_="a", **{"from": "b"})  # before: sent {"from": "b"}
    with pytest.raises(TypeError, match=r"'from', the wire name of the parameter from_"):
        find(**{"from": "b"})
    with pytest.raises(TypeError, match=r"'user-id', the wire name of the parameter user_id: pass it as user_id="):
        find(user_id=1, **{"user-id": 2})
    with pytest.raises(TypeError, match="multiple values for keyword argument 'from_'"):  # Python's own
        find(from_="a", **{"from_": "b"})
    with pytest.raises(TypeError, match="multiple values for keyword argument 'q'"):
        find(q="a", **{"q": "b"})
    assert sent == []


def test_the_other_calls_of_such_a_stub_send_what_they_were_given(sent: list[dict[str, Any]]) -> None:
    find = _find()
    find(from_="a", q="x", note=1)
    find(**{"from_": "b", "user_id": 2, "q": "y"})
    find(note=None)
    find()
    assert sent == [
        {"from": "a", "q": "x", "note": 1},
        {"from": "b", "user-id": 2, "q": "y"},
        {"note": None},
        {},
    ]


def test_the_stubs_signature_reads_the_same_as_the_merged_form_of_an_older_tree() -> None:
    source = render_stub(server="s", tool=TOOL, function="find").source
    older = source.replace(
        source[source.index("    return call_tool(") :],
        '    return call_tool("s", "find", {"from": from_, "user-id": user_id, "q": q, **arguments})\n',
    )
    assert check_stub(older, function="find", server="s", tool="find") is None
    old, new = signature(older.encode(), "find"), signature(source.encode(), "find")
    assert old is not None and new is not None
    assert list(new.params) == ["from", "user-id", "q"] and new.extra == "Any"
    assert compare(old, new) == []


def test_a_stub_whose_parameters_keep_their_wire_names_merges_arguments_into_the_dict() -> None:
    tool = {**TOOL, "inputSchema": {**TOOL["inputSchema"], "properties": {"q": {"type": "string"}}}}
    source = render_stub(server="s", tool=tool, function="find").source
    assert '    return call_tool("s", "find", {"q": q, **arguments})\n' in source
