"""Helpers for untrusted description text."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def clean(text: str) -> str:
    """Drop control, bidi and zero-width characters; normalise line ends to ``\\n``."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text.replace("\t", "    "))


def one_line(text: str, limit: int = 160) -> str:
    """Collapse all white space to single spaces and cap the length with an ellipsis."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence (or first paragraph line) of a description, on one line."""
    cleaned = clean(text).strip()
    if not cleaned:
        return ""
    para = cleaned.split("\n\n", 1)[0]
    first = _SENTENCE_END.split(" ".join(para.split()), maxsplit=1)[0]
    return one_line(first, limit)
