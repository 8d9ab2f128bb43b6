"""What one stub is made of, gathered from a tool definition before any text is laid out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from generator.type_defs import Property, TypedDictDef
from generator.type_expr import PyType


@dataclass(frozen=True, slots=True)
class Param:
    """One keyword-only parameter: its identifier and the property it sends."""

    ident: str
    prop: Property

    @property
    def renamed(self) -> bool:
        return self.ident != self.prop.wire


@dataclass(slots=True)
class StubParts:
    """The pieces of one stub (:mod:`generator.render` lays them out, :mod:`generator.docstrings` documents them)."""

    server: str
    tool: str
    function: str
    description: str
    title: str
    hints: list[str]
    definitions: list[TypedDictDef] = field(default_factory=list)
    params: list[Param] = field(default_factory=list)
    extra: PyType | None = None
    """Type of ``**arguments`` (keys beyond the properties, or the fallback); None for none."""
    extra_patterns: tuple[str, ...] = ()
    """The patterns the keys of ``**arguments`` must match (none: any key)."""
    raw_input: Any = None
    fallback_reason: str = ""
    output: PyType | None = None
    output_fields: list[tuple[str, str, str]] = field(default_factory=list)
    """(key, annotation, description) of the output TypedDict's fields."""


MAX_TEXT = 20_000
"""Characters of a server's text (a description, a title) the generator reads at most: five times what a stub
shows of a description, so a cut there still finds its sentence ends; the rest is never looked at (a 10 MB
description took 4–6 s to render, nearly all of it spent on text a stub never shows)."""


def text_of(value: Any) -> str:
    """``value`` (its first `MAX_TEXT` characters) when it is a string, else empty (server data is untrusted in type
    too)."""
    return value[:MAX_TEXT] if isinstance(value, str) else ""


def tool_title(raw: dict[str, Any]) -> str:
    """A tool's display title (MCP 2025-06-18): its own ``title``, else the one in its ``annotations``."""
    annotations = raw.get("annotations")
    return text_of(raw.get("title")) or (text_of(annotations.get("title")) if isinstance(annotations, dict) else "")
