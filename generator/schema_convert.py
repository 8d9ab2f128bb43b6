"""The recursive walk from one JSON Schema document to types: ``$ref``, ``allOf``, unions, caps.

A :class:`Converter` serves one document (a tool's input or output schema) for the
:class:`generator.schema_types.TypeBuilder` that owns the stub module's names and definitions;
every cap here turns what is past it into ``Any`` (or ``dict[str, Any]``) with a warning, so a
hostile schema costs bounded work. :func:`generator.schema_size.measure` refuses a raw schema too big to walk at all.
(Over 400 lines: one recursion over every keyword family a stub types — references, combinators, literals,
arrays and tuples, objects open and closed, merged ``allOf`` members — whose methods call one another and share
the caps. What an object schema says of its keys, the key rules of merged ``allOf`` members too, is read in
`generator.schema_keys`.)

A tuple array (``prefixItems``, or the older ``items: [...]``) is an argument a caller may pass as a tuple
or a list (``tuple[int, str] | list[int | str]``; an open one ``tuple[int | str, ...] | list[int | str]``,
since ``tuple[int, *tuple[str, ...]]`` does not parse on Python 3.10); in a result it is the list JSON
gives. An argument whose ``patternProperties`` or ``additionalProperties`` allow keys beyond its
``properties`` is a ``dict[str, V]`` (:class:`generator.type_expr.OpenDict`): a TypedDict would refuse them
in the caller's dict. A result keeps its TypedDict: reading the known keys typed is what a caller wants, and
a TypedDict value may hold more keys (PEP 589 subtyping).

An argument object that allows more keys and refers to itself has ``Any`` at the self-reference: its
``dict[str, V]`` would need a recursive alias (``Node = dict[str, "list[Node] | str"]``, which mypy accepts),
and a stub names nothing but TypedDicts (:mod:`generator.stub_check` admits no other definition).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from generator.parts import text_of
from generator.schema_keys import (
    _patterns_of,
    additional_of,
    fields_of,
    is_open,
    merged_extra_keys,
    props_of,
    required_of,
)
from generator.schema_size import MAX_NODES, MAX_RAW_DEPTH, measure
from generator.type_defs import FieldDef, TypedDictDef
from generator.type_expr import (
    ANY,
    MAX_LITERALS,
    MAX_UNION,
    NONE,
    Atom,
    DictOf,
    ListOf,
    Lit,
    OpenDict,
    PyType,
    TupleOf,
    make_union,
    written_size,
)
from tool_tree.text import one_line

if TYPE_CHECKING:
    from generator.schema_types import TypeBuilder

__all__ = [
    "MAX_DEFINITIONS",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_PROPERTIES",
    "MAX_RAW_DEPTH",
    "MAX_STEPS",
    "MAX_TUPLE_TYPES",
    "Converter",
    "additional_of",
    "fields_of",
    "matches_nothing",
    "measure",
    "props_of",
    "required_of",
]

MAX_DEPTH = 32
"""Schema nesting the converter follows; deeper parts become ``Any``."""
MAX_PROPERTIES = 500
"""Properties per object; a bigger object becomes ``dict[str, Any]`` (the input root: a fallback stub)."""
MAX_DEFINITIONS = 200
"""TypedDicts per module; further objects become ``dict[str, Any]``."""
MAX_STEPS = 20_000
"""Subschemas converted per tool (``$ref`` can make a small schema expand a lot); the rest is ``Any``."""
MAX_TUPLE_TYPES = 100
"""Types a tuple array's ``tuple[...]`` may write to be offered beside its ``list[...]``, which writes its items
again: past it, only the list (before, tuple arrays nested 20 deep, a schema of 2 KB, wrote a stub of 32 MB and
45 deep never finished, the host's memory growing by gigabytes)."""
_MAX_REF_HOPS = 16
_MAX_LITERAL_INT = 2**63


_SIMPLE = {"string": Atom("str"), "integer": Atom("int"), "number": Atom("float"), "boolean": Atom("bool")}


def _description(schema: Any) -> str:
    return text_of(schema.get("description")) if isinstance(schema, dict) else ""


def matches_nothing(schema: Any) -> bool:
    """Whether a schema no value meets: ``false``, or ``{"not": {}}``, which zod-to-json-schema writes as a branch of
    an ``anyOf`` for a value left out (``binNumber: anyOf [number, {"not": {}}, null]`` is a number or null)."""
    return schema is False or (isinstance(schema, dict) and (schema.get("not") == {} or schema.get("not") is True))


def _default_of(*schemas: Any) -> str | None:
    """The JSON of the first of ``schemas`` (a property's, then the one it refers to) that gives a ``default``."""
    for schema in schemas:
        if isinstance(schema, dict) and "default" in schema:
            try:
                return json.dumps(schema["default"], ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                return None
    return None


def _decode_pointer_token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _shown_ref(ref: str) -> str:
    """``ref`` as a warning quotes it: on one line, cut at 80 characters (a warning goes to the terminal and the
    manifest, and a server's ``$ref`` may be megabytes long: before, each warning held all of it)."""
    return one_line(ref[:320], 80)


def _unresolved(ref: str) -> str:
    """Why ``ref`` leads nowhere (before: "only local references are" for each, a missing ``#/$defs/X`` too)."""
    if not ref.startswith("#"):
        return "it is outside the schema, and tooltree fetches nothing"
    return "it points at nothing in the schema" if ref[:2] in ("#", "#/") else "only JSON pointers ('#/…') are followed"


_SHAPE_KEYS = frozenset(
    {"type", "properties", "patternProperties", "additionalProperties", "items", "prefixItems", "anyOf", "oneOf"}
    | {"enum", "const"}
)
"""Keys that say something about a schema's type (beside them an ``allOf`` is more than a wrapper)."""


def _lone_all_of_ref(schema: dict[str, Any]) -> str | None:
    """The reference in ``{"allOf": [{"$ref": …}], "description": …}``, else None.

    pydantic v1 and FastAPI wrap a reference to give it a description or a default: it is the
    referenced type, under its definition's name. Merging it as an ``allOf`` would make a new TypedDict
    for every use, and unroll a recursive definition to the depth cap.
    """
    members = schema.get("allOf")
    if not (isinstance(members, list) and len(members) == 1 and isinstance(members[0], dict)):
        return None
    ref = members[0].get("$ref")
    if not isinstance(ref, str) or len(members[0]) != 1 or not schema.keys().isdisjoint(_SHAPE_KEYS):
        return None
    return ref


class Converter:
    """Converts the schemas of one document (the input or the output schema)."""

    def __init__(self, builder: TypeBuilder, root: Any, label: str, root_hint: str, *, output: bool = False) -> None:
        self._b = builder
        self._output = output
        """Types of a result (JSON as read) rather than of arguments (what a caller may pass)."""
        self._root = root
        self._label = label
        self._root_hint = root_hint
        self._ref_types: dict[str, PyType] = {}
        self._resolving: set[str] = set()
        self._objects: dict[int, tuple[Any, Atom]] = {}
        """id of an object schema → (it, kept so the id stays its own; its TypedDict): an object met again (by a
        ``$ref`` to it where it is written, as zod-to-json-schema refers to a schema used twice) is that TypedDict,
        not a copy of it under another name (``Style_2``)."""

    # $ref handling

    def bind(self, ref: str, t: PyType) -> None:
        """Make ``ref`` mean ``t`` (the output root's TypedDict for ``#``)."""
        self._ref_types[ref] = t

    def resolve(self, ref: str) -> Any | None:
        """The target of a local JSON pointer, or None (external, malformed or missing)."""
        if ref == "#":
            return self._root
        if not ref.startswith("#/"):
            return None
        node: Any = self._root
        for token in ref[2:].split("/"):
            key = _decode_pointer_token(token)
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isascii() and key.isdigit() and int(key) < len(node):  # not '²'
                node = node[int(key)]
            else:
                return None
        return node

    def deref(self, schema: Any) -> Any | None:
        """Follow a chain of ``$ref`` to a schema that is not a bare reference (None on failure)."""
        if not (isinstance(schema, dict) and "$ref" in schema):
            return schema
        seen: set[str] = set()
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
            ref = schema["$ref"]
            if ref in seen or len(seen) >= _MAX_REF_HOPS:
                return None
            seen.add(ref)
            schema = self.resolve(ref)
        return schema

    def object_view(self, schema: Any) -> dict[str, Any] | None:
        """The schema as one object schema (``allOf`` members merged), or None if it is not one."""
        if not isinstance(schema, dict):
            return None
        t = schema.get("type")
        if t is not None and t != "object" and not (isinstance(t, list) and "object" in t):
            return None
        if "enum" in schema or "const" in schema:
            return None
        if ("anyOf" in schema or "oneOf" in schema) and not props_of(schema):
            return None
        all_of = schema.get("allOf")
        if not isinstance(all_of, list):
            return schema if ("properties" in schema or t == "object") else None
        merged_props: dict[str, Any] = dict(props_of(schema))
        required: list[str] = list(required_of(schema))
        title = schema.get("title")
        description = _description(schema)
        own = {k: schema[k] for k in ("properties", "additionalProperties", "patternProperties") if k in schema}
        scopes = [own]
        for member in all_of:
            target = self.deref(member)
            if not isinstance(target, dict):
                return None
            mt = target.get("type")
            if mt is not None and mt != "object":
                return None
            if "allOf" in target or not ("properties" in target or mt == "object"):
                return None
            for k, v in props_of(target).items():
                merged_props.setdefault(k, v)
            required += [r for r in required_of(target) if r not in required]
            title = title if isinstance(title, str) else target.get("title")
            description = description or _description(target)
            scopes.append(target)
        unevaluated = schema.get("unevaluatedProperties")
        if unevaluated is not None and not any(additional_of(s) not in (None, False) for s in scopes):
            seen: dict[str, Any] = {p: {} for s in scopes for p in _patterns_of(s)}  # keys a member evaluates
            scopes.append({"properties": merged_props, "additionalProperties": unevaluated, "patternProperties": seen})
        extra, refused = merged_extra_keys(scopes, merged_props)
        if refused:
            self._b.warn(
                f"{self._label}: in an allOf, additionalProperties judges keys by its own schema's properties only, "
                f"so JSON Schema refuses {', '.join(repr(one_line(k, 60)) for k in refused[:10])}; leaving them out"
            )
            merged_props = {k: v for k, v in merged_props.items() if k not in refused}
            required = [r for r in required if r not in refused]
        merged: dict[str, Any] = {"type": "object", "properties": merged_props, "required": required, **extra}
        if isinstance(title, str):
            merged["title"] = title
        if description:
            merged["description"] = description
        return merged

    def _convert_ref(self, ref: str, hint: str, depth: int) -> PyType:
        known = self._ref_types.get(ref)
        if known is not None:
            return known
        target = self.resolve(ref)
        if target is None:
            self._b.warn(f"{self._label}: $ref {_shown_ref(ref)!r} cannot be resolved ({_unresolved(ref)}); using Any")
            return ANY
        if ref in self._resolving:
            # A stub names only TypedDicts (generator.stub_check admits no type alias), and an argument
            # object that allows more keys is a dict[str, V], no TypedDict: its self-reference has no name.
            self._b.warn(
                f"{self._label}: $ref {_shown_ref(ref)!r} refers to itself through a non-object or an object that "
                "allows more keys (a stub can name neither); using Any there"
            )
            return ANY
        if (seen := self._objects.get(id(target))) is not None:
            self._ref_types[ref] = seen[1]
            return seen[1]
        def_hint = _decode_pointer_token(ref.rsplit("/", 1)[-1]) if ref != "#" else self._root_hint
        obj = self.object_view(target)
        if (
            obj is not None
            and props_of(obj)
            and len(props_of(obj)) <= MAX_PROPERTIES
            and not (is_open(obj) and not self._output)
            and self._b.can_define()
        ):
            name = self._b.names.allocate(def_hint)
            self._ref_types[ref] = Atom(name)
            self._objects[id(target)] = (target, Atom(name))
            written = Atom(self.typed_dict(obj, name, depth))
            self._ref_types[ref] = written
            self._objects[id(target)] = (target, written)
            return written
        self._resolving.add(ref)
        try:
            t = self.convert(target, hint=def_hint, depth=depth + 1)
        finally:
            self._resolving.discard(ref)
        self._ref_types[ref] = t
        return t

    # conversion

    def convert(self, schema: Any, *, hint: str, depth: int) -> PyType:
        if depth > MAX_DEPTH:
            self._b.warn(f"{self._label}: schema nested deeper than {MAX_DEPTH} levels; using Any below that")
            return ANY
        if not self._b.step():
            self._b.warn(f"{self._label}: schema expands to more than {MAX_STEPS} subschemas; using Any for the rest")
            return ANY
        if not isinstance(schema, dict):
            return ANY
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            ref = _lone_all_of_ref(schema)
        if isinstance(ref, str):
            t = self._convert_ref(ref, hint, depth)
            return make_union([t, NONE]) if schema.get("nullable") is True else t
        t = ANY  # `is ANY` below: make_union gives Any only as ANY itself
        for key in ("oneOf", "anyOf"):
            options = schema.get(key)
            if t is ANY and isinstance(options, list) and options:
                t = make_union(self.convert(o, hint=hint, depth=depth + 1) for o in options if not matches_nothing(o))
        # Branches with real types win over the schema's own type; constraint-only branches
        # ({"required": [...]}) convert to Any and leave the schema's own type standing.
        if t is ANY:
            t = self._own_type(schema, hint, depth)
        if schema.get("nullable") is True:
            t = make_union([t, NONE])
        return t

    def _own_type(self, schema: dict[str, Any], hint: str, depth: int) -> PyType:
        if "const" in schema:
            return self._literal([schema["const"]], schema, hint, depth)
        if isinstance(schema.get("enum"), list):
            return self._literal(schema["enum"], schema, hint, depth)
        return self._by_type(schema, hint, depth)

    def _literal(self, values: list[Any], schema: dict[str, Any], hint: str, depth: int) -> PyType:
        ok = all(
            v is None or isinstance(v, str | bool) or (isinstance(v, int) and abs(v) < _MAX_LITERAL_INT) for v in values
        )
        lit = [v for v in values if v is not None]
        if not ok or not values or len(lit) > MAX_LITERALS:
            return self._by_type(schema, hint, depth)
        members: list[PyType] = [Lit(tuple(lit))] if lit else []
        if len(lit) < len(values):
            members.append(NONE)
        return make_union(members)

    def _by_type(self, schema: dict[str, Any], hint: str, depth: int) -> PyType:
        t = schema.get("type")
        if isinstance(t, list):
            names = [x for x in t if isinstance(x, str)]
            if not names:
                return ANY
            return make_union(self._single(schema, name, hint, depth) for name in names)
        if isinstance(t, str):
            return self._single(schema, t, hint, depth)
        if "properties" in schema or isinstance(schema.get("additionalProperties"), dict):
            return self._single(schema, "object", hint, depth)
        if "items" in schema or "prefixItems" in schema:
            return self._single(schema, "array", hint, depth)
        if isinstance(schema.get("allOf"), list):
            return self._all_of(schema, hint, depth)
        return ANY

    def _single(self, schema: dict[str, Any], name: str, hint: str, depth: int) -> PyType:
        if name in _SIMPLE:
            return _SIMPLE[name]
        if name == "null":
            return NONE
        if name == "array":
            return self._array(schema, hint, depth)
        if name == "object":
            return self._object(schema, hint, depth)
        return ANY

    def _array(self, schema: dict[str, Any], hint: str, depth: int) -> PyType:
        items, prefix = schema.get("items"), schema.get("prefixItems")
        rest = items
        if not isinstance(prefix, list) and isinstance(items, list):
            prefix, rest = items, schema.get("additionalItems")  # the tuple form before 2020-12
        if not isinstance(prefix, list) or not prefix:
            return ListOf(self.convert(rest, hint=hint + "Item", depth=depth + 1) if isinstance(rest, dict) else ANY)
        positions = [self.convert(p, hint=hint + "Item", depth=depth + 1) for p in prefix]
        most = schema.get("maxItems")
        if isinstance(most, int) and not isinstance(most, bool) and most < len(positions):
            positions = positions[: max(most, 0)]
        closed = rest is False or (isinstance(most, int) and not isinstance(most, bool) and most <= len(prefix))
        if closed and not positions:
            return ListOf(ANY)
        exact = TupleOf(tuple(positions), None if closed else self.convert(rest, hint=hint + "Item", depth=depth + 1))
        one = make_union(positions) if exact.each is None else exact.each
        if self._output or len(positions) > MAX_UNION or written_size(exact, MAX_TUPLE_TYPES) >= MAX_TUPLE_TYPES:
            return ListOf(one)
        return make_union([exact, ListOf(one)])

    def _object(self, schema: dict[str, Any], hint: str, depth: int) -> PyType:
        obj = self.object_view(schema) or schema
        props = props_of(obj)
        if props:
            if len(fields_of(obj)) > MAX_PROPERTIES:
                self._b.warn(
                    f"{self._label}: an object has more than {MAX_PROPERTIES} properties; using dict[str, Any]"
                )
                return DictOf(ANY)
            if not self._b.can_define():
                self._b.warn(f"{self._label}: more than {MAX_DEFINITIONS} nested object types; using dict[str, Any]")
                return DictOf(ANY)
            if is_open(obj) and not self._output:
                return self._open_dict(obj, hint, depth)
            if (seen := self._objects.get(id(schema))) is not None:
                return seen[1]
            title = obj.get("title")
            name = self._b.names.allocate(title if isinstance(title, str) and title.strip() else hint)
            self._objects[id(schema)] = (schema, Atom(name))
            written = Atom(self.typed_dict(obj, name, depth))
            self._objects[id(schema)] = (schema, written)
            return written
        return DictOf(self.free_values(obj, hint, depth + 1))

    def free_values(self, obj: dict[str, Any], hint: str, depth: int) -> PyType:
        """The type of the values of an object without ``properties``: every value its ``additionalProperties``
        schema or its ``patternProperties`` allow (with ``additionalProperties: false``, the patterns' alone; absent
        or ``true``: any value). Before, the patterns' were left out: a valid key refused, a result mistyped."""
        extra = additional_of(obj)
        if not isinstance(extra, dict) and not (extra is False and _patterns_of(obj)):
            return ANY
        more, _ = self.extra_keys(obj, hint, depth)
        return ANY if more is None else more

    def _open_dict(self, obj: dict[str, Any], hint: str, depth: int) -> OpenDict:
        """``dict[str, V]`` for an object with properties that allows more keys (V: every value type)."""
        required = set(required_of(obj))
        keys = tuple(
            (key, self.convert(sub, hint=key, depth=depth + 1), key in required) for key, sub in props_of(obj).items()
        )
        more, only = self.extra_keys(obj, hint, depth + 1)
        more = ANY if more is None else more  # not reached: an open object allows some
        return OpenDict(make_union([*(t for _, t, _ in keys), more]), keys, more, only)

    def extra_keys(self, obj: dict[str, Any], hint: str, depth: int) -> tuple[PyType | None, tuple[str, ...]]:
        """The type of the keys an object with ``properties`` allows beyond them (None: none), and the patterns
        they must match when only ``patternProperties`` allows them (else ``()``: any key).

        Keys matching a pattern are allowed whatever ``additionalProperties`` says of the others; without it the
        object is taken as closed but for them (see `is_open`).
        """
        extra = additional_of(obj)
        patterns = _patterns_of(obj)
        by_pattern = [self.convert(sub, hint=hint + "Value", depth=depth) for sub in patterns.values()]
        if isinstance(extra, dict):
            return make_union([self.convert(extra, hint=hint + "Value", depth=depth), *by_pattern]), ()
        if extra is True:
            return ANY, ()
        if by_pattern:
            return make_union(by_pattern), tuple(patterns)
        return None, ()

    def _all_of(self, schema: dict[str, Any], hint: str, depth: int) -> PyType:
        obj = self.object_view(schema)
        if obj is not None and obj is not schema:
            return self._object(obj, hint, depth)
        members = schema.get("allOf")
        for member in members if isinstance(members, list) else []:
            t = self.convert(member, hint=hint, depth=depth + 1)
            if t != ANY:
                return t
        return ANY

    def typed_dict(self, obj: dict[str, Any], name: str, depth: int) -> str:
        """Convert an object schema's properties into the TypedDict ``name`` (already allocated); the name it is
        written under (an earlier one of the same TypedDict, see `TypeBuilder.add`)."""
        self._b.defining()
        since = len(self._b.definitions)
        required = set(required_of(obj))
        fields = tuple(
            FieldDef(
                key=key,
                type=self.convert(sub, hint=key, depth=depth + 1),
                required=key in required,
                description=_description(sub) or _description(self.deref(sub)),
                default=None if self._output else _default_of(sub, self.deref(sub)),
            )
            for key, sub in fields_of(obj).items()
        )
        return self._b.add(TypedDictDef(name=name, fields=fields, description=_description(obj)), since)
