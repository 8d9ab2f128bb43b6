from hypothesis import given, settings
from hypothesis import strategies as st

from generator.type_expr import (
    ANY,
    MAX_LITERALS,
    MAX_UNION,
    NONE,
    Atom,
    DictOf,
    ImportNames,
    ListOf,
    Lit,
    LiteralValue,
    PyType,
    Union,
    literal_source,
    make_union,
    render_type,
)


def test_union_merges_literals_and_puts_none_last() -> None:
    u = make_union([Atom("None"), Lit(("a",)), Atom("int"), Lit(("b", "a")), Atom("int")])
    assert render_type(u, ImportNames()) == 'Literal["a", "b"] | int | None'
    assert make_union([Atom("str"), Atom("Any")]) == Atom("Any")
    assert make_union([Lit((1,)), Lit((True,))]) == Lit((1, True))


def test_render_type_reports_the_typing_names_it_uses() -> None:
    names = ImportNames()
    render_type(make_union([Lit(("a",)), DictOf(Atom("Any"))]), names)
    assert names.used == {"Literal", "Any"}


def test_render_type_uses_the_alias_when_the_function_takes_a_typing_name() -> None:
    names = ImportNames("Any")
    assert render_type(make_union([Lit(("a",)), DictOf(Atom("Any"))]), names) == 'Literal["a"] | dict[str, Any_]'
    assert names.used == {"Literal", "Any"}


def test_literal_values_are_written_as_safe_literals() -> None:
    assert literal_source(True) == "True"
    assert literal_source(-3) == "-3"
    assert literal_source('a"b') == "'a\"b'"
    assert literal_source("a'b", quote="'") == "'a\\'b'"


def test_nested_types_render_as_builtin_generics() -> None:
    names = ImportNames()
    assert render_type(ListOf(DictOf(make_union([Atom("int"), Atom("None")]))), names) == "list[dict[str, int | None]]"
    assert names.used == set()


def _union_by_comparing(members: list[PyType]) -> PyType:
    """make_union as first written, comparing members with ``==``."""
    flat: list[PyType] = []
    stack = list(members)[::-1]
    while stack:
        m = stack.pop()
        if isinstance(m, Union):
            stack.extend(reversed(m.members))
        else:
            flat.append(m)
    if not flat or ANY in flat:
        return ANY
    literals: list[LiteralValue] = []
    seen: set[tuple[str, LiteralValue]] = set()
    out: list[PyType] = []
    has_none = False
    for m in flat:
        if m == NONE:
            has_none = True
        elif isinstance(m, Lit):
            for v in m.values:
                if (type(v).__name__, v) not in seen:
                    seen.add((type(v).__name__, v))
                    literals.append(v)
            if not any(isinstance(o, Lit) for o in out):
                out.append(m)
        elif m not in out:
            out.append(m)
    if literals:
        out = [Lit(tuple(literals)) if isinstance(o, Lit) else o for o in out]
    if has_none:
        out.append(NONE)
    if len(out) > MAX_UNION or (literals and len(literals) > MAX_LITERALS):
        return ANY
    return out[0] if len(out) == 1 else Union(tuple(out))


_LEAVES: st.SearchStrategy[PyType] = st.one_of(
    st.sampled_from(["str", "int", "None", "Any", "Item"]).map(Atom),
    st.lists(st.one_of(st.sampled_from(["a", "b"]), st.integers(-2, 2), st.booleans()), max_size=3).map(
        lambda values: Lit(tuple(values))
    ),
)
_TYPES: st.SearchStrategy[PyType] = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        inner.map(ListOf), inner.map(DictOf), st.lists(inner, max_size=4).map(lambda ms: Union(tuple(ms)))
    ),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_TYPES, max_size=6))
def test_union_is_what_comparing_members_gives(members: list[PyType]) -> None:
    assert make_union(members) == _union_by_comparing(members)


def test_a_union_that_is_any_is_the_any_object_itself() -> None:
    assert make_union([Atom("str"), Atom("Any")]) is ANY
    assert make_union([Union((Atom("int"), Atom("Any")))]) is ANY
    assert make_union([]) is ANY
    assert make_union([Lit(tuple(range(MAX_LITERALS + 1)))]) is ANY
