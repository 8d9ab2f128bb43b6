from __future__ import annotations

import keyword
import random

from hypothesis import given, settings
from hypothesis import strategies as st

import generator.naming
from generator.naming import assign_identifiers, assign_parameters, to_identifier, to_parameter
from tests.generator.work import lines_run


def test_keywords_soft_keywords_builtins_and_dunders_never_come_through() -> None:
    for name in [*keyword.kwlist, *keyword.softkwlist, "print", "list", "__init__", "__class__", "self"]:
        ident = to_identifier(name)
        assert ident.isidentifier()
        assert not keyword.iskeyword(ident) and not keyword.issoftkeyword(ident)
        assert not ident.startswith("__")
        assert ident not in dir(__builtins__)


def test_non_identifier_names_are_mapped_to_ascii() -> None:
    assert to_identifier("user-id") == "user_id"
    assert to_identifier("2fa") == "x_2fa"
    assert to_identifier("from") == "from_"
    assert to_identifier("café.menu") == "cafe_menu"
    assert to_identifier("../../etc/passwd") == "etc_passwd"
    assert to_identifier("日本語") == "x"


def test_collisions_are_resolved_the_same_way_whatever_the_order() -> None:
    names = ["a-b", "a.b", "a_b", "Foo", "foo", "FOO"]
    expected = assign_identifiers(names, case_insensitive=True)
    for _ in range(20):
        shuffled = names[:]
        random.shuffle(shuffled)
        assert assign_identifiers(shuffled, case_insensitive=True) == expected
    assert len({v.lower() for v in expected.values()}) == len(names)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=30))
def test_assigned_identifiers_are_unique_safe_and_ascii(names: list[str]) -> None:
    mapping = assign_identifiers(names, reserved={"README"}, case_insensitive=True)
    values = list(mapping.values())
    assert len({v.lower() for v in values}) == len(values)
    for v in values:
        assert v.isascii() and v.isidentifier() and not keyword.iskeyword(v)
        assert not keyword.issoftkeyword(v) and not v.startswith("__") and v != "README"


def test_many_names_mapping_to_one_identifier_are_numbered_in_work_linear_in_their_number() -> None:
    # The names differ only in a character that is not ASCII, so all map to get_item. Each used to try
    # every suffix from _2 up, which is quadratic: 20,000 such tools took a minute (bench/scale_shapes.py).
    names = [f"get_item_{chr(0x4E00 + i)}" for i in range(1000)]
    with lines_run(generator.naming) as lines:
        assigned = assign_identifiers([*names, "get_item_3"], fallback="tool", case_insensitive=True)
    assert assigned.pop("get_item_3") == "get_item_3"  # its own name: the derived ones go round it
    assert assigned == {name: "get_item" if i == 0 else f"get_item_{i + 1 + (i >= 2)}" for i, name in enumerate(names)}
    assert lines.count < 100 * len(names)  # was 2,000 per name


def test_an_exact_identifier_wins_over_a_derived_one_whatever_sorts_first() -> None:
    assert assign_identifiers(["get-item", "get_item"]) == {"get_item": "get_item", "get-item": "get_item_2"}
    assert assign_identifiers(["Foo", "foo"], case_insensitive=True) == {"Foo": "Foo", "foo": "foo_2"}


def test_a_name_given_before_is_kept_while_it_is_still_valid() -> None:
    kept = assign_identifiers(["get-item", "get_item"], previous={"get-item": "get_item"})
    assert kept == {"get-item": "get_item", "get_item": "get_item_2"}
    # Not an identifier the rules would give, reserved, or taken twice: derived again.
    for bad in ["class", "print", "x y", "README", "__init__", ""]:
        assert assign_identifiers(["a-b"], reserved={"README"}, previous={"a-b": bad}) == {"a-b": "a_b"}
    twice = assign_identifiers(["a", "b"], previous={"a": "z", "b": "z"})
    assert twice == {"a": "z", "b": "b"}


def test_parameters_keep_builtin_soft_keyword_and_dunder_names() -> None:
    for name in ["id", "type", "format", "input", "range", "filter", "match", "case", "_", "self", "__init__"]:
        assert to_parameter(name) == name
    assert [to_parameter(n) for n in ["from", "class", "None", "__debug__", "user-id", "2fa", "ｆｒｏｍ"]] == [
        "from_",
        "class_",
        "None_",
        "debug",
        "user_id",
        "x_2fa",
        "from_",
    ]
    assert to_parameter("result", reserved={"result", "result_"}) == "result__"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=20), st.dictionaries(st.text(max_size=6), st.text(max_size=6)))
def test_assigned_parameters_are_unique_bindable_and_clear_of_reserved_names(
    names: list[str], previous: dict[str, str]
) -> None:
    reserved = {"call_tool", "result"}
    mapping = assign_parameters(names, reserved=reserved, previous=previous)
    assert set(mapping) == set(names)
    values = list(mapping.values())
    assert len(set(values)) == len(values)
    for v in values:
        assert v.isascii() and v.isidentifier() and not keyword.iskeyword(v) and v != "__debug__"
        assert v not in reserved
        compile(f"def f(*, {v}=1): return call_tool", "<p>", "exec")
    assert assign_parameters(list(reversed(names)), reserved=reserved, previous=previous) == mapping
