"""A structured result that is one of several objects (an output schema of ``anyOf``/``oneOf`` object schemas, no
properties of its own) is typed as the union of their TypedDicts, each with its keys, and mypy narrows it. Before:
the stub returned ``ToolResult`` and said nothing of what comes back, with a warning at generation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from generator.render import render_stub
from tests.generator.test_tuples_and_open_objects import _mypy

FOUND = {
    "type": "object",
    "properties": {"found": {"const": True}, "name": {"type": "string", "description": "the record's name"}},
    "required": ["found", "name"],
}
MISSING = {
    "type": "object",
    "properties": {"found": {"const": False}, "reason": {"type": "string"}},
    "required": ["found"],
}


def _tool(output: dict[str, Any]) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    return {"name": "lookup", "description": "Look up a record.", "inputSchema": schema, "outputSchema": output}


@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
def test_an_output_that_is_one_of_several_objects_is_their_union(key: str) -> None:
    stub = render_stub(server="demo", tool=_tool({"type": "object", key: [FOUND, MISSING]}), function="lookup")
    assert stub.warnings == []
    assert "def lookup(*, id: str) -> LookupOutput_2 | LookupOutput_3:" in stub.source
    assert "    found: Literal[True]\n    name: str\n" in stub.source
    assert "    found: Literal[False]\n    reason: NotRequired[str]\n" in stub.source
    assert "name: the record's name" in stub.source
    assert "ToolResult" not in stub.source


def test_the_union_type_checks_and_narrows(tmp_path: Path) -> None:
    stub = render_stub(server="demo", tool=_tool({"anyOf": [FOUND, MISSING]}), function="lookup")
    script = (
        "from lookup import lookup\n"
        "r = lookup(id='1')\n"
        "if r['found']:\n"
        "    reveal_type(r['name'])\n"
        "else:\n"
        "    r['name']\n"
    )
    checked = _mypy(tmp_path, {"lookup": stub.source}, script)
    assert 'use.py:4: note: Revealed type is "str"' in checked.stdout, checked.stdout
    assert 'TypedDict "LookupOutput_3" has no key "name"' in checked.stdout, checked.stdout


def test_a_union_with_a_branch_that_is_not_an_object_still_returns_a_tool_result() -> None:
    stub = render_stub(server="demo", tool=_tool({"anyOf": [FOUND, {"type": "string"}]}), function="lookup")
    assert "-> ToolResult:" in stub.source
    assert any("the output schema could not be converted" in w for w in stub.warnings)
