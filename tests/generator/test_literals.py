import ast
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.literals import docstring_literal, string_literal

# Every code point, lone surrogates included: JSON can carry them ("\ud800").
ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=60)
NASTY = [
    '"""',
    "'''",
    '"',
    "'",
    "\\",
    'end with a quote"',
    "end with a backslash\\",
    '\\"""',
    'x"""+__import__("os").system("x")+"""',
    "line\rimport os",
    "nul\x00byte",
    "ls\u2028ps\u2029",
    "\x0b\x0c\x1c\x1d\x1e\x1f\x85",
    "bidi \u202e reversed \u2066",
    "zero\u200bwidth",
    "\ud800 lone surrogate",
    "emoji 🎉 and café",
    "\\N{BULLET} \\x41 \\u0041",
    '""""""""',
    "",
]


def _doc_value(text: str, indent: str) -> str:
    lines = text.split("\n")
    value = "\n".join((indent + line) if (i and line) else line for i, line in enumerate(lines))
    return value + ("\n" + indent if len(lines) > 1 else "")


@pytest.mark.parametrize("text", NASTY)
@pytest.mark.parametrize("quote", ['"', "'"])
def test_string_literal_evaluates_to_the_exact_text(text: str, quote: str) -> None:
    literal = string_literal(text, quote=quote)
    assert ast.literal_eval(literal) == text
    assert "\n" not in literal and "\r" not in literal
    literal.encode("utf-8")


@settings(max_examples=500, deadline=None)
@given(ANY_TEXT, st.sampled_from(['"', "'"]))
def test_string_literal_round_trips_any_text(text: str, quote: str) -> None:
    literal = string_literal(text, quote=quote)
    assert ast.literal_eval(literal) == text
    assert all(ch == " " or ch.isprintable() for ch in literal)


def test_string_literal_keeps_readable_unicode_and_escapes_invisible_characters() -> None:
    assert string_literal("café") == '"café"'
    assert string_literal("a\u202eb") == '"a\\u202eb"'
    assert string_literal("a\x00b\nc") == '"a\\x00b\\nc"'


@pytest.mark.parametrize("text", NASTY)
def test_docstring_literal_cannot_be_ended_by_its_text(text: str) -> None:
    source = f"def f():\n    {docstring_literal(text, indent='    ')}\n    return 1\n"
    tree = ast.parse(source)
    func = tree.body[0]
    assert isinstance(func, ast.FunctionDef)
    assert len(func.body) == 2
    assert ast.get_docstring(func, clean=False) == _doc_value(text, "    ")


@settings(max_examples=500, deadline=None)
@given(st.lists(ANY_TEXT, min_size=1, max_size=4).map("\n".join))
def test_docstring_literal_round_trips_any_text(text: str) -> None:
    literal = docstring_literal(text, indent="    ")
    assert ast.literal_eval(literal) == _doc_value(text, "    ")
    literal.encode("utf-8")
    # The only line breaks are the ones the text asked for.
    assert literal.count("\n") == text.count("\n") + (1 if "\n" in text else 0)


def test_docstring_literal_leaves_plain_prose_readable() -> None:
    assert docstring_literal('Say "hi" to them.') == '"""Say "hi" to them."""'
    assert (
        docstring_literal('Server default: "". Examples: ["", "a"].')
        == '"""Server default: "". Examples: ["", "a"]."""'
    )
    assert docstring_literal('a """ b """"""') == '"""a ""\\" b ""\\"""\\""""'
    assert docstring_literal("a\n\nb", indent="    ") == '"""a\n\n    b\n    """'


def test_docstring_literal_rejects_an_indent_that_is_not_spaces() -> None:
    with pytest.raises(ValueError):
        docstring_literal("x", indent="\t")


# The writers as they were first written, character by character: the faster forms must give
# the same bytes.
_UNSAFE_CHAR = re.compile(r"[^\x20-\x7e]")


def _escape(ch: str) -> str:
    named = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _string_literal_per_char(text: str, quote: str) -> str:
    body = text.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return (
        quote + _UNSAFE_CHAR.sub(lambda m: m.group() if m.group().isprintable() else _escape(m.group()), body) + quote
    )


def _docstring_literal_per_char(text: str, indent: str) -> str:
    lines = text.split("\n")
    body = "\n".join((indent + line) if (i and line) else line for i, line in enumerate(lines))
    if len(lines) > 1:
        body += "\n" + indent
    body = body.replace("\\", "\\\\")
    body = _UNSAFE_CHAR.sub(
        lambda m: m.group() if m.group() == "\n" or m.group().isprintable() else _escape(m.group()), body
    )
    out: list[str] = []
    unescaped = 0  # quotes in a row before this one
    for i, ch in enumerate(body):
        if ch != '"':
            out.append(ch)
            unescaped = 0
        elif unescaped == 2 or i in (0, len(body) - 1):
            out.append('\\"')
            unescaped = 0
        else:
            out.append(ch)
            unescaped += 1
    return '"""' + "".join(out) + '"""'


_QUOTEY_TEXT = st.lists(
    st.sampled_from(['"', "'", "\\", "\n", "a", "é", "\x00", "\u200b", "🎉", " "]), max_size=20
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(ANY_TEXT, _QUOTEY_TEXT), st.sampled_from(['"', "'"]))
def test_string_literal_writes_the_same_bytes_as_escaping_char_by_char(text: str, quote: str) -> None:
    assert string_literal(text, quote=quote) == _string_literal_per_char(text, quote)


@settings(max_examples=500, deadline=None)
@given(st.one_of(ANY_TEXT, _QUOTEY_TEXT), st.sampled_from(["", "    ", "        "]))
def test_docstring_literal_writes_the_same_bytes_as_escaping_char_by_char(text: str, indent: str) -> None:
    assert docstring_literal(text, indent=indent) == _docstring_literal_per_char(text, indent)
