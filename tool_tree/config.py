"""tooltree configuration: which MCP servers to use and how to reach them.

Two file formats are read:

- ``tooltree.yaml`` (any ``.yaml``/``.yml``)::

      servers:
        crm:
          command: python
          args: [servers/crm.py]
          env: {CRM_TOKEN: "${CRM_TOKEN}"}
          timeout: 30
          include: ["search_*", "get_*"]
        drive:
          url: https://drive.example.com/mcp
          headers: {Authorization: "Bearer ${DRIVE_TOKEN}"}
      sandbox:              # optional: limits of the script sandbox (owned by `sandbox.config`)
        memory: 1g
      agent:                # optional: defaults of agent runs (owned by `agent.defaults`)
        pinned: [drive.get_document, crm.update_record]

  The core reads ``servers:``. Every other top-level mapping is a `Section`, handed on with the
  line of each key; the package that owns it declares its keys as `Setting` values and reads it
  with `Section.read` (``SandboxConfig.from_config``, ``agent.defaults``), so an option lives in
  one file. A section must be one of `SECTIONS` (a misspelt one is an error naming file, line and
  key); its keys are checked where its owner reads it. ``load_config(path, sections=...)`` names
  the sections allowed instead and checks the keys of those given with their settings while
  loading: the CLI passes every section's (``tooltree_cli.common.config_sections()``), so a
  misspelt key is an error at once.

- a Claude Desktop / Claude Code style JSON file with a top-level ``mcpServers`` object
  (``.mcp.json``, ``claude_desktop_config.json``, ``~/.claude.json``), read unchanged: keys
  tooltree does not use are ignored there, because the file belongs to another program. Other clients'
  files are read too, as they read them (`tool_tree.config_clients`): VS Code's ``servers``, Zed's
  ``context_servers``, Cursor's, Windsurf's and Gemini CLI's ``mcpServers``, Codex CLI's TOML.

``${VAR}``, ``${VAR:-default}`` (the default when VAR is unset or empty, as in the shell) and
``${VAR-default}`` (only when unset) are expanded from the environment in ``command``, ``args``, ``env``,
``cwd``, ``url`` and ``headers``, and in string settings of sections; ``$$`` is a literal ``$``. Any other
``${`` (a default holding ``${B}``, ``${1}``, ``${VAR:?message}``) is an error rather than text left as it
was. A disabled server's variables are not looked up (its strings stay as written), and with ``using`` (the
servers a run will use) another server's unset variable is an error only once `Config.server` picks it
(`ServerConfig.unresolved`). YAML merge keys (``<<: *common``) merge a mapping, or a list of mappings, into theirs;
keys written beside them win, and a top-level key starting with ``x-`` (``x-common: &common``) is ignored, a
place to define them, as in docker compose. Relative paths (``cwd``, a ``command`` with a ``/``) resolve against
the config file's folder, and a stdio server without ``cwd`` starts in that folder, so relative ``args`` do too;
a leading ``~`` in ``command`` and ``cwd`` is the home folder, as in the shell (``args`` are the server's to read; in a
Codex file, a folder named ``~``, as Codex runs it).
Headers and environment variables no HTTP client or program could be given are refused while loading.
Every problem is a `ConfigError` whose text names the file, the line and the key. A YAML file over
`MAX_CONFIG_BYTES`, nested deeper than `MAX_DEPTH` or holding more than `MAX_NODES` values (`MAX_VALUES` with
aliases expanded) is refused before it costs the reader much. Of a JSON file (up to `MAX_JSON_CONFIG_BYTES`,
as a ``~/.claude.json`` grown with Claude Code's history may be) only the ``mcpServers`` value is read, with
the file's lines, within those same bounds (`tool_tree.config_json`); the rest is only checked to be JSON.

(Over 400 lines: what a configuration holds (servers, sections, settings) is checked here, key by key,
for both formats; how its values are read, with their lines and within bounds, is `tool_tree.config_read`'s,
and the sections' own keys live in the packages that own them.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import logging
import math
import os
import re
import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_tree.config_clients import (
    MAX_JSONC_BYTES,
    client_of,
    client_variables,
    codex_servers,
    entry_of,
    gemini_blocked,
    is_codex,
    is_jsonc,
    read_env_file,
    servers_folder,
    without_comments,
    workspace_of,
)
from tool_tree.config_json import server_maps, top_level_keys
from tool_tree.config_read import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_VALUES,
    ConfigError,
    Node,
    Reader,
    compose,
    did_you_mean,
    kind_of,
    value_shown,
)
from tool_tree.text import one_line

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_DESCRIPTION",
    "MAX_JSON_CONFIG_BYTES",
    "MAX_NODES",
    "MAX_VALUES",
    "SECTIONS",
    "Config",
    "ConfigError",
    "Section",
    "SectionSettings",
    "ServerConfig",
    "Setting",
    "load_config",
    "parse_config",
    "unmatched_filter",
]

DEFAULT_TIMEOUT = 30.0
MAX_CONFIG_BYTES = 2 * 1024 * 1024
"""The largest YAML configuration file read, and the largest ``mcpServers`` value of a JSON one, checked before
they are parsed. A config of 10,000 servers, each with its args and env, is about 1.1 MiB (the 70 servers of
LiveMCPBench's catalog: 9 KB, 127 bytes a server); the YAML reader, in pure Python to keep every value's line,
takes about 2 s a MiB of such text (before: a 10 MB file took 31 s and 870 MB before the value cap refused it)."""
MAX_JSON_CONFIG_BYTES = 128 * 1024 * 1024
"""The largest JSON configuration file read, checked before it is read: a ``~/.claude.json`` grows with Claude
Code's history to 8–100 MB. Only its ``mcpServers`` value goes through the YAML reader (`MAX_CONFIG_BYTES` and
the other bounds apply to it); the rest is checked to be JSON by the json module's C scanner and let go
(`tool_tree.config_json`). The cost is reading the file and holding its text: a 50 MB one takes 0.2–0.3 s and
107 MB at peak when ASCII, 153 MB with some CJK, 247 MB with one emoji (Python then keeps 4 bytes a
character); one at this limit, about 2.5 times that."""
MAX_CONCURRENCY = 1024
"""The most calls in flight to one server a config may allow (``servers.NAME.concurrency``)."""
MAX_DESCRIPTION = 2000
"""Characters a server's ``description`` may have. It is one line saying what the server is for, copied into
INDEX.md, the manifest, the search index and the agent's tool list (the longest of LiveMCPBench's 70
servers has 429); a 50 MB one went into all of them."""


PROTOCOLS = ("auto", "legacy")
"""The values of ``servers.NAME.protocol`` (`ServerConfig.protocol`)."""
PROBE_SECONDS = 10.0
"""How long the SDK waits for an answer to ``server/discover`` before it falls back to the ``initialize`` handshake
(``mcp.client.session.DISCOVER_TIMEOUT_SECONDS``, not imported here: the config is read without the SDK)."""


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server. Exactly one of ``command`` (stdio) and ``url`` (Streamable HTTP) is set."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    concurrency: int | None = None
    """Calls in flight to this server at most; None: the pool's (16). 1 for a server that is not safe to call
    while another of its calls runs (one that reads, changes and writes a file per call)."""
    protocol: str = "auto"
    """How the session agrees on its protocol version: ``"auto"`` (ask ``server/discover``, then fall back to the
    ``initialize`` handshake) or ``"legacy"`` (the handshake only: for a server that leaves requests it does not
    know unanswered, which makes the question cost `PROBE_SECONDS` at every start)."""
    enabled: bool = True
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    description: str = ""
    named: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """The patterns of ``include`` and ``exclude`` that stand for one exact tool name from another client's list in
    an ``mcpServers`` entry, each with that list's key and the name as written: ``{"get_[*]": ("includeTools",
    "get_*")}``. A warning about such a pattern words it with them (`unmatched_filter`)."""
    unresolved: ConfigError | None = field(default=None, repr=False, compare=False)
    """Why the server cannot be used yet: a variable one of its settings names is not set (the error names the
    file, line and key; the reference is kept as written in the setting), or gives a header or environment variable
    a value that cannot be sent. Only a server `parse_config` was told is not used (``using``) keeps it;
    `Config.server` and `Config.enabled_servers`, which pick the servers to use, raise it (before: an unset variable
    of any server, even one not used, refused the whole file)."""

    def leaves_out(self, tool: str) -> str | None:
        """Which of this server's filters leaves ``tool`` out (`filtered_out`), or None: it is offered."""
        return filtered_out(tool, self.include, self.exclude)

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


def filtered_out(tool: str, include: Sequence[str], exclude: Sequence[str]) -> str | None:
    """Which of a server's tool filters leaves ``tool`` out: ``"include"`` (there are patterns and none
    matches), ``"exclude"`` (a pattern matches), or None (the tool is kept). Patterns are shell-style
    (``search_*``), matched case-sensitively; the generator and the bridge both decide with this."""
    if include and not any(fnmatch.fnmatchcase(tool, pattern) for pattern in include):
        return "include"
    if any(fnmatch.fnmatchcase(tool, pattern) for pattern in exclude):
        return "exclude"
    return None


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

    def read(self, settings: Mapping[str, Setting]) -> dict[str, Any]:
        """The section's values, each key known and of its declared type; ``${VAR}`` expanded in strings.

        Raises:
            ConfigError: an unknown key or a value of the wrong type (with file, line and key).
        """
        out: dict[str, Any] = {}
        for k, v in self.values.items():
            key, line = f"{self.name}.{k}", self.lines.get(k)
            setting = settings.get(k)
            if setting is None:
                raise ConfigError(f"unknown key{did_you_mean(k, settings)}", file=self.source, line=line, key=key)
            kind, meaning = setting.kind, setting.meaning
            if kind is list and isinstance(v, list) and all(_scalar(x) for x in v):
                out[k] = tuple(str(x) for x in v)
            elif kind is str and _scalar(v):
                reader = Reader(self.source, self.environ)
                out[k] = reader.expand(str(v), Node(v, line), key)
                if setting.choices and out[k] not in setting.choices:
                    raise ConfigError(f"expected {meaning}, got {v!r}", file=self.source, line=line, key=key)
            elif kind is bool and isinstance(v, bool):
                out[k] = v
            elif kind is float and not isinstance(v, bool) and isinstance(v, int | float) and 0 < v < math.inf:
                out[k] = float(v)
            elif kind is int and not isinstance(v, bool) and isinstance(v, int) and v > 0:
                out[k] = v
            elif kind is list and isinstance(v, list):  # an item is not a string: say which, and what it is
                i, item = next((i, x) for i, x in enumerate(v) if not _scalar(x))
                shown = "null" if item is None else value_shown(item)
                raise ConfigError(
                    f"expected {meaning}; item {i} is {shown}, not a string", file=self.source, line=line, key=key
                )
            else:
                expected = f"expected {_expected(kind, meaning)}, got {value_shown(v)}"
                raise ConfigError(expected, file=self.source, line=line, key=key)
            if setting.check is not None and (problem := setting.check(out[k])) is not None:
                raise ConfigError(problem, file=self.source, line=line, key=key)
        return out


SECTIONS: tuple[str, ...] = ("pool", "sandbox", "agent", "serve")
"""The sections a tooltree.yaml may have besides ``servers`` (what `load_config` allows by default), by name
only: their keys are declared, and checked when read, by the modules that own them (``pool``
`tool_tree.starts`, ``sandbox`` ``sandbox.config``, ``agent`` ``agent.defaults``, ``serve``
``agent.serve.settings``), which the core does not import."""

SectionSettings = Mapping[str, Mapping[str, Setting] | None]
"""Sections allowed besides ``servers``: each name with its settings (checked while loading), or with
None (handed on; its owner checks its keys when it reads it)."""


def _scalar(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, str | int | float)


@dataclass(frozen=True)
class Config:
    servers: tuple[ServerConfig, ...]
    source: str = "<config>"
    sections: Mapping[str, Section] = field(default_factory=dict)
    """Every other top-level section (``sandbox:``, ``agent:``, …), for the package that owns it."""

    def section(self, name: str) -> Section:
        """The section called ``name`` (an empty one when the file has none)."""
        return self.sections.get(name) or Section(name, self.source)

    @property
    def file(self) -> str | None:
        """The file this config was read from; None for one `parse_config` read from text with no name."""
        return None if self.source == "<config>" else self.source

    def server(self, name: str) -> ServerConfig:
        """The server called ``name``, to use (or to say it is disabled: a disabled one needs no variable).

        Raises:
            TypeError: ``name`` is not a str (it was "'int' object is not iterable").
            ConfigError: no server has that name, or a variable it needs is not set (`ServerConfig.unresolved`).
        """
        if not isinstance(name, str):
            raise TypeError(f"name: expected a server's name (str), got {type(name).__name__} {name!r:.60}")
        for s in self.servers:
            if s.name == name:
                return _usable(s)
        raise ConfigError(
            f"no server named {name!r}{did_you_mean(name, [s.name for s in self.servers])}", file=self.source
        )

    @property
    def enabled_servers(self) -> tuple[ServerConfig, ...]:
        """The servers to use when none is named: every one not disabled.

        Raises:
            ConfigError: a variable one of them needs is not set (the first such server's, in the file's order).
        """
        return tuple(_usable(s) for s in self.servers if s.enabled)


def _usable(server: ServerConfig) -> ServerConfig:
    """``server``, to be used. Raises: ConfigError: `ServerConfig.unresolved` (a new one at each use)."""
    if (e := server.unresolved) is None:
        return server
    raise ConfigError(e.message, file=e.file, line=e.line, key=e.key)


def unmatched_filter(kind: str, pattern: str, named: Mapping[str, tuple[str, str]]) -> str:
    """What a warning says of the ``kind`` (``include`` or ``exclude``) pattern ``pattern`` of a server that matches
    none of its tools. ``named`` is the server's `ServerConfig.named`: a pattern that stands for a tool name of another
    client's list is said as that name, under that list's key (before: ``include pattern 'get_[*]' matches no tool``,
    a pattern the user never wrote, for ``"includeTools": ["get_*"]``).
    """
    if (origin := named.get(pattern)) is None:
        return f"{kind} pattern {pattern!r} matches no tool"
    key, name = origin
    return f"{key} lists exact tool names; {name!r} matches none (use {kind}: in tooltree.yaml for patterns)"


# --- loading -------------------------------------------------------------------------------------------------------

_SERVER_KEYS = {
    "command": "the program to start (stdio server)",
    "args": "a list of arguments",
    "env": "a mapping of environment variables",
    "cwd": "the working directory",
    "url": "the Streamable HTTP endpoint",
    "headers": "a mapping of HTTP headers",
    "timeout": "seconds",
    "concurrency": "calls in flight to the server at most (default 16; 1: one at a time)",
    "protocol": "auto (the default) or legacy (for a server that never answers requests it does not know)",
    "enabled": "true or false",
    "include": "a list of tool name patterns",
    "exclude": "a list of tool name patterns",
    "description": "one line saying what the server is for",
}
# Keys of the mcpServers JSON format that tooltree reads: the format's own, and tooltree's (but ``enabled``, which is
# ``disabled`` there). Others are other clients' (``autoApprove``): ignored, with a warning when close to one of these.
_JSON_SERVER_KEYS = {"command", "args", "env", "envFile", "cwd", "url", "headers", "type", "timeout", "disabled"} | (
    _SERVER_KEYS.keys() - {"enabled"}
)
_JSON_TOOL_LISTS = {
    "includeTools": "include",
    "excludeTools": "exclude",
    "disabledTools": "exclude",
    "enabled_tools": "include",  # Codex CLI's
    "disabled_tools": "exclude",
}
"""Other clients' lists of tool names in an ``mcpServers`` entry, read as tooltree's patterns (with its own): a shared
config's exclusions keep the tools out of the tree too."""
_FOREIGN_KEYS = {
    *("autoApprove", "alwaysAllow", "networkTimeout", "trust", "oauth", "authProviderType"),
    *("targetAudience", "targetServiceAccount", "tcp"),  # Gemini CLI's
    *("dev", "sandboxEnabled", "sandbox", "gallery", "version"),  # VS Code's
    *("source", "settings"),  # Zed's
}
"""Other clients' keys of an ``mcpServers`` entry that tooltree ignores without a word (not misspellings of its own)."""
_JSON_TYPES = ("stdio", "http", "streamable-http", "streamableHttp")
"""The values of an ``mcpServers`` entry's ``type`` that tooltree connects to (``sse`` and others are left out)."""


def _literal_pattern(name: str) -> str:
    """A tool name as a pattern matching it alone (``*``, ``?`` and ``[`` in it taken as themselves)."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _tool_pattern(reader: Reader, key: str, name: str, node: Node, where: str) -> str:
    """The pattern that stands for ``name`` of the list ``key`` (``includeTools``, ``disabled_tools``, …).

    Gemini CLI keeps a tool its ``includeTools`` names with arguments, ``name(...)``: an entry matches the tool it
    is, or the tool its text before a ``(`` names (``tool.startsWith(name + "(")``); an MCP tool's name holds no
    ``(`` (letters, digits, ``_``, ``-`` and ``.``), so the name before the first is the tool. Its ``excludeTools``
    matches names exactly: ``name(...)`` there leaves no tool out, in Gemini CLI as here, and a warning says so.
    """
    if "(" in name and key == "includeTools" and (tool := name.partition("(")[0]):
        return _literal_pattern(tool)
    if "(" in name and key == "excludeTools":
        logger.warning(
            "%s:%d: %s.%s: %s: Gemini CLI matches these names exactly, so an entry with arguments leaves no tool "
            "out (tooltree does the same); write the tool's name alone", reader.file, node.line,
            one_line(where, 200), key, one_line(repr(name), 80),
        )  # fmt: skip
    return _literal_pattern(name)


def _server(
    reader: Reader,
    name: str,
    body: Node,
    *,
    json_format: bool,
    used: bool,
    where: str,
    client: str = "claude",
    aliases: Mapping[str, str] | None = None,
) -> ServerConfig | None:
    """The server ``name`` of the config (at ``where``), or None for an entry of a type tooltree does not connect to
    (left out with a warning). A server that is not ``used`` keeps an unset variable's error on it
    (`ServerConfig.unresolved`); a disabled one looks up no variable. An entry of another ``client``'s file is read
    as that client's (`tool_tree.config_clients.entry_of`); an error names its keys as the file has them."""
    renamed = dict(aliases or {})
    if json_format and client != "codex":
        entry = entry_of(reader, client, where, body)
        if entry.body is None:
            return None
        body, renamed = entry.body, {**renamed, **entry.aliases}
    try:
        server = _server_entry(reader, name, body, json_format=json_format, used=used, where=where, client=client)
    except ConfigError as e:
        raise _renamed(e, renamed) from None
    if server is not None and server.unresolved is not None:
        server = dataclasses.replace(server, unresolved=_renamed(server.unresolved, renamed))
    return server


def _renamed(e: ConfigError, aliases: Mapping[str, str]) -> ConfigError:
    """``e`` naming the key as the file has it (``mcpServers.x.httpUrl``, not ``mcpServers.x.url``)."""
    key = e.key or ""
    for ours in sorted(aliases, key=len, reverse=True):
        if key == ours or key.startswith((f"{ours}.", f"{ours}[")):
            return ConfigError(e.message, file=e.file, line=e.line, key=aliases[ours] + key[len(ours) :])
    return e


def _server_entry(
    reader: Reader, name: str, body: Node, *, json_format: bool, used: bool, where: str, client: str = "claude"
) -> ServerConfig | None:
    """`_server` of an entry in tooltree's shape."""
    if not isinstance(body.value, dict):
        raise reader.error(f"expected a mapping with `command` or `url`, got {kind_of(body.value)}", body, where)
    items: dict[str, tuple[Node, Node]] = body.value
    named: dict[str, tuple[str, str]] = {}
    if not json_format:
        for k, (knode, _) in items.items():
            if k not in _SERVER_KEYS:
                raise reader.error(f"unknown key{did_you_mean(k, _SERVER_KEYS)}", knode, f"{where}.{k}")
    else:
        foreign = {k: v for k, v in items.items() if k in _JSON_TOOL_LISTS}
        for k, (knode, _) in items.items():
            if k in _JSON_SERVER_KEYS or k in _JSON_TOOL_LISTS or k in _FOREIGN_KEYS:
                continue
            if close := did_you_mean(k, _JSON_SERVER_KEYS):
                shown_key = one_line(f"{where}.{k}", 200)  # the file's text: no escape reaches the terminal
                logger.warning(
                    "%s:%d: %s: not a key tooltree reads; ignored%s", reader.file, knode.line, shown_key, close
                )
        items = {k: v for k, v in items.items() if k in _JSON_SERVER_KEYS}
        for k, (_, vnode) in foreign.items():  # after tooltree's own: their patterns and these names together
            ours = _JSON_TOOL_LISTS[k]
            names = reader.string_list(vnode, f"{where}.{k}", expand=False)
            own = reader.string_list(items[ours][1], f"{where}.{ours}", expand=False) if ours in items else ()
            if ours == "include" and not names and not own:  # an allow-list of nothing: Gemini CLI's, Codex's
                logger.warning(
                    "%s:%d: %s.%s: an empty list, so the client offers none of the server's tools; the server is "
                    "left out", reader.file, vnode.line, one_line(where, 200), k,
                )  # fmt: skip
                return None
            patterns = {n: _tool_pattern(reader, k, n, vnode, where) for n in names}
            merged = [*own, *patterns.values()]
            named.update((p, (k, n)) for n, p in patterns.items() if p not in own)
            items[ours] = (vnode, Node([Node(p, vnode.line) for p in merged], vnode.line))

    def get(k: str) -> Node | None:
        return items[k][1] if k in items else None

    if json_format and (n := get("type")) is not None:
        kind = reader.string(n, f"{where}.type")
        if kind not in _JSON_TYPES:  # one entry tooltree cannot connect to: the file's others are still served
            why = "an SSE server, which tooltree does not connect to (use its Streamable HTTP endpoint)"
            logger.warning(
                "%s:%d: %s.type: %s; the server is left out", reader.file, n.line, one_line(where, 200),
                why if kind == "sse" else f"{one_line(repr(kind), 80)} is not a type tooltree knows",
            )  # fmt: skip
            return None
    kw: dict[str, Any] = {"name": name, "named": named}
    if (n := get("enabled")) is not None:  # first: a disabled server's variables are not looked up
        kw["enabled"] = reader.boolean(n, f"{where}.enabled")
    if json_format and (n := get("disabled")) is not None:
        kw["enabled"] = not reader.boolean(n, f"{where}.disabled")
    enabled = kw.get("enabled", True)
    deferred: contextlib.AbstractContextManager[list[ConfigError]] = (
        reader.deferring(verbatim=not enabled) if not (used and enabled) else contextlib.nullcontext([])
    )
    with deferred as unset:
        server = _server_settings(reader, where, body, get, kw, unset, codex=client == "codex")
    return dataclasses.replace(server, unresolved=unset[0]) if unset else server


def _server_settings(
    reader: Reader,
    where: str,
    body: Node,
    get: Callable[[str], Node | None],
    kw: dict[str, Any],
    unset: list[ConfigError],
    *,
    codex: bool = False,
) -> ServerConfig:
    """The server of the entry ``body`` at ``where`` with its settings but ``enabled`` (already in ``kw``), read
    within `Reader.deferring`: a string may keep a reference to a variable that is not set (``unset``), or, of a
    disabled server, every reference as written. Of a ``codex`` file, ``command`` and ``cwd`` are paths as Codex
    starts the server: a leading ``~`` is a folder of that name, not the home folder, and a relative ``command``
    is found from the server's ``cwd`` (Codex changes to it, then runs the program)."""

    def kept(value: str) -> bool:  # a reference is left in the value: neither checked as a URL nor resolved as a path
        return "${" in value and (not kw.get("enabled", True) or bool(unset))

    if (n := get("command")) is not None:
        kw["command"] = reader.string(n, f"{where}.command")
    if (n := get("url")) is not None:
        kw["url"] = reader.string(n, f"{where}.url")
    if "command" in kw and not kw["command"].strip():
        raise reader.error("expected the program to start, got an empty string", get("command"), f"{where}.command")
    if ("command" in kw) == ("url" in kw):
        problem = "has both `command` and `url`" if "command" in kw else "needs `command` (stdio) or `url` (HTTP)"
        raise reader.error(f"server {problem}", body, where)
    if "url" in kw and not kept(kw["url"]) and (bad_url := _url_problem(kw["url"])) is not None:
        raise reader.error(bad_url, get("url"), f"{where}.url")
    for k, conv in (("args", reader.string_list), ("include", reader.string_list), ("exclude", reader.string_list)):
        if (n := get(k)) is not None:
            kw[k] = conv(n, f"{where}.{k}", expand=k == "args")
    for k in ("env", "headers"):
        if (n := get(k)) is not None:
            kw[k] = reader.string_map(n, f"{where}.{k}")
            check = _header_problem if k == "headers" else _env_problem
            _check_fields(reader, n, kw[k], f"{where}.{k}", check, kept, unset)
    if (n := get("envFile")) is not None and kw.get("enabled", True):  # VS Code's and Cursor's: `env` wins
        env_file = reader.string(n, f"{where}.envFile")
        if not kept(env_file):
            try:
                loaded = read_env_file(reader, env_file, n, f"{where}.envFile")
            except ConfigError as e:
                if not reader.is_deferring:
                    raise
                unset.append(e)
                loaded = None
            if loaded is not None:
                kw["env"] = {**loaded, **kw.get("env", {})}
    if (n := get("cwd")) is not None:
        kw["cwd"] = reader.string(n, f"{where}.cwd")
    for k in ("command", "args", "cwd"):  # handed to the program started: a NUL cannot be
        values = kw.get(k, ())
        for i, value in enumerate((values,) if isinstance(values, str) else values):
            if "\x00" in value:
                node = get(k)
                at = node.value[i] if k == "args" and node is not None else node
                shown = f"{where}.{k}[{i}]" if k == "args" else f"{where}.{k}"
                raise reader.error("holds a NUL character, which no program can be given", at, shown)
    for k in ("command", "cwd") if not codex else ():  # as the shell does: `~/bin/server` is in the home folder
        if k in kw and kw[k].startswith("~") and not kept(kw[k]):
            kw[k] = _home(reader, kw[k], get(k), f"{where}.{k}")
    if (n := get("description")) is not None:
        kw["description"] = reader.string(n, f"{where}.description", expand=False)
        if len(kw["description"]) > MAX_DESCRIPTION:
            count = len(kw["description"])
            problem = f"{count:,} characters; at most {MAX_DESCRIPTION:,} (one line saying what the server is for)"
            raise reader.error(problem, n, f"{where}.description")
    if (n := get("timeout")) is not None:
        kw["timeout"] = reader.number(n, f"{where}.timeout")
    if (n := get("concurrency")) is not None:
        kw["concurrency"] = reader.whole(n, f"{where}.concurrency", most=MAX_CONCURRENCY)
    if (n := get("protocol")) is not None:
        kw["protocol"] = reader.string(n, f"{where}.protocol")
        if kw["protocol"] not in PROTOCOLS and not kept(kw["protocol"]):
            raise reader.error(f"expected {_SERVER_KEYS['protocol']}, got {kw['protocol']!r}", n, f"{where}.protocol")
    if "command" in kw and ("url" in kw or "headers" in kw):
        raise reader.error("`headers` only applies to `url` servers", body, f"{where}.headers")
    if "url" in kw and any(k in kw for k in ("args", "env", "cwd")):
        bad = next(k for k in ("args", "env", "cwd") if k in kw)
        raise reader.error(f"`{bad}` only applies to `command` servers", get(bad), f"{where}.{bad}")
    if reader.folder is not None and "command" in kw:
        # Relative to the config file, not to the shell's working directory.
        if not kept(kw.get("cwd", "")):
            kw["cwd"] = str((reader.folder / kw.get("cwd", ".")).resolve())
        if "/" in kw["command"] and not os.path.isabs(kw["command"]) and not kept(kw["command"]):
            started = Path(kw["cwd"]) if codex and not kept(kw["cwd"]) else reader.folder
            resolved = (started / kw["command"]).resolve()
            # `npx -y @scope/server` is a command line, not a path: left as written, its start says so
            if not any(c.isspace() for c in kw["command"]) or resolved.exists():
                kw["command"] = str(resolved)
    return ServerConfig(**kw)


def _home(reader: Reader, path: str, node: Node | None, key: str) -> str:
    """``path`` with its leading ``~`` (the user's home folder, ``$HOME``) or ``~user`` (that user's) replaced.

    Raises:
        ConfigError: the home folder is not known (no ``$HOME``, no such user).
    """
    head, sep, rest = path.partition("/")
    home = (reader.environ.get("HOME") or os.path.expanduser(head)) if head == "~" else os.path.expanduser(head)
    if home == head:
        who = "HOME is not set" if head == "~" else f"there is no user {head[1:]!r}"
        raise reader.error(f"cannot resolve {head!r} in {path!r}: {who}", node, key)
    return home + sep + rest


_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP header's name (a token, RFC 9110 section 5.1)."""
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")
"""An HTTP header's value as the HTTP client sends it: printable ASCII, spaces inside but not at its ends."""
_FRAMING_HEADERS = {"content-length", "transfer-encoding"}
"""Headers the HTTP client sets for each request itself: one from the config would break every request."""


def _header_problem(name: str, value: str) -> str | None:
    """What is wrong with the header ``name: value`` (never showing the value: it may be a secret), or None."""
    if not _HEADER_NAME.fullmatch(name):
        return "not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~, no spaces)"
    if name.lower() in _FRAMING_HEADERS:
        return "set by the HTTP client for each request; it cannot be configured"
    if _HEADER_VALUE.fullmatch(value):
        return None
    if value != value.strip(" \t"):
        return "the value starts or ends with a space (is a variable it names empty?)"
    return "the value holds a line break, a control character or a non-ASCII character, which HTTP cannot send"


def _env_problem(name: str, value: str) -> str | None:
    """What is wrong with the environment variable ``name=value`` for a program to be started, or None."""
    if not name or "=" in name or "\x00" in name:
        return "not a valid environment variable name (it may not be empty or hold `=`)"
    if "\x00" in value:
        return "the value holds a NUL character, which no program can be given"
    return None


def _check_fields(
    reader: Reader,
    node: Node,
    fields: Mapping[str, str],
    key: str,
    problem: Callable[[str, str], str | None],
    kept: Callable[[str], bool],
    unset: list[ConfigError],
) -> None:
    """Check each ``name: value`` of the mapping ``node`` at ``key`` (``env``, ``headers``) with ``problem``; a value
    that keeps a variable's reference (unset, or its server disabled) is checked once it is set. A value's problem
    in a server the run does not use is added to ``unset``, as an unset variable's is (`Reader.deferring`).

    Raises:
        ConfigError: at the first field ``problem`` refuses, naming its line and key.
    """
    for name, value in fields.items():
        knode, vnode = node.value[name]
        if (why := problem(name, "" if kept(value) else value)) is None:
            continue
        e = reader.error(why, vnode if why.startswith("the value") else knode, f"{key}.{name}")
        if not (reader.is_deferring and why.startswith("the value")):
            raise e
        unset.append(e)


def _url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a server's address, or None."""
    from urllib.parse import urlsplit

    if not re.match(r"^https?://", url):
        return f"expected an http:// or https:// URL, got {url!r}"
    if any(c.isspace() or not c.isprintable() for c in url):
        return f"expected a URL without spaces or control characters, got {url!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- reading it checks it: a port out of range raises ValueError
    except ValueError as e:
        return f"not a valid URL ({e}): {url!r}"
    if not parts.hostname:
        return f"expected a URL with a host (http://host:port/path), got {url!r}"
    return None


def _expected(kind: type, meaning: str) -> str:
    """What a setting of ``kind`` takes, said with its meaning: "a whole number, at least 1 (…)"."""
    if kind is int:
        return f"a whole number, at least 1 ({meaning})"
    if kind is float:
        return f"a positive number ({meaning})"
    return meaning


def parse_config(
    text: str,
    *,
    source: str = "<config>",
    environ: Mapping[str, str] | None = None,
    folder: str | Path | None = None,
    sections: SectionSettings | None = None,
    using: Collection[str] | None = None,
) -> Config:
    """Parse configuration text; the format (YAML or mcpServers JSON) is detected from the content.

    Args:
        folder: where relative paths resolve (`load_config` passes the file's folder); None keeps them.
        using: the names of the servers that will be used (``generate-tree --server NAME``): only their variables
            must be set now; another server's unset one is kept on it (`ServerConfig.unresolved`) and raised when
            `Config.server` or `Config.enabled_servers` picks it. None: every enabled server is used, so an unset
            variable of any is an error here. A disabled server's variables are never looked up (its strings are
            kept as written).
        sections: the sections allowed besides ``servers``, each with its settings, read (checked) here,
            or with None, handed on for its owner to read (`Section.read`). Default: tooltree's
            `SECTIONS`, each with None; ``tooltree_cli.common.config_sections()`` has the settings of
            every one. A section of another name is an error.

    Raises:
        TypeError: ``text`` is not a str, or ``environ`` not a mapping (or None).
        ConfigError: the text is not a valid configuration.
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected the configuration's text as a str, got {type(text).__name__}")
    if isinstance(using, str | bytes):  # else "time" would use every server whose name is a part of it
        raise TypeError(f"using: expected a list of server names, got {type(using).__name__} {using!r:.60}")
    used = None if using is None else frozenset(using)
    env = dict(os.environ if environ is None else _environ(environ))
    reader = Reader(source, env, Path(folder).resolve() if folder is not None else None)
    allowed: SectionSettings = dict.fromkeys(SECTIONS) if sections is None else sections
    top: dict[str, tuple[Node, Node]] = {}
    prefix, client, aliases = "mcpServers", "claude", dict[str, str]()
    gemini_lists: dict[str, list[str]] = {}  # Gemini CLI's `mcp.allowed` and `mcp.excluded`
    text = text.removeprefix("\ufeff")  # a byte order mark (Notepad's): before, a VS Code mcp.json was read as YAML
    jsonc = is_jsonc(source) and not source.endswith(".toml")
    # JSON: an object, or (in a file with comments) a comment before it (before: a file opening with one was YAML)
    is_json = re.match(r"\s*(?:\{|/[/*])" if jsonc else r"\s*\{", text) is not None
    if is_json and jsonc and len(text) > MAX_JSONC_BYTES:
        limit = MAX_JSONC_BYTES // 2**20
        problem = f"too large: {len(text):,} characters, over the {limit} MiB a JSON file with comments may have"
        raise ConfigError(problem, file=source)
    if is_json and jsonc:  # VS Code's, Zed's, Gemini CLI's: comments and trailing commas, lines kept
        text = without_comments(text, source)
    if is_json and _tooltree_json(text):  # tooltree's own settings, written as JSON: the YAML reader's
        is_json, text, reader.json = False, _as_yaml(text), True
    if not is_json and is_codex(text, source):  # Codex CLI's config.toml
        if len(text) > MAX_CONFIG_BYTES:
            raise ConfigError(_too_large(f"{len(text):,} characters"), file=source)
        servers_node, aliases = codex_servers(text, source, reader)
        prefix, client, json_format = "mcp_servers", "codex", True
    elif is_json:  # JSON: its servers alone are read, and bounded as a whole YAML file is
        if len(text) > MAX_JSON_CONFIG_BYTES:
            raise ConfigError(_too_large_json(f"{len(text):,} characters", source), file=source)
        maps = server_maps(text, source)
        prefix, spans = maps.key, maps.spans
        reader.json = True
        # VS Code's inputs go through the YAML reader too (before: unbounded, and 60 MB of them took 38 s)
        read = [*spans, *(span for span in (maps.inputs, maps.settings) if span is not None)]
        if (size := sum(span.end - span.start for span in read)) > MAX_CONFIG_BYTES:
            too_large = _too_large(f"{size:,} characters", "its servers")
            raise ConfigError(too_large, file=source, line=spans[0].line, key=prefix)
        nodes = [  # a user's (top-level), then a project's (`claude mcp add`'s local scope), which wins
            reader.to_node(
                compose(_as_yaml(text[span.start : span.end]), source, line=span.line, column=span.column, depth=1),
                prefix,
                depth=2,
            )
            for span in spans
        ]
        servers_node = nodes[0]
        for node in nodes[1:]:
            if isinstance(servers_node.value, dict) and isinstance(node.value, dict):
                servers_node.value.update(node.value)
            else:  # the one that is not a mapping is named below
                servers_node = node if isinstance(servers_node.value, dict) else servers_node
        json_format = True
        client = client_of(source, prefix, servers_node.value if isinstance(servers_node.value, dict) else {})
        inputs = None
        if (span := maps.inputs) is not None:
            inputs_yaml = compose(_as_yaml(text[span.start : span.end]), source, line=span.line, column=span.column)
            inputs = reader.to_node(inputs_yaml, "inputs", depth=2)
        if client == "gemini" and (span := maps.settings) is not None:  # its `mcp.allowed` and `mcp.excluded`
            settings_yaml = compose(_as_yaml(text[span.start : span.end]), source, line=span.line, column=span.column)
            gemini_lists = gemini_blocked(reader, reader.to_node(settings_yaml, "mcp", depth=2))
        workspace = workspace_of(source, env)
        reader.client = client_variables(client, source, env, inputs, workspace)
    else:
        if len(text) > MAX_CONFIG_BYTES:  # characters: a text within the limit in bytes is within it here
            raise ConfigError(_too_large(f"{len(text):,} characters"), file=source)
        root_yaml = compose(text, source)
        if root_yaml is None:
            raise ConfigError("the file is empty; expected a `servers:` mapping", file=source)
        root = reader.to_node(root_yaml)
        if not isinstance(root.value, dict):
            raise reader.error(f"expected a mapping at the top level, got {kind_of(root.value)}", root)
        top = root.value
        json_format = "mcpServers" in top and "servers" not in top
        if json_format:
            servers_node = top["mcpServers"][1]
        else:
            known = {"servers", *allowed}
            for k, (knode, _) in top.items():
                if k not in known and not k.startswith("x-"):
                    raise reader.error(f"unknown key{did_you_mean(k, known)}", knode, k)
            if "servers" not in top:
                raise reader.error("expected a `servers:` mapping", root)
            servers_node = top["servers"][1]
    started = servers_folder(reader.folder, Path(source).name, env) if json_format and reader.folder else None
    if started is not None:  # `.vscode/mcp.json`'s servers start in the workspace, `~/.claude.json`'s where tooltree is
        reader.folder = started
    if not isinstance(servers_node.value, dict):
        key = prefix if json_format else "servers"
        raise reader.error(f"expected a mapping of server names, got {kind_of(servers_node.value)}", servers_node, key)
    handed_on: dict[str, Section] = {}
    for name, (knode, vnode) in top.items() if not json_format else ():
        if name == "servers" or name.startswith("x-"):  # `x-common: &common`: a place for anchors, as in compose
            continue
        if not isinstance(vnode.value, dict):
            raise reader.error(f"expected a mapping of {name} settings, got {kind_of(vnode.value)}", vnode, name)
        items: dict[str, tuple[Node, Node]] = vnode.value
        handed_on[name] = Section(
            name,
            source,
            knode.line,
            values={k: _plain(v) for k, (_, v) in items.items()},
            lines={k: kn.line for k, (kn, _) in items.items()},
            environ=env,
        )
        if (settings := allowed[name]) is not None:
            handed_on[name].read(settings)
    servers = []
    for name, (name_node, body) in servers_node.value.items():
        if not name.strip():
            raise reader.error("server names must not be empty", name_node, "servers")
        only, excluded = gemini_lists.get("allowed"), gemini_lists.get("excluded", [])
        if (only and name not in only) or name in excluded:
            setting = "mcp.excluded names it" if name in excluded else "mcp.allowed does not name it"
            logger.warning(
                "%s:%d: %s: Gemini CLI does not start it (%s); it is left out", source, name_node.line,
                one_line(f"{prefix}.{name}", 200), setting,
            )  # fmt: skip
            continue
        server = _server(
            reader, name, body, json_format=json_format, used=used is None or name in used,
            where=f"{prefix}.{name}" if json_format else f"servers.{name}", client=client, aliases=aliases,
        )  # fmt: skip
        if server is None:
            continue
        if starts_tooltree_serve(server):  # a client's config (`claude mcp add` wrote it) listing tooltree itself
            logger.warning(
                "%s:%d: %s starts `tooltree serve` itself; it is left out (tooltree would list and proxy a copy of "
                "itself)",
                source,
                name_node.line,
                name,
            )
            continue
        servers.append(server)
    return Config(servers=tuple(servers), source=source, sections=handed_on)


def _tooltree_json(text: str) -> bool:
    """Whether the JSON ``text`` is tooltree's own configuration: ``servers`` beside a section of tooltree's
    (``sandbox``, ``agent``, …), which no other client's file has. Read as YAML (which JSON is), its sections are
    read and its keys checked; before, it was taken for VS Code's mcp.json and its sections dropped without a word.
    """
    if len(text) > MAX_CONFIG_BYTES:
        return False
    found = top_level_keys(text, ("servers", *SECTIONS))
    return "servers" in found and len(found) > 1


_SURROGATE_PAIR = re.compile(r"(\\+)u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)
_YAML_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_YAML_UNPRINTABLE = re.compile("[\x7f-\x84\x86-\x9f\ufffe\uffff]")
"""Characters JSON takes in a string as they are and YAML refuses anywhere (before: a ReaderError traceback)."""
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"([ \t\r\n]*+:)?')
"""A JSON string and, when it is a key, the space and colon after it (group 1)."""
_LONGEST_SIMPLE_KEY = 1000
"""A key longer than this, with the space before its colon, is not one YAML's flow mapping reads (1,024 at most)."""


def _as_yaml(json_text: str) -> str:
    """JSON text the YAML reader reads as JSON does: a character past U+FFFF escaped as a surrogate pair (Python's
    ``json.dump`` writes an emoji so) is that character, not two lone surrogates; NEL, U+2028 and U+2029, which
    YAML takes for line breaks (a key broken, a value's NEL a space), are escaped, and so are the characters YAML
    refuses (DEL, C1 controls). A key that is long, or apart from its colon by a line break, is made YAML's explicit
    key (``? "key": value``): before, either was "invalid YAML: … expected ',' or '}', but got ':'" for valid JSON.
    Lines stay where they were."""

    def joined(m: re.Match[str]) -> str:
        slashes = m.group(1)
        if len(slashes) % 2 == 0:  # the backslash before ``u`` is itself escaped: text, not an escape
            return m.group(0)
        pair = chr(0x10000 + ((int(m.group(2), 16) - 0xD800) << 10) + (int(m.group(3), 16) - 0xDC00))
        return slashes[:-1] + pair

    def keyed(m: re.Match[str]) -> str:
        colon = m.group(1)
        if colon is None or (len(m.group()) <= _LONGEST_SIMPLE_KEY and "\n" not in colon and "\r" not in colon):
            return m.group()
        return "? " + m.group()

    text = _SURROGATE_PAIR.sub(joined, json_text).translate(_YAML_LINE_BREAKS)
    text = _YAML_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return _JSON_STRING.sub(keyed, text)


_TOOLTREE_MODULES = (("-m", "tooltree_cli.main"), ("-m", "tooltree_cli"))


def starts_tooltree_serve(server: ServerConfig) -> bool:
    """Whether ``server`` is a stdio entry that runs ``tooltree serve`` (``tooltree`` or ``python -m tooltree_cli``)."""
    if server.command is None:
        return False
    program = os.path.basename(server.command).removesuffix(".exe")
    if program == "tooltree":
        rest = server.args
    elif re.fullmatch(r"python[0-9.]*", program) and server.args[:2] in _TOOLTREE_MODULES:
        rest = server.args[2:]
    else:
        return False
    return rest[:1] == ("serve",)


def _plain(node: Node) -> Any:
    """A node's value without line numbers."""
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, (_, v) in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.value


def _too_large(size: str, what: str = "a configuration") -> str:
    limit = MAX_CONFIG_BYTES // 2**20
    return f"too large: {size}, over the {limit} MiB {what} may have (10,000 servers take about 1.1 MiB)"


def _too_large_json(size: str, source: str) -> str:
    return (
        f"too large: {size}, over the {MAX_JSON_CONFIG_BYTES // 2**20} MiB a JSON configuration may have (and "
        f"{MAX_CONFIG_BYTES // 2**20} MiB its mcpServers); to keep its servers alone: "
        f"jq '{{mcpServers}}' {shlex.quote(source)} > .mcp.json"
    )


def load_config(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    sections: SectionSettings | None = None,
    using: Collection[str] | None = None,
) -> Config:
    """Read and parse a configuration file (relative paths in it resolve against its folder).

    A section other than ``servers`` and tooltree's `SECTIONS` is an error; a section's keys are checked
    where it is read (``SandboxConfig.from_config(config)``, ``BackgroundPool(config)``, ``Agent(config)``).
    To check every key now, as the CLI does, pass ``sections=tooltree_cli.common.config_sections()``;
    ``sections`` and ``using`` (the servers whose variables must be set now) are as for `parse_config`.

    Raises:
        TypeError: ``path`` is not a str or a path (``None``, bytes), or ``environ`` not a mapping.
        ConfigError: the file cannot be read or is not a valid configuration.
    """
    given: object = path
    if not isinstance(given, str | os.PathLike) or isinstance(os.fspath(given), bytes):
        raise TypeError(f"path: expected the configuration file's path (str or Path), got {type(given).__name__}")
    p = Path(path)
    env = _environ(environ) if environ is not None else None  # checked before the file is read
    text = _read(p)
    return parse_config(text, source=str(p), environ=env, folder=p.parent, sections=sections, using=using)


_BYTE_ORDER_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32 text (byte order mark FF FE 00 00)"),
    (b"\x00\x00\xfe\xff", "UTF-32 text (byte order mark 00 00 FE FF)"),
    (b"\xff\xfe", "UTF-16 text (byte order mark FF FE, as Windows PowerShell's `>` writes)"),
    (b"\xfe\xff", "UTF-16 text (byte order mark FE FF)"),
)


def _wide_encoding(data: bytes) -> str | None:
    """What ``data`` is when it is UTF-16 or UTF-32 text, by its byte order mark or, without one, by the NUL bytes
    beside each ASCII character of its start (which UTF-8 reads as NUL characters); else None."""
    for mark, what in _BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return what
    head = data[:64]
    if len(head) >= 4 and b"\x00" in head and (not any(head[1::2]) or not any(head[0::2])):
        return "UTF-16 text (a NUL byte beside each character)"
    return None


def _environ(environ: object) -> Mapping[str, str]:
    """Raises: TypeError: ``environ`` is not a mapping (it was "'int' object is not iterable")."""
    if not isinstance(environ, Mapping):
        raise TypeError(f"environ: expected a mapping of variable names to values, got {type(environ).__name__}")
    return environ


def _read(p: Path) -> str:
    """The text of the file ``p``, read only when within the limits (its bytes are let go on return).

    Raises:
        ConfigError: the file cannot be read, is larger than its format may be, or is not UTF-8. Of a file that is
            missing or a folder, the ``OSError`` is its ``__cause__``: the message names no option (before: "create
            one, or pass --config PATH" from Python too); the CLI adds what to do.
    """
    try:
        if (size := p.stat().st_size) > MAX_JSON_CONFIG_BYTES:  # refused before it is opened
            raise ConfigError(_too_large_json(f"{size:,} bytes", str(p)), file=str(p))
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size  # 0 for a pipe; checked again: it may have grown
            if size > MAX_JSON_CONFIG_BYTES:
                raise ConfigError(_too_large_json(f"{size:,} bytes", str(p)), file=str(p))
            data = f.read(MAX_CONFIG_BYTES + 1)  # no more unless it is JSON: a YAML file past it is refused
            is_json = re.match(rb"[ \t\r\n]*\{", data) is not None
            if len(data) > MAX_CONFIG_BYTES and is_json:
                data += f.read(MAX_JSON_CONFIG_BYTES + 1 - len(data))
    except FileNotFoundError as e:  # the cause stays: the CLI says what to do from it (`tooltree_cli.common.load`)
        raise ConfigError("no such file", file=str(p)) from e
    except IsADirectoryError as e:
        raise ConfigError("is a folder, not a configuration file", file=str(p)) from e
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    limit = MAX_JSON_CONFIG_BYTES if is_json else MAX_CONFIG_BYTES
    if len(data) > limit:
        shown = f"{size:,} bytes" if size > limit else f"more than {limit:,} bytes"
        raise ConfigError(_too_large_json(shown, str(p)) if is_json else _too_large(shown), file=str(p))
    if (other := _wide_encoding(data)) is not None:  # before: "byte 0xff in column 1", or invalid JSON at column 2
        raise ConfigError(f"not UTF-8 text: {other} (save the file as UTF-8)", file=str(p), line=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = data.count(b"\n", 0, e.start) + 1, e.start - data.rfind(b"\n", 0, e.start)
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[e.start]:02x} in column {column} (save the file as UTF-8)",
            file=str(p),
            line=line,
        ) from None
