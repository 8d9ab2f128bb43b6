"""Where a JSON configuration's server maps (``mcpServers``, or another client's) lie, so the reader reads them alone.

A ``~/.claude.json`` keeps Claude Code's history beside its ``mcpServers``, and grows with it to 8–100 MB.
tooltree's reader keeps every value's line but is pure Python (about 2 s a MiB), so `server_maps` walks
the top-level object with the json module's C scanner instead, which checks that the whole file is JSON and
drops each object once scanned: on a 50 MB ``~/.claude.json``-like file, 0.14 s and nothing held beyond the
text (building the values took 0.28 s and 76 MB more; handing the reader the value behind as many blank lines
as come before it, 0.58 s more). The span it returns, with the line and column where it starts, is read alone,
its lines counted from there, within every bound of the reader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_tree.config_read import MAX_DEPTH, ConfigError, too_deep

_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a string, or a bracket outside strings


def _dropped(pairs: list[tuple[str, Any]]) -> None:
    """An object, once scanned: not kept, so a large history is never held whole."""
    return None


def _number(text: str) -> None:
    """A number, once scanned: not made (an int of more than 4,300 digits is a ValueError, and not the file's)."""
    return None


_SCANNER = json.JSONDecoder(object_pairs_hook=_dropped, parse_int=_number, parse_float=_number)


@dataclass(frozen=True)
class Span:
    """Where a top-level value lies in the text: ``text[start:end]``, starting on ``line`` (1-based) at ``column``."""

    start: int
    end: int
    line: int
    column: int


@dataclass(frozen=True)
class ServerMaps:
    """Where a JSON configuration's servers lie: ``key`` names their map as the file does (``mcpServers``,
    ``servers``, ``mcp.servers`` or ``context_servers``), ``spans`` its values (two of a ``~/.claude.json``), and
    ``inputs`` VS Code's ``inputs`` beside ``servers``, if any."""

    key: str
    spans: list[Span]
    inputs: Span | None = None
    settings: Span | None = None
    """The ``mcp`` object beside ``mcpServers`` (Gemini CLI's ``mcp.allowed`` and ``mcp.excluded``), if any."""
    keys: list[str] = field(default_factory=list)
    """Each span's key path as the file writes it where that is not ``key``: a ``~/.claude.json`` project's
    ``projects["/folder"].mcpServers``, so an error names its server as the file has it (`named_spans`)."""

    def named_spans(self) -> list[tuple[Span, str]]:
        """Each span with its key path as the file writes it."""
        return [(span, self.keys[i] if i < len(self.keys) else self.key) for i, span in enumerate(self.spans)]


CLIENT_KEYS = ("mcpServers", "projects", "servers", "inputs", "context_servers", "mcp")
"""The top-level keys read: Claude Code's, Claude Desktop's, Cursor's, Windsurf's and Gemini CLI's ``mcpServers``
(and ``~/.claude.json``'s ``projects``), VS Code's ``servers`` and ``inputs`` (``.vscode/mcp.json``) or ``mcp``
(the ``"mcp": {"servers": …}`` of its settings.json, before VS Code 1.102), Zed's ``context_servers``."""


def server_maps(text: str, source: str, project: Path | None = None) -> ServerMaps:
    """Where the server maps of the JSON object ``text`` lie: its top-level ``mcpServers`` and, in a Claude Code
    ``~/.claude.json``, ``projects[<folder>].mcpServers`` of ``project`` (default: the working folder) or of the
    nearest folder above it that has an entry, in that order: the servers `claude mcp add` adds by default (local
    scope; before, they were not read, and a file with none at the top level was refused). A server of both is
    the local one (it comes last). Without them, another client's map: VS Code's ``servers`` (or the
    ``mcp.servers`` of its settings.json), Zed's ``context_servers``; a file named ``.mcp.json`` (Claude Code's and
    Copilot's) is read as they read it, ``mcpServers`` alone.

    Raises:
        ConfigError: the text is not JSON, it has no map, an object has two of a key read here, or a value
            nests deeper than the json module can scan (with the file and line).
    """
    first = _skip(text, 0)
    try:
        top = _members(text, first, source, lambda key: key in CLIENT_KEYS)
        if (at := _skip(text, top.end)) != len(text):
            raise json.JSONDecodeError("Extra data", text, at)
        found = top.found
        spans = [found["mcpServers"]] if "mcpServers" in found else []
        keys = ["mcpServers"] * len(spans)
        folders: list[str] = []
        if (projects := found.get("projects")) is not None and text[projects.start] == "{":
            here = (project if project is not None else Path.cwd()).resolve()
            folders = [str(folder) for folder in (here, *here.parents)]
            entries = _members(text, projects.start, source, lambda key: key in folders).found
            folder = next((f for f in folders if f in entries), None)
            entry = entries[folder] if folder is not None else None
            if entry is not None and text[entry.start] == "{":
                local = _members(text, entry.start, source, lambda key: key == "mcpServers").found.get("mcpServers")
                if local is not None:  # named as the file writes it: projects["/home/u/app"].mcpServers
                    spans.append(local)
                    keys.append(f"projects[{json.dumps(folder, ensure_ascii=False)}].mcpServers")
        if spans:
            settings = found.get("mcp")  # Gemini CLI's `mcp.allowed` and `mcp.excluded`
            is_object = settings is not None and text[settings.start] == "{"
            return ServerMaps("mcpServers", spans, settings=settings if is_object else None, keys=keys)
        claude = Path(source).name == ".mcp.json"
        if not claude and "servers" in found:
            return ServerMaps("servers", [found["servers"]], found.get("inputs"))
        if not claude and (mcp := found.get("mcp")) is not None and text[mcp.start] == "{":
            inner = _members(text, mcp.start, source, lambda key: key in ("servers", "inputs")).found
            if "servers" in inner:
                return ServerMaps("mcp.servers", [inner["servers"]], inner.get("inputs"))
        if not claude and "context_servers" in found:
            return ServerMaps("context_servers", [found["context_servers"]])
    except json.JSONDecodeError as e:
        raise ConfigError(f"invalid JSON: {e.msg} (column {e.colno})", file=source, line=e.lineno) from None
    problem = "expected a top-level `mcpServers` object"
    if folders:
        problem += (
            f", or one in `projects` for this folder ({folders[0]}) or one above it: Claude Code keeps a server "
            "`claude mcp add` added (its local scope) under the folder it was added in; run tooltree there, or "
            "add the server with `--scope user`"
        )
    elif not claude:
        problem += " (Claude, Cursor, Windsurf, Gemini CLI), `servers` (VS Code's mcp.json) or `context_servers` (Zed)"
    raise ConfigError(problem, file=source, line=_line(text, first))


def top_level_keys(text: str, names: Collection[str]) -> set[str]:
    """Which of ``names`` the JSON object ``text`` has at its top level (none when it is not JSON: `server_maps`
    says where it is not)."""
    try:
        return set(_members(text, _skip(text, 0), "", lambda key: key in names).found)
    except (json.JSONDecodeError, ConfigError):
        return set()


@dataclass(frozen=True)
class _Scanned:
    found: dict[str, Span]
    end: int


def _members(text: str, first: int, source: str, wanted: Callable[[str], bool]) -> _Scanned:
    """Where the values of the ``wanted`` keys of the JSON object at ``first`` lie, and where the object ends.

    Raises:
        json.JSONDecodeError: the object is not JSON.
        ConfigError: a wanted key comes twice, or a value nests deeper than the json module can scan.
    """
    found: dict[str, Span] = {}
    at = _skip(text, _expect(text, first, "{", "Expecting value"))
    if text[at : at + 1] == "}":
        return _Scanned(found, at + 1)
    while True:
        if text[at : at + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
        key_at = at
        key, at = _SCANNER.raw_decode(text, at)
        start = _skip(text, _expect(text, _skip(text, at), ":", "Expecting ':' delimiter"))
        try:
            _, at = _SCANNER.raw_decode(text, start)
        except RecursionError:
            raise ConfigError(too_deep(), file=source, line=_line(text, _past_max_depth(text, start))) from None
        if wanted(key):
            if key in found:
                raise ConfigError("duplicate key", file=source, line=_line(text, key_at), key=key)
            found[key] = Span(start, at, _line(text, start), start - text.rfind("\n", 0, start) - 1)
        at = _skip(text, at)
        if text[at : at + 1] != ",":
            return _Scanned(found, _expect(text, at, "}", "Expecting ',' delimiter"))
        at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    """The offset of the first character at or after ``at`` that is not JSON whitespace."""
    m = _SPACE.match(text, at)
    return m.end() if m else at


def _expect(text: str, at: int, char: str, problem: str) -> int:
    """The offset after ``char``, which must be at ``at``.

    Raises:
        json.JSONDecodeError: it is not (``problem`` says what was expected, as the json module would).
    """
    if text[at : at + 1] != char:
        raise json.JSONDecodeError(problem, text, at)
    return at + 1


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _past_max_depth(text: str, start: int) -> int:
    """The offset where the value at ``start``, in the top-level object, goes past `MAX_DEPTH` levels."""
    depth = 1  # the top-level object
    for m in _TOKEN.finditer(text, start):
        if m.group() in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return m.start()
        elif m.group() in ("]", "}"):
            depth -= 1
            if depth <= 1:
                break
    return start
