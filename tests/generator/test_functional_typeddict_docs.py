"""A TypedDict written in the functional form (a key that is no identifier, such as ``from``) keeps its documentation.

The reference memory server's ``create_relations`` takes relations of keys ``from``, ``to`` and ``relationType``;
before, the class form had an ``Attributes:`` docstring and the functional form none, so its stub said nowhere that
``from`` is the entity where the relation starts.
"""

from __future__ import annotations

import ast
import itertools
from typing import Any

from generator.render import render_stub
from generator.stub_check import check_stub

_RELATION = {
    "type": "object",
    "properties": {
        "from": {"type": "string", "description": "The name of the entity where the relation starts"},
        "to": {"type": "string", "description": "The name of the entity where the relation ends"},
        "relationType": {"type": "string", "description": "The type of the relation"},
    },
    "required": ["from", "to", "relationType"],
}
CREATE_RELATIONS: dict[str, Any] = {  # @modelcontextprotocol/server-memory 2026.8.31, as it lists the tool
    "name": "create_relations",
    "title": "Create Relations",
    "description": "Create multiple new relations between entities in the knowledge graph. "
    "Relations should be in active voice",
    "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"relations": {"type": "array", "items": _RELATION}},
        "required": ["relations"],
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False},
    "execution": {"taskSupport": "forbidden"},
    "outputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"relations": {"type": "array", "items": {**_RELATION, "additionalProperties": False}}},
        "required": ["relations"],
        "additionalProperties": False,
    },
}


def _attribute_docs(source: str) -> dict[str, str]:
    """Each module-level name's docstring: the string statement right after its assignment."""
    body = ast.parse(source).body
    docs = {}
    for stmt, after in itertools.pairwise(body):
        if isinstance(stmt, ast.Assign) and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[ast.unparse(stmt.targets[0])] = after.value.value
    return docs


def test_memory_relations_document_their_keys() -> None:
    stub = render_stub(server="memory", tool=CREATE_RELATIONS, function="create_relations")
    assert not stub.warnings
    assert 'RelationsItem = TypedDict("RelationsItem", {"from": "str", "to": "str", "relationType": "str"})' in (
        stub.source
    )
    docs = _attribute_docs(stub.source)
    assert "RelationsItem_2" not in stub.source  # the argument's items and the result's are one (test_same_typed_dicts)
    assert "from: The name of the entity where the relation starts" in docs["RelationsItem"]
    assert "to: The name of the entity where the relation ends" in docs["RelationsItem"]
    assert "relationType: The type of the relation" in docs["RelationsItem"]
    assert check_stub(stub.source, function="create_relations", server="memory", tool="create_relations") is None
    namespace: dict[str, Any] = {"__name__": "servers.memory.create_relations"}
    exec(compile(stub.source, "<create_relations>", "exec"), namespace)
    assert set(namespace["RelationsItem"].__required_keys__) == {"from", "to", "relationType"}


def test_an_undocumented_functional_typeddict_has_no_docstring() -> None:
    tool = {
        "name": "t",
        "inputSchema": {"type": "object", "properties": {"f": {"type": "object", "properties": {"from": {}}}}},
    }
    stub = render_stub(server="s", tool=tool, function="t")
    assert "F = TypedDict(" in stub.source and _attribute_docs(stub.source) == {}


def test_hostile_field_descriptions_stay_inside_the_docstring() -> None:
    nasty = 'ends """ here\\\nimport os\r\u2028os.system("x")"'
    tool = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {"f": {"type": "object", "properties": {"from": {"type": "string", "description": nasty}}}},
        },
    }
    stub = render_stub(server="s", tool=tool, function="t")
    assert not stub.warnings
    assert [type(s).__name__ for s in ast.parse(stub.source).body] == [
        "Expr", "ImportFrom", "ImportFrom", "ImportFrom", "Assign", "Expr", "FunctionDef"
    ]  # fmt: skip
    assert "import os" in _attribute_docs(stub.source)["F"]


def test_the_check_admits_a_string_only_right_after_a_functional_typeddict() -> None:
    head = '"""doc"""\nfrom __future__ import annotations\nfrom typing import TypedDict\n'
    tail = 'def f() -> ToolResult:\n    return call_tool("s", "t", {})\n'
    runtime = "from tool_tree.runtime import ToolResult, call_tool\n"
    ok = head + runtime + 'A = TypedDict("A", {"from": "str"})\n"""A\'s keys."""\n' + tail
    assert check_stub(ok, function="f", server="s", tool="t") is None
    for bad in (
        '"""loose"""\nA = TypedDict("A", {"from": "str"})\n',
        'A = TypedDict("A", {"from": "str"})\n"""one"""\n"""two"""\n',
        'class A(TypedDict):\n    x: int\n"""after a class"""\n',
        'A = TypedDict("A", {"from": "str"})\nf"""{A}"""\n',
    ):
        assert check_stub(head + runtime + bad + tail, function="f", server="s", tool="t") is not None, bad


def test_output_keys_that_are_no_identifiers_are_escaped_in_the_docstrings_text_not_written_raw() -> None:
    # Before: the object's docstring held the keys' NUL, ESC and right-to-left override as they are (the source showed
    # `a\x00b`, an escape of the literal, so help() and an editor printed them raw), and the Returns section showed
    # each key cleaned: `x\u200b` and `x` both as "x", `e\u202ef` as "ef", another key.
    keys = {
        "a\x00b": "a\\x00b",
        "c\x1bd": "c\\x1bd",
        "e\u202ef": "e\\u202ef",
        "ef": "ef",
        "x\u200b": "x\\u200b",
        "x": "x",
    }
    output = {"type": "object", "properties": {k: {"type": "string", "description": "A key."} for k in keys}}
    tool = {"name": "t", "description": "Do it.", "inputSchema": {"type": "object"}, "outputSchema": output}
    source = render_stub(server="s", tool=tool, function="t").source
    function = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    returns = (ast.get_docstring(function) or "").split("with keys:\n", 1)[1].splitlines()
    attributes = _attribute_docs(source)["TOutput"].split("Attributes:\n", 1)[1].splitlines()
    assert [line.strip() for line in returns] == [f"{shown} (str, optional): A key." for shown in keys.values()]
    assert [line.strip() for line in attributes] == [f"{shown}: A key." for shown in keys.values()]
    for text in (ast.get_docstring(function) or "", _attribute_docs(source)["TOutput"]):
        assert text.isascii() and "\x00" not in text and "\x1b" not in text, text
