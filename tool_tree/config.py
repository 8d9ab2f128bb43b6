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
``cwd``, ``url``, ``headers`` and ``protocol``, and in string settings of sections (not in ``include``, ``exclude`` or
``description``, copied into the tree as written: a warning names a reference there); ``$$`` is a literal ``$``.
Any other ``${`` (a default holding ``${B}``, ``${1}``, ``${VAR:?message}``) is an error rather than text left as
it was. A disabled server's variables are not looked up (its strings stay as written), and with ``using`` (the
servers a run will use) another server's unset variable is an error only once `Config.server` picks it
(`ServerConfig.unresolved`). YAML merge keys (``<<: *common``) merge a mapping, or a list of mappings, into theirs;
keys written beside them win, and a top-level key starting with ``x-`` (``x-common: &common``) is ignored, a
place to define them, as in docker compose. Relative paths (``cwd``, a ``command`` with a ``/``) resolve against
the config file's folder, and a stdio server without ``cwd`` starts in that folder, so relative ``args`` do too;
a leading ``~`` in ``command`` and ``cwd`` is the home folder, as in the shell (``args`` are the server's to read; in a
Codex file, a folder named ``~``, as Codex runs it).
Headers and environment variables no HTTP client or program could be given are refused while loading.
Every problem is a `ConfigError` whose text names the file, the line and the key; every one of a file that the
others leave meaningful (each server's entry, each section's key, each unknown top-level key and duplicate key) is
reported at once, in one `ConfigError` (its ``also``), a YAML syntax error or a top level that is no mapping alone.
A YAML file over `MAX_CONFIG_BYTES`, nested deeper than `MAX_DEPTH` or holding more than `MAX_NODES` values
(`MAX_VALUES` with aliases expanded) is refused before it costs the reader much. Of a JSON file (up to
`MAX_JSON_CONFIG_BYTES`, as a ``~/.claude.json`` grown with Claude Code's history may be) only the ``mcpServers``
value is read, with the file's lines, within those same bounds (`tool_tree.config_json`); the rest is only checked
to be JSON.

This module reads a file's top level (its format, its sections, its servers) into a `Config`; the rest is split
by job: a file's text and JSON made ready for the reader (`tool_tree.config_text`), the reader itself, with every
value's line and within bounds (`tool_tree.config_read`, its YAML composer `tool_tree.config_compose`), a JSON
file's server maps (`tool_tree.config_json`), other clients' files (`tool_tree.config_clients`, Codex CLI's
`tool_tree.config_codex`), a server's entry read into a `ServerConfig` (`tool_tree.config_entries`, its values
checked by `tool_tree.config_checks`), the `ServerConfig` it makes (`tool_tree.config_servers`) and the sections
handed on (`tool_tree.config_sections`); the sections' own keys live in the packages that own them. Import the
names from here.

(Over 400 lines: the top level of every format is read here, in one place, with the errors of a file kept together.)
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tool_tree.config_clients import (
    MAX_JSONC_BYTES,
    client_of,
    client_variables,
    gemini_blocked,
    is_jsonc,
    servers_folder,
    without_comments,
    workspace_of,
)
from tool_tree.config_codex import codex_servers, is_codex
from tool_tree.config_compose import MAX_NODES, compose
from tool_tree.config_entries import server_of
from tool_tree.config_json import server_maps
from tool_tree.config_read import (
    MAX_DEPTH,
    MAX_VALUES,
    ConfigError,
    Node,
    Reader,
    did_you_mean,
    joined,
    kind_of,
    lone_surrogate,
)
from tool_tree.config_sections import SECTIONS, Section, SectionSettings, Setting, plain, warn_ignored
from tool_tree.config_servers import DEFAULT_TIMEOUT, MAX_DESCRIPTION, ServerConfig, unmatched_filter
from tool_tree.config_servers import MAX_CONCURRENCY as MAX_CONCURRENCY  # these five: imported from here elsewhere
from tool_tree.config_servers import PROBE_SECONDS as PROBE_SECONDS
from tool_tree.config_servers import PROTOCOLS as PROTOCOLS
from tool_tree.config_servers import filtered_out as filtered_out
from tool_tree.config_servers import setting_named as setting_named
from tool_tree.config_servers import starts_tooltree_serve as starts_tooltree_serve
from tool_tree.config_text import (
    MAX_CONFIG_BYTES,
    MAX_JSON_CONFIG_BYTES,
    as_yaml,
    empty_json,
    is_tooltree_json,
    over_the_json_limit,
    over_the_limit,
    read_text,
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
        """The server called ``name``, to use (or to say it is disabled: a disabled one needs no variable). Raises:
        TypeError: ``name`` is not a str (it was "'int' object is not iterable"). ConfigError: no server has that
        name, or a variable it needs is not set (`ServerConfig.unresolved`)."""
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
        """The servers to use when none is named: every one not disabled. Raises: ConfigError: a variable one of them
        needs is not set (the first such server's, in the file's order)."""
        return tuple(_usable(s) for s in self.servers if s.enabled)

    @property
    def offered_servers(self) -> tuple[ServerConfig, ...]:
        """Every server not disabled, with any whose variable is not set (`ServerConfig.unresolved`): what a session
        starting servers at their first call offers (`tool_tree.pool.ServerPool`); such a server's calls fail with
        the error (before: one server's unset token stopped every script, even one using only the others)."""
        return tuple(s for s in self.servers if s.enabled)


def _usable(server: ServerConfig) -> ServerConfig:
    """``server``, to be used. Raises: ConfigError: `ServerConfig.unresolved` (a new one at each use)."""
    if (e := server.unresolved) is None:
        return server
    raise ConfigError(e.message, file=e.file, line=e.line, key=e.key)


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
    try:
        config = _parsed(text, reader, source, env, allowed, used)
    except _Stopped:
        raise joined(reader.problems) from None
    except ConfigError as e:  # one that stops the reading: after those found before it
        if not reader.problems:
            raise
        raise joined([*reader.problems, e]) from None
    if reader.problems:  # every independent error of the file at once (`Reader.kept`)
        raise joined(reader.problems)
    return config


class _Stopped(Exception):
    """The errors kept so far leave nothing more to read (`_parsed`)."""


def _parsed(
    text: str,
    reader: Reader,
    source: str,
    env: dict[str, str],
    allowed: SectionSettings,
    used: frozenset[str] | None,
) -> Config:
    """`parse_config` of ``text`` with ``reader``: an error of a part the rest does not depend on is kept in
    ``reader.problems`` (`Reader.kept`); one that makes the rest meaningless is raised."""
    top: dict[str, tuple[Node, Node]] = {}
    prefix, client, aliases, key_of = "mcpServers", "claude", dict[str, str](), dict[str, str]()
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
        if not text.strip():  # comments alone (before: "invalid JSON: Expecting value")
            raise empty_json(source)
    if is_json and is_tooltree_json(text):  # tooltree's own settings, written as JSON: the YAML reader's
        is_json, text, reader.json = False, as_yaml(text), True
    if not is_json and is_codex(text, source):  # Codex CLI's config.toml
        if len(text) > MAX_CONFIG_BYTES:
            raise ConfigError(over_the_limit(f"{len(text):,} characters"), file=source)
        servers_node, aliases = codex_servers(text, source, reader)
        prefix, client, json_format = "mcp_servers", "codex", True
    elif is_json:  # JSON: its servers alone are read, and bounded as a whole YAML file is
        if len(text) > MAX_JSON_CONFIG_BYTES:
            raise ConfigError(over_the_json_limit(f"{len(text):,} characters", source), file=source)
        maps = server_maps(text, source)
        prefix, spans = maps.key, maps.spans
        reader.json = True
        # VS Code's inputs go through the YAML reader too (before: unbounded, and 60 MB of them took 38 s)
        read = [*spans, *(span for span in (maps.inputs, maps.settings) if span is not None)]
        if (size := sum(span.end - span.start for span in read)) > MAX_CONFIG_BYTES:
            too_large = over_the_limit(f"{size:,} characters", "its servers")
            raise ConfigError(too_large, file=source, line=spans[0].line, key=prefix)
        nodes = [  # a user's (top-level), then a project's (`claude mcp add`'s local scope), which wins
            (reader.to_node(compose(as_yaml(text[span.start : span.end]), source, line=span.line, column=span.column,
                                    depth=1), key, depth=2), key)
            for span, key in maps.named_spans()
        ]  # fmt: skip
        servers_node, map_key = nodes[0]
        for node, key in nodes[1:]:
            if isinstance(servers_node.value, dict) and isinstance(node.value, dict):
                servers_node.value.update(node.value)
            elif isinstance(servers_node.value, dict):  # the one that is not a mapping is named below
                servers_node, map_key = node, key
        # a server as the file writes it: a project's `projects["/folder"].mcpServers.NAME` (before: `mcpServers.NAME`)
        key_of = {name: key for node, key in nodes if isinstance(node.value, dict) for name in node.value}
        json_format = True
        client = client_of(source, prefix, servers_node.value if isinstance(servers_node.value, dict) else {})
        inputs = None
        if (span := maps.inputs) is not None:
            inputs_yaml = compose(as_yaml(text[span.start : span.end]), source, line=span.line, column=span.column)
            inputs = reader.to_node(inputs_yaml, "inputs", depth=2)
        if client == "gemini" and (span := maps.settings) is not None:  # its `mcp.allowed` and `mcp.excluded`
            settings_yaml = compose(as_yaml(text[span.start : span.end]), source, line=span.line, column=span.column)
            gemini_lists = gemini_blocked(reader, reader.to_node(settings_yaml, "mcp", depth=2))
        workspace = workspace_of(source, env)
        reader.client = client_variables(client, source, env, inputs, workspace)
    else:
        if len(text) > MAX_CONFIG_BYTES:  # characters: a text within the limit in bytes is within it here
            raise ConfigError(over_the_limit(f"{len(text):,} characters"), file=source)
        root = None if (root_yaml := compose(text, source)) is None else reader.to_node(root_yaml)
        if (root is None or root.value is None) and source.endswith((".json", ".jsonc")):  # before: told of `servers:`
            raise empty_json(source, "is empty" if root is None else "holds null")
        if root is None:
            raise ConfigError("the file is empty; expected a `servers:` mapping", file=source)
        if root.value is None:  # `---` alone, or `null`: before, "expected a mapping at the top level, got nothing"
            raise ConfigError("the file holds no settings; expected a `servers:` mapping", file=source)
        if not isinstance(root.value, dict):
            raise reader.error(f"expected a mapping at the top level, got {kind_of(root.value)}", root)
        top = root.value
        json_format = "mcpServers" in top and "servers" not in top
        if json_format:
            servers_node = top["mcpServers"][1]
            warn_ignored(source, {k: knode.line for k, (knode, _) in top.items() if k in allowed})
        else:
            known = {"servers", *allowed}
            for k, (knode, _) in top.items():
                if k not in known and not k.startswith("x-"):
                    reader.add(reader.error(f"unknown key{did_you_mean(k, known, unknown=True)}", knode, k))
            if "servers" not in top and not reader.problems:  # else a misspelt `servers:` is among them
                raise reader.error("expected a `servers:` mapping", root)
            if "servers" not in top:
                raise _Stopped
            servers_node = top["servers"][1]
    started = servers_folder(reader.folder, Path(source).name, env) if json_format and reader.folder else None
    if started is not None:  # `.vscode/mcp.json`'s servers start in the workspace, `~/.claude.json`'s where tooltree is
        reader.folder = started
    if not isinstance(servers_node.value, dict):
        key = map_key if is_json else prefix if json_format else "servers"
        hint = ""
        if isinstance(servers_node.value, list) and not reader.json:  # `- name: crm`, as some tools list them
            first = servers_node.value[0].value if servers_node.value else None
            named = first.get("name", (None, Node(None, None)))[1].value if isinstance(first, dict) else first
            name = one_line(named, 40) if isinstance(named, str) and named.strip() else "crm"
            hint = f" (write each server as its name and a colon, `{name}:`, its settings indented under it)"
            hint = hint if servers_node.value else " (write `servers: {}` for none yet)"
        got = kind_of(servers_node.value)
        raise reader.error(f"expected a mapping of server names, got {got}{hint}", servers_node, key)
    handed_on: dict[str, Section] = {}
    for name, (knode, vnode) in top.items() if not json_format else ():
        if name == "servers" or name.startswith("x-") or name not in allowed:  # `x-common: &common`: for anchors
            continue
        if not isinstance(vnode.value, dict):
            reader.add(reader.error(f"expected a mapping of {name} settings, got {kind_of(vnode.value)}", vnode, name))
            continue
        items: dict[str, tuple[Node, Node]] = vnode.value
        handed_on[name] = Section(
            name,
            source,
            knode.line,
            values={k: plain(v) for k, (_, v) in items.items()},
            lines={k: kn.line for k, (kn, _) in items.items()},
            written={k: v.text for k, (_, v) in items.items() if v.text is not None and not reader.json},
            environ=env,
        )
        if (settings := allowed[name]) is not None:
            with reader.kept():
                handed_on[name].read(settings, unset_kept=True)  # a variable is needed by the command reading it
    servers = []
    for name, (name_node, body) in servers_node.value.items():
        if not name.strip():  # named as the file has it (before: `servers` in an `mcpServers` file too)
            reader.add(reader.error("server names must not be empty", name_node, prefix if json_format else "servers"))
            continue
        if (half := lone_surrogate(name)) is not None:
            reader.add(reader.error(f"a server's name {half}", name_node, prefix if json_format else "servers"))
            continue
        only, excluded = gemini_lists.get("allowed"), gemini_lists.get("excluded", [])
        if (only and name not in only) or name in excluded:
            setting = "mcp.excluded names it" if name in excluded else "mcp.allowed does not name it"
            logger.warning(
                "%s:%d: %s: Gemini CLI does not start it (%s); it is left out", source, name_node.line,
                one_line(f"{prefix}.{name}", 200), setting,
            )  # fmt: skip
            continue
        server = None
        with reader.kept():  # each server's errors, and the next server read
            server = server_of(
                reader, name, body, json_format=json_format, used=used is None or name in used,
                where=f"{key_of.get(name, prefix)}.{name}" if json_format else f"servers.{name}", client=client,
                aliases=aliases,
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
    ``sections`` and ``using`` (the servers whose variables must be set now; ``()``: none, as `exec`, `serve`
    and `agent` read it, see `Config.offered_servers`) are as for `parse_config`. Raises: TypeError: ``path`` is not
    a str or a path (``None``, bytes), or ``environ`` not a mapping. ConfigError: the file cannot be read or is not a
    valid configuration."""
    given: object = path
    if not isinstance(given, str | os.PathLike) or isinstance(os.fspath(given), bytes):
        raise TypeError(f"path: expected the configuration file's path (str or Path), got {type(given).__name__}")
    p = Path(path)
    env = _environ(environ) if environ is not None else None  # checked before the file is read
    text = read_text(p)
    return parse_config(text, source=str(p), environ=env, folder=p.parent, sections=sections, using=using)


def _environ(environ: object) -> Mapping[str, str]:
    """Raises: TypeError: ``environ`` is not a mapping (it was "'int' object is not iterable")."""
    if not isinstance(environ, Mapping):
        raise TypeError(f"environ: expected a mapping of variable names to values, got {type(environ).__name__}")
    return environ
