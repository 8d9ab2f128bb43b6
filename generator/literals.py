"""Write untrusted text into generated Python source so that no text can end its literal.

Both writers escape by construction instead of filtering known-bad sequences:

- every backslash is doubled, so server text can never start an escape of its own or escape
  the closing quote;
- every character that is not printable (``str.isprintable``: controls, ``\\r``, ``\\x0b``,
  ``\\x0c``, ``\\x1c``-``\\x1f``, ``\\x85``, NUL, ``\\u2028``, ``\\u2029``, bidi and zero-width
  marks, unassigned and private-use code points, lone surrogates) becomes a ``\\x``/``\\u``/``\\U``
  escape, so the source has no line break the writer did not put there and always encodes
  to UTF-8;
- quotes are escaped wherever they could close the literal.

``ast.literal_eval(string_literal(s)) == s`` for every ``str`` ``s``, and a docstring written by
:func:`docstring_literal` evaluates to exactly the laid-out text.
"""

from __future__ import annotations

import re

_NAMED = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}
_MAYBE_UNSAFE = re.compile(r"[^\x20-\x7e]+")
"""Runs of anything but printable ASCII: each character is kept only if it is printable."""
_MAYBE_UNSAFE_BUT_NEWLINE = re.compile(r"[^\x20-\x7e\n]+")
"""The same, but a newline is not even looked at (docstrings keep theirs)."""
_LINE_START = re.compile(r"\n(?=[^\n])")
_QUOTE_RUN = re.compile(r'""+|\A"|"\Z')
"""Quotes that may need an escape: two or more in a row, the first character, the last."""


def _escape_char(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_unprintable(match: re.Match[str]) -> str:
    run = match.group()
    if run.isprintable():  # e.g. a word of non-ASCII letters
        return run
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in run)


def _escaped_quotes(match: re.Match[str]) -> str:
    """The run of quotes with every third escaped, and its first or last when it starts or ends the text."""
    run, start, end = match.group(), match.start(), match.end()
    out: list[str] = []
    unescaped = 0  # quotes in a row before this one
    for i in range(len(run)):
        if unescaped == 2 or start + i == 0 or (i == len(run) - 1 and end == len(match.string)):
            out.append('\\"')
            unescaped = 0
        else:
            out.append('"')
            unescaped += 1
    return "".join(out)


def string_literal(text: str, *, quote: str = '"') -> str:
    """A one-line string literal (``"..."`` or ``'...'``) that evaluates to exactly ``text``.

    Raises:
        ValueError: ``quote`` is not a single or double quote.
    """
    if quote not in ("'", '"'):
        raise ValueError(f"quote must be ' or \", not {quote!r}")
    body = text.replace("\\", "\\\\").replace(quote, "\\" + quote)
    if not body.isprintable():
        body = _MAYBE_UNSAFE.sub(_escape_unprintable, body)
    return quote + body + quote


def preferred_literal(text: str) -> str:
    """:func:`string_literal` with the quote that needs fewer escapes (double on a tie), as ruff formats it."""
    return string_literal(text, quote="'" if text.count('"') > text.count("'") else '"')


def docstring_literal(text: str, *, indent: str = "") -> str:
    """A triple-double-quoted docstring whose value is ``text`` with ``indent`` added to lines 2…n.

    ``text`` is split on ``\\n`` only (never ``str.splitlines``, which also splits on ``\\x0b``,
    ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``); every other
    non-printable character is escaped. Of quotes in a row every third is escaped, and a quote that is
    the first or last character, so ``\"\"\"`` can never appear unescaped (and JSON's ``""`` reads as
    written: before, every quote before a quote was escaped, ``\\""``). A
    multi-line docstring ends with the closing quotes on their own line at ``indent``.

    Raises:
        ValueError: ``indent`` is not made of spaces only.
    """
    if indent.strip(" "):
        raise ValueError("indent must be spaces")
    body = text
    if "\n" in text:
        if indent:  # every line but the first, unless it is empty
            body = _LINE_START.sub("\n" + indent, body)
        body += "\n" + indent
    # Backslashes first: the escapes added after them must not be doubled. Escaping never puts
    # a character between two quotes, so the quote rule sees the same neighbours as in `body`.
    body = body.replace("\\", "\\\\")
    if not body.replace("\n", " ").isprintable():
        body = _MAYBE_UNSAFE_BUT_NEWLINE.sub(_escape_unprintable, body)
    if '"' in body:
        body = _QUOTE_RUN.sub(_escaped_quotes, body)
    return '"""' + body + '"""'
