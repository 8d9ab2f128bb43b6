"""Codex CLI's configuration file, read as Codex reads it (`tool_tree.config` reads the servers;
`tool_tree.config_clients` the other clients' files).

Its servers are the ``[mcp_servers.NAME]`` tables of ``~/.codex/config.toml`` (`codex_servers`), whose strings name no
variables (a ``$`` is text).

(Over 400 lines: Codex's TOML has no line numbers of its own, so finding each table's and key's line in the text
(`_toml_lines` and its helpers), for an error to name the file's line and key, takes a third of it.)
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from typing import Any

from tool_tree.config_clients import _as_disabled
from tool_tree.config_read import (
    LARGEST,
    MAX_DEPTH,
    ConfigError,
    Node,
    Reader,
    did_you_mean,
    number_read,
    too_deep,
    value_shown,
)
from tool_tree.text import one_line

logger = logging.getLogger("tool_tree.config")

CODEX_KEYS = {
    "command", "args", "env", "cwd", "url", "http_headers", "env_http_headers", "bearer_token_env_var",
    "startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec", "enabled", "enabled_tools", "disabled_tools",
    "env_vars", "description", "concurrency", "protocol",
}  # fmt: skip
"""The keys of a Codex ``[mcp_servers.NAME]`` table tooltree reads (``description``, ``concurrency`` and
``protocol`` are tooltree's own)."""
CODEX_FOREIGN = {"required", "scopes", "oauth", "oauth_resource", "transport", "experimental_environment"}
"""Codex's keys tooltree has no use for: ignored without a word."""
CODEX_STARTUP_SECONDS, CODEX_TOOL_SECONDS = 10.0, 60.0
"""Codex's bounds on a server's start-up and on each of its calls when its table sets none."""


def is_codex(text: str, source: str) -> bool:
    """Whether ``text`` is a TOML file (a ``.toml`` one, or one with a ``[mcp_servers.NAME]`` table)."""
    return source.endswith(".toml") or re.search(r"(?m)^[ \t]*\[[ \t]*mcp_servers[ \t]*[.\]]", text) is not None


def codex_servers(text: str, source: str, reader: Reader) -> tuple[Node, dict[str, str]]:
    """The ``mcp_servers`` of Codex CLI's config.toml ``text`` as ``mcpServers`` entries (each value with its line),
    and the aliases of the keys renamed (`Entry.aliases`).

    ``http_headers`` are its ``headers``, ``env_http_headers`` (a header's name with the variable holding its value)
    and ``bearer_token_env_var`` (``Authorization: Bearer $VAR``) headers read from the environment,
    ``enabled_tools`` and ``disabled_tools`` lists of exact tool names, ``env_vars`` variables passed on from
    tooltree's environment when set. tooltree has one ``timeout`` for a server's start-up and each call: the larger
    of ``startup_timeout_sec`` and ``tool_timeout_sec`` (Codex's defaults, 10 and 60 s, for one not set). Codex
    expands no variable in its strings, so a ``$`` in them is text (before: ``${TOKEN}`` in an ``env`` that
    ``codex mcp add --env`` wrote was looked up, and refused the file when unset).

    Raises:
        ConfigError: the text is not TOML, has no ``mcp_servers`` table, or nests deeper than `MAX_DEPTH`.
    """
    import tomllib

    try:
        doc = tomllib.loads(text, parse_float=lambda written: number_read(written, float(written)))
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(e))
        problem = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(e)) + (f" (column {m.group(2)})" if m else "")
        line = int(m.group(1)) if m else text.count("\n") + 1 if "end of document" in str(e) else None
        raise ConfigError(f"invalid TOML: {problem}", file=source, line=line) from None
    except RecursionError:  # before: without the line
        line = _too_deep_line(text)
        raise ConfigError(too_deep(), file=source, line=line, key=_key_at(text, line)) from None
    except ValueError:  # Python's bound on an int's digits (before: a traceback)
        raise _too_many_digits(text, source) from None
    try:
        return _codex_entries(_held(doc), _toml_lines(text), source, reader)
    except ConfigError as e:
        if e.file is not None:
            raise
        raise ConfigError(e.message, file=source, line=e.line, key=e.key) from None


_TOML_TOKEN = re.compile(
    r'"""(?:[^"\\]++|\\.|"(?!""))*+"""|\'\'\'(?:[^\']++|\'(?!\'\'))*+\'\'\'|"(?:[^"\\\n]++|\\.)*+"|\'[^\'\n]*+\''
    r"|#[^\n]*+|(?<![\w.+-])([+-]?+(?:0[xob])?+[0-9A-Fa-f_]{1000,}+)(?![\w.:-])"
)
"""A string or a comment, skipped whole, or a whole number of 1,000 characters or more (group 1)."""


def _too_many_digits(text: str, source: str) -> ConfigError:
    """The error for the TOML ``text``, whose whole number of more digits than Python reads (4,300, as
    ``sys.get_int_max_str_digits`` has it) tomllib refused with a ValueError: at the number's line and key. Codex
    refuses the file too (its integers are 64-bit)."""
    line = None
    for m in _TOML_TOKEN.finditer(text):
        if (written := m.group(1)) is not None and _unreadable(written):
            line = text.count("\n", 0, m.start()) + 1
            break
    limit = sys.get_int_max_str_digits() or 4300
    problem = f"invalid TOML: a whole number of more than {limit:,} digits (Codex reads whole numbers up to 2**63 - 1)"
    return ConfigError(problem, file=source, line=line, key=_key_at(text, line))


def _key_at(text: str, line: int | None) -> str | None:
    """The dotted key of the TOML ``text`` whose value ``line`` is in: the last key on a line up to it."""
    if line is None:
        return None
    above = [(at, path) for path, at in _toml_lines(text).items() if at <= line]
    return ".".join(max(above, key=lambda found: (found[0], len(found[1])))[1]) if above else None


def _too_deep_line(text: str) -> int | None:
    """The line of the TOML ``text`` where its brackets go deeper than `MAX_DEPTH` levels (strings and comments
    skipped), if they do."""
    within: str | None = None
    depth = 0
    for number, line in enumerate(text.split("\n"), 1):
        if within is not None:
            if (close := line.find(within)) < 0:
                continue
            line, within = line[close + 3 :], None
        at = 0  # `_left_open`, one bracket at a time
        while (m := _MULTILINE.search(line, at)) is not None and m.group() != "#":
            at = m.end()
            if (delimiter := m.group(1)) is not None:
                if (close := line.find(delimiter, at)) < 0:
                    within = delimiter
                    break
                at = close + 3
            elif m.group(2) is not None:
                depth += 1
                if depth > MAX_DEPTH:
                    return number
            elif m.group() in "]}":
                depth = max(depth - 1, 0)
    return None


def _held(value: Any, depth: int = 0) -> Any:
    """The TOML ``value`` with each whole number too long to show (``0x`` and 4,000 digits, which tomllib reads) a
    `BigNumber`, as the YAML reader has it (before: its error was a ValueError traceback). Past `MAX_DEPTH` levels
    the value is left as it is, for `_node` to refuse."""
    if isinstance(value, dict) and depth <= MAX_DEPTH:
        return {k: _held(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list) and depth <= MAX_DEPTH:
        return [_held(v, depth + 1) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return number_read(hex(value), value)
    return value


def _unreadable(written: str) -> bool:
    """Whether the TOML whole number ``written`` is one Python refuses to read or show (more than 4,300 digits)."""
    digits = written.lstrip("+-").replace("_", "")
    base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2], 10)
    try:
        str(int(digits[2:] if base != 10 else digits, base))
    except ValueError as e:
        return "limit" in str(e)
    return False


def _codex_entries(
    doc: Mapping[str, Any], lines: Mapping[tuple[str, ...], int], source: str, reader: Reader
) -> tuple[Node, dict[str, str]]:
    servers = doc.get("mcp_servers")
    if not isinstance(servers, dict):
        problem = "expected `[mcp_servers.NAME]` tables (Codex CLI's config.toml)"
        raise ConfigError(problem, file=source, line=lines.get(("mcp_servers",)))
    aliases: dict[str, str] = {}
    entries: dict[str, tuple[Node, Node]] = {}
    unknown = 0  # keys tooltree does not read: the first `_MAX_WARNED` said one by one, the rest counted
    for name, table in servers.items():
        path = ("mcp_servers", name)
        line = lines.get(path, lines.get(("mcp_servers",)))  # `mcp_servers = {x = …}`: the line of the table
        where = f"mcp_servers.{name}"
        if not isinstance(table, dict):
            entries[name] = (Node(name, line), _node(table, path, lines, line))
            continue
        items: dict[str, tuple[Node, Node]] = {}
        for k, v in table.items():
            if k in CODEX_FOREIGN or k in _CODEX_DERIVED:
                continue
            if k not in CODEX_KEYS:
                unknown += 1
                if unknown <= _MAX_WARNED:
                    at = lines.get((*path, k), line)
                    logger.warning(
                        "%s%s: %s: not a key tooltree reads; ignored%s", source, f":{at}" if at is not None else "",
                        one_line(f"{where}.{k}", 200), did_you_mean(k, CODEX_KEYS),
                    )  # fmt: skip
                continue
            ours, at = "headers" if k == "http_headers" else k, lines.get((*path, k), line)
            items[ours] = (Node(ours, at), _node(v, (*path, k), lines, at, literal=k in _CODEX_LITERAL))
            if ours != k:
                aliases[f"{where}.{ours}"] = f"{where}.{k}"
        if "enabled" in items:
            _as_disabled(items, where, aliases)
        _codex_headers(reader, table, items, path, lines, line, aliases)
        forwarded = table.get("env_vars")
        if forwarded is not None and (
            not isinstance(forwarded, list) or not all(isinstance(v, str) for v in forwarded)
        ):  # before: not a list, or a name not a string, was dropped without a word
            at = lines.get((*path, "env_vars"), line)
            problem = f"expected a list of environment variable names, got {one_line(value_shown(forwarded), 80)}"
            raise reader.error(problem, Node(forwarded, at), f"{where}.env_vars")
        if isinstance(forwarded, list) and (items.get("env") is None or isinstance(items["env"][1].value, dict)):
            at = lines.get((*path, "env_vars"), line)
            env: dict[str, tuple[Node, Node]] = {
                v: (Node(v, at), Node(f"${{{v}}}", at)) for v in forwarded if isinstance(v, str) and v in reader.environ
            }
            given = items["env"][1].value if "env" in items else {}
            for i, v in enumerate(forwarded):  # named as written, env_vars[0] (before: env.TOKEN, a key not there)
                if v in env and v not in given:
                    aliases.setdefault(f"{where}.env.{v}", f"{where}.env_vars[{i}]")
            env.update(given)  # `env` wins
            if env:
                items["env"] = (Node("env", at), Node(env, items["env"][1].line if "env" in items else at))
        timeouts = {
            k: table[k] for k in ("startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec") if k in table
        }
        for k, v in timeouts.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= LARGEST:
                at = lines.get((*path, k), line)
                problem = f"expected a positive number, got {one_line(repr(v), 80)}"
                raise reader.error(problem, Node(v, at), f"{where}.{k}")
        startup = timeouts.get(
            "startup_timeout_sec", timeouts.get("startup_timeout_ms", CODEX_STARTUP_SECONDS * 1000) / 1000
        )
        tool = timeouts.get("tool_timeout_sec", CODEX_TOOL_SECONDS)
        at = lines.get((*path, next(iter(timeouts))), line) if timeouts else line
        items["timeout"] = (Node("timeout", at), Node(float(max(startup, tool)), at))
        started = next((k for k in timeouts if k.startswith("startup")), "startup_timeout_sec")
        aliases[f"{where}.timeout"] = f"{where}.{started if startup > tool else 'tool_timeout_sec'}"  # the one taken
        entries[name] = (Node(name, line), Node(items, line))
    if unknown > _MAX_WARNED:  # before: a warning each, 170,000 of them for a 2 MiB file
        logger.warning("%s: %s more keys tooltree does not read; ignored", source, f"{unknown - _MAX_WARNED:,}")
    return Node(entries, lines.get(("mcp_servers",))), aliases


_MAX_WARNED = 20
"""Unknown keys of a Codex file said one by one."""


_CODEX_LITERAL = {"command", "args", "env", "cwd", "url", "http_headers", "protocol"}
"""The keys whose strings tooltree expands variables in: Codex expands none (its `env_vars` and `*_env_var` keys
name variables), so their ``$`` is escaped (``$$``) and ``${TOKEN}`` reaches the server as written."""
_CODEX_DERIVED = {"env_http_headers", "bearer_token_env_var", "env_vars", "startup_timeout_sec", "startup_timeout_ms",
                  "tool_timeout_sec"}  # fmt: skip
"""Codex's keys read into others (``headers``, ``env``, ``timeout``)."""


def _codex_headers(
    reader: Reader,
    table: Mapping[str, Any],
    items: dict[str, tuple[Node, Node]],
    path: tuple[str, ...],
    lines: Mapping[tuple[str, ...], int],
    line: int | None,
    aliases: dict[str, str],
) -> None:
    """The headers of a Codex table into ``items["headers"]``: its ``http_headers``, then each of its
    ``env_http_headers`` and its ``bearer_token_env_var`` as a reference to the variable that holds the value."""
    where = ".".join(path)
    if "headers" in items and not isinstance(items["headers"][1].value, dict):
        return  # not a mapping: said when it is read
    headers: dict[str, tuple[Node, Node]] = dict(items["headers"][1].value) if "headers" in items else {}
    named: dict[str, tuple[str, Any]] = {}
    extra = table.get("env_http_headers", {})
    if not isinstance(extra, dict):
        at = lines.get((*path, "env_http_headers"), line)
        problem = "expected a mapping of header names to the environment variables holding their values"
        raise reader.error(problem, Node(extra, at), f"{where}.env_http_headers")
    named.update({header: (f"env_http_headers.{header}", variable) for header, variable in extra.items()})
    if "bearer_token_env_var" in table:
        named["Authorization"] = ("bearer_token_env_var", table["bearer_token_env_var"])
    for header, (key, variable) in named.items():
        at = lines.get((*path, *key.split(".")), lines.get((*path, key.split(".")[0]), line))
        if not isinstance(variable, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
            problem = f"expected the name of an environment variable, got {variable!r}"
            raise reader.error(problem, Node(variable, at), f"{where}.{key}")
        value = f"Bearer ${{{variable}}}" if key == "bearer_token_env_var" else f"${{{variable}}}"
        headers[header] = (Node(header, at), Node(value, at))
        aliases[f"{where}.headers.{header}"] = f"{where}.{key}"
    if headers:
        at = items["headers"][1].line if "headers" in items else next(iter(headers.values()))[1].line
        items["headers"] = (Node("headers", at), Node(headers, at))


def _node(
    value: Any,
    path: tuple[str, ...],
    lines: Mapping[tuple[str, ...], int],
    line: int | None,
    depth: int = 2,
    *,
    literal: bool = False,
) -> Node:
    """A TOML value as `Node` values, each with the line of its key (or of the nearest key above it); with
    ``literal``, each string's ``$`` escaped (``$$``), so that expanding it gives the text as written.

    Raises:
        ConfigError: it nests deeper than `MAX_DEPTH` (without the file's name: `codex_servers` adds it).
    """
    if depth > MAX_DEPTH:
        raise ConfigError(too_deep(), line=line)
    if isinstance(value, dict):
        out: dict[str, tuple[Node, Node]] = {}
        for k, v in value.items():
            at = lines.get((*path, k), line)
            out[k] = (Node(k, at), _node(v, (*path, k), lines, at, depth + 1, literal=literal))
        return Node(out, line)
    if isinstance(value, list):
        return Node([_node(v, path, lines, line, depth + 1, literal=literal) for v in value], line)
    return Node(value.replace("$", "$$") if literal and isinstance(value, str) else value, line)


_TOML_KEY = re.compile(r'[ \t]*+("(?:[^"\\\n]++|\\.)*+"|\'[^\'\n]*+\'|[A-Za-z0-9_-]++)[ \t]*+')
_TOML_HEADER = re.compile(r"""[ \t]*+\[\[?((?:[^\[\]"']++|"(?:[^"\\]|\\.)*+"|'[^']*+')++)\]\]?[ \t]*+(?:#.*)?""")
_TOML_ASSIGNED = re.compile(r"[ \t]*+([^=#\[\]\"']*+(?:(?:\"(?:[^\"\\]|\\.)*+\"|'[^']*+')[^=#\[\]\"']*+)*+)=")
"""The key of a ``key = value`` line (possessive throughout: a line of 3,000 spaces took 9 s, before, to find none)."""
_MULTILINE = re.compile(r'("""|\'\'\')|"(?:[^"\\\n]++|\\.)*+"|\'[^\'\n]*+\'|#|([\[{])|[\]}]')
"""A multi-line string's delimiter (group 1), a one-line string, where a comment starts, or a bracket (an opening one
in group 2)."""


def _toml_keys(text: str) -> tuple[str, ...] | None:
    """The parts of a dotted TOML key (``a."b c".d``, a quoted part's escapes read), or None when ``text`` is not
    one."""
    import tomllib

    parts, at = [], 0
    while True:
        m = _TOML_KEY.match(text, at)
        if m is None:
            return None
        part = m.group(1)
        if part.startswith('"') and "\\" in part:  # `"a\u001b"`: the key tomllib read holds the escape's character
            try:
                part = '"' + next(iter(tomllib.loads(f"{part} = 0"))) + '"'
            except (tomllib.TOMLDecodeError, ValueError, StopIteration):
                return None
        parts.append(part[1:-1] if part[0] in "\"'" else part)
        at = m.end()
        if at == len(text):
            return tuple(parts)
        if text[at] != ".":
            return None
        at += 1


def _toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line of each table header and key of the TOML ``text`` (by its dotted path), as far as a line-by-line
    look finds them: lines within a multi-line string are skipped (before, a ``[table]`` line in one was taken for
    a header), and so are the lines of a value that opens a bracket it closes on a later line (before, a line of
    ``["x"]`` in a multi-line array was taken for the header ``[x]``, and every key after it was given its table's
    line); a key inside a multi-line array or inline table may be missed (its value then takes its table's line).
    Lines end at ``\\n`` alone, as TOML's do (before: also at U+2028 in a string, and every line number after it
    was off)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    within: str | None = None  # the delimiter of the multi-line string the line is in
    depth = 0  # brackets a value has opened and not closed, on lines before
    for number, line in enumerate(text.split("\n"), 1):
        rest = line
        if within is not None:
            if (close := line.find(within)) < 0:
                continue
            rest, within = line[close + 3 :], None
        elif depth > 0:
            pass  # within a value: no header, no key of the table
        elif (m := _TOML_HEADER.fullmatch(line.removesuffix("\r"))) is not None:
            if (keys := _toml_keys(m.group(1))) is not None:
                table = keys
                for i in range(1, len(keys) + 1):
                    lines.setdefault(keys[:i], number)
            continue
        elif (m := _TOML_ASSIGNED.match(line)) is not None:
            if (keys := _toml_keys(m.group(1).rstrip())) is not None:
                for i in range(1, len(keys) + 1):
                    lines.setdefault((*table, *keys[:i]), number)
            rest = line[m.end() :]
        within, depth = _left_open(rest, depth)
    return lines


def _left_open(rest: str, depth: int) -> tuple[str | None, int]:
    """The delimiter of a multi-line string that the text ``rest`` (of a line) opens and does not close, if any, and
    the brackets open at its end, ``depth`` of them open at its start."""
    at = 0
    while (m := _MULTILINE.search(rest, at)) is not None and m.group() != "#":
        at = m.end()
        if (delimiter := m.group(1)) is not None:
            if (close := rest.find(delimiter, at)) < 0:
                return delimiter, depth
            at = close + 3
        elif m.group(2) is not None:
            depth += 1
        elif m.group() in "]}":
            depth = max(depth - 1, 0)
    return None, depth
