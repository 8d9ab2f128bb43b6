"""The small language of Python types the schema converter produces, and how it is written.

Types are values (``Atom("str")``, ``Lit(("a", "b"))``, ``ListOf(...)``, ``TupleOf(...)``, ``DictOf(...)``,
``OpenDict(...)``, ``Union(...)``) until :func:`render_type` writes them; every string Literal value goes through
:mod:`generator.literals`. :class:`ImportNames` records which ``typing`` names a stub uses and
what it calls them (``Any_`` when the stub's own function is called ``Any``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from generator.literals import preferred_literal, string_literal

MAX_LITERALS = 100
"""Values in one ``Literal[...]``; a longer enum becomes its base type."""
MAX_UNION = 30
"""Members of one union; a wider one becomes ``Any``."""

TYPING_NAMES = frozenset({"Any", "Literal", "TypedDict", "cast"})
"""Names a stub may import from ``typing``: Python 3.10 has each (`NotRequired`, 3.11's, comes from the runtime)."""
RUNTIME_NAMES = frozenset(
    {"ToolResult", "ToolError", "ToolCallError", "call_tool", "structured", "NotGiven", "NOT_GIVEN", "NotRequired"}
)
"""Names of ``tool_tree.runtime`` a stub may use (only some are imported)."""
IMPORTABLE_NAMES = TYPING_NAMES | RUNTIME_NAMES

LiteralValue = str | int | bool


def import_alias(name: str, function: str) -> str:
    """What an imported name is called in a stub: itself, or ``name_`` when the function is called ``name``."""
    return name + "_" if name == function else name


def import_aliases(names: frozenset[str], function: str) -> frozenset[str]:
    """What each of ``names`` is called in a stub whose function is ``function``."""
    if function not in names:
        return names
    return frozenset(import_alias(n, function) for n in names)


class ImportNames:
    """The ``typing`` / runtime names one stub uses, under the names the stub gives them."""

    def __init__(self, function: str = "") -> None:
        self.function = function
        self.used: set[str] = set()

    def use(self, name: str) -> str:
        """Record that ``name`` is imported; returns what to write for it."""
        self.used.add(name)
        return import_alias(name, self.function)

    @property
    def aliases(self) -> frozenset[str]:
        """Every name the imports may bind in the module."""
        return import_aliases(IMPORTABLE_NAMES, self.function)


@dataclass(frozen=True, slots=True)
class Atom:
    """A plain name: ``str``, ``int``, ``None``, ``Any``, a TypedDict name …"""

    name: str


@dataclass(frozen=True, slots=True)
class Lit:
    """``Literal[...]`` of the given values (never empty, never ``None``)."""

    values: tuple[LiteralValue, ...]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: PyType


@dataclass(frozen=True, slots=True)
class TupleOf:
    """``tuple[A, B]``; with ``rest`` (the type of any further items) ``tuple[A | B | R, ...]``."""

    items: tuple[PyType, ...]
    rest: PyType | None = None

    @property
    def each(self) -> PyType | None:
        """The one item type of an open tuple (None for a closed one)."""
        return None if self.rest is None else make_union([*self.items, self.rest])


@dataclass(frozen=True, slots=True)
class DictOf:
    value: PyType


@dataclass(frozen=True, slots=True)
class OpenDict:
    """An object with known keys and more (``properties`` beside ``patternProperties`` or
    ``additionalProperties``), written ``dict[str, V]``: no TypedDict can take the extra keys.

    ``value`` is every value type together; the rest only documents the object.
    """

    value: PyType
    keys: tuple[tuple[str, PyType, bool], ...]
    """(key, type, required) of each property."""
    more: PyType
    """The type of the other keys' values."""
    patterns: tuple[str, ...] = ()
    """The patterns the other keys must match (none: any key)."""


@dataclass(frozen=True, slots=True)
class Union:
    members: tuple[PyType, ...]


PyType = Atom | Lit | ListOf | TupleOf | DictOf | OpenDict | Union

ANY = Atom("Any")
NONE = Atom("None")


def _literal_key(value: LiteralValue) -> tuple[str, LiteralValue]:
    return (type(value).__name__, value)


def make_union(members: Iterable[PyType]) -> PyType:
    """Flatten, merge Literals, de-duplicate, put ``None`` last; ``Any`` absorbs everything.

    A union that is ``Any`` is returned as the ``ANY`` object itself.
    """
    flat: list[PyType] = []
    stack = list(members)[::-1]
    while stack:
        m = stack.pop()
        if isinstance(m, Union):
            stack.extend(reversed(m.members))
        else:
            flat.append(m)
    atoms = {m.name for m in flat if type(m) is Atom}  # what ``m == ANY`` / ``m == NONE`` compare
    if not flat or ANY.name in atoms:
        return ANY
    literals: list[LiteralValue] = []
    seen_literals: set[tuple[str, LiteralValue]] = set()
    out: list[PyType] = []
    merged_at = -1
    for m in flat:
        if type(m) is Atom and m.name == NONE.name:
            continue
        if isinstance(m, Lit):
            for v in m.values:
                key = _literal_key(v)
                if key not in seen_literals:
                    seen_literals.add(key)
                    literals.append(v)
            if merged_at < 0:
                merged_at = len(out)  # the merged Literal goes where the first one was
                out.append(m)
        elif m not in out:
            out.append(m)
    if literals:
        out[merged_at] = Lit(tuple(literals))
    if NONE.name in atoms:
        out.append(NONE)
    if len(out) > MAX_UNION or len(literals) > MAX_LITERALS:
        return ANY
    return out[0] if len(out) == 1 else Union(tuple(out))


def written_size(t: PyType, limit: int) -> int:
    """How many types the source text of ``t`` writes (each shared part counted where it is written), or ``limit``
    once it is that many: linear in the distinct parts, while the text may double at each level (a tuple's items
    are written in its ``tuple[...]`` and again in its ``list[...]``)."""
    sizes: dict[int, int] = {}
    held: list[PyType] = []  # an open tuple's union of items is made anew at each reading: kept while its id counts
    stack: list[tuple[PyType, tuple[PyType, ...] | None]] = [(t, None)]
    while stack:
        node, parts = stack.pop()
        if id(node) in sizes:
            continue
        if parts is None:
            parts = _written_parts(node)
            held.extend(parts)
            stack.append((node, parts))
            stack.extend((p, None) for p in parts if id(p) not in sizes)
            continue
        sizes[id(node)] = min(limit, 1 + sum(sizes[id(p)] for p in parts))
    return sizes[id(t)]


def _written_parts(t: PyType) -> tuple[PyType, ...]:
    """The types the source text of ``t`` writes inside it (as `render_type` does)."""
    if isinstance(t, ListOf):
        return (t.item,)
    if isinstance(t, TupleOf):
        return t.items if t.each is None else (t.each,)
    if isinstance(t, DictOf | OpenDict):
        return (t.value,)
    return t.members if isinstance(t, Union) else ()


def literal_source(value: LiteralValue, *, quote: str | None = None) -> str:
    """A Literal value as source text (strings in ``quote``, or the quote ruff would pick)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    return preferred_literal(value) if quote is None else string_literal(value, quote=quote)


def type_names(t: PyType) -> set[str]:
    """The names the source text of ``t`` refers to (before import aliases): ``dict[str, Foo]`` → dict, str, Foo."""
    if isinstance(t, Atom):
        return {t.name}
    if isinstance(t, Lit):
        return {"Literal"}
    if isinstance(t, ListOf):
        return {"list"} | type_names(t.item)
    if isinstance(t, TupleOf):
        return {"tuple"}.union(*(type_names(m) for m in ([t.each] if t.each is not None else t.items)))
    if isinstance(t, DictOf | OpenDict):
        return {"dict", "str"} | type_names(t.value)
    return set().union(*(type_names(m) for m in t.members))


def render_type(t: PyType, names: ImportNames, *, quote: str | None = None, wrap: str | None = None) -> str:
    """Source text of a type; records the ``typing`` names it needs in ``names``.

    ``quote`` forces the quote of string Literal values (for types written inside a string).
    ``wrap`` puts every value of a Literal on its own line, after the given indentation (for
    long enums; the brackets keep the expression valid across lines).
    """
    if isinstance(t, Atom):
        return names.use(t.name) if t.name in TYPING_NAMES else t.name
    if isinstance(t, Lit):
        values = [literal_source(v, quote=quote) for v in t.values]
        if wrap is None or len(values) < 2:
            return names.use("Literal") + "[" + ", ".join(values) + "]"
        return names.use("Literal") + "[\n" + "".join(f"{wrap}    {v},\n" for v in values) + wrap + "]"
    if isinstance(t, ListOf):
        return f"list[{render_type(t.item, names, quote=quote, wrap=wrap)}]"
    if isinstance(t, TupleOf):
        each = t.each
        if each is not None:
            return f"tuple[{render_type(each, names, quote=quote, wrap=wrap)}, ...]"
        return "tuple[" + ", ".join(render_type(m, names, quote=quote, wrap=wrap) for m in t.items) + "]"
    if isinstance(t, DictOf | OpenDict):
        return f"dict[str, {render_type(t.value, names, quote=quote, wrap=wrap)}]"
    return " | ".join(render_type(m, names, quote=quote, wrap=wrap) for m in t.members)
