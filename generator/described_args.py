"""The ``Args:`` section a tool's description may hold (FastMCP makes a tool's description of its Python function's
docstring), taken out of the description so that a stub's docstring has one ``Args:`` section, tooltree's; and its
``Returns:`` section, which goes into the stub's own when the stub has one (a tool with an output schema).

A section is taken out only when each of its entries names one of the tool's parameters (by its wire name or its
name in the stub): then the stub's ``Args:`` says all it said, each entry's text standing for a parameter whose schema
has no description. A section that names anything else (a parameter the schema does not have, a typo) is left in the
description as it is, so no text is lost.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

_HEADINGS = frozenset({"Args:", "Arguments:", "Parameters:"})
_ENTRY = re.compile(r"(\*{0,2}[^\W\d][\w-]*)(?: *\([^()]{0,200}\))?: ?(.*)")
"""``name: text`` or ``name (type): text`` (Google style)."""


@dataclass(frozen=True, slots=True)
class DescribedArgs:
    description: str
    """The description without the section (the description as given when there is none to take out)."""
    texts: dict[str, str] = field(default_factory=dict)
    """Each entry's text (its lines joined), by the name it gives."""


def described_args(description: str, names: Collection[str]) -> DescribedArgs:
    """The ``Args:`` section of ``description`` (dedented text) taken out, when each entry is one of ``names``."""
    lines = description.split("\n")
    found = _section(lines, _HEADINGS)
    if found is None:
        return DescribedArgs(description)
    start, end = found  # the first section is the one read; another is left alone
    texts = _entries(lines[start + 1 : end])
    if not texts or not texts.keys() <= set(names):
        return DescribedArgs(description)
    return DescribedArgs("\n".join([*lines[:start], *lines[end:]]).strip(), texts)


def described_returns(description: str) -> tuple[str, str]:
    """``description`` (dedented text) without its ``Returns:`` section, and that section's text (dedented); for a
    stub whose docstring has a ``Returns:`` section of its own (a tool with an output schema)."""
    lines = description.split("\n")
    found = _section(lines, frozenset({"Returns:"}))
    if found is None:
        return description, ""
    start, end = found
    body = lines[start + 1 : end]
    cut = min((_indent(line) for line in body if line.strip()), default=0)
    text = "\n".join(line[cut:] for line in body).strip()
    if not text:
        return description, ""
    return "\n".join([*lines[:start], *lines[end:]]).strip(), text


def _section(lines: list[str], headings: frozenset[str]) -> tuple[int, int] | None:
    """Where the first section of one of ``headings`` starts (its heading) and ends (its first line indented no
    deeper than the heading), or None."""
    for start, line in enumerate(lines):
        if line.strip() in headings:
            indent = _indent(line)
            end = start + 1
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
                end += 1
            return start, end
    return None


def _entries(lines: list[str]) -> dict[str, str]:
    """Each entry's text by its name; empty when a line is neither an entry nor the continuation of one."""
    texts: dict[str, list[str]] = {}
    current: list[str] | None = None
    entry_indent = -1
    for line in lines:
        if not line.strip():
            continue
        if entry_indent < 0 or _indent(line) <= entry_indent:
            m = _ENTRY.fullmatch(line.strip())
            if m is None or m[1].lstrip("*") in texts:
                return {}
            entry_indent = _indent(line)
            current = texts[m[1].lstrip("*")] = [m[2]]
        elif current is not None:
            current.append(line.strip())
    return {name: " ".join(" ".join(parts).split()) for name, parts in texts.items()}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
