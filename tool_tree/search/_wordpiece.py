"""BERT's uncased WordPiece tokenizer (basic split, then greedy longest-match sub-words), in stdlib.

It turns text into the vocabulary ids a BERT-style sentence encoder expects, reading the
model's own ``vocab.txt``, so the optional embedding ranker needs no tokenizer package.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

MAX_WORD_CHARS = 100
MAX_CACHED_WORDS = 20_000
"""Words whose sub-word ids ``WordPiece`` keeps (a query's clauses repeat its words); then it starts over."""

_ASCII_DROPPED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII control characters ``basic_split`` drops (tab, newline and carriage return are spaces)."""
_ASCII_WORDS = re.compile(r"[^\s!-/:-@\[-`{-~]+|[!-/:-@\[-`{-~]")
"""An ASCII word is a run of anything but white space and punctuation; each punctuation mark is a word."""


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def basic_split(text: str) -> list[str]:
    """Lowercase, strip accents, drop control characters, split on white space and punctuation."""
    if text.isascii():  # the same steps, for the common case, in two regular expressions
        return _ASCII_WORDS.findall(_ASCII_DROPPED.sub("", text).lower())
    return split_unicode(text)


def split_unicode(text: str) -> list[str]:
    """``basic_split`` for any text, a character at a time."""
    chars: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        cat = unicodedata.category(ch)
        if ch in "\t\n\r" or cat == "Zs":
            chars.append(" ")
        elif cat.startswith("C"):
            continue
        elif _is_cjk(cp):
            chars.append(f" {ch} ")
        else:
            chars.append(ch)
    words: list[str] = []
    for word in "".join(chars).lower().split():
        word = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
        current = ""
        for ch in word:
            if _is_punctuation(ch):
                if current:
                    words.append(current)
                words.append(ch)
                current = ""
            else:
                current += ch
        if current:
            words.append(current)
    return words


class WordPiece:
    """Text → token ids, with ``[CLS]`` and ``[SEP]`` around and truncation to ``max_tokens``."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.unk = vocab["[UNK]"]
        self.cls = vocab["[CLS]"]
        self.sep = vocab["[SEP]"]
        self._cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        """Read a ``vocab.txt`` (one token a line; the line number is the id)."""
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls({tok: i for i, tok in enumerate(lines)})

    def word_ids(self, word: str) -> tuple[int, ...]:
        """The ids of one word of ``basic_split``'s (``[UNK]`` alone when a piece is not in the vocabulary)."""
        if len(word) > MAX_WORD_CHARS:
            return (self.unk,)  # not cached: the cache holds at most MAX_CACHED_WORDS short words
        found = self._cache.get(word)
        if found is None:
            if len(self._cache) >= MAX_CACHED_WORDS:
                self._cache = {}
            found = self._cache[word] = tuple(self._word_ids(word))
        return found

    def _word_ids(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        out: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = -1
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece, -1)
                if found >= 0:
                    break
                end -= 1
            if found < 0:
                return [self.unk]
            out.append(found)
            start = end
        return out

    def encode(self, text: str, max_tokens: int = 256) -> list[int]:
        ids = [self.cls]
        for word in basic_split(text):
            ids.extend(self.word_ids(word))
            if len(ids) >= max_tokens - 1:
                break
        return [*ids[: max_tokens - 1], self.sep]
