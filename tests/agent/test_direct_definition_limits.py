"""A native tool definition (direct, tool-search and filtered modes; serve's passthrough tools) carries at most
`DESCRIPTION_CHARS` of its description, as the stub's docstring does, and no input schema over `SCHEMA_CHARS`: a
server's 1 MB description went whole into every request before. Real servers, the real generate-tree."""

from __future__ import annotations

import json
from pathlib import Path

from agent.toolsets.direct import DESCRIPTION_CHARS, SCHEMA_CHARS, DirectToolset
from tests.support import raw_server_tree

BIG = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 200} for i in range(400)}}


def test_a_huge_description_is_cut_and_a_huge_schema_left_out_saying_so_and_ordinary_ones_are_whole(
    tmp_path: Path,
) -> None:
    tools = [
        {"name": "long", "description": "word " * 20_000, "inputSchema": {"type": "object"}},
        {"name": "wide", "description": "Wide.", "inputSchema": BIG},
        {"name": "plain", "description": "Plain.", "inputSchema": {"type": "object", "properties": {"a": {}}}},
    ]
    tree, _ = raw_server_tree(tmp_path, tools)
    defined = {d["name"]: d for d in DirectToolset(tree).tools() if d["name"].startswith("raw__")}
    long = defined["raw__long"]["description"]
    assert long.startswith("word word") and long.endswith("… (96,000 characters more left out)")
    assert len(long) < DESCRIPTION_CHARS + 50
    size = len(json.dumps(BIG))
    assert size > SCHEMA_CHARS and defined["raw__wide"]["input_schema"] == {"type": "object"}
    assert defined["raw__wide"]["description"] == (
        f"Wide.\n\n(Its input schema, {size:,} characters, is over {SCHEMA_CHARS:,} and left out here; the "
        "arguments are still checked against it.)"
    )
    assert defined["raw__plain"]["description"] == "Plain."
    assert defined["raw__plain"]["input_schema"] == {"type": "object", "properties": {"a": {}}}


def test_an_input_schema_the_messages_api_refuses_is_left_out_saying_why_and_a_valid_one_is_whole(
    tmp_path: Path,
) -> None:
    # Before: carried as the server sent it; the API refuses a whole request for one tool's schema that is not JSON
    # Schema draft 2020-12 (400 "tools.N.custom.input_schema: JSON schema is invalid"), so one careless server's tool
    # made every request of a direct-mode run fail, and every request of a client of serve's passthrough tools.
    typo = {"type": "object", "properties": {"a": {"type": "strin"}}}
    draft4 = {"type": "object", "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}}
    tuple_items = {"type": "object", "properties": {"p": {"type": "array", "items": [{"type": "number"}]}}}
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {}}}
    valid = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"name": {"type": ["string", "null"], "pattern": "^\\p{L}+$", "minLength": 1}},
        "required": ["name"],
        "$defs": {"x": {"anyOf": [{"type": "integer"}, True]}},
    }
    tools = [
        {"name": "typo", "description": "Typo.", "inputSchema": typo},
        {"name": "draft4", "description": "Old.", "inputSchema": draft4},
        {"name": "tuple", "description": "Tuple.", "inputSchema": tuple_items},
        {"name": "draft7", "description": "Declared.", "inputSchema": draft7},
        {"name": "valid", "description": "Valid.", "inputSchema": valid},
    ]
    tree, _ = raw_server_tree(tmp_path, tools)
    defined = {d["name"]: d for d in DirectToolset(tree).tools() if d["name"].startswith("raw__")}
    said = (
        "(Its input schema is left out here: it is not valid JSON Schema draft 2020-12, which the Messages API takes: "
    )
    for name, description, why in [
        ("typo", "Typo.", 'type at /properties/a is "strin", not one of array, boolean, integer, null, number, '
         "object, string (or a list of them)"),
        ("draft4", "Old.", "exclusiveMinimum at /properties/n is true, not a number"),
        ("tuple", "Tuple.", "/properties/p/items is list, not an object or a boolean"),
    ]:  # fmt: skip
        assert defined[f"raw__{name}"]["input_schema"] == {"type": "object"}
        assert (
            defined[f"raw__{name}"]["description"] == f"{description}\n\n{said}{why}; the server checks the arguments.)"
        )
    # A $schema naming an older draft is not refused for that (161 of LiveMCPBench's 527 real tools declare draft-07).
    assert defined["raw__draft7"]["input_schema"] == draft7 and defined["raw__draft7"]["description"] == "Declared."
    assert defined["raw__valid"]["input_schema"] == valid and defined["raw__valid"]["description"] == "Valid."
