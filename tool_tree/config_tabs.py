"""Tabs in a YAML configuration where they are white space, not indentation: `TabsAsSpaces`.

PyYAML's pure-Python scanner, which `tool_tree.config_compose` composes with to keep every value's line, takes only
spaces between tokens, so an invisible tab at the end of a line, before a comment (``command: python<TAB># …``)
or between a key and its value (``command:<TAB>python``) made the whole file "invalid YAML: found character '\\t'
that cannot start any token (YAML indents with spaces, not tabs)", though the line was indented with spaces.
YAML takes a tab there as white space, and so does PyYAML's own C reader (libyaml) and docker compose's. A tab
that indents a line, or that follows a block's ``-`` or ``?`` (where it would set the next line's indentation),
stays an error, as in libyaml.
"""

from __future__ import annotations

from typing import Any

_LINE_BREAKS = "\0\r\n\x85\u2028\u2029"
"""What ends a line for PyYAML's reader (``\\0`` is the end of its buffer)."""


class TabsAsSpaces:
    """A mixin for a PyYAML loader: `scan_to_next_token` skips a run of blanks holding tabs where it is white space
    (`white_blanks`) as it skips spaces; the rest is PyYAML's ``Scanner.scan_to_next_token``."""

    def scan_to_next_token(self) -> None:
        """Skip white space, comments and line breaks up to the next token (PyYAML's, tabs outside a line's
        indentation taken as spaces); a line break in the block context allows a simple key, as in PyYAML."""
        scanner: Any = self  # PyYAML's reader and scanner, which this is mixed into
        if scanner.index == 0 and scanner.peek() == "\ufeff":
            scanner.forward()
        while True:
            if blanks := self.white_blanks():
                scanner.forward(blanks)
            if scanner.peek() == "#":
                while scanner.peek() not in _LINE_BREAKS:
                    scanner.forward()
            if not scanner.scan_line_break():
                return
            if not scanner.flow_level:
                scanner.allow_simple_key = True

    def white_blanks(self) -> int:
        """How many of the spaces and tabs at the reader's position are white space: all of them when they hold no
        tab, or when the tabs are inside ``[ ]`` or ``{ }``, end their line (with a comment or not), follow a
        ``key:`` or come between a key and its ``:``; else the spaces before the first tab. A tab that indents a
        line, follows a block's ``-`` or ``?``, or lies inside a value not quoted (``a: x<TAB>y``, which libyaml
        reads as one value) is left for PyYAML to refuse (`tab_hint` says what to write). Each run of blanks is
        looked at once: a line of a million tabs costs a million steps."""
        scanner: Any = self
        text: str = scanner.buffer
        at: int = scanner.pointer
        end = at
        while text[end : end + 1] in (" ", "\t"):
            end += 1
        tab = text.find("\t", at, end)
        if tab < 0 or scanner.flow_level or end >= len(text) or text[end] in _LINE_BREAKS or text[end] == "#":
            return end - at
        before = at
        while before > 0 and text[before - 1] in (" ", "\t"):
            before -= 1
        if (before > 0 and text[before - 1] == ":") or (not scanner.allow_simple_key and text[end] == ":"):
            return end - at  # after `key:`; or after a value on its line, whose `:` alone may follow
        return tab - at


def _before(text: str, at: int) -> str:
    """What precedes ``at`` on its line in ``text``, without the blanks just before it."""
    start = at
    while start > 0 and text[start - 1] not in _LINE_BREAKS:
        start -= 1
    return text[start:at].rstrip(" \t")


def tab_hint(text: str, at: int) -> str:
    """What to do about the tab at ``at`` in ``text`` that PyYAML found where no token may start."""
    before = _before(text, at).lstrip(" ")
    if not before:
        return " (YAML indents with spaces, not tabs)"
    if before.endswith(("-", "?")):
        return f" (a tab after `{before[-1]}` would set the next lines' indentation: write a space)"
    return " (a tab inside a value that is not quoted: quote the value, or write a space)"
