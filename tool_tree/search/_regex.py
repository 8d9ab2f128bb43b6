"""Regex mode: patterns run on RE2 (``google-re2``), whose matching time is linear in the text.

Python's ``re`` backtracks: ``.*.*.*.*§`` over one 1,000-character description took 1.4 s, and
``re`` holds the GIL for a whole match, so timers and other sessions stopped too. RE2 compiles a
pattern to an automaton (no backreferences or lookaround, which it refuses with an error), so a
scan costs time proportional to the text. Two more bounds hold whatever the pattern:

- the pattern is at most ``MAX_PATTERN`` characters and its compiled form at most
  ``MAX_PROGRAM_BYTES`` (RE2 refuses larger programs, e.g. ``(a{999}){999}``);
- each name and description is scanned up to ``MAX_REGEX_TEXT`` characters (60 names of 1 MB
  each took 11 s to scan whole), and a scan of the whole catalog stops with an error after
  ``REGEX_BUDGET_S`` seconds (checked before each tool, so at most one tool's capped text past
  it), so a very large catalog cannot make one query unbounded either.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Sequence
from typing import Any, Protocol

from tool_tree.search._errors import SearchError

MAX_PATTERN = 200
"""Longest regex pattern accepted."""
MAX_REGEX_TEXT = 1000
"""Characters of each name and description that regex mode scans."""
MAX_PROGRAM_BYTES = 8 << 20
"""Memory RE2 may use for one compiled pattern (its automaton included)."""
REGEX_BUDGET_S = 0.5
"""Seconds one regex query may scan before it is stopped with an error."""

_INSTALL = "regex search needs google-re2: `pip install google-re2` (a dependency of tooltree; reinstall it)"


class Matcher(Protocol):
    def search(self, text: str) -> object | None: ...


class RegexTarget(Protocol):
    """What regex mode reads of one indexed tool."""

    @property
    def server(self) -> str: ...
    @property
    def package(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def function(self) -> str: ...
    @property
    def text(self) -> str: ...


def _re2() -> Any:
    try:
        return importlib.import_module("re2")
    except ModuleNotFoundError:
        raise SearchError(_INSTALL) from None


def shown_pattern(pattern: str, limit: int = 80) -> str:
    """``pattern`` as a message quotes it: its repr, each character shown (a NUL, a line break or a tab escaped, as
    ``\\x00``, ``\\n``, ``\\t``: in a pattern each matches itself), cut at ``limit`` characters with ``…``. Before, a
    NUL was dropped: ``a\\x00b`` matched nothing as "No tools matched 'ab'"."""
    return repr(pattern if len(pattern) <= limit else pattern[: limit - 1] + "…")


def _printable(reason: str) -> str:
    """RE2's ``reason``, which quotes the pattern's bytes as they are, with each character that does not print
    escaped (before: a NUL of the pattern went into the message as it was)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in reason)


def compile_pattern(pattern: str) -> Matcher:
    """Compile a regex-mode pattern (case-insensitive, RE2 syntax: Python's without backreferences
    and lookaround).

    Raises:
        SearchError: the pattern is empty, longer than ``MAX_PATTERN``, holds a lone surrogate (no
            character), or RE2 refuses it (bad syntax, an unsupported feature, or a program too large);
            the message names RE2's reason.
    """
    if not pattern:
        raise SearchError("regex pattern is empty")
    if len(pattern) > MAX_PATTERN:
        raise SearchError(f"regex pattern is {len(pattern)} characters; the limit is {MAX_PATTERN}")
    try:
        pattern.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate: bytes that were not UTF-8 on a command line, or `\ud800`
        raise SearchError(f"bad regex {pattern!r}: {pattern[e.start]!r} at {e.start} is not a character") from None
    re2 = _re2()
    options = re2.Options()
    options.case_sensitive = False
    options.never_capture = True  # groups only group: matching stays on RE2's fastest engines
    options.log_errors = False
    options.max_mem = MAX_PROGRAM_BYTES
    try:
        compiled: Matcher = re2.compile(pattern, options)
    except re2.error as e:
        reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise SearchError(f"bad regex {pattern!r}: {_printable(reason)}{_hint(reason)}") from None
    return compiled


_BACKREFERENCE = re.compile(r"\\[1-9gk]|\(\?P")
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _hint(reason: str) -> str:
    """What RE2's refusal ``reason`` means for a construct Python's ``re`` has and RE2 lacks, or "". Before: any
    refused pattern holding ``(?`` or a backslash was said to hold a backreference or lookaround, ``(?x)`` and
    ``\\Z`` too."""
    construct = reason.rpartition(": ")[2]
    if construct in _LOOKAROUND or _BACKREFERENCE.fullmatch(construct):
        return " (backreferences and lookaround are not supported)"
    if construct == "\\Z":
        return " (use \\z for the end of the text)"
    if construct == "(?>" or (construct.endswith("+") and reason.startswith("bad repetition operator")):
        return " (atomic groups and possessive repeats are not supported, nor needed: RE2 never backtracks)"
    if reason.startswith("invalid perl operator: (?"):
        return " (RE2 takes the flags i, m, s and U alone, as in (?s) or (?m:…): no (?x), (?a), (?u) or (?#…))"
    return ""


def regex_scores(pattern: str, targets: Sequence[RegexTarget], *, budget_s: float = REGEX_BUDGET_S) -> dict[int, float]:
    """Score each tool the pattern matches: 2 for a name, 1 for its description (both: 3).

    Each name form is matched on its own, so anchors work: ``^get_document$`` and
    ``^docs\\.get_document$`` both find ``docs.get_document``.

    Raises:
        SearchError: the pattern is rejected (see ``compile_pattern``), or the scan ran past
            ``budget_s`` seconds.
    """
    compiled = compile_pattern(pattern)
    deadline = time.monotonic() + budget_s
    out: dict[int, float] = {}
    cap = MAX_REGEX_TEXT
    for d, e in enumerate(targets):
        if time.monotonic() > deadline:
            raise SearchError(
                f"regex {pattern!r} took longer than {budget_s:g} s over {len(targets)} tools; use a simpler "
                "pattern or a word search"
            )
        s = 0.0
        tool, function = e.tool[:cap], e.function[:cap]
        names = (tool, f"{e.server}.{tool}"[:cap], function, f"{e.package}.{function}"[:cap])
        if any(compiled.search(name) is not None for name in names):
            s += 2.0
        if compiled.search(e.text[:cap]) is not None:
            s += 1.0
        if s:
            out[d] = s
    return out
