"""The sections of a tooltree.yaml besides ``servers`` (`Section`), and the keys their owners declare (`Setting`).

The core reads ``servers:`` alone; every other top-level mapping is handed on as a `Section`, with the line of each
key, to the package that owns it (``sandbox.config``, ``agent.defaults``, …), which declares its keys as `Setting`
values and reads it with `Section.read`. Import these from `tool_tree.config`.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tool_tree.config_read import (
    ConfigError,
    Node,
    Reader,
    did_you_mean,
    exponent_hint,
    joined,
    lone_surrogate,
    quote_hint,
    value_shown,
)

logger = logging.getLogger("tool_tree.config")

_KEPT = object()
"""`Section._value` of a string naming a variable that is not set, left out of `Section.read`'s values."""


@dataclass(frozen=True)
class Setting:
    """One key of a section, declared by the package that owns the section.

    ``kind`` is ``str``, ``int`` or ``float`` (positive numbers, finite), ``bool``, or ``list`` (of
    strings); ``choices`` limits a string to those values. ``check`` says what else is wrong with a
    value of the right kind (``"not a size: 'lots'"``), or returns None; its text becomes the error,
    with file, line and key.
    """

    kind: type
    meaning: str
    choices: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class Section:
    """A top-level section other than ``servers``, as written, with where each key came from."""

    name: str
    source: str = "<config>"
    line: int | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    """Raw values (strings not yet expanded)."""
    lines: Mapping[str, int | None] = field(default_factory=dict)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    written: Mapping[str, str] = field(default_factory=dict)
    """Of a YAML file, each value read as other than a string (``off``, ``yes``, a date), as written: a setting that
    takes text says to quote it (before: ``prefilter: off`` was "expected …, or off; …, got False")."""

    def read(self, settings: Mapping[str, Setting], *, unset_kept: bool = False) -> dict[str, Any]:
        """The section's values, each key known and of its declared type; ``${VAR}`` expanded in strings.
        ``unset_kept``: a string naming a variable that is not set is left out, unchecked (its owner's read raises it):
        the file is checked while it loads, and only the commands that read the section need its variables (before:
        ``agent: {model: "${MODEL}"}`` with MODEL unset refused ``generate-tree``).

        Raises:
            ConfigError: an unknown key or a value of the wrong type (with file, line and key), every such key's at
                once (`ConfigError.also`).
        """
        out: dict[str, Any] = {}
        problems: list[ConfigError] = []
        for k, v in self.values.items():
            try:
                value = self._value(k, v, settings, unset_kept=unset_kept)
            except ConfigError as e:  # every key's error at once (before: the first alone)
                problems.append(e)
                continue
            if value is not _KEPT:
                out[k] = value
        if problems:
            raise joined(problems)
        return out

    def _value(self, k: str, v: Any, settings: Mapping[str, Setting], *, unset_kept: bool) -> Any:
        """The value of the key ``k`` (`read`), or `_KEPT` for a string naming a variable that is not set."""
        key, line = f"{self.name}.{k}", self.lines.get(k)
        setting = settings.get(k)
        if setting is None:
            unknown = f"unknown key{did_you_mean(k, settings, unknown=True)}"
            raise ConfigError(unknown, file=self.source, line=line, key=key)
        kind, meaning = setting.kind, setting.meaning
        for text in v if isinstance(v, list) else (v,):  # `"\ud800"`: no program or file can take it
            if isinstance(text, str) and (half := lone_surrogate(text)) is not None:
                raise ConfigError(half, file=self.source, line=line, key=key)
        value: Any
        if kind is list and isinstance(v, list) and all(_scalar(x) for x in v):
            value = tuple(str(x) for x in v)
        elif kind is str and _scalar(v):
            reader = Reader(self.source, self.environ)
            kept: contextlib.AbstractContextManager[list[ConfigError]] = (
                reader.deferring() if unset_kept else contextlib.nullcontext([])
            )
            # a number as written: YAML 1.1 reads `model: 0x10` as 16, `010` as 8, `12:30` as 750 (before: the
            # setting got "16", "8" or "750"), as `Reader.string` takes a server's
            text = v if isinstance(v, str) else self.written.get(k, str(v))
            with kept as unset:
                value = reader.expand(text, Node(v, line), key)
            if unset:
                return _KEPT
            if setting.choices and value not in setting.choices:
                raise ConfigError(f"expected {meaning}, got {v!r}", file=self.source, line=line, key=key)
        elif kind is bool and isinstance(v, bool):
            value = v
        elif kind is float and not isinstance(v, bool) and isinstance(v, int | float) and 0 < v < math.inf:
            value = float(v)
        elif kind is int and not isinstance(v, bool) and isinstance(v, int) and v > 0:
            value = v
        elif kind is list and isinstance(v, list):  # an item is not a string: say which, and what it is
            i, item = next((i, x) for i, x in enumerate(v) if not _scalar(x))
            shown = "null" if item is None else value_shown(item)
            raise ConfigError(
                f"expected {meaning}; item {i} is {shown}, not a string", file=self.source, line=line, key=key
            )
        else:
            written = Node(v, line, self.written.get(k))
            hint = quote_hint(written, json=False) if kind is str else exponent_hint(v) if kind in (int, float) else ""
            expected = f"expected {_expected(kind, meaning)}, got {value_shown(v)}{hint}"
            raise ConfigError(expected, file=self.source, line=line, key=key)
        if setting.check is not None and (problem := setting.check(value)) is not None:
            raise ConfigError(problem, file=self.source, line=line, key=key)
        return value


SECTIONS: tuple[str, ...] = ("pool", "sandbox", "agent", "serve")
"""The sections a tooltree.yaml may have besides ``servers`` (what `load_config` allows by default), by name
only: their keys are declared, and checked when read, by the modules that own them (``pool``
`tool_tree.starts`, ``sandbox`` ``sandbox.config``, ``agent`` ``agent.defaults``, ``serve``
``agent.serve.settings``), which the core does not import."""

SectionSettings = Mapping[str, Mapping[str, Setting] | None]
"""Sections allowed besides ``servers``: each name with its settings (checked while loading), or with
None (handed on; its owner checks its keys when it reads it)."""


def warn_ignored(source: str, lines: Mapping[str, int | None]) -> None:
    """Say that the sections of tooltree's ``lines`` names (with their lines) are ignored: a YAML file whose servers
    are under ``mcpServers`` is read as another client's, its servers alone (before: dropped without a word)."""
    for name, line in lines.items():
        logger.warning(
            "%s:%s: %s: ignored: beside `mcpServers` (another client's format) only the servers are read; name them "
            "`servers:` (`enabled: false` for `disabled: true`) to have tooltree's settings read", source, line, name,
        )  # fmt: skip


def _scalar(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, str | int | float)


def _expected(kind: type, meaning: str) -> str:
    """What a setting of ``kind`` takes, said with its meaning: "a whole number, at least 1 (…)"."""
    if kind is int:
        return f"a whole number, at least 1 ({meaning})"
    if kind is float:
        return f"a positive number ({meaning})"
    if kind is bool:  # before: "expected offer the servers' MCP prompts …, got 1"
        return f"true or false ({meaning})"
    return meaning


def plain(node: Node) -> Any:
    """A node's value without line numbers."""
    if isinstance(node.value, dict):
        return {k: plain(v) for k, (_, v) in node.value.items()}
    if isinstance(node.value, list):
        return [plain(v) for v in node.value]
    return node.value
