"""One object schema in a tool's input and its output that the stub would type the same (they differ only in what a
TypedDict does not express, as server-memory's relations closed by ``additionalProperties: false`` in the output
alone) is written once, under its first name; objects that differ in their keys, types or descriptions, and a
recursive one, keep a TypedDict each."""

from __future__ import annotations

import ast
from typing import Any

from generator.render import render_stub

RELATION = {
    "type": "object",
    "properties": {
        "from": {"type": "string", "description": "The name of the entity where the relation starts"},
        "to": {"type": "string", "description": "The name of the entity where the relation ends"},
    },
    "required": ["from", "to"],
}


def _tool(item_in: dict[str, Any], item_out: dict[str, Any]) -> dict[str, Any]:
    def listing(item: dict[str, Any], **closed: Any) -> dict[str, Any]:
        properties = {"relations": {"type": "array", "items": item}}
        return {"type": "object", "properties": properties, "required": ["relations"], **closed}

    return {
        "name": "create_relations",
        "description": "Create relations.",
        "inputSchema": listing(item_in),
        "outputSchema": listing(item_out, additionalProperties=False),
    }


def _typed_dicts(source: str) -> list[str]:
    """The names the stub's module binds to TypedDicts (class or functional syntax)."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            names.extend(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_an_item_closed_only_in_the_output_is_one_typed_dict_for_arguments_and_result() -> None:
    # Before: RelationsItem and RelationsItem_2, the same keys, types and descriptions twice (server-memory's
    # create_relations, create_entities, …), the result typed with the second.
    closed = {**RELATION, "additionalProperties": False}
    stub = render_stub(server="memory", tool=_tool(RELATION, closed), function="create_relations")
    assert stub.warnings == []
    assert _typed_dicts(stub.source) == ["RelationsItem", "CreateRelationsOutput"]
    assert "def create_relations(*, relations: list[RelationsItem]) -> CreateRelationsOutput:" in stub.source
    assert "class CreateRelationsOutput(TypedDict):\n    relations: list[RelationsItem]\n" in stub.source
    assert "RelationsItem_2" not in stub.source


def test_items_that_differ_in_a_key_a_type_a_requirement_or_a_description_keep_a_typed_dict_each() -> None:
    props = RELATION["properties"]
    others = [
        {**RELATION, "properties": {**props, "weight": {"type": "number"}}},
        {**RELATION, "properties": {**props, "to": {"type": "integer", "description": props["to"]["description"]}}},
        {**RELATION, "required": ["from"]},
        {**RELATION, "properties": {**props, "to": {"type": "string", "description": "Where it ends"}}},
    ]
    for other in others:
        stub = render_stub(server="memory", tool=_tool(RELATION, other), function="create_relations")
        assert _typed_dicts(stub.source) == ["RelationsItem", "RelationsItem_2", "CreateRelationsOutput"], other
        assert "    relations: list[RelationsItem_2]\n" in stub.source


def test_a_recursive_item_is_never_merged_into_another() -> None:
    def node() -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/N"}}},
        }

    tool = _tool({"$ref": "#/$defs/N"}, {"$ref": "#/$defs/N"})
    tool["inputSchema"]["$defs"] = {"N": node()}
    tool["outputSchema"]["$defs"] = {"N": node()}
    stub = render_stub(server="memory", tool=tool, function="create_relations")
    assert _typed_dicts(stub.source) == ["N", "N_2", "CreateRelationsOutput"]
    assert "    children: NotRequired[list[N_2]]\n" in stub.source
    compile(stub.source, "stub.py", "exec")
