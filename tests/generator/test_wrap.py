"""Docstring text layout: the fast wrap gives exactly the lines textwrap gives."""

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from generator.wrap import dedent, paragraphs, wrap

_WRAP_PIECES = ["a", "bc", "word", "-", "é", "x" * 40, " ", "  ", "\t", "\n", "\r", "\x0b", "\x85", "\u3000"]
_WRAP_TEXT = st.one_of(
    st.lists(st.text(alphabet="abcé-.", min_size=1, max_size=30), max_size=40).map(" ".join),
    st.lists(st.sampled_from(_WRAP_PIECES), max_size=40).map("".join),
)


def _textwrap_wrap(text: str, width: int, indent: str, continuation: str | None) -> list[str]:
    """How docstring text was wrapped before: with the standard library."""
    if len(indent) + len(text) <= width and "\n" not in text:
        return [(indent + text).rstrip()]
    cont = indent + "    " if continuation is None else continuation
    return textwrap.wrap(
        text, width=width, initial_indent=indent, subsequent_indent=cont, break_long_words=False, break_on_hyphens=False
    ) or [indent.rstrip()]


@settings(max_examples=400, deadline=None)
@given(
    _WRAP_TEXT,
    st.sampled_from([1, 8, 30, 116]),
    st.sampled_from(["", "    ", " " * 40]),
    st.sampled_from([None, "", "        ", " " * 50]),
)
def test_wrapping_gives_the_lines_textwrap_gives(text: str, width: int, indent: str, continuation: str | None) -> None:
    assert wrap(text, width, indent, continuation) == _textwrap_wrap(text, width, indent, continuation)


def test_dedent_removes_the_indentation_common_to_the_later_lines() -> None:
    assert dedent("Title.\n    body\n      more\n") == "Title.\nbody\n  more"
    assert dedent("  one line  ") == "one line"


def test_paragraphs_keep_blank_lines_once_and_cap_the_text() -> None:
    assert paragraphs("a\n\n\n\nb", 100, width=80) == ["a", "", "b"]
    assert paragraphs("word " * 40, 30, width=80) == ["word word word word word word…"]
    assert paragraphs("x\u2028y\x00z", 100, width=80) == ["x yz"]
