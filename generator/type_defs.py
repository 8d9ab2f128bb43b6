"""What the schema converter hands the renderer: TypedDict definitions, parameters, and type names.

:class:`NameRegistry` gives each TypedDict of one stub module a unique name made from untrusted
text (a schema ``title``, a property name) through :func:`generator.naming.to_identifier`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from generator.naming import MAX_IDENTIFIER, to_identifier
from generator.type_expr import PyType


@dataclass(frozen=True, slots=True)
class FieldDef:
    """One key of a TypedDict."""

    key: str
    """The exact wire name."""
    type: PyType
    required: bool
    description: str
    """Untrusted text (may be empty)."""
    default: str | None = None
    """The JSON of the schema's ``default`` (a key of an argument, not of a result), or None when it gives none."""


@dataclass(frozen=True, slots=True)
class TypedDictDef:
    name: str
    fields: tuple[FieldDef, ...]
    description: str
    """Untrusted text (may be empty)."""

    def uses_class_syntax(self, module_names: Iterable[str]) -> bool:
        """Whether every key can be written as a class-body name that means exactly that key.

        Non-ASCII identifiers are excluded (Python NFKC-normalises them, so ``ﬁ`` would become
        ``fi``), and so are keys starting with ``_`` and keys that shadow a name an annotation
        might refer to.
        """
        names = set(module_names)
        return all(
            f.key.isascii()
            and f.key.isidentifier()
            and not keyword.iskeyword(f.key)
            and not keyword.issoftkeyword(f.key)
            and not f.key.startswith("_")
            and f.key not in names
            for f in self.fields
        )


@dataclass(frozen=True, slots=True)
class Property:
    """One top-level property of the input schema: a parameter of the stub function."""

    wire: str
    type: PyType
    required: bool
    schema: dict[str, Any]
    """The property's schema with a top-level ``$ref`` resolved (for documentation)."""


@dataclass(frozen=True, slots=True)
class InputShape:
    """What the input schema turns into."""

    properties: tuple[Property, ...]
    extra: PyType | None
    """Type of ``**arguments`` when the schema allows keys beyond its properties; else None."""
    patterns: tuple[str, ...] = ()
    """The ``patternProperties`` patterns the extra keys must match (none: any key that ``extra`` allows)."""


_PLAIN_NAME = re.compile(rf"[A-Za-z][A-Za-z0-9_]{{0,{MAX_IDENTIFIER - 1}}}")
"""Names :func:`generator.naming.to_identifier` changes at most in their underscores (which :func:`camel` drops)."""


def camel(name: str) -> str:
    """``update_record`` → ``UpdateRecord``, ``user-id`` → ``UserId`` (ASCII; may still need checking)."""
    ident = name if _PLAIN_NAME.fullmatch(name) else to_identifier(name, fallback="Model")
    return "".join([part[:1].upper() + part[1:] for part in ident.split("_") if part]) or "Model"


class NameRegistry:
    """Allocates unique type names in one module, in the order they are asked for."""

    def __init__(self, reserved: Iterable[str]) -> None:
        self._reserved = set(reserved)
        self._taken = set(self._reserved)
        self._bases: dict[str, str] = {}

    def allocate(self, raw: str) -> str:
        base = to_identifier(camel(raw), fallback="Model", reserved=self._reserved)
        candidate, n = base, 1
        while candidate in self._taken:
            n += 1
            candidate = f"{base}_{n}"
        self._taken.add(candidate)
        self._bases[candidate] = base
        return candidate

    def base_of(self, name: str) -> str | None:
        """The name ``allocate`` numbered to give ``name`` (``RelationsItem`` of ``RelationsItem_2``); None for a
        name it did not give."""
        return self._bases.get(name)

    def release(self, name: str) -> None:
        """Give back ``name``, which is not written: a later type of its base may take it."""
        self._taken.discard(name)
        self._bases.pop(name, None)
