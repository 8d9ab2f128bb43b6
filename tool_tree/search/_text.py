"""Turning names, descriptions and queries into index terms.

``tokens`` splits identifiers the way tool names are written (``snake_case``, ``kebab-case``,
``dotted.names``, ``camelCase``, ``HTTPServer``), lowercases, drops stop words and
stems. Runs of CJK characters become overlapping character bigrams, so descriptions in
Chinese or Japanese still match. The stemmer is Porter's (1980) algorithm, written out here
so the core needs no dependency.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from tool_tree.search._regex import shown_pattern

# Display text (summaries, one-line previews) comes from the core's one cleaner and sentence splitter.
from tool_tree.text import first_sentence as first_sentence
from tool_tree.text import one_line as one_line
from tool_tree.text import summary_line as summary_line

WORDS = 2
"""The version of `split_words`, recorded in an index (``RankingConfig.words``): 2 keeps a word with letters outside
ASCII whole (1 cut ``résumé`` into ``r é sum é``)."""
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[^\W\d_A-Za-z]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

_SPACES = re.compile(r"[^\S\x1c-\x1f\x85]+")
"""A run of white space, the control characters Python also splits at (separators of files, groups, records, units;
NEL) left out: a query's echo escapes them as it does a NUL."""


def shown_query(query: str, limit: int = 80) -> str:
    """A plain query as a message quotes it: each run of white space one space, as the words are read, then as
    `shown_pattern` shows a pattern, each character that does not print escaped. Before, control and invisible
    characters were dropped: ``search_tools(tree, "a\\x00b")`` said "No tool has the words of 'ab'"."""
    return shown_pattern(_SPACES.sub(" ", query).strip(" "), limit)


STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each either else
    etc even ever every few for from further get gets getting got had has have having he her here
    hers herself him himself his how however i if in into is it its itself just let lets like
    may me might mine more most much must my myself no nor not now of off on once only or other
    our ours ourselves out over own per please same shall she should so some such than that the
    their theirs them themselves then there these they this those through thus to too under
    until up upon us use used uses using very via want wants was we were what when where which
    while who whom whose why will with within without would yes yet you your yours yourself
    yourselves i'm i'd i've i'll can't don't s t ve ll d re m
    """.split()  # noqa: SIM905 - a word list reads better as text
)
"""Function words that carry no meaning about what a tool does (English)."""


def split_words(text: str) -> list[str]:
    """Split text and identifiers into lowercase words (no stop-word removal, no stemming).

    ``getCalendarEvents`` → ``get calendar events``; ``list-files.v2`` → ``list files v 2``;
    ``HTTPServer`` → ``http server``; CJK runs become overlapping character bigrams. A letter outside ASCII is
    read by its case, as an ASCII one is, and a combining mark belongs to the letter before it: ``résumé`` and
    ``getÜbersicht`` are ``résumé`` and ``get übersicht``, ``नमस्ते`` one word (before: ``r é sum é`` (so it
    found a tool that sums), ``get ü bersicht``, ``नमस त``).
    """
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        chunks = _WORD.findall(text)
    else:
        chunks = [text[m.start() : m.end()] for m in _SHAPE_WORD.finditer(_shape(text))]
    out: list[str] = []
    for chunk in chunks:
        out.extend(_split_chunk(chunk))
    return out


def _shape(text: str) -> str:
    """``text`` with each character replaced by its kind, which the ASCII patterns then split: ``A`` an upper-case
    letter, ``a`` a lower-case one, ``0`` a digit, ``x`` another letter (no case: CJK, Arabic, …), a combining mark
    the kind of the letter before it (a space when there is none), a space anything else."""
    kinds: list[str] = []
    before = " "
    for ch in text:
        if ch.isalnum() and ch != "_":
            kind = "A" if ch.isupper() or ch.istitle() else "a" if ch.islower() else "0" if ch.isdecimal() else "x"
        elif unicodedata.category(ch).startswith("M"):
            kind = before
        else:
            kind = " "
        kinds.append(kind)
        before = kind
    return "".join(kinds)


_SHAPE_WORD = re.compile(r"[Aa0x]+")
_SHAPE_CAMEL = re.compile(r"A+(?=Aa)|A?a+|A+|0+|x+")


@lru_cache(maxsize=65536)
def _split_chunk(chunk: str) -> tuple[str, ...]:
    """The words of one run of letters and digits (cached: a catalog repeats its words), split by ``_CAMEL``, or
    for a run with characters outside ASCII by its `_shape` (which starts with no mark: a run does not)."""
    out: list[str] = []
    spans = _CAMEL.finditer(chunk) if chunk.isascii() else _SHAPE_CAMEL.finditer(_shape(chunk))
    parts = [chunk[m.start() : m.end()] for m in spans]
    for part in parts:
        if _CJK.fullmatch(part):
            out.extend(_bigrams(part))
        else:
            out.append(part.lower())
    return tuple(out)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokens(text: str, *, stem: bool = True) -> list[str]:
    """Index terms of ``text``: split, lowercased, stop words dropped, optionally stemmed."""
    words = [w for w in split_words(text) if w not in STOPWORDS]
    return [stem_word(w) for w in words] if stem else words


# --- Porter stemmer -----------------------------------------------------------------------

_VOWELS = frozenset("aeiou")


def _is_consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``stem``."""
    m, prev_vowel = 0, False
    for i in range(len(stem)):
        vowel = not _is_consonant(stem, i)
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    if len(word) < 3:
        return False
    n = len(word)
    return (
        _is_consonant(word, n - 3)
        and not _is_consonant(word, n - 2)
        and _is_consonant(word, n - 1)
        and word[-1] not in "wxy"
    )


def _replace(word: str, rules: tuple[tuple[str, str], ...], min_m: int) -> str:
    for suffix, repl in rules:
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
            return stem + repl if _measure(stem) > min_m else word
    return word


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("abli", "able"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""),
)  # fmt: skip
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


@lru_cache(maxsize=65536)
def stem_word(word: str) -> str:
    """Porter-stem one lowercase word; words of two letters or fewer and non-ASCII words are kept."""
    if len(word) <= 2 or not word.isascii() or not word.isalpha():
        return word
    w = word
    # step 1a
    if w.endswith(("sses", "ies")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    # step 1b
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    else:
        for suffix in ("ed", "ing"):
            if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
                w = w[: -len(suffix)]
                if w.endswith(("at", "bl", "iz")):
                    w += "e"
                elif _double_consonant(w) and w[-1] not in "lsz":
                    w = w[:-1]
                elif _measure(w) == 1 and _cvc(w):
                    w += "e"
                break
    # step 1c
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    # step 4
    for suffix in sorted(_STEP4, key=len, reverse=True):
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
                w = stem
            break
    # step 5
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            w = stem
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w
