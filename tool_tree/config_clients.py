"""Other MCP clients' configuration files, read as those clients read them (`tool_tree.config` reads the servers).

- VS Code: ``.vscode/mcp.json`` (or the profile's ``mcp.json``) keeps its servers under ``servers`` and the values
  it asks the user for under ``inputs``; before VS Code 1.102, its settings.json kept both under ``mcp``.
- Cursor (``.cursor/mcp.json``), Windsurf (``mcp_config.json``, a remote server's address in ``serverUrl``) and
  Gemini CLI (``.gemini/settings.json``, a Streamable HTTP server's address in ``httpUrl``, ``timeout`` in
  milliseconds, ``$VAR`` without braces) keep theirs under ``mcpServers``, as Claude's files do.
- Zed: ``context_servers`` in its settings.json, the command as a string (or, in older files, as
  ``{"path", "args", "env"}``).
- Codex CLI: ``[mcp_servers.NAME]`` tables of ``~/.codex/config.toml``, read by `tool_tree.config_codex`.

VS Code's, Zed's and Gemini CLI's files are JSON with comments and trailing commas (`without_comments` blanks them,
keeping every line and column). An editor's variables are read (`client_variables`): ``${workspaceFolder}`` is the
folder holding ``.vscode`` (``.cursor``, ``.gemini``, ``.zed``) or, for a file of the user's, the working folder;
``${userHome}`` the home folder; ``${env:VAR}`` an environment variable. VS Code's ``${input:id}`` is asked of the
user when the server starts; tooltree cannot ask, so it reads the environment variable ``TOOLTREE_INPUT_<ID>``
(`tool_tree.config_read.input_variable`) and, when it is not set, says so with the input's description.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tool_tree.config_read import (
    LARGEST,
    ClientVariables,
    ConfigError,
    Node,
    Reader,
    did_you_mean,
    kind_of,
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
