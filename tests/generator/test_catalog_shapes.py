"""Stubs of schemas written as real servers write them (pydantic, zod-to-json-schema, FastMCP docstrings), in the
shapes found in a catalog of 527 real tools: the docstring tells what the schema says, and the type is as narrow."""

from __future__ import annotations

import ast
from typing import Any

from generator.render import render_stub
from generator.stub_signature import Signature, compare, signature


def _docstring(tool: dict[str, Any]) -> str:
    stub = render_stub(server="demo", tool=tool, function="find")
    assert stub.warnings == []
    function = ast.parse(stub.source).body[-1]
    assert isinstance(function, ast.FunctionDef)
    return ast.get_docstring(function) or ""


def test_the_default_pydantic_writes_beside_a_reference_to_an_enum_is_in_the_docstring() -> None:
    schema = {
        "$defs": {"Unit": {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"}},
        "properties": {
            "unit": {"$ref": "#/$defs/Unit", "default": "celsius"},
            "other": {"$ref": "#/$defs/Unit", "default": "fahrenheit", "description": "The other unit."},
        },
        "type": "object",
    }
    doc = _docstring({"name": "find", "inputSchema": schema})
    assert '    unit: Server default: "celsius".\n' in doc
    assert '    other: The other unit. Server default: "fahrenheit".' in doc


def test_a_limit_added_to_a_tool_whose_description_has_its_own_args_section_breaks_calls() -> None:
    description = "Get the forecast.\n\nArgs:\n    days: Number of days\n\nReturns:\n    The forecast"

    def signature_of(days: dict[str, Any]) -> Signature:
        schema = {"type": "object", "properties": {"days": {"type": "integer", **days}}, "required": ["days"]}
        tool = {"name": "find", "description": description, "inputSchema": schema}
        stub = render_stub(server="demo", tool=tool, function="find")
        found = signature(stub.source.encode(), "find")
        assert found is not None
        return found

    before, after = signature_of({}), signature_of({"maximum": 7})
    assert compare(before, after) == [("limit narrowed", True, "days", "no maximum", "Maximum: 7")]


def test_a_branch_zod_writes_for_a_value_left_out_narrows_nothing() -> None:
    bins = {"anyOf": [{"type": "number", "minimum": 1}, {"not": {}}, {"type": "null"}], "default": None}
    schema = {"type": "object", "properties": {"binNumber": bins, "never": {"anyOf": [{"not": {}}, False]}}}
    stub = render_stub(server="demo", tool={"name": "find", "inputSchema": schema}, function="find")
    assert "binNumber: float | None | NotGiven = NOT_GIVEN" in stub.source
    assert "never: Any | NotGiven = NOT_GIVEN" in stub.source
    assert "    binNumber: Minimum: 1. Server default: null." in _docstring({"name": "find", "inputSchema": schema})


def test_what_each_value_of_a_union_of_described_literals_means_is_in_the_docstring() -> None:
    kinds = [
        {"type": "string", "const": "hot", "description": "Most popular"},
        {"type": "string", "const": "video", "title": "Videos"},
        {"type": "string", "const": "comment"},
    ]
    schema = {"type": "object", "properties": {"type": {"anyOf": kinds, "default": "hot", "description": "Board"}}}
    stub = render_stub(server="demo", tool={"name": "find", "inputSchema": schema}, function="find")
    assert 'type: Literal["hot", "video", "comment"] | NotGiven = NOT_GIVEN' in stub.source
    doc = _docstring({"name": "find", "inputSchema": schema})
    assert '    type: Board. Values: "hot" (Most popular), "video" (Videos), "comment". Server default: "hot".' in doc
    plain = {"type": "object", "properties": {"type": {"anyOf": [{"const": "hot"}, {"const": "video"}]}}}
    assert "Values:" not in _docstring({"name": "find", "inputSchema": plain})


def test_an_object_zod_refers_to_where_it_is_first_written_is_one_typed_dict() -> None:
    style = {"type": "object", "properties": {"fillColor": {"type": "string"}}, "description": "Style settings."}
    district = {"type": "object", "properties": {"name": {"type": "string"}, "style": {"$ref": "#/properties/style"}}}
    schema = {
        "type": "object",
        "properties": {"style": style, "subdistricts": {"type": "array", "items": district}, "again": {"$ref": "#"}},
    }
    source = render_stub(server="demo", tool={"name": "find", "inputSchema": schema}, function="find").source
    assert "class Style(TypedDict):" in source
    assert source.count("    style: NotRequired[Style]\n") == 2  # in a district and in the root's own TypedDict
    assert "Style_2" not in source and "SubdistrictsItem_2" not in source


def _signature_of(source: str) -> Signature:
    found = signature(source.encode(), "find")
    assert found is not None
    return found


def test_a_typed_dict_written_once_instead_of_twice_under_two_names_changes_nothing_for_callers() -> None:
    head = "from typing import NotRequired, TypedDict\n\n"
    twice = head + (
        "class Items(TypedDict):\n    name: str\n    children: NotRequired[list[Items]]\n\n"
        "class ChildrenItem(TypedDict):\n    name: str\n    children: NotRequired[list[Items]]\n\n"
        "def find(*, data: ChildrenItem) -> None:\n    pass\n"
    )
    once = head + (
        "class ChildrenItem(TypedDict):\n    name: str\n    children: NotRequired[list[ChildrenItem]]\n\n"
        "def find(*, data: ChildrenItem) -> None:\n    pass\n"
    )
    assert compare(_signature_of(twice), _signature_of(once)) == []
    assert compare(_signature_of(once), _signature_of(twice)) == []
    other = once.replace("children: NotRequired[list[ChildrenItem]]", "children: NotRequired[list[str]]")
    assert compare(_signature_of(twice), _signature_of(other)) == [
        ("type changed", True, "data", "ChildrenItem", "ChildrenItem")
    ]


def test_the_default_of_a_key_of_a_nested_argument_object_is_in_its_typed_dicts_docstring() -> None:
    unit = {"enum": ["px", "pt"], "type": "string", "description": "The unit."}
    style = {
        "type": "object",
        "properties": {
            "colors": {"type": "array", "items": {"type": "string"}, "default": ["#1783FF"], "description": "Colors"},
            "bold": {"type": "boolean", "default": False},
            "unit": {"$ref": "#/$defs/Unit", "default": "px"},
            "size": {"type": "integer"},
        },
    }
    schema = {"type": "object", "$defs": {"Unit": unit}, "properties": {"style": style}}
    result = {"type": "object", "properties": {"style": style}}
    source = render_stub(
        server="demo", tool={"name": "find", "inputSchema": schema, "outputSchema": result}, function="find"
    ).source
    classes = [node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]
    argument, returned = (ast.get_docstring(c) or "" for c in classes if c.name.startswith("Style"))
    assert argument.endswith(
        '    colors: Colors. Server default: ["#1783FF"].\n'
        "    bold: Server default: false.\n"
        '    unit: The unit. Server default: "px".'
    )
    assert "default" not in returned  # a result's keys are what the server sends


def test_a_bound_draft_4_marks_exclusive_is_given_as_one_the_value_must_pass() -> None:
    page = {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 10, "exclusiveMaximum": False}
    doc = _docstring({"name": "find", "inputSchema": {"type": "object", "properties": {"page": page}}})
    assert doc.endswith("    page: Maximum: 10. Greater than: 0.")
