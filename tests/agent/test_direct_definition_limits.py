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
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {}}}
    typo = {"type": "object", "properties": {"a": {"type": "strin"}}}
    valid = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^\\p{L}+$"}},
    }
    tools = [
        {"name": "draft7", "description": "Old.", "inputSchema": draft7},
        {"name": "typo", "description": "Typo.", "inputSchema": typo},
        {"name": "valid", "description": "Valid.", "inputSchema": valid},
    ]
    tree, _ = raw_server_tree(tmp_path, tools)
    defined = {d["name"]: d for d in DirectToolset(tree).tools() if d["name"].startswith("raw__")}
    assert defined["raw__draft7"]["input_schema"] == defined["raw__typo"]["input_schema"] == {"type": "object"}
    assert defined["raw__draft7"]["description"] == (
        "Old.\n\n(Its input schema is left out here: it declares 'http://json-schema.org/draft-07/schema#', not JSON "
        "Schema draft 2020-12; the server checks the arguments.)"
    )
    assert defined["raw__typo"]["description"].startswith(
        "Typo.\n\n(Its input schema is left out here: it is not valid JSON Schema draft 2020-12 ('strin' is not valid"
    )
    assert defined["raw__valid"]["input_schema"] == valid and defined["raw__valid"]["description"] == "Valid."
