"""JSON Schema → Python type annotations and TypedDict definitions, written by hand.

One :class:`TypeBuilder` serves one stub module: it converts the input schema's properties and
the output schema, allocates every TypedDict name (unique within the module, never a reserved
name), and collects the definitions in the order they must be written (children before parents).

What maps to what:

- ``string`` / ``integer`` / ``number`` / ``boolean`` / ``null`` → ``str`` / ``int`` / ``float`` /
  ``bool`` / ``None``; ``type: [..]`` → a union;
- ``enum`` / ``const`` of strings, ints, bools and null → ``Literal[...]`` (other values: the
  base type);
- ``array`` → ``list[T]``; a tuple (``prefixItems``, or ``items: [...]`` with ``additionalItems``) →
  ``tuple[A, B] | list[A | B]`` as an argument (open: ``tuple[A | B | T, ...] | list[A | B | T]``),
  ``list[A | B]`` in a result;
- an object with ``properties`` → a TypedDict (``NotRequired`` for optional keys); an argument whose
  ``patternProperties`` or ``additionalProperties`` (a schema or ``true``) allow more keys →
  ``dict[str, V]``, V every value type, the keys in the docstring; an object without ``properties``
  → ``dict[str, T]``, T every value its ``additionalProperties`` schema or ``patternProperties`` allow
  (``dict[str, Any]``, a free-form object, when ``additionalProperties`` is absent or ``true``); the input
  schema's own root becomes parameters instead (:meth:`TypeBuilder.input_shape`), and keys its
  ``additionalProperties`` or ``patternProperties`` allow become ``**arguments``;
- ``unevaluatedProperties`` → as ``additionalProperties`` (where that is absent);
- a key ``required`` names that no property defines → a required parameter (or TypedDict key) all the same, of
  the ``additionalProperties`` schema's type when no ``patternProperties`` may judge it, else ``Any``: left out,
  no call through the stub could meet the schema;
- ``anyOf`` / ``oneOf`` → a union; ``allOf`` of objects → one merged object (``allOf`` of one
  ``$ref`` beside only notes, as pydantic v1 and FastAPI write a described reference: the reference); the
  merged object allows a further key only if every member (and the ``allOf``'s own keys) that says anything
  of further keys allows it, and leaves out a property that a member's ``additionalProperties`` refuses
  (``false``, or a schema of other JSON types): in an ``allOf`` it judges keys by its own member's properties;
  ``nullable: true`` → ``T | None``;
- local ``$ref`` (``#``, ``#/$defs/X``, ``#/definitions/X``, any JSON pointer) → resolved, a
  referenced object becomes a named TypedDict, so recursive definitions work;
- anything else, an external ``$ref``, or anything past the caps → ``Any``.

Nothing from the schema is ever written as code except Literal values (through
:mod:`generator.type_expr`, which writes them with :mod:`generator.literals`) and type names
(through :func:`generator.naming.to_identifier`). No schema key can make the builder emit an import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from generator.schema_convert import (
    MAX_DEFINITIONS,
    MAX_PROPERTIES,
    MAX_STEPS,
    Converter,
    additional_of,
    fields_of,
    measure,
    props_of,
    required_of,
)
from generator.type_defs import InputShape, NameRegistry, Property, TypedDictDef
from generator.type_expr import ANY, IMPORTABLE_NAMES, Atom, DictOf, PyType, type_names

MAX_WARNINGS = 20
"""Distinct warnings one tool's schemas give (the 21st says the rest are not given). Before, each property gave its
own: 490 properties whose `$ref` leads nowhere, in the input and the output schema, gave 980 warnings a tool, and 450
such tools (a 15 MB listing) a 52 MB manifest (it keeps a tool's warnings to say them again); now 1.2 MB."""


class SchemaConversionError(Exception):
    """A schema cannot become what was asked (e.g. the input schema is not an object)."""


class TypeBuilder:
    """Converts the schemas of one tool into types, sharing names and definitions in one module.

    ``reserved`` are module-level names the types must not take (the function name, imports).
    """

    def __init__(self, *, reserved: Iterable[str], warn: Callable[[str], None]) -> None:
        self.names = NameRegistry(IMPORTABLE_NAMES.union(reserved, ["annotations"]))
        self.definitions: list[TypedDictDef] = []
        self._warn = warn
        self._warned: set[str] = set()
        self._allocated = 0
        self._steps = 0

    def warn(self, message: str) -> None:
        """Say ``message`` once; past `MAX_WARNINGS` distinct ones, say once that the rest are left unsaid."""
        if message in self._warned or len(self._warned) > MAX_WARNINGS:
            return
        self._warned.add(message)
        if len(self._warned) <= MAX_WARNINGS:
            self._warn(message)
        else:
            self._warn(f"more warnings about its schemas are not given: only the first {MAX_WARNINGS} are")

    def step(self) -> bool:
        """Count one converted subschema; False once the budget is spent."""
        self._steps += 1
        return self._steps <= MAX_STEPS

    def can_define(self) -> bool:
        return self._allocated < MAX_DEFINITIONS

    def defining(self) -> None:
        self._allocated += 1

    def add(self, definition: TypedDictDef, since: int) -> str:
        """Add ``definition`` (its nested types from ``since`` on in `definitions`) and give the name it is written
        under: the name of an earlier definition of the same base name that writes the same TypedDict (the same keys,
        types, descriptions and defaults), which it is not then written beside. Such a pair comes of one object
        schema in the input and the output differing in what a TypedDict does not express: server-memory's relations
        closed by ``additionalProperties: false`` in its output schema alone (before: ``RelationsItem`` and
        ``RelationsItem_2``, the same type twice). A definition that a nested type of its own refers to (a recursive
        one) is always kept: that type would name it."""
        name = definition.name
        base = self.names.base_of(name)
        nested = self.definitions[since:]
        if base is not None and not any(name in type_names(f.type) for d in nested for f in d.fields):
            for earlier in self.definitions:
                same = (earlier.fields, earlier.description) == (definition.fields, definition.description)
                if same and self.names.base_of(earlier.name) == base:
                    self.names.release(name)
                    return earlier.name
        self.definitions.append(definition)
        return name

    def input_shape(self, schema: Any, *, hint: str) -> InputShape:
        """The parameters an input schema describes.

        An object without ``properties`` (``{"type": "object"}``) takes any arguments, as does one
        with ``additionalProperties: true``; ``additionalProperties`` with a schema types the extra
        arguments. ``"properties": {}`` alone declares a tool without arguments.

        Raises:
            SchemaConversionError: the schema is not an object schema the stub can take apart,
                or it is too big.
        """
        conv, root = self._root(schema, "input schema", hint)
        props = fields_of(root)
        if len(props) > MAX_PROPERTIES:
            raise SchemaConversionError(f"more than {MAX_PROPERTIES} properties")
        extra_type: PyType | None
        only: tuple[str, ...]
        if additional_of(root) is None and "properties" not in root:  # a free-form object
            extra_type, only = ANY, ()
        else:
            extra_type, only = conv.extra_keys(root, hint, 1)
        required = set(required_of(root))
        out: list[Property] = []
        for key, sub in props.items():
            resolved = conv.deref(sub)
            doc_schema = resolved if isinstance(resolved, dict) else (sub if isinstance(sub, dict) else {})
            if doc_schema is not sub and isinstance(sub, dict):
                # What is written beside the reference is of this property: pydantic puts an enum's default there.
                doc_schema = {**doc_schema, **{k: v for k, v in sub.items() if k != "$ref"}}
            out.append(
                Property(
                    wire=key,
                    type=conv.convert(sub, hint=key, depth=1),
                    required=key in required,
                    schema=doc_schema,
                )
            )
        return InputShape(tuple(out), extra_type, only)

    def output_type(self, schema: Any, *, name: str) -> PyType:
        """The type of the structured result; ``name`` (already reserved) names its TypedDict.

        Raises:
            SchemaConversionError: the schema is too big or not an object schema.
        """
        if (union := self._output_union(schema, name)) is not None:
            return union
        conv, root = self._root(schema, "output schema", name, output=True)
        if not props_of(root):  # a free-form object, whatever keys it requires
            return DictOf(conv.free_values(root, name, 1))
        if len(fields_of(root)) > MAX_PROPERTIES:
            raise SchemaConversionError(f"more than {MAX_PROPERTIES} properties")
        conv.bind("#", Atom(name))
        return Atom(conv.typed_dict(root, name, 0))

    def _output_union(self, schema: Any, name: str) -> PyType | None:
        """The type of a structured result that is one of several objects (``anyOf``/``oneOf`` of object schemas, no
        properties of its own), each its own TypedDict; None for any other schema. Before: ``ToolResult``, and the
        stub said nothing of what comes back.

        Raises:
            SchemaConversionError: the schema is too big.
        """
        if (problem := measure(schema)) is not None:
            raise SchemaConversionError(problem)
        conv = Converter(self, schema, "output schema", name, output=True)
        root = conv.deref(schema)
        if not isinstance(root, dict) or props_of(root):
            return None
        options = root.get("oneOf") if isinstance(root.get("oneOf"), list) else root.get("anyOf")
        if not isinstance(options, list) or not options:
            return None
        views = [conv.object_view(conv.deref(option)) for option in options]
        if not all(view is not None and props_of(view) for view in views):
            return None
        return conv.convert(root, hint=name, depth=0)

    def _root(self, schema: Any, label: str, hint: str, *, output: bool = False) -> tuple[Converter, dict[str, Any]]:
        """A converter for one schema document and its root as one object schema.

        Raises:
            SchemaConversionError: the schema is too big or its root is not an object schema.
        """
        problem = measure(schema)
        if problem is not None:
            raise SchemaConversionError(problem)
        conv = Converter(self, schema, label, hint, output=output)
        root = conv.object_view(conv.deref(schema))
        if root is None:
            raise SchemaConversionError("it is not an object schema")
        return conv, root
