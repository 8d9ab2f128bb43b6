import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.naming import to_identifier
from generator.schema_convert import MAX_DEFINITIONS, MAX_DEPTH, MAX_PROPERTIES, MAX_STEPS, measure
from generator.schema_types import SchemaConversionError, TypeBuilder
from generator.type_defs import TypedDictDef, camel
from generator.type_expr import Atom, DictOf, ImportNames, render_type


def _build(schema: Any, *, reserved: tuple[str, ...] = ("fn",)) -> tuple[dict[str, str], TypeBuilder, list[str]]:
    found: list[str] = []
    builder = TypeBuilder(reserved=reserved, warn=found.append)
    shape = builder.input_shape(schema, hint="FnArguments")
    types = {p.wire: render_type(p.type, ImportNames()) for p in shape.properties}
    return types, builder, found


def _prop(schema: Any) -> str:
    types, _, _ = _build({"type": "object", "properties": {"p": schema}})
    return types["p"]


def _defs(builder: TypeBuilder) -> dict[str, TypedDictDef]:
    return {d.name: d for d in builder.definitions}


def _fields(d: TypedDictDef) -> dict[str, tuple[str, bool]]:
    return {f.key: (render_type(f.type, ImportNames()), f.required) for f in d.fields}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({}, "Any"),
        (True, "Any"),
        ({"type": "frobnicate"}, "Any"),
        ({"type": ["string", "integer"]}, "str | int"),
        ({"type": ["null", "string"]}, "str | None"),
        ({"type": "string", "nullable": True}, "str | None"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "str | None"),
        ({"oneOf": [{"type": "integer"}, {"type": "array", "items": {"type": "string"}}]}, "int | list[str]"),
        ({"enum": ["open", "won"]}, 'Literal["open", "won"]'),
        ({"enum": ["a", None]}, 'Literal["a"] | None'),
        ({"enum": [1, 2, True]}, "Literal[1, 2, True]"),
        ({"enum": [-1, 0]}, "Literal[-1, 0]"),
        ({"const": "x"}, 'Literal["x"]'),
        ({"const": None}, "None"),
        ({"type": "number", "enum": [1.5, 2.5]}, "float"),
        ({"enum": [{"a": 1}]}, "Any"),
        ({"enum": []}, "Any"),
        ({"enum": ['say "hi"\n']}, "Literal['say \"hi\"\\n']"),
        ({"enum": ['it\'s "q"', "it's"]}, "Literal['it\\'s \"q\"', \"it's\"]"),
        ({"anyOf": [{"const": "a"}, {"const": "b"}]}, 'Literal["a", "b"]'),
        ({"type": "array", "items": {"type": "integer"}}, "list[int]"),
        ({"type": "array"}, "list[Any]"),
        ({"type": "array", "items": [{"type": "string"}]}, "tuple[Any, ...] | list[Any]"),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "tuple[Any, ...] | list[Any]"),
        ({"type": "object"}, "dict[str, Any]"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({"type": "object", "additionalProperties": True}, "dict[str, Any]"),
        ({"anyOf": [{"type": "string"}, {}]}, "Any"),
        # constraint-only branches leave the schema's own type standing
        ({"type": "string", "anyOf": [{"format": "date"}, {"format": "email"}]}, "str"),
    ],
)
def test_schema_converts_to_the_expected_annotation(schema: Any, expected: str) -> None:
    assert _prop(schema) == expected


def test_huge_integers_never_become_literals() -> None:
    assert _prop({"type": "integer", "enum": [10**30]}) == "int"


def test_long_enum_falls_back_to_its_base_type() -> None:
    assert _prop({"type": "string", "enum": [f"v{i}" for i in range(500)]}) == "str"


def test_nested_object_becomes_a_typeddict_named_after_its_property() -> None:
    types, builder, _ = _build(
        {
            "type": "object",
            "properties": {
                "home_address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string", "description": "City"}},
                    "required": ["street"],
                }
            },
        }
    )
    assert types == {"home_address": "HomeAddress"}
    d = _defs(builder)["HomeAddress"]
    assert _fields(d) == {"street": ("str", True), "city": ("str", False)}
    assert [f.description for f in d.fields] == ["", "City"]


def test_title_names_the_typeddict_and_duplicates_get_suffixes() -> None:
    obj = {"type": "object", "title": "Address", "properties": {"a": {"type": "string"}}}
    other = {**obj, "properties": {"b": {"type": "string"}}}
    types, builder, _ = _build({"type": "object", "properties": {"x": obj, "y": other}})
    assert types == {"x": "Address", "y": "Address_2"}
    assert list(_defs(builder)) == ["Address", "Address_2"]
    # two that write the same TypedDict (as JSON gives them: two objects) are one (test_same_typed_dicts.py)
    types, builder, _ = _build({"type": "object", "properties": {"x": obj, "y": {**obj}, "z": other}})
    assert types == {"x": "Address", "y": "Address", "z": "Address_2"}
    assert list(_defs(builder)) == ["Address", "Address_2"]


@pytest.mark.parametrize(
    ("title", "expected"),
    [("None", "None_"), ("TypedDict", "TypedDict_"), ("call_tool", "CallTool"), ("1st", "Model1st"), ("fn", "Fn_")],
)
def test_type_names_never_take_reserved_names(title: str, expected: str) -> None:
    types, _, _ = _build(
        {"type": "object", "properties": {"x": {"type": "object", "title": title, "properties": {"a": {}}}}},
        reserved=("fn", "Fn"),
    )
    name = types["x"]
    assert name.isidentifier() and name.isascii()
    assert name == expected


def test_arrays_of_objects_get_item_typeddicts() -> None:
    types, builder, _ = _build(
        {
            "type": "object",
            "properties": {"rows": {"type": "array", "items": {"type": "object", "properties": {"id": {}}}}},
        }
    )
    assert types == {"rows": "list[RowsItem]"}
    assert "RowsItem" in _defs(builder)


def test_ref_to_defs_and_definitions_are_resolved() -> None:
    types, builder, _ = _build(
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/Point"}, "b": {"$ref": "#/definitions/Kind"}},
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
            "definitions": {"Kind": {"enum": ["a", "b"]}},
        }
    )
    assert types == {"a": "Point", "b": 'Literal["a", "b"]'}
    assert _fields(_defs(builder)["Point"]) == {"x": ("float", True)}


def test_recursive_definition_refers_to_itself_by_name() -> None:
    types, builder, warnings = _build(
        {
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "integer"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                        "parent": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                    },
                }
            },
        }
    )
    assert types == {"tree": "Node"}
    assert _fields(_defs(builder)["Node"]) == {
        "value": ("int", False),
        "children": ("list[Node]", False),
        "parent": ("Node | None", False),
    }
    assert warnings == []


def test_mutually_recursive_objects_are_both_defined() -> None:
    types, builder, _ = _build(
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}},
            },
        }
    )
    assert types == {"a": "A"}
    defs = _defs(builder)
    assert _fields(defs["A"]) == {"b": ("B", False)}
    assert _fields(defs["B"]) == {"a": ("A", False)}
    assert list(defs) == ["B", "A"]  # children before parents


def test_ref_loop_between_bare_references_becomes_any_with_a_warning() -> None:
    types, _, warnings = _build(
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        }
    )
    assert types == {"a": "Any"}
    assert any("refers to itself" in w for w in warnings)


def test_ref_to_the_root_makes_a_typeddict_of_the_root() -> None:
    types, builder, _ = _build(
        {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}}, "required": ["name"]}
    )
    assert types == {"name": "str", "child": "FnArguments"}
    assert _fields(_defs(builder)["FnArguments"]) == {"name": ("str", True), "child": ("FnArguments", False)}


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("https://example.com/schema.json", "it is outside the schema, and tooltree fetches nothing"),
        ("other.json#/x", "it is outside the schema, and tooltree fetches nothing"),
        ("#/$defs/Missing", "it points at nothing in the schema"),
        ("#/a~1b", "it points at nothing in the schema"),
        ("#item", "only JSON pointers ('#/…') are followed"),
    ],
)
def test_unresolvable_ref_becomes_any_with_a_warning_saying_why(ref: str, why: str) -> None:
    # Before: "(only local references are)" for each, a missing "#/$defs/Missing" too, which is local.
    types, _, warnings = _build({"type": "object", "properties": {"a": {"$ref": ref}}})
    assert types == {"a": "Any"}
    assert f"$ref {ref!r} cannot be resolved ({why}); using Any" in "\n".join(warnings)


@pytest.mark.parametrize("index", ["\u00b2", "\u0661", "\uff11"])
def test_a_ref_whose_index_is_a_digit_that_is_not_ascii_points_at_nothing(index: str) -> None:
    # Before: '²' passed str.isdigit and failed int(): "internal error while rendering (ValueError …); using the
    # minimal stub", the whole tool's typed stub lost over one parameter.
    schema = {"type": "object", "properties": {"a": {"$ref": f"#/$defs/b/anyOf/{index}"}, "c": {"type": "integer"}}}
    types, _, warnings = _build({**schema, "$defs": {"b": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}})
    assert types == {"a": "Any", "c": "int"}
    assert "it points at nothing in the schema); using Any" in "\n".join(warnings)


def test_json_pointer_escapes_are_decoded() -> None:
    types, _, _ = _build(
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/a~1b~0c"}}, "$defs": {"a/b~c": {"type": "integer"}}}
    )
    assert types == {"a": "int"}


def test_all_of_objects_merge_into_one_typeddict() -> None:
    types, builder, _ = _build(
        {
            "type": "object",
            "properties": {
                "item": {
                    "allOf": [
                        {"$ref": "#/$defs/Base"},
                        {"type": "object", "properties": {"extra": {"type": "boolean"}}, "required": ["extra"]},
                    ]
                }
            },
            "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
        }
    )
    assert types == {"item": "Item"}
    assert _fields(_defs(builder)["Item"]) == {"id": ("str", True), "extra": ("bool", True)}


def test_all_of_with_a_single_non_object_takes_that_type() -> None:
    assert _prop({"allOf": [{"type": "string"}, {"minLength": 1}]}) == "str"


def test_any_of_object_variants_become_a_union_of_typeddicts() -> None:
    types, builder, _ = _build(
        {
            "type": "object",
            "properties": {
                "target": {
                    "anyOf": [
                        {"type": "object", "title": "ByName", "properties": {"name": {"type": "string"}}},
                        {"type": "object", "title": "ById", "properties": {"id": {"type": "integer"}}},
                    ]
                }
            },
        }
    )
    assert types == {"target": "ByName | ById"}
    assert set(_defs(builder)) == {"ByName", "ById"}


def test_required_is_taken_from_the_root_and_ignores_junk() -> None:
    _, _, _ = _build({"type": "object", "properties": {"a": {}}, "required": "a"})
    found: list[str] = []
    shape = TypeBuilder(reserved=(), warn=found.append).input_shape(
        {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b", 3, None, "zzz"]}, hint="H"
    )
    # a name no property defines is still required: a parameter of any type (test_stub_fidelity_audit.py)
    assert [(p.wire, p.required) for p in shape.properties] == [("a", False), ("b", True), ("zzz", True)]


def test_root_ref_and_root_all_of_are_followed() -> None:
    types, _, _ = _build(
        {"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    )
    assert types == {"q": "str"}
    types, _, _ = _build({"allOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {}}}]})
    assert types == {"a": "str", "b": "Any"}


def test_root_with_properties_and_constraint_variants_keeps_its_properties() -> None:
    types, _, _ = _build(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        }
    )
    assert types == {"a": "str", "b": "str"}


@pytest.mark.parametrize(
    "schema",
    [True, [], "string", None, 5, {"type": "string"}, {"anyOf": [{"type": "object"}]}, {"$ref": "#"}, {"enum": [1]}],
)
def test_input_schema_that_is_not_an_object_is_refused(schema: Any) -> None:
    with pytest.raises(SchemaConversionError):
        _build(schema)


def test_an_object_without_properties_takes_any_arguments_but_empty_properties_take_none() -> None:
    builder = TypeBuilder(reserved=(), warn=lambda m: None)
    assert builder.input_shape({"type": "object"}, hint="H").extra == Atom("Any")
    assert builder.input_shape({"type": "object", "properties": {}}, hint="H").extra is None
    assert builder.input_shape({"type": "object", "additionalProperties": False}, hint="H").extra is None
    closed = {"type": "object", "properties": {}, "additionalProperties": True}
    assert builder.input_shape(closed, hint="H").extra == Atom("Any")
    assert builder.input_shape({"type": "object", "additionalProperties": True}, hint="H").extra == Atom("Any")
    extra = builder.input_shape({"type": "object", "additionalProperties": {"type": "string"}}, hint="H").extra
    assert extra == Atom("str")


def test_properties_keep_their_extra_keys_only_when_the_schema_allows_them() -> None:
    builder = TypeBuilder(reserved=(), warn=lambda m: None)
    props = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert builder.input_shape(props, hint="H").extra is None  # the usual, closed-by-intent object
    assert builder.input_shape({**props, "additionalProperties": True}, hint="H").extra == Atom("Any")
    typed = builder.input_shape({**props, "additionalProperties": {"type": "integer"}}, hint="H")
    assert ([p.wire for p in typed.properties], typed.extra) == (["a"], Atom("int"))


def test_too_many_root_properties_are_refused() -> None:
    with pytest.raises(SchemaConversionError, match="properties"):
        _build({"type": "object", "properties": {f"p{i}": {} for i in range(MAX_PROPERTIES + 1)}})


def test_too_many_nested_properties_become_a_plain_dict_with_a_warning() -> None:
    big = {"type": "object", "properties": {f"p{i}": {} for i in range(MAX_PROPERTIES + 1)}}
    types, _, warnings = _build({"type": "object", "properties": {"big": big}})
    assert types == {"big": "dict[str, Any]"}
    assert warnings


def test_nesting_past_the_depth_cap_becomes_any_with_a_warning() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_DEPTH + 5):
        schema = {"type": "array", "items": schema}
    text = _prop(schema)
    assert text.count("list[") == MAX_DEPTH and text.endswith("list[Any]" + "]" * (MAX_DEPTH - 1))
    _, _, warnings = _build({"type": "object", "properties": {"p": schema}})
    assert any("deeper than" in w for w in warnings)


def test_definition_count_is_capped() -> None:
    props = {f"p{i}": {"type": "object", "properties": {"a": {}}} for i in range(MAX_DEFINITIONS + 10)}
    types, builder, warnings = _build({"type": "object", "properties": props})
    assert len(builder.definitions) == MAX_DEFINITIONS
    assert list(types.values()).count("dict[str, Any]") == 10
    assert any(str(MAX_DEFINITIONS) in w for w in warnings)


def test_measure_reports_size_and_depth_without_recursing() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert measure(deep) is not None and "deeper" in (measure(deep) or "")
    assert "more than" in (measure(list(range(100_000))) or "")
    assert measure({"type": "object"}) is None


def test_output_schema_becomes_the_named_typeddict() -> None:
    builder = TypeBuilder(reserved=("fn",), warn=lambda m: None)
    assert builder.names.allocate("fn_output") == "FnOutput"
    t = builder.output_type(
        {"type": "object", "properties": {"id": {"type": "string"}, "self": {"$ref": "#"}}, "required": ["id"]},
        name="FnOutput",
    )
    assert t == Atom("FnOutput")
    assert _fields(_defs(builder)["FnOutput"]) == {"id": ("str", True), "self": ("FnOutput", False)}
    assert builder.output_type({"type": "object"}, name="X") == DictOf(Atom("Any"))
    with pytest.raises(SchemaConversionError):
        builder.output_type({"type": "array"}, name="Y")


def test_conversion_is_deterministic() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/X"}}},
            "c": {"$ref": "#/$defs/X"},
        },
        "$defs": {"X": {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/X"}]}}}},
    }
    first = _build(schema)
    second = _build(schema)
    assert first[0] == second[0]
    assert first[1].definitions == second[1].definitions


def test_conversion_work_is_capped_by_the_step_budget() -> None:
    props = {f"p{i}": {"anyOf": [{"type": "string"} for _ in range(70)]} for i in range(300)}
    types, _, warnings = _build({"type": "object", "properties": props})
    assert types["p0"] == "str" and types["p299"] == "Any"
    assert any(f"more than {MAX_STEPS} subschemas" in w for w in warnings)


def _camel_of_identifier(name: str) -> str:
    ident = to_identifier(name, fallback="Model")
    return "".join(part[:1].upper() + part[1:] for part in ident.split("_") if part) or "Model"


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=string.ascii_letters + string.digits + "_", max_size=80),
        st.text(alphabet=string.ascii_letters + "_-. é１", max_size=20),
    )
)
def test_camel_case_is_taken_from_the_safe_identifier(name: str) -> None:
    assert camel(name) == _camel_of_identifier(name)


@pytest.mark.parametrize("name", ["print", "class", "match", "_x", "__init__", "a__b_", "x" * 70, "A1_b2"])
def test_camel_case_of_plain_and_reserved_names(name: str) -> None:
    assert camel(name) == _camel_of_identifier(name)


def _measure_depth_first(value: Any, max_nodes: int, max_depth: int) -> str | None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        v, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"more than {max_nodes} JSON values"
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list | tuple):
            stack.extend((x, depth + 1) for x in v)
    return None


_JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(_JSON_VALUES, st.integers(min_value=1, max_value=25), st.integers(min_value=1, max_value=6))
def test_measure_names_the_limit_a_depth_first_walk_meets_first(value: Any, max_nodes: int, max_depth: int) -> None:
    assert measure(value, max_nodes=max_nodes, max_depth=max_depth) == _measure_depth_first(value, max_nodes, max_depth)
