"""A parameter's ``examples`` (JSON Schema; pydantic's ``Field(examples=[...])``) are in its line of the docstring.

Before, they were dropped: a model writing the call saw neither the form a value takes nor a value to start from.
"""

from __future__ import annotations

import ast
from typing import Any

from generator.render import render_stub

SEARCH: dict[str, Any] = {  # as a FastMCP (pydantic) server lists a tool whose Fields give examples
    "name": "search_issues",
    "description": "Search the issues of a repository.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Search words.", "examples": ["is:open crash"]},
            "labels": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
                "title": "Labels",
                "examples": [["bug", "p1"], ["docs"]],
            },
            "limit": {"type": "integer", "examples": "not a list", "default": 10},
            "since": {"type": "string", "format": "date", "examples": ["2024-01-15", "x" * 500]},
        },
        "required": ["query"],
    },
}


def _args(stub_source: str) -> str:
    func = ast.parse(stub_source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    return (ast.get_docstring(func) or "").partition("Args:\n")[2]


def test_examples_are_shown_after_the_description() -> None:
    args = _args(render_stub(server="gh", tool=SEARCH, function="search_issues").source)
    assert '    query: Search words. Examples: "is:open crash".\n' in args
    assert '    labels: Examples: ["bug", "p1"], ["docs"]. Server default: null.\n' in args
    assert "    limit: Server default: 10." in args  # not a list: nothing said
    since = " ".join(args.split("since: ", 1)[1].split())
    assert since.startswith('Format: date. Examples: "2024-01-15", "xxx') and since.endswith("….")
    assert len(since) < 400


def test_a_long_enum_shown_as_a_list_says_it_was_cut() -> None:
    """Before: ``One of: 0.5, 1.5, …, 61.5, 62.`` (the cut's ``…`` went with the closing bracket): read as whole."""
    rates = [n + 0.5 for n in range(200)]
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {"rate": {"type": "number", "enum": rates}}}}
    args = " ".join(_args(render_stub(server="s", tool=tool, function="t").source).split())
    assert args.startswith("rate: One of: 0.5, 1.5, 2.5,") and args.endswith("….")
    short = {**tool, "inputSchema": {"type": "object", "properties": {"rate": {"type": "number", "enum": [0.5, 1.5]}}}}
    assert _args(render_stub(server="s", tool=short, function="t").source) == "    rate: One of: 0.5, 1.5."


def test_a_const_no_literal_holds_is_shown_as_the_one_value_taken() -> None:
    """Before: a ``const`` object, list or float was typed ``Any`` and said nowhere, where an ``enum`` of them is
    listed: a model writing the call could not know the one value the server takes."""
    properties = {"filter": {"const": {"kind": "all"}}, "pair": {"const": [1, 2]}, "ratio": {"const": 1.5}}
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": properties}}
    args = _args(render_stub(server="s", tool=tool, function="t").source)
    assert args == '    filter: One of: {"kind": "all"}.\n    pair: One of: [1, 2].\n    ratio: One of: 1.5.'
    literal = {**tool, "inputSchema": {"type": "object", "properties": {"mode": {"const": "fast"}}}}
    assert "mode" not in _args(render_stub(server="s", tool=literal, function="t").source)  # its Literal says it
