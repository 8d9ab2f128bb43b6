"""Which servers of a Claude Code file Claude Code starts itself besides tooltree, from its settings beside that file.

A user who adds ``tooltree serve --config .mcp.json`` to that same ``.mcp.json`` (or ``--config ~/.claude.json`` to
``~/.claude.json``) keeps the servers listed there, and Claude Code starts each of them too: every tool reaches the
model twice, natively and through tooltree, and every server runs twice. Claude Code stops starting them, and
tooltree still reads them, with its own settings (checked with Claude Code 2.1):

- a project's ``.mcp.json``: ``"disabledMcpjsonServers": ["name", ...]`` in the project's
  ``.claude/settings.local.json`` (or ``.claude/settings.json``, shared with the team);
- ``~/.claude.json`` (user and local scope): ``"deniedMcpServers": [{"serverName": "name"}, ...]`` in
  ``~/.claude/settings.json`` (in every project; the ``.claude/settings.json`` of ``$CLAUDE_CONFIG_DIR`` when
  ``.claude.json`` is there).

A server the user stopped with ``/mcp disable`` (in any scope) is not started either: Claude Code writes its name
into ``"disabledMcpServers": ["name", ...]`` of the project's entry in its own file, ``projects.<folder>`` of
``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json`` when that is set), the folder being the root of the git
work tree it runs in (of a linked worktree: of the main one), else the folder itself (checked with Claude Code 2.1:
``claude mcp list`` says "Disabled for this project").

An entry's ``"disabled": true`` is no way to do it: Claude Code starts the server anyway, and tooltree leaves it out.

`claude_code_doubles` reads the file's server maps again (tooltree's reader leaves its own entry out), those
settings files, and the project's ``disabledMcpServers`` alone (the rest of a ``~/.claude.json``, Claude Code's
history, is scanned, not built), and says nothing when it cannot be sure (a file that is not JSON).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tool_tree.config import MAX_JSON_CONFIG_BYTES, Config, ConfigError, ServerConfig, starts_tooltree_serve
from tool_tree.config_json import Span, _members, _skip, server_maps
from tool_tree.tree import read_regular

PROJECT_FILE, USER_FILE = ".mcp.json", ".claude.json"
SETTINGS_FILES = ("settings.json", "settings.local.json")
MAX_SETTINGS_BYTES = 4 * 1024 * 1024
"""A settings file larger than this is not read (Claude Code's are a few kB)."""
SHOWN_NAMES = 8
"""Server names written out in the warning; the rest are counted."""
MOVING = 'README: "Moving your servers behind tooltree"'
MAX_GIT_FILE_BYTES = 4096
"""A worktree's ``.git`` file or ``commondir`` larger than this is not read (each holds one path)."""


@dataclass(frozen=True)
class Doubled:
    """Servers tooltree serves from ``source`` that Claude Code also starts directly, and how to stop that."""

    source: str
    servers: tuple[str, ...]
    key: str
    """The setting that stops it: ``disabledMcpjsonServers`` or ``deniedMcpServers``."""
    settings: Path
    """The settings file to add it to."""

    @property
    def setting(self) -> str:
        """The setting as JSON, its list cut after `SHOWN_NAMES` names."""
        names = list(self.servers[:SHOWN_NAMES])
        items: list[Any] = names if self.key == "disabledMcpjsonServers" else [{"serverName": n} for n in names]
        text = json.dumps({self.key: items})[1:-1]
        if len(self.servers) > SHOWN_NAMES:
            text = f"{text[:-1]}, … ({len(self.servers) - SHOWN_NAMES} more)]"
        return text

    def message(self) -> str:
        n = len(self.servers)
        return (
            f"{self.source} lists tooltree itself, and Claude Code also starts {n} of its server(s) directly: each "
            "tool reaches the model twice (natively and through tooltree) and each server runs twice. To have Claude "
            f"Code start only tooltree (which still reads them from {self.source}), add {self.setting} to "
            f"{self.settings} ({MOVING})"
        )


def claude_code_doubles(config: Config, environ: Mapping[str, str] | None = None) -> Doubled | None:
    """The servers tooltree serves from ``config`` that Claude Code also starts directly: ``config`` is Claude Code's
    ``.mcp.json`` or ``.claude.json``, it lists tooltree serve itself, and the settings beside it do not stop
    Claude Code from starting them. None otherwise, and when a file cannot be read or is not as expected."""
    env = os.environ if environ is None else environ
    source = config.file
    if source is None or Path(source).name not in (PROJECT_FILE, USER_FILE):
        return None
    path = Path(source)
    user = path.name == USER_FILE
    try:
        text = _claude_text(path)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not _lists_tooltree(text, path):
        return None
    folder = path.resolve().parent
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    settings_dir = folder if user and config_dir and Path(config_dir).resolve() == folder else folder / ".claude"
    stopped: set[str] = set()
    for name in SETTINGS_FILES:
        settings = _json_object(settings_dir / name)
        if settings is None:
            return None
        if not user:
            stopped.update(_names(settings.get("disabledMcpjsonServers")))
        denied = settings.get("deniedMcpServers")
        for entry in denied if isinstance(denied, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("serverName"), str):
                stopped.add(entry["serverName"])
    started = tuple(s.name for s in config.offered_servers if s.name not in stopped)
    if not started:
        return None
    project = _project(Path.cwd().resolve())
    if user:  # its own file: read once (a ~/.claude.json holds Claude Code's history too)
        disabled = _disabled_in(text, project, str(path))
    else:
        state = _state_file(env)
        disabled = None if state is None else _disabled(state, project)
    if disabled is None:
        return None
    started = tuple(name for name in started if name not in disabled)
    if not started:
        return None
    key = "deniedMcpServers" if user else "disabledMcpjsonServers"
    shown = settings_dir / ("settings.json" if user else "settings.local.json")
    return Doubled(source, started, key, _shown(shown, env.get("HOME")))


def _shown(path: Path, home: str | None) -> Path:
    """``path`` relative to the working folder when it is in it, else as ``~/…`` when it is in the home folder
    ``home``, else whole."""
    here = Path.cwd().resolve()
    if path.is_relative_to(here):
        return path.relative_to(here)
    if home and path.is_relative_to(Path(home).resolve()):
        return Path("~", path.relative_to(Path(home).resolve()))
    return path


def _claude_text(path: Path) -> str:
    """The text of Claude Code's JSON file ``path``, read without waiting on a FIFO.

    Raises:
        OSError: it cannot be read.
        UnicodeDecodeError: it is not UTF-8.
        ValueError: it is larger than tooltree reads (`MAX_JSON_CONFIG_BYTES`).
    """
    data = read_regular(path, MAX_JSON_CONFIG_BYTES + 1)
    if len(data) > MAX_JSON_CONFIG_BYTES:
        raise ValueError(f"{path}: more than {MAX_JSON_CONFIG_BYTES:,} bytes")
    return data.decode("utf-8-sig")


def _lists_tooltree(text: str, path: Path) -> bool:
    """Whether a server map of ``text``, the Claude Code file ``path`` (the maps tooltree reads), has an entry that
    runs ``tooltree serve``."""
    try:
        maps = server_maps(text, str(path))
        entries = [json.loads(text[span.start : span.end]) for span in maps.spans]
    except (ValueError, RecursionError, ConfigError):
        return False
    for servers in entries:
        for name, entry in servers.items() if isinstance(servers, dict) else ():
            command, args = (entry.get("command"), entry.get("args", [])) if isinstance(entry, dict) else (None, None)
            if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                continue
            if starts_tooltree_serve(ServerConfig(name, command=command, args=tuple(args))):
                return True
    return False


def _json_object(path: Path) -> dict[str, Any] | None:
    """The settings file ``path`` as read: {} when there is none; None when it cannot be read as a JSON object."""
    try:
        data = read_regular(path, MAX_SETTINGS_BYTES + 1)  # never waits on a FIFO
        if len(data) > MAX_SETTINGS_BYTES:
            return None
        value = json.loads(data.decode("utf-8-sig"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _names(value: Any) -> list[str]:
    """A settings list of server names (Claude Code also takes one name as a string)."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _state_file(env: Mapping[str, str]) -> Path | None:
    """Claude Code's own file, where ``/mcp disable`` writes: ``$CLAUDE_CONFIG_DIR/.claude.json``, else
    ``~/.claude.json``; None when there is no home folder to look in."""
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        return Path(config_dir) / USER_FILE
    try:
        return Path(env.get("HOME") or Path.home()) / USER_FILE
    except RuntimeError:  # no HOME and no passwd entry (a bare UID in a container): before, serve's exit 70
        return None


def _project(cwd: Path) -> Path:
    """The folder Claude Code, run in ``cwd``, keeps the project's state under: the root of the git work tree ``cwd``
    is in (of a linked worktree, whose ``.git`` is a file: the main work tree's), else ``cwd``."""
    for folder in (cwd, *cwd.parents):
        git = folder / ".git"
        try:
            if git.is_dir():
                return folder
            if not git.exists():
                continue
            # A linked worktree: ``gitdir: <main>/.git/worktrees/<name>``, whose ``commondir`` leads to ``<main>/.git``.
            pointer = read_regular(git, MAX_GIT_FILE_BYTES).decode("utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return folder
            gitdir = folder / pointer.removeprefix("gitdir:").strip()
            common = (gitdir / read_regular(gitdir / "commondir", MAX_GIT_FILE_BYTES).decode("utf-8").strip()).resolve()
            return common.parent if common.name == ".git" else folder
        except (OSError, UnicodeDecodeError, ValueError, RuntimeError):  # RuntimeError: resolve()'s symlink loop
            return folder
    return cwd


def _disabled(state: Path, project: Path) -> set[str] | None:
    """The servers disabled in ``project`` with Claude Code's ``/mcp disable``: the ``projects.<project>`` entry's
    ``disabledMcpServers`` (a list of names; Claude Code takes nothing else) in its file ``state``. None when that
    file cannot be read as JSON (too large, not JSON, nesting without end, a key twice)."""
    try:
        text = _claude_text(state)
    except FileNotFoundError:
        return set()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return _disabled_in(text, project, str(state))


def _disabled_in(text: str, project: Path, source: str) -> set[str] | None:
    """`_disabled` of the file ``source`` read as ``text``."""
    try:
        span: Span | None = Span(_skip(text, 0), len(text), 1, 0)
        for key in ("projects", str(project), "disabledMcpServers"):  # scanned, not built: only this value is
            span = _member(text, span, key, source)
        value = json.loads(text[span.start : span.end]) if span is not None else None
    except (ValueError, RecursionError, ConfigError):
        return None
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _member(text: str, span: Span | None, key: str, source: str) -> Span | None:
    """Where the value of ``key`` lies in the JSON object at ``span`` of ``text`` (None: ``span`` is None or not an
    object, or has no ``key``).

    Raises:
        json.JSONDecodeError: the object is not JSON.
        ConfigError: ``key`` comes twice, or a value nests deeper than the json module can scan.
    """
    if span is None or text[span.start : span.start + 1] != "{":
        return None
    return _members(text, span.start, source, lambda found: found == key).found.get(key)
