from __future__ import annotations

import keyword
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from generator.naming import assign_identifiers, to_identifier


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
