"""Laying out description text in docstrings: paragraphs kept, lines wrapped at a width.

:func:`wrap` gives exactly the lines ``textwrap.wrap`` gives with ``break_long_words=False,
break_on_hyphens=False`` (a test holds it to that), several times faster on the usual text of
words between single spaces. The text is :func:`tool_tree.text.clean` text: no control characters.
"""

from __future__ import annotations

import re

from tool_tree.text import clean


def dedent(text: str) -> str:
    """Like `inspect.cleandoc`: remove the indentation common to the lines after the first (docstrings)."""
    if "\n" not in text:
        return text.strip()
    first, *rest = text.strip("\n").split("\n")
    cut = min((len(line) - len(line.lstrip(" ")) for line in rest if line.strip()), default=0)
    if cut:
        rest = [line[cut:] for line in rest]
    return "\n".join([first.strip(), *rest]).strip()


def paragraphs(text: str, limit: int, *, width: int) -> list[str]:
    """Description text as wrapped lines: paragraphs kept, blank runs collapsed, capped with …"""
    tidy = dedent(clean(text))
    if len(tidy) > limit:
        tidy = tidy[: limit - 1].rstrip() + "…"
    out: list[str] = []
    for line in tidy.split("\n"):
        line = line.rstrip()
        if not line:
            if out and out[-1]:
                out.append("")
            continue
        lead = line[: len(line) - len(line.lstrip(" "))]
        out += wrap(line.lstrip(" "), width, lead, lead)
    return out


def wrap(text: str, width: int, indent: str, continuation: str | None = None) -> list[str]:
    """``text`` in lines of at most ``width`` columns (a longer word gets a line of its own).

    The first line starts with ``indent``, the others with ``continuation`` (default: ``indent``
    and four more spaces).
    """
    if len(indent) + len(text) <= width and "\n" not in text:
        return [(indent + text).rstrip()]
    cont = indent + "    " if continuation is None else continuation
    if " ".join(text.split()) == text:  # the usual case: words between single spaces
        return _fill(text, width, indent, cont) or [indent.rstrip()]
    return _greedy_wrap(text, width, indent, cont) or [indent.rstrip()]


def _fill(text: str, width: int, indent: str, continuation: str) -> list[str]:
    """What :func:`_greedy_wrap` gives for words between single spaces, found by searching for spaces."""
    lines: list[str] = []
    prefix, rest = indent, text
    while rest and len(prefix) + len(rest) > width:
        cut = rest.rfind(" ", 0, max(width - len(prefix), 0) + 1)  # after the last word that fits
        if cut < 0:  # the first word is longer than a line: it gets a line of its own
            cut = rest.find(" ")
            if cut < 0:
                break
        lines.append(prefix + rest[:cut])
        prefix, rest = continuation, rest[cut + 1 :]
    if rest:
        lines.append(prefix + rest)
    return lines


_WRAP_SPACES = str.maketrans(dict.fromkeys("\t\n\x0b\x0c\r", " "))
_SPACE_RUNS = re.compile("( +)")


def _greedy_wrap(text: str, width: int, indent: str, continuation: str) -> list[str]:
    """``textwrap.wrap`` with ``break_long_words=False, break_on_hyphens=False``, line for line.

    Tabs are expanded and ASCII white space becomes spaces; the text is cut into runs of spaces
    and the words between them. A line takes runs while they fit, a word longer than a line gets
    a line of its own, and a run that is all white space (``str.strip``: a "word" such as
    U+3000 counts too) is dropped at the end of a line and at the start of every line but the first.
    """
    chunks = [c for c in _SPACE_RUNS.split(text.expandtabs().translate(_WRAP_SPACES)) if c]
    chunks.reverse()  # popped from the end
    lines: list[str] = []
    while chunks:
        prefix = continuation if lines else indent
        room = width - len(prefix)
        if lines and not chunks[-1].strip():
            chunks.pop()
        line: list[str] = []
        size = 0
        while chunks and size + len(chunks[-1]) <= room:
            size += len(chunks[-1])
            line.append(chunks.pop())
        if chunks and not line:
            line.append(chunks.pop())
        if line and not line[-1].strip():
            line.pop()
        if line:
            lines.append(prefix + "".join(line))
    return lines
