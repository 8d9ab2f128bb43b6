"""Other MCP clients' configuration files, read as those clients read them (`tool_tree.config` reads the servers).

- VS Code: ``.vscode/mcp.json`` (or the profile's ``mcp.json``) keeps its servers under ``servers`` and the values
  it asks the user for under ``inputs``; before VS Code 1.102, its settings.json kept both under ``mcp``.
- Cursor (``.cursor/mcp.json``), Windsurf (``mcp_config.json``, a remote server's address in ``serverUrl``) and
  Gemini CLI (``.gemini/settings.json``, a Streamable HTTP server's address in ``httpUrl``, ``timeout`` in
  milliseconds, ``$VAR`` without braces) keep theirs under ``mcpServers``, as Claude's files do.
- Zed: ``context_servers`` in its settings.json, the command as a string (or, in older files, as
  ``{"path", "args", "env"}``).
- Codex CLI: ``[mcp_servers.NAME]`` tables of ``~/.codex/config.toml`` (`codex_servers`), whose strings name no
  variables (a ``$`` is text).

VS Code's, Zed's and Gemini CLI's files are JSON with comments and trailing commas (`without_comments` blanks them,
keeping every line and column). An editor's variables are read (`client_variables`): ``${workspaceFolder}`` is the
folder holding ``.vscode`` (``.cursor``, ``.gemini``, ``.zed``) or, for a file of the user's, the working folder;
``${userHome}`` the home folder; ``${env:VAR}`` an environment variable. VS Code's ``${input:id}`` is asked of the
user when the server starts; tooltree cannot ask, so it reads the environment variable ``TOOLTREE_INPUT_<ID>``
(`tool_tree.config_read.input_variable`) and, when it is not set, says so with the input's description.

(Over 400 lines: each client's format is a few rules, kept together so one file says how tooltree reads them all;
Codex's TOML, which has no line numbers of its own, takes the most.)
"""

from __future__ import annotations

import logging
import os
import re
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_tree.config_read import (
    LARGEST,
    MAX_DEPTH,
    ClientVariables,
    ConfigError,
    Node,
    Reader,
    did_you_mean,
    kind_of,
    number_read,
    too_deep,
    value_shown,
)
from tool_tree.text import one_line

logger = logging.getLogger("tool_tree.config")

JSONC_NAMES = ("mcp.json", "settings.json", "mcp_config.json")
"""Names of the files read as JSON with comments: VS Code's and Cursor's ``mcp.json``, VS Code's, Zed's and Gemini
CLI's ``settings.json``, Windsurf's ``mcp_config.json`` (and any ``*.jsonc``). Claude's files stay strict JSON."""
WORKSPACE_FOLDERS = (".vscode", ".cursor", ".gemini", ".zed", ".windsurf")
"""Folders an editor keeps a workspace's configuration in: a file in one belongs to the folder above it."""
MAX_ENV_FILE_BYTES = 1024 * 1024
"""The largest ``envFile`` read (a file of ``NAME=value`` lines)."""

MAX_JSONC_BYTES = 8 * 1024 * 1024
"""The largest file read as JSON with comments (`without_comments`): an editor's settings are kilobytes, and the
comments are blanked in Python, one at a time (8 MiB of nothing but ``/**/`` takes about 2 s)."""

_STRING = r'"(?:[^"\\\n]++|\\.)*+"?'
"""A JSON string, or one not closed on its line, to where its line ends: each character is looked at once (before,
a line of ``"\\"\\"\\"…`` was scanned again from each of its quotes: 64 KB took 15 s)."""
_COMMENT = re.compile(r'(?:[^"/]++|' + _STRING + r"|/(?![/*]))*+(//[^\n]*+|/\*(?:[^*]++|\*(?!/))*+(?:\*/)?|\Z)")
"""The text up to the next comment (strings skipped whole) and the comment (group 1), or the end."""
_TRAILING_COMMA = re.compile(r'(?:[^",]++|' + _STRING + r"|,(?!\s*+[}\]]))*+(,|\Z)")
"""The text up to the next comma before a ``}`` or ``]`` (group 1), or the end."""
_NOT_NEWLINE = re.compile(r"[^\n]+")


def is_jsonc(source: str) -> bool:
    """Whether the file ``source`` is one its client reads as JSON with comments and trailing commas."""
    name = Path(source).name
    return name in JSONC_NAMES or name.endswith(".jsonc")


def without_comments(text: str, source: str) -> str:
    """``text`` with its ``//`` and ``/* */`` comments and trailing commas blanked: as long, and every line and
    column where it was, so the JSON reader's errors name the file's lines.

    Raises:
        ConfigError: a ``/*`` comment is not closed (naming the line it opens on).
    """

    def blank(m: re.Match[str]) -> str:
        start = m.start(1)
        found = m.group(1)
        if found.startswith("/*") and (len(found) < 4 or not found.endswith("*/")):
            line = text.count("\n", 0, start) + 1
            raise ConfigError("invalid JSON: a /* comment is not closed (*/)", file=source, line=line)
        spaces = " " * len(found) if "\n" not in found else _NOT_NEWLINE.sub(lambda r: " " * len(r.group()), found)
        return text[m.start() : start] + spaces

    if "/" in text:
        text = _COMMENT.sub(blank, text)
    if "," in text:
        text = _TRAILING_COMMA.sub(lambda m: m.group()[:-1] + " " if m.group(1) else m.group(), text)
    return text


def workspace_of(source: str, environ: Mapping[str, str]) -> Path:
    """The folder a client file's ``${workspaceFolder}`` stands for, and where its servers start: the folder above
    ``.vscode`` (``.cursor``, ``.gemini``, …) for a workspace's file; for a user's (``~/.cursor/mcp.json``, a
    profile's ``mcp.json``), the working folder, as the editor opened there would have it."""
    folder = Path(source).resolve().parent
    home = environ.get("HOME") or os.path.expanduser("~")
    if folder.name in (*WORKSPACE_FOLDERS, ".codex") and str(folder.parent) != str(Path(home).resolve()):
        return folder.parent
    return Path.cwd()


def servers_folder(folder: Path, name: str, environ: Mapping[str, str]) -> Path | None:
    """The folder the stdio servers of a client's file ``name`` in ``folder`` start in when they name none (and their
    relative paths resolve against), as the client runs them; None: the file's own folder, as for tooltree's.

    A workspace's file (``.vscode/mcp.json``, ``.gemini/settings.json``, ``.codex/config.toml`` of a project): the
    folder above it. A file of the user's own, which the client reads wherever it is started (``~/.gemini/
    settings.json``, ``~/.cursor/mcp.json``, ``~/.codex/config.toml``, Claude Code's ``.claude.json``): the working
    folder, where Claude Code, Gemini CLI and Codex start those servers (before: in ``~/.claude`` or ``~/.gemini``,
    so a server given ``.`` got the client's settings folder).
    """
    if folder.name in (*WORKSPACE_FOLDERS, ".codex"):
        return workspace_of(str(folder / name), environ)
    if name == ".claude.json":
        return Path.cwd()
    return None


def client_of(source: str, key: str, entries: Mapping[str, Any]) -> str:
    """Which client's file this is, from its path, the key of its servers and their keys: ``vscode``, ``zed``,
    ``gemini`` (``.gemini/settings.json``, or an entry with ``httpUrl``, which only Gemini CLI writes), ``cursor``,
    ``windsurf`` or ``claude`` (Claude's files and any other ``mcpServers`` file)."""
    path = Path(source)
    if key in ("servers", "mcp.servers"):
        return "vscode"
    if key == "context_servers":
        return "zed"
    gemini_file = path.name == "settings.json" and path.parent.name == ".gemini"
    if gemini_file or any(isinstance(e.value, dict) and "httpUrl" in e.value for _, e in entries.values()):
        return "gemini"
    if path.parent.name == ".cursor":
        return "cursor"
    if path.name == "mcp_config.json":
        return "windsurf"
    return "claude"


def client_variables(
    client: str, source: str, environ: Mapping[str, str], inputs: Node | None, workspace: Path
) -> ClientVariables | None:
    """The variables the ``client``'s file may name besides tooltree's (None for Claude's files, which have
    tooltree's ``${VAR}`` alone); ``inputs`` is VS Code's list of them, as read."""
    if client in ("claude", "zed"):
        return None
    home = environ.get("HOME") or os.path.expanduser("~")
    predefined = {
        "workspaceFolder": str(workspace),
        "workspaceFolderBasename": workspace.name,
        "userHome": home,
        "pathSeparator": os.sep,
    }
    declared: dict[str, tuple[str, int | None]] = {}
    if inputs is not None and not isinstance(inputs.value, list):  # VS Code reads none of them: said, not refused
        logger.warning(
            "%s:%s: inputs: expected a list of the values VS Code asks for, got %s; ignored", source, inputs.line,
            kind_of(inputs.value) if isinstance(inputs.value, dict | list) else one_line(value_shown(inputs.value), 80),
        )  # fmt: skip
    for item in inputs.value if inputs is not None and isinstance(inputs.value, list) else ():
        fields = {k: v.value for k, (_, v) in item.value.items()} if isinstance(item.value, dict) else {}
        if isinstance(fields.get("id"), str):
            description = fields.get("description")
            declared[fields["id"]] = (description if isinstance(description, str) else "", item.line)
    return ClientVariables(client, predefined, declared, bare=client == "gemini")


def gemini_blocked(reader: Reader, settings: Node | None) -> dict[str, list[str]]:
    """Of a Gemini CLI ``settings.json`` whose ``mcp`` object is ``settings``, its lists of the servers it starts
    alone (``allowed``, when not empty) and of those it does not (``excluded``), by their exact names, as Gemini CLI
    reads them (``isBlockedBySettings``). A list that is not one of strings is ignored, with a warning."""
    lists: dict[str, list[str]] = {}
    fields = settings.value if settings is not None and isinstance(settings.value, dict) else {}
    for k in ("allowed", "excluded"):
        if k not in fields:
            continue
        node = fields[k][1]
        if isinstance(node.value, list) and all(isinstance(item.value, str) for item in node.value):
            lists[k] = [item.value for item in node.value]
        else:
            logger.warning("%s:%s: mcp.%s: expected a list of server names; ignored", reader.file, node.line, k)
    return lists


@dataclass
class Entry:
    """A client's server entry in the shape of an ``mcpServers`` one, with the keys it was written with."""

    body: Node | None
    """The entry, its keys tooltree's (``url`` for ``serverUrl``); None: left out (a warning said why)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Each key of the entry as tooltree names it (``mcpServers.x.url``) with the key the file has there
    (``mcpServers.x.httpUrl``): an error about it names the file's."""


def entry_of(reader: Reader, client: str, where: str, body: Node) -> Entry:
    """The entry ``body`` of a ``client``'s file at ``where`` as an ``mcpServers`` entry tooltree reads.

    Windsurf's ``serverUrl`` and Gemini CLI's ``httpUrl`` are its ``url``; Gemini CLI's ``timeout`` is in
    milliseconds (converted, and said in a warning); Zed's older ``{"command": {"path", "args", "env"}}`` is
    flattened. An entry tooltree cannot start (a Zed extension's, a Gemini CLI WebSocket server) is left out
    with a warning.
    """
    if not isinstance(body.value, dict):
        return Entry(body)
    items: dict[str, tuple[Node, Node]] = dict(body.value)
    aliases: dict[str, str] = {}
    if client == "gemini" and "httpUrl" in items and "url" in items:  # Gemini CLI connects to `httpUrl`, and warns
        knode = items.pop("url")[0]
        logger.warning(
            "%s:%s: %s: has both `httpUrl` and `url`; Gemini CLI connects to `httpUrl`, and so does tooltree",
            reader.file, knode.line, one_line(where, 200),
        )  # fmt: skip
    for theirs in ("serverUrl", "httpUrl"):
        if theirs in items:
            if "url" in items:
                raise reader.error(f"has both `url` and `{theirs}`; keep one", items[theirs][0], f"{where}.{theirs}")
            items["url"] = items.pop(theirs)
            aliases[f"{where}.url"] = f"{where}.{theirs}"
    if client == "zed":
        command = items.get("command")
        if command is not None and isinstance(command[1].value, dict):  # Zed's older {"path", "args", "env"}
            inner: dict[str, tuple[Node, Node]] = command[1].value
            for k, (knode, _) in inner.items():  # before: `arg` was dropped without a word, and the server started bare
                if k not in _ZED_COMMAND_KEYS and (close := did_you_mean(k, _ZED_COMMAND_KEYS)):
                    logger.warning(
                        "%s:%s: %s: not a key tooltree reads; ignored%s", reader.file, knode.line,
                        one_line(f"{where}.command.{k}", 200), close,
                    )  # fmt: skip
            for ours, theirs in (("command", "path"), ("args", "args"), ("env", "env")):
                if theirs in inner:
                    items[ours] = inner[theirs]
                    aliases[f"{where}.{ours}"] = f"{where}.command.{theirs}"
                elif ours == "command":
                    raise reader.error(
                        "expected the program to start in `command.path`", command[1], f"{where}.command"
                    )
        if "command" not in items and "url" not in items:
            _left_out(reader, body, where, "a server a Zed extension starts (`\"source\": \"extension\"`); tooltree "
                      "cannot start it: give it a `command` (and `args`) or a `url`")  # fmt: skip
            return Entry(None)
    if client == "zed" and "enabled" in items:
        _as_disabled(items, where, aliases)
    if "tcp" in items and "command" not in items and "url" not in items:
        _left_out(reader, items["tcp"][0], where, "a WebSocket server (`tcp`), which tooltree does not connect to")
        return Entry(None)
    if client == "gemini" and "url" in items and "command" in items:  # Gemini CLI connects, and starts nothing
        knode = items["command"][0]
        ignored = [k for k in ("command", "args", "env", "cwd") if items.pop(k, None) is not None]
        logger.warning(
            "%s:%s: %s: has both a URL and `command`; Gemini CLI connects to the URL and starts nothing, and so does "
            "tooltree (%s ignored)", reader.file, knode.line, one_line(where, 200), ", ".join(ignored),
        )  # fmt: skip
    if client == "gemini" and "timeout" in items:
        knode, vnode = items["timeout"]
        ms = vnode.value
        if not isinstance(ms, bool) and isinstance(ms, int | float) and 0 < ms <= LARGEST:  # else refused as it is
            seconds = ms / 1000
            items["timeout"] = (knode, Node(seconds, vnode.line))
            logger.warning(
                "%s:%s: %s.timeout: %s is Gemini CLI's milliseconds; tooltree reads it as %s s", reader.file,
                vnode.line, one_line(where, 200), ms, f"{seconds:g}",
            )  # fmt: skip
    elif "timeout" in items and _plausibly_ms(items["timeout"][1].value):
        vnode = items["timeout"][1]
        logger.warning(
            "%s:%s: %s.timeout: %s is read as seconds (%s h); if it is in milliseconds (Gemini CLI's unit), write it "
            "in seconds, or keep the file as .gemini/settings.json", reader.file, vnode.line, one_line(where, 200),
            vnode.value, f"{vnode.value / 3600:.1f}",
        )  # fmt: skip
    return Entry(Node(items, body.line), aliases)


_ZED_COMMAND_KEYS = ("path", "args", "env")
"""The keys of Zed's older ``"command": {"path", "args", "env"}`` tooltree reads."""


def _plausibly_ms(value: Any) -> bool:
    """Whether a ``timeout`` in seconds looks like one in milliseconds: 1,000 s or more, a whole number."""
    return not isinstance(value, bool) and isinstance(value, int) and 1000 <= value <= LARGEST


def _as_disabled(items: dict[str, tuple[Node, Node]], where: str, aliases: dict[str, str]) -> None:
    """Zed's and Codex's ``enabled`` as the ``disabled`` of an ``mcpServers`` entry (there, ``enabled`` is none of the
    format's keys)."""
    knode, vnode = items.pop("enabled")
    items["disabled"] = (knode, Node(not vnode.value, vnode.line) if isinstance(vnode.value, bool) else vnode)
    aliases[f"{where}.disabled"] = f"{where}.enabled"


def _left_out(reader: Reader, node: Node, where: str, why: str) -> None:
    logger.warning("%s:%s: %s: %s; the server is left out", reader.file, node.line, one_line(where, 200), why)


def read_env_file(reader: Reader, path: str, node: Node, key: str) -> dict[str, str] | None:
    """The variables of the ``envFile`` ``path``, read as VS Code reads one: ``NAME=value`` (or ``NAME: value``)
    lines, ``export`` before the name, a ``#`` outside quotes starting a comment, a value in ``"``, ``'`` or
    `````` quotes taken without them (``\\n`` and ``\\r`` in ``"`` a line end); None when its path is relative and the
    config has no folder to resolve it against.

    Raises:
        ConfigError: the file cannot be read, is not a regular file (a FIFO, a device: before, a FIFO with no writer
            never returned), is over `MAX_ENV_FILE_BYTES` or has a line that is not ``NAME=value`` or whose value
            holds a NUL (naming the env file and its line).
    """
    p = Path(path)
    if not p.is_absolute():
        if reader.folder is None:
            return None
        p = reader.folder / p
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO opens at once, and is refused below
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise reader.error(f"the env file {str(p)!r} is not a regular file", node, key)
            data = f.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as e:
        raise reader.error(f"cannot read the env file {str(p)!r}: {e.strerror or e}", node, key) from None
    except ValueError as e:  # a NUL or a lone surrogate in the path (before: a traceback)
        raise reader.error(f"cannot read the env file {str(p)!r}: {e}", node, key) from None
    if len(data) > MAX_ENV_FILE_BYTES:
        raise reader.error(f"the env file {str(p)!r} is over {MAX_ENV_FILE_BYTES // 1024} KiB", node, key)
    env: dict[str, str] = {}
    # Lines end at \n, \r\n or \r alone, as VS Code splits them (before: also at a form feed or U+2028, so a later
    # line's number was off).
    for number, raw in enumerate(re.split(r"\r\n?|\n", data.decode("utf-8", "replace")), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _ENV_LINE.fullmatch(line)
        if m is None:
            raise ConfigError(f"expected NAME=value (the envFile of {one_line(key, 200)})", file=str(p), line=number)
        name, value = m.group(1), m.group(2).strip()
        value = value[: _ENV_COMMENT.match(value).end()].strip()  # type: ignore[union-attr]  # it matches any text
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
            value = value[1:-1].replace("\\n", "\n").replace("\\r", "\r") if value[0] == '"' else value[1:-1]
        if "\x00" in value:  # as in `env` (before: the start failed with "bad response: embedded null byte")
            problem = f"{name}: the value holds a NUL character, which no program can be given"
            raise ConfigError(f"{problem} (the envFile of {one_line(key, 200)})", file=str(p), line=number)
        env[name] = value
    return env


_ENV_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*[=:](.*)")
_ENV_COMMENT = re.compile(r"""(?:[^"'`#]++|"(?:[^"\\]|\\.)*+"?|'[^']*+'?|`[^`]*+`?)*+""")
"""A value up to a ``#`` outside quotes (where its comment starts), if it has one."""


# --- Codex CLI -------------------------------------------------------------------------------------------------------

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
