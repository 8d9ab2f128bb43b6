"""A tool description that holds its own ``Args:`` and ``Returns:`` sections (FastMCP's, from a Python docstring): the
stub's docstring has one of each, tooltree's, each parameter's text taken from the description's where its schema has
none, and what changed for callers reads the same as before."""

from __future__ import annotations

import ast
from typing import Any

import pytest

import generator.docstrings as docstrings_module
from generator.described_args import DescribedArgs
from generator.render import render_stub
from generator.stub_signature import compare, signature

# Shaped as a FastMCP tool of a real catalog (names and texts changed).
TOOL: dict[str, Any] = {
    "name": "find_places",
    "description": (
        "\nFind places of one kind near a point.\n\nResults are sorted by distance.\n\n"
        "Args:\n    latitude: Center point latitude (decimal degrees)\n"
        "    radius (float): Search radius in meters\n                 (defaults to 1000m)\n"
        "    kind: Optional filter\n    \nReturns:\n    List of places with:\n    - Name and type\n"
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "latitude": {"title": "Latitude", "type": "number"},
            "radius": {"default": 1000, "title": "Radius", "type": "number", "maximum": 5000},
            "kind": {"type": "string", "description": "Kind of place, as the schema says it."},
        },
        "required": ["latitude"],
    },
    "outputSchema": {"type": "object", "properties": {"result": {"type": "object"}}, "required": ["result"]},
}


def _docstring(source: str) -> str:
    func = ast.parse(source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    return ast.get_docstring(func) or ""


def test_a_descriptions_args_section_is_taken_into_the_stubs_own() -> None:
    doc = _docstring(render_stub(server="geo", tool=TOOL, function="find_places").source)
    assert doc.split("\n").count("Args:") == 1  # before: two, the description's and tooltree's
    assert (
        "Args:\n"
        "    latitude: Center point latitude (decimal degrees).\n"
        "    radius: Search radius in meters (defaults to 1000m). Maximum: 5000. Server default: 1000.\n"
        "    kind: Kind of place, as the schema says it.\n\n"
        "Returns:\n"
    ) in doc


def test_a_section_that_names_what_is_no_parameter_stays_in_the_description() -> None:
    description = "Find places.\n\nArgs:\n    latitude: Center latitude\n    ctx: The request context\n"
    doc = _docstring(render_stub(server="geo", tool={**TOOL, "description": description}, function="f").source)
    assert doc.startswith(description + "\nArgs:\n    radius: Maximum: 5000. Server default: 1000.\n")


def test_what_changed_for_callers_of_a_stub_rendered_before_is_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    new = render_stub(server="geo", tool=TOOL, function="find_places").source
    with monkeypatch.context() as m:  # the renderer before: the description's section left where it is
        m.setattr(docstrings_module, "described_args", lambda text, names: DescribedArgs(text))
        old = render_stub(server="geo", tool=TOOL, function="find_places").source
    assert old.count("    Args:\n") == 2 and new.count("    Args:\n") == 1
    before, after = signature(old.encode(), "find_places"), signature(new.encode(), "find_places")
    assert before is not None and after is not None
    assert after.limits == {"radius": {"Maximum": "5000"}} == before.limits
    assert compare(before, after) == []
    tighter = {**TOOL, "inputSchema": {**TOOL["inputSchema"], "properties": {**TOOL["inputSchema"]["properties"]}}}
    tighter["inputSchema"]["properties"]["radius"] = {**TOOL["inputSchema"]["properties"]["radius"], "maximum": 100}
    narrowed = signature(render_stub(server="geo", tool=tighter, function="find_places").source.encode(), "find_places")
    assert narrowed is not None
    assert compare(before, narrowed) == [("limit narrowed", True, "radius", "Maximum: 5000", "Maximum: 100")]


def test_a_descriptions_returns_section_goes_into_the_stubs_own_when_it_has_one() -> None:
    doc = _docstring(render_stub(server="geo", tool=TOOL, function="find_places").source)
    assert doc.split("\n").count("Returns:") == 1  # before: two, the description's and tooltree's
    assert doc.startswith("Find places of one kind near a point.\n\nResults are sorted by distance.\n\nArgs:\n")
    assert doc.endswith(
        "Returns:\n    List of places with:\n    - Name and type\n\n"
        "    FindPlacesOutput: the tool's structured result, with keys:\n        result (dict[str, Any])"
    )
    untyped = _docstring(render_stub(server="geo", tool={**TOOL, "outputSchema": None}, function="f").source)
    assert untyped.startswith(  # the description's is the only one: it stays where it is
        "Find places of one kind near a point.\n\nResults are sorted by distance.\n\n"
        "Returns:\n    List of places with:\n    - Name and type\n\nArgs:\n"
    )
