from generator.type_expr import Atom, DictOf, ImportNames, ListOf, Lit, literal_source, make_union, render_type


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
