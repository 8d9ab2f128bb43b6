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
  tooltree does not use are ignored there, because the file belongs to another program.

``${VAR}`` and ``${VAR:-default}`` are expanded from the environment in ``command``, ``args``,
``env``, ``cwd``, ``url`` and ``headers``, and in string settings of sections; ``$$`` is a literal
``$``. Relative paths (``cwd``, a ``command`` with a ``/``) resolve against the config file's folder,
and a stdio server without ``cwd`` starts in that folder, so relative ``args`` do too. Every
problem is a `ConfigError` whose text names the file, the line and the key.

(Over 400 lines: both formats go through one reader that keeps every value's line, so every error
can name it; the sections' own keys live in the packages that own them.)
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT = 30.0
MAX_VALUES = 1_000_000
"""Values (mappings, lists, scalars) a configuration may hold, its YAML aliases expanded: 50 times a config of
ten thousand servers, and a bound on what a file of nested aliases (a "billion laughs") can make the reader build."""


class ConfigError(Exception):
    """The configuration is invalid. ``str()`` is one line: ``file:line: key: problem``."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, key: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.key = key
        where = file or "<config>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


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
    enabled: bool = True
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    description: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


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
                raise ConfigError(f"unknown key{_did_you_mean(k, settings)}", file=self.source, line=line, key=key)
            kind, meaning = setting.kind, setting.meaning
            if kind is list and isinstance(v, list) and all(_scalar(x) for x in v):
                out[k] = tuple(str(x) for x in v)
            elif kind is str and _scalar(v):
                reader = _Reader(self.source, self.environ)
                out[k] = reader.expand(str(v), _Node(v, line), key)
                if setting.choices and out[k] not in setting.choices:
                    raise ConfigError(f"expected {meaning}, got {v!r}", file=self.source, line=line, key=key)
            elif kind is bool and isinstance(v, bool):
                out[k] = v
            elif kind is float and not isinstance(v, bool) and isinstance(v, int | float) and 0 < v < math.inf:
                out[k] = float(v)
            elif kind is int and not isinstance(v, bool) and isinstance(v, int) and v > 0:
                out[k] = v
            else:
                expected = f"expected {_expected(kind, meaning)}, got {_shown(v)}"
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

    def server(self, name: str) -> ServerConfig:
        """Raises: ConfigError: no server has that name."""
        for s in self.servers:
            if s.name == name:
                return s
        raise ConfigError(
            f"no server named {name!r}{_did_you_mean(name, [s.name for s in self.servers])}", file=self.source
        )

    @property
    def enabled_servers(self) -> tuple[ServerConfig, ...]:
        return tuple(s for s in self.servers if s.enabled)


# --- loading -------------------------------------------------------------------------------------------------------

_SERVER_KEYS = {
    "command": "the program to start (stdio server)",
    "args": "a list of arguments",
    "env": "a mapping of environment variables",
    "cwd": "the working directory",
    "url": "the Streamable HTTP endpoint",
    "headers": "a mapping of HTTP headers",
    "timeout": "seconds",
    "enabled": "true or false",
    "include": "a list of tool name patterns",
    "exclude": "a list of tool name patterns",
    "description": "one line saying what the server is for",
}
# Keys of the mcpServers JSON format that tooltree reads; others there are ignored.
_JSON_SERVER_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type", "timeout", "disabled"}
_VAR = re.compile(r"\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})")


@dataclass
class _Node:
    """A parsed value with the line it came from (1-based)."""

    value: Any
    line: int | None


class _Reader:
    def __init__(self, file: str, environ: Mapping[str, str], folder: Path | None = None):
        self.file = file
        self.environ = environ
        self.folder = folder
        self.values = 0  # values read so far (`to_node`), aliases counted each time they are used

    def error(self, message: str, node: _Node | None, key: str | None = None) -> ConfigError:
        return ConfigError(message, file=self.file, line=node.line if node else None, key=key)

    def to_node(self, yn: Any, key: str | None = None) -> _Node:
        """A composed YAML node as `_Node` values, each with its line; ``key`` names it in errors.

        Raises:
            ConfigError: a key that is not a string, a duplicate key, or a tag no safe loader knows.
        """
        import yaml
        from yaml.constructor import ConstructorError, SafeConstructor

        line = yn.start_mark.line + 1
        self.values += 1
        if self.values > MAX_VALUES:
            # Aliases are expanded here: a few lines of `&a [*b, *b, …]` can stand for billions of values.
            raise self.error(
                f"the file holds more than {MAX_VALUES:,} values once its YAML aliases (*name) are expanded",
                _Node(None, line),
                key,
            )
        if isinstance(yn, yaml.MappingNode):
            out: dict[str, tuple[_Node, _Node]] = {}
            for k, v in yn.value:
                knode = self.to_node(k, key)
                if not isinstance(knode.value, str):
                    raise self.error(f"keys must be strings, got {knode.value!r}", knode, key)
                if knode.value in out:
                    raise self.error("duplicate key", knode, f"{key}.{knode.value}" if key else knode.value)
                out[knode.value] = (knode, self.to_node(v, f"{key}.{knode.value}" if key else knode.value))
            return _Node(out, line)
        if isinstance(yn, yaml.SequenceNode):
            return _Node([self.to_node(v, f"{key}[{i}]" if key else f"[{i}]") for i, v in enumerate(yn.value)], line)
        assert isinstance(yn, yaml.ScalarNode)
        if yn.tag == "tag:yaml.org,2002:str":
            return _Node(yn.value, line)
        # Constructed directly, not re-serialized and loaded: an empty value (`servers:` and nothing
        # after it) has no text of its own, and serializing it alone is not valid YAML.
        try:
            value = SafeConstructor().construct_object(yn, deep=True)
        except ConstructorError as e:
            raise self.error(f"invalid YAML: {e.problem or e}", _Node(None, line), key) from None
        except (ValueError, TypeError, KeyError, AttributeError):  # an explicit tag on text it does not fit
            tag = yn.tag.removeprefix("tag:yaml.org,2002:")
            raise self.error(f"invalid YAML: {yn.value!r} is not a valid !!{tag}", _Node(None, line), key) from None
        return _Node(value, line)

    def expand(self, text: str, node: _Node, key: str) -> str:
        def sub(m: re.Match[str]) -> str:
            if m.group(1) == "$":
                return "$"
            name, default = m.group(2), m.group(3)
            if name in self.environ:
                return self.environ[name]
            if default is not None:
                return default
            raise self.error(f"environment variable ${{{name}}} is not set", node, key)

        return _VAR.sub(sub, text)

    def string(self, node: _Node, key: str, *, expand: bool = True) -> str:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise self.error(f"expected a string, got {_kind(v)}", node, key)
        return self.expand(str(v), node, key) if expand else str(v)

    def string_list(self, node: _Node, key: str, *, expand: bool = True) -> tuple[str, ...]:
        if not isinstance(node.value, list):
            raise self.error(f"expected a list of strings, got {_kind(node.value)}", node, key)
        return tuple(self.string(item, f"{key}[{i}]", expand=expand) for i, item in enumerate(node.value))

    def string_map(self, node: _Node, key: str) -> dict[str, str]:
        if not isinstance(node.value, dict):
            raise self.error(f"expected a mapping of strings, got {_kind(node.value)}", node, key)
        return {k: self.string(v, f"{key}.{k}") for k, (_, v) in node.value.items()}

    def number(self, node: _Node, key: str) -> float:
        v = node.value
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < math.inf:
            raise self.error(f"expected a positive number of seconds, got {_shown(v)}", node, key)
        return float(v)

    def boolean(self, node: _Node, key: str) -> bool:
        if not isinstance(node.value, bool):
            raise self.error(f"expected true or false, got {_shown(node.value)}", node, key)
        return node.value

    def server(self, name: str, name_node: _Node, body: _Node, *, json_format: bool) -> ServerConfig:
        where = f"servers.{name}" if not json_format else f"mcpServers.{name}"
        if not isinstance(body.value, dict):
            raise self.error(f"expected a mapping with `command` or `url`, got {_kind(body.value)}", body, where)
        items: dict[str, tuple[_Node, _Node]] = body.value
        if not json_format:
            for k, (knode, _) in items.items():
                if k not in _SERVER_KEYS:
                    raise self.error(f"unknown key{_did_you_mean(k, _SERVER_KEYS)}", knode, f"{where}.{k}")
        else:
            items = {k: v for k, v in items.items() if k in _JSON_SERVER_KEYS}

        def get(k: str) -> _Node | None:
            return items[k][1] if k in items else None

        kw: dict[str, Any] = {"name": name}
        if (n := get("command")) is not None:
            kw["command"] = self.string(n, f"{where}.command")
        if (n := get("url")) is not None:
            kw["url"] = self.string(n, f"{where}.url")
        if "command" in kw and not kw["command"].strip():
            raise self.error("expected the program to start, got an empty string", get("command"), f"{where}.command")
        if ("command" in kw) == ("url" in kw):
            problem = "has both `command` and `url`" if "command" in kw else "needs `command` (stdio) or `url` (HTTP)"
            raise self.error(f"server {problem}", body, where)
        if "url" in kw and (bad_url := _url_problem(kw["url"])) is not None:
            raise self.error(bad_url, get("url"), f"{where}.url")
        if json_format and (n := get("type")) is not None:
            kind = self.string(n, f"{where}.type")
            if kind == "sse":
                raise self.error("SSE servers are not supported; use Streamable HTTP", n, f"{where}.type")
        for k, conv in (("args", self.string_list), ("include", self.string_list), ("exclude", self.string_list)):
            if (n := get(k)) is not None:
                kw[k] = conv(n, f"{where}.{k}", expand=k == "args")
        for k in ("env", "headers"):
            if (n := get(k)) is not None:
                kw[k] = self.string_map(n, f"{where}.{k}")
        if (n := get("cwd")) is not None:
            kw["cwd"] = self.string(n, f"{where}.cwd")
        if (n := get("description")) is not None:
            kw["description"] = self.string(n, f"{where}.description", expand=False)
        if (n := get("timeout")) is not None:
            kw["timeout"] = self.number(n, f"{where}.timeout")
        if (n := get("enabled")) is not None:
            kw["enabled"] = self.boolean(n, f"{where}.enabled")
        if json_format and (n := get("disabled")) is not None:
            kw["enabled"] = not self.boolean(n, f"{where}.disabled")
        if "command" in kw and ("url" in kw or "headers" in kw):
            raise self.error("`headers` only applies to `url` servers", body, f"{where}.headers")
        if "url" in kw and any(k in kw for k in ("args", "env", "cwd")):
            bad = next(k for k in ("args", "env", "cwd") if k in kw)
            raise self.error(f"`{bad}` only applies to `command` servers", get(bad), f"{where}.{bad}")
        if self.folder is not None and "command" in kw:
            # Relative to the config file, not to the shell's working directory.
            kw["cwd"] = str((self.folder / kw.get("cwd", ".")).resolve())
            if "/" in kw["command"] and not os.path.isabs(kw["command"]):
                kw["command"] = str((self.folder / kw["command"]).resolve())
        return ServerConfig(**kw)


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


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    return f"{type(v).__name__} {v!r}"


def _expected(kind: type, meaning: str) -> str:
    """What a setting of ``kind`` takes, said with its meaning: "a whole number, at least 1 (…)"."""
    if kind is int:
        return f"a whole number, at least 1 ({meaning})"
    if kind is float:
        return f"a positive number ({meaning})"
    return meaning


def _shown(v: Any) -> str:
    """A value as an error shows it: a scalar as written, a mapping or list (or nothing) by its kind."""
    return _kind(v) if v is None or isinstance(v, dict | list) else repr(v)


def _did_you_mean(word: str, options: Any) -> str:
    close = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_config(
    text: str,
    *,
    source: str = "<config>",
    environ: Mapping[str, str] | None = None,
    folder: str | Path | None = None,
    sections: SectionSettings | None = None,
) -> Config:
    """Parse configuration text; the format (YAML or mcpServers JSON) is detected from the content.

    Args:
        folder: where relative paths resolve (`load_config` passes the file's folder); None keeps them.
        sections: the sections allowed besides ``servers``, each with its settings, read (checked) here,
            or with None, handed on for its owner to read (`Section.read`). Default: tooltree's
            `SECTIONS`, each with None; ``tooltree_cli.common.config_sections()`` has the settings of
            every one. A section of another name is an error.

    Raises:
        ConfigError: the text is not a valid configuration.
    """
    import yaml  # here, not at module level: commands that read no config start faster

    env = dict(os.environ if environ is None else environ)
    reader = _Reader(source, env, Path(folder).resolve() if folder is not None else None)
    allowed: SectionSettings = dict.fromkeys(SECTIONS) if sections is None else sections
    stripped = text.lstrip()
    is_json = stripped.startswith("{")
    if is_json:
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"invalid JSON: {e.msg} (column {e.colno})", file=source, line=e.lineno) from None
    try:
        root_yaml = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ConfigError(f"invalid YAML: {e.problem or e}", file=source, line=line) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}", file=source) from None
    if root_yaml is None:
        raise ConfigError("the file is empty; expected a `servers:` mapping", file=source)
    root = reader.to_node(root_yaml)
    if not isinstance(root.value, dict):
        raise reader.error(f"expected a mapping at the top level, got {_kind(root.value)}", root)
    top: dict[str, tuple[_Node, _Node]] = root.value

    if is_json or ("mcpServers" in top and "servers" not in top):
        if "mcpServers" not in top:
            raise reader.error("expected a top-level `mcpServers` object", root)
        servers_node = top["mcpServers"][1]
        json_format = True
    else:
        known = {"servers", *allowed}
        for k, (knode, _) in top.items():
            if k not in known:
                raise reader.error(f"unknown key{_did_you_mean(k, known)}", knode, k)
        if "servers" not in top:
            raise reader.error("expected a `servers:` mapping", root)
        servers_node = top["servers"][1]
        json_format = False
    if not isinstance(servers_node.value, dict):
        key = "mcpServers" if json_format else "servers"
        raise reader.error(f"expected a mapping of server names, got {_kind(servers_node.value)}", servers_node, key)
    handed_on: dict[str, Section] = {}
    for name, (knode, vnode) in top.items() if not json_format else ():
        if name == "servers":
            continue
        if not isinstance(vnode.value, dict):
            raise reader.error(f"expected a mapping of {name} settings, got {_kind(vnode.value)}", vnode, name)
        items: dict[str, tuple[_Node, _Node]] = vnode.value
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
        servers.append(reader.server(name, name_node, body, json_format=json_format))
    return Config(servers=tuple(servers), source=source, sections=handed_on)


def _plain(node: _Node) -> Any:
    """A node's value without line numbers."""
    if isinstance(node.value, dict):
        return {k: _plain(v) for k, (_, v) in node.value.items()}
    if isinstance(node.value, list):
        return [_plain(v) for v in node.value]
    return node.value


def load_config(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    sections: SectionSettings | None = None,
) -> Config:
    """Read and parse a configuration file (relative paths in it resolve against its folder).

    A section other than ``servers`` and tooltree's `SECTIONS` is an error; a section's keys are checked
    where it is read (``SandboxConfig.from_config(config)``, ``BackgroundPool(config)``, ``Agent(config)``).
    To check every key now, as the CLI does, pass ``sections=tooltree_cli.common.config_sections()``;
    ``sections`` is as for `parse_config`.

    Raises:
        ConfigError: the file cannot be read or is not a valid configuration.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError("no such file (create one, or pass --config PATH)", file=str(p)) from None
    except IsADirectoryError:
        raise ConfigError("is a folder; --config names the configuration file", file=str(p)) from None
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = data.count(b"\n", 0, e.start) + 1, e.start - data.rfind(b"\n", 0, e.start)
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[e.start]:02x} in column {column} (save the file as UTF-8)",
            file=str(p),
            line=line,
        ) from None
    return parse_config(text, source=str(p), environ=environ, folder=p.parent, sections=sections)
