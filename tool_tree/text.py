"""Text from servers, made safe and short for people and models: the one place that decides

- what untrusted text keeps (:func:`clean`: control, bidi, zero-width, tag and other invisible characters go; line
  separators and unicode spaces become plain spaces; line ends become ``\\n``);
- how it fits on one line (:func:`one_line`);
- how a name shows (:func:`shown_name`: escaped, never cleaned, so two names stay two; :func:`cut_name` and
  :func:`quoted_name` in a message);
- where its first sentence ends (:func:`split_sentence`, :func:`first_sentence`): at ``.``,
  ``!`` or ``?`` (closing quotes and brackets included) before white space and a character
  that is not a lower-case letter, or at ``。！？``; never after an abbreviation such as
  ``e.g.``, ``i.e.`` or ``vs.``;
- how a byte count reads (:func:`size`).

The generator (stub docstrings, ``INDEX.md``, ``README.md``, the manifest's summaries) and tool
search use these functions, so a summary reads the same wherever it is shown.
"""

from __future__ import annotations

import re
import unicodedata

# Defined in the sandbox's package (it has no other); the host's modes import it from here.
from tool_tree.runtime._result import is_text_type as is_text_type

_DROPPED = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\U000e0000-\U000e007f"
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\ufff0-\ufffb"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0100-\U000e01ef]"
)
"""Control, zero-width, bidi, byte-order and tag characters, every other character Unicode says to draw as nothing
(Default_Ignorable_Code_Point: variation selectors, invisible operators, fillers, the soft hyphen; not the
unassigned ones past the tags and the selectors) and the interlinear annotation marks (U+FFF9–U+FFFB): removed.
They show nothing, yet a model reads them: tag characters (U+E0000–U+E007F) as the ASCII they shadow ("ASCII
smuggling"), INVISIBLE TIMES and INVISIBLE PLUS (U+2062, U+2064) as bits, the 256 variation selectors as bytes.
U+061C (ARABIC LETTER MARK) is a bidi control too. Before, all but the tags and the first bidi and zero-width
characters went into INDEX.md and README.md as sent."""
_AS_SPACE = re.compile("[\x0b\x0c\x1c-\x1f\x85\u2028\u2029\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
"""Separators other than ``\\n`` (vertical tab, form feed, NEL, line and paragraph separators) and
every Unicode space separator (category Zs) but the space itself: a plain space each."""

_SENTENCE_END = re.compile(r"""(?<![.!?])[.!?]+["'”’)\]]*(?=\s+(\S))|[。！？]""")
"""Punctuation that may end a sentence, and (group 1) the first character after the white space.

The look-behind starts a match only at the first mark of a run (``!!!…``), so a search is linear."""
_WORD_BEFORE = re.compile(r"[\w.]+$")
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")
"""``e.g``, ``i.e``, ``U.S``: letters joined by periods (the last period is the sentence's candidate end)."""
ABBREVIATIONS = frozenset(
    "eg ie vs cf approx incl esp resp viz al fig figs no vol mr mrs ms dr prof st jr sr".split()  # noqa: SIM905
)
"""Words whose period does not end a sentence (lower case, without the period)."""
_LONGEST_WORD = 16
"""Characters before a period looked at to find an abbreviation (``e.g`` or a dotted ``U.S.A``)."""
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_SECTION = r"[A-Z]\w{0,20}(?: \w{1,20})?:"
"""A section line of one or two words: ``Args:``, ``Example usage:``."""
_BLOCK_START = re.compile(rf"\n[ \t]*(?:[-*+•]\s|\d{{1,3}}[.)]\s|#|{_SECTION}[ \t]*(?:\n|$))")
"""A later line that starts a list, a heading or a section (``Args:``): it ends the first paragraph."""
_HEADING = re.compile(rf"[#\s]*{_SECTION}")


def clean(text: str) -> str:
    """Drop control, bidi, zero-width, tag and other invisible characters (`_DROPPED`); line separators and unicode
    spaces become a space.

    Line ends become ``\\n`` and a tab becomes four spaces, so the text keeps its lines and indentation.
    """
    if text.replace("\n", " ").isprintable() and (text.isascii() or _DROPPED.search(text) is None):
        return text  # the usual case (a variation selector, a filler or U+034F is printable, yet dropped)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", "    ")
    return _AS_SPACE.sub(" ", _DROPPED.sub("", text))


def shown_name(name: str) -> str:
    """``name`` with every backslash and every character that is not printable or that `clean` drops escaped as in
    a Python literal: one line that cannot move the cursor or fake an entry, and that still tells names apart
    (`clean` alone shows ``get\\u200b_item`` as ``get_item``, another tool's name). In a name not in Unicode's
    composed form (NFC), each combining mark is escaped too: ``cafe\\u0301``, which looks like ``café``, another
    name (before, the two looked identical)."""
    composed = name.isascii() or unicodedata.is_normalized("NFC", name)
    if composed and name.isprintable() and "\\" not in name and (name.isascii() or _DROPPED.search(name) is None):
        return name
    return "".join(
        _escaped(c)
        if not c.isprintable() or c == "\\" or _DROPPED.match(c) or (not composed and unicodedata.combining(c))
        else c
        for c in name
    )


def cut_name(name: str, limit: int = 80) -> str:
    """``name`` as a message shows it: `shown_name`, cut to ``limit`` characters with ``…`` (before: cleaned, so
    ``get\\u200b_item`` was shown as ``get_item``, another tool's name)."""
    shown = shown_name(name[: limit + 1])  # not all of a name of megabytes
    return shown if len(shown) <= limit and len(name) <= limit else shown[: limit - 1] + "…"


def quoted_name(name: str, limit: int = 80) -> str:
    """`cut_name` in single quotes, as a warning or an error quotes a name: ``tool 'get\\u200b_item'``."""
    return f"'{cut_name(name, limit)}'"


def _escaped(char: str) -> str:
    """``char`` as a Python literal escapes it; a printable one that shows nothing (a filler) as ``\\uXXXX``."""
    literal = repr(char)[1:-1]
    if literal != char:
        return literal
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


def shown(value: object) -> str:
    """``value`` as an error message about an argument quotes it: its repr, cut at 40 characters."""
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python prints
        return "(an integer too long to print)"
    except Exception:  # a caller's object whose repr fails: the error about it, not the repr's, goes on
        return f"(a {type(value).__name__} whose repr failed)"
    if not text.isprintable():  # a caller's repr may hold escapes and line breaks
        text = one_line(text, 200)
    return text if len(text) <= 40 else text[:39] + "…"


def one_line(text: str, limit: int = 160) -> str:
    """:func:`clean` text with all white space collapsed to single spaces, capped at ``limit`` with ``…``."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


def split_sentence(text: str) -> tuple[str, str]:
    """``text`` cut after its first sentence: the sentence and the rest (white space between them dropped).

    Without a sentence end, the whole text is the sentence and the rest is empty.
    """
    for end in _SENTENCE_END.finditer(text):
        after = end.group(1)
        if after is None:  # 。！？ end a sentence whatever follows
            return text[: end.end()], text[end.end() :].lstrip()
        if after.islower() or (end.group().startswith(".") and _abbreviation(text, end.start())):
            continue
        return text[: end.end()], text[end.end() :].lstrip()
    return text, ""


def _abbreviation(text: str, dot: int) -> bool:
    """Whether the period at ``dot`` closes an abbreviation (``e.g.``, ``vs.``) rather than a sentence."""
    word = _WORD_BEFORE.search(text, max(0, dot - _LONGEST_WORD), dot)  # bounded: the text is untrusted
    if word is None:
        return False
    token = word.group().lstrip(".")
    return token.lower() in ABBREVIATIONS or _DOTTED.fullmatch(token) is not None


def first_paragraph(text: str) -> str:
    """The lines of :func:`clean` ``text`` before its first blank line, list, heading or section line."""
    text = clean(text).strip()
    blank = _BLANK_LINE.search(text)
    if blank is not None:
        text = text[: blank.start()]
    for block in _BLOCK_START.finditer(text):
        lead = text[: block.start()].strip()
        if lead and not _HEADING.fullmatch(lead):  # a paragraph that is only "Returns:" takes its block along
            return text[: block.start()]
    return text


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of the first paragraph, on one line, capped at ``limit`` with ``…``."""
    flat = " ".join(first_paragraph(text).split())
    return one_line(split_sentence(flat)[0], limit)


_DEPRECATION = re.compile(r"\bDEPRECATED\b|\b[Dd]eprecated\s*[:;(]|\b(?:is|are|now)\s+deprecated\b|^[Dd]eprecated\b")
"""A sentence saying a tool is deprecated: ``DEPRECATED``, ``Deprecated:``, ``is deprecated``, a sentence that
starts so. Not any "deprecated" (``lists deprecated fields``)."""
DEPRECATION_SCAN = 4000
"""Characters of a description looked through for a deprecation (a description is untrusted)."""


def summary_line(text: str, limit: int = 160) -> str:
    """:func:`first_sentence`, and after it the sentence saying the tool is deprecated when a later one of the
    description does (``Read a file as text. DEPRECATED: Use read_text_file instead.``), capped at ``limit``.

    Before, the first sentence alone: a deprecated tool's summary (its stub's first line, its line in the server's
    README, its search result) read as any other's, and search put it first."""
    first = first_sentence(text, limit)
    if _DEPRECATION.search(first):
        return first
    rest = " ".join(clean(text[:DEPRECATION_SCAN]).split())
    while rest:
        sentence, rest = split_sentence(rest)
        if _DEPRECATION.search(sentence):
            note = one_line(sentence, limit // 2)
            head = one_line(first, limit - len(note) - 1) if first and limit > len(note) + 1 else ""
            return f"{head} {note}" if head else note
    return first


def counted(n: int, noun: str, nouns: str = "") -> str:
    """``n`` things as people say them: ``1 image``, ``9 images``, ``1,000 content blocks`` (``nouns``: the plural,
    when it is not ``noun`` and an s). Before, a count said alone in the plural gave "1 images past the first 8"."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def size(n: int) -> str:
    """A byte count as people read it: ``1234567`` → ``1.2 MB``."""
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def text_of_blob(blob: object, max_chars: int) -> str | None:
    """A base64 blob of UTF-8 text, decoded from its first ``max_chars`` characters at most (a note says how much
    was left); None when it is not strict base64 or not UTF-8."""
    import base64
    import binascii

    if not isinstance(blob, str):
        return None
    head = blob[: max_chars - max_chars % 4]
    try:
        text = base64.b64decode(head, validate=True).decode("utf-8", errors="strict" if head == blob else "ignore")
    except (binascii.Error, ValueError):
        return None
    return text if head == blob else f"{text}\n[… {size(len(blob) * 3 // 4 - len(text.encode()))} more not shown]"
