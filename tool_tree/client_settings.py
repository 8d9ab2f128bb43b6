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

An entry's ``"disabled": true`` is no way to do it: Claude Code starts the server anyway, and tooltree leaves it out.

`claude_code_doubles` reads the file's server maps again (tooltree's reader leaves its own entry out) and those
settings files alone, and says nothing when it cannot be sure (a settings file that is not JSON).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tool_tree.config import MAX_JSON_CONFIG_BYTES, Config, ConfigError, ServerConfig, starts_tooltree_serve
from tool_tree.config_json import server_maps
from tool_tree.tree import read_regular

PROJECT_FILE, USER_FILE = ".mcp.json", ".claude.json"
SETTINGS_FILES = ("settings.json", "settings.local.json")
MAX_SETTINGS_BYTES = 4 * 1024 * 1024
"""A settings file larger than this is not read (Claude Code's are a few kB)."""
SHOWN_NAMES = 8
"""Server names written out in the warning; the rest are counted."""
MOVING = 'README: "Moving your servers behind tooltree"'


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
    if not _lists_tooltree(path):
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
    started = tuple(s.name for s in config.enabled_servers if s.name not in stopped)
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


def _lists_tooltree(path: Path) -> bool:
    """Whether a server map of the Claude Code file ``path`` (the ones tooltree reads) has an entry that runs
    ``tooltree serve``."""
    try:
        data = read_regular(path, MAX_JSON_CONFIG_BYTES + 1)  # never waits on a FIFO
        if len(data) > MAX_JSON_CONFIG_BYTES:
            return False
        text = data.decode("utf-8-sig")
        maps = server_maps(text, str(path))
        entries = [json.loads(text[span.start : span.end]) for span in maps.spans]
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, ConfigError):
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
