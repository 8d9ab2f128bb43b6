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
