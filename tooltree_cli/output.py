"""Small printing helpers shared by subcommands.

Text a server, a script, the model or the API wrote is untrusted: what the human output quotes of it goes through
`terminal_label` (one line, cut) or `terminal_text` (lines kept), which drop escape sequences and control
characters, and a server's or tool's name through `terminal_name` (escaped, so two names stay two); ``--json``
output goes through `json_text`, which escapes what JSON itself leaves raw and a terminal may act on.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Sequence
from typing import Any

_JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
"""Characters `json.dumps` (``ensure_ascii=False``) leaves raw that a terminal may act on or that hide text: DEL
and the C1 controls (the 8-bit CSI ``\\x9b``), bidi marks and overrides, zero-width and invisible characters, line
and paragraph separators, lone surrogates (which cannot even be printed as UTF-8) and tag characters."""


EXIT_NOT_PRINTED = 4
"""The exit status of a command whose output could not be printed (`not_printed`), as `exec` and `agent` give."""


def error(message: str) -> None:
    """One clear line on stderr."""
    print(f"tooltree: error: {message}", file=sys.stderr)


def not_printed(what: str, e: OSError | UnicodeEncodeError, kept: str = "") -> None:
    """One line on stderr: ``what`` (the result, the answer) could not be printed on standard output and why (a full
    disk, a terminal that takes only ASCII), and where it is ``kept`` when it is; a standard error that cannot take
    the line either is passed over. The caller then exits `EXIT_NOT_PRINTED` (before: "unexpected", exit 70, as if
    a bug). A reader that left (``BrokenPipeError``) is not this: the command line says nothing of it."""
    why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    if isinstance(e, UnicodeEncodeError):  # what to do: the codec's words alone did not say
        why += f" (standard output takes only {e.encoding}: set PYTHONIOENCODING=utf-8, or a UTF-8 locale, to print it)"
    with contextlib.suppress(OSError):
        error(terminal_text(f"{what} could not be printed: {why}" + (f"; it is in {kept}" if kept else "")))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON spells a character past the BMP as its UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_text(value: Any) -> str:
    """``value`` as indented JSON, safe to print on a terminal: the characters a terminal may act on that JSON
    leaves raw (C1 controls such as the 8-bit CSI, bidi overrides, tag characters) are escaped as ``\\uXXXX``
    (JSON escapes the C0 controls itself): the same JSON, nothing lost.

    Raises:
        ValueError: ``value`` holds NaN or an infinity, which JSON has no words for (Python writes ``NaN`` and
            ``Infinity``, which no JSON reader takes): a bug, never invalid output.
    """
    return _JSON_UNSAFE.sub(_escaped, json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False))


def print_json(value: Any) -> None:
    """``value`` as JSON on stdout (`json_text`): every ``--json`` output of the command line."""
    print(json_text(value))


def terminal_label(value: object, limit: int) -> str:
    """A value from a server, a script, the model or the API as one line for the terminal: cleaned of escape
    sequences and control characters (`sandbox.results.clean_text`), white space runs (line ends too) one space,
    at most ``limit`` characters (only twice as many are looked at: a message of any size costs the same)."""
    from sandbox.results import note_label

    return note_label(value if isinstance(value, str) else str(value), limit)


def terminal_name(name: str, limit: int = 80) -> str:
    """A server's or a tool's name for the terminal: every character that is not printable or that shows nothing, and
    every backslash, escaped as in a Python literal (`tool_tree.text.cut_name`, as the tree's files show it), cut to
    ``limit`` characters: ``crm\\u200b``, not ``crm``, another server's name (before: `terminal_label`, which showed
    the zero-width space raw and dropped a right-to-left override, so ``crm`` was printed for three servers)."""
    from tool_tree.text import cut_name

    return cut_name(name, limit)


def terminal_text(text: str) -> str:
    """Text for the terminal, lines kept: escape sequences and control characters removed
    (`sandbox.results.clean_text`; tabs and newlines stay, a carriage return ends a line)."""
    from sandbox.results import clean_text

    return clean_text(text)


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain aligned text table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)
