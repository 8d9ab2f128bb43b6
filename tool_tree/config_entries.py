"""A server's entry read into a `ServerConfig`: in tooltree's shape (``servers.NAME``) or an ``mcpServers`` one.

`server_of` reads one entry (another client's through `tool_tree.config_clients.entry_of`), key by key: tooltree's
keys (`SERVER_KEYS`) are checked in a tooltree.yaml, other clients' are ignored in their files, and their lists of
tool names (``includeTools``, ``disabledTools``, …) become tooltree's patterns. A server that is disabled, or not
used, keeps an unset variable's error on it (`ServerConfig.unresolved`) instead of raising it.

Over 400 lines: one entry's keys are read in one pass, in tooltree's shape and in every other client's, each key's
error named as its file has it; split, each part would need the others' renamings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tool_tree.config_checks import (
    check_fields,
    env_problem,
    expand_home,
    header_named_twice,
    header_problem,
    url_problem,
    warn_bare_variables,
)
from tool_tree.config_clients import entry_of, read_env_file
from tool_tree.config_codex import CODEX_STARTUP_SECONDS, CODEX_TOOL_SECONDS
from tool_tree.config_read import ConfigError, Node, Reader, did_you_mean, kind_of
from tool_tree.config_sections import SECTIONS
from tool_tree.config_servers import ASKABLE, DEFAULT_TIMEOUT, MAX_CONCURRENCY, MAX_DESCRIPTION, PROTOCOLS, ServerConfig
from tool_tree.text import one_line

logger = logging.getLogger("tool_tree.config")


SERVER_KEYS = {
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
    "client_capabilities": "a list of what the server may ask: elicitation, sampling",
}
# Keys of the mcpServers JSON format that tooltree reads: the format's own, and tooltree's (but ``enabled``, which is
# ``disabled`` there). Others are other clients' (``autoApprove``): ignored, with a warning when close to one of these.
_JSON_SERVER_KEYS = {"command", "args", "env", "envFile", "cwd", "url", "headers", "type", "timeout", "disabled"} | (
    SERVER_KEYS.keys() - {"enabled"}
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
_OTHER_FORMATS = {
    "type": "a tooltree.yaml tells a stdio server by its `command` and an HTTP one by its `url`: leave `type` out",
    "httpUrl": "Gemini CLI's name of it: write `url`",
    "serverUrl": "Windsurf's name of it: write `url`",
    "envFile": 'a tooltree.yaml reads none: set the variables in `env`, "${VAR}" passing on tooltree\'s own',
    "disabled": "write `enabled: false`",
}
"""Keys of an ``mcpServers`` entry (another client's file) written in a tooltree.yaml, with what to write instead."""
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


def server_of(
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
    if server is not None and json_format:
        server = dataclasses.replace(server, keys=_keys(where, client, renamed))
    return server


def _keys(where: str, client: str, renamed: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The keys of the entry at ``where`` of a ``client``'s file by tooltree's fields (`ServerConfig.keys`), its keys
    that tooltree reads as others' (``renamed``: ``mcp_servers.x.http_headers`` for ``mcp_servers.x.headers``) named as
    written, with the ``timeout`` the file's format takes when none is written."""
    keys = {"": (where, "")} | {k: (renamed.get(f"{where}.{k}", f"{where}.{k}"), "") for k in SERVER_KEYS}
    keys["enabled"] = (renamed.get(f"{where}.disabled", f"{where}.disabled"), "")  # an mcpServers entry's `disabled`
    keys |= {k: (f"{where}.{k}", "") for k in _JSON_TOOL_LISTS}  # `includeTools`, Codex's `enabled_tools`, …
    keys |= {ours.removeprefix(f"{where}."): (to, "") for ours, to in renamed.items() if ours.startswith(f"{where}.")}
    if client in ("codex", "zed"):  # their `enabled = false` disables a server
        keys["enabled"] = (f"{where}.enabled", "")
    if client == "codex":  # a 401 is about the token of `bearer_token_env_var` when it gives one
        bearer = keys.get("headers.Authorization", (f"{where}.http_headers", ""))
        keys["headers"] = bearer if bearer[0].endswith("bearer_token_env_var") else (f"{where}.http_headers", "")
    timeout = keys["timeout"][0]
    if client == "codex":
        taken = timeout.rpartition(".")[2]
        unset = CODEX_TOOL_SECONDS if taken == "tool_timeout_sec" else CODEX_STARTUP_SECONDS
        other = "startup_timeout_sec" if taken == "tool_timeout_sec" else "tool_timeout_sec"
        shown = f"{unset * 1000:g}" if taken.endswith("_ms") else f"{unset:g}"
        keys["timeout"] = (timeout, f"Codex's default {shown}; tooltree waits the larger of it and {other}")
    else:
        ms = client == "gemini"  # Gemini CLI's `timeout` is in milliseconds
        said = f"in milliseconds, default {DEFAULT_TIMEOUT * 1000:g}" if ms else f"default {DEFAULT_TIMEOUT:g}"
        keys["timeout"] = (timeout, said)
    return keys


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
    """`server_of` of an entry in tooltree's shape."""
    if not isinstance(body.value, dict):
        raise reader.error(f"expected a mapping with `command` or `url`, got {kind_of(body.value)}", body, where)
    items: dict[str, tuple[Node, Node]] = body.value
    named: dict[str, tuple[str, str]] = {}
    misnamed = False  # an unknown key that is a misspelt `command` or `url` (`comand`, Gemini CLI's `httpUrl`)
    if not json_format:  # each unknown key is kept (`Reader.problems`), and the known ones read: every error at once
        for k, (knode, _) in items.items():
            if k not in SERVER_KEYS:  # another client's key says what tooltree's is, or that there is none
                said = _OTHER_FORMATS.get(k, "")
                if k in _JSON_TOOL_LISTS:
                    said = f"another client's list of tool names: write `{_JSON_TOOL_LISTS[k]}`, of patterns"
                elif k in _FOREIGN_KEYS and k not in SECTIONS:  # a `sandbox:` indented under a server: no
                    said = "another client's key, which tooltree does not read: leave it out"
                said = f" ({said})" if said else did_you_mean(k, SERVER_KEYS, unknown=True)
                reader.add(reader.error(f"unknown key{said}", knode, f"{where}.{k}"))
                misnamed |= k != "type" and any(f"{q}{key}{q}" in said for key in ("command", "url") for q in "'`")
        items = {k: v for k, v in items.items() if k in SERVER_KEYS}  # not read as another format's (`envFile`)
        if misnamed and "command" not in items and "url" not in items:
            # Its error stands for "needs `command` or `url`", which would be a second error of one mistake (the
            # file's errors are raised together at its end).
            return None
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
        connects = "command" if kind == "stdio" else "url"  # before: a `type` the entry contradicts, not a word of it
        if connects not in items and (other := "url" if kind == "stdio" else "command") in items:
            logger.warning(
                "%s:%d: %s.type: %r, but the entry has `%s` and no `%s`; tooltree %s", reader.file, n.line,
                one_line(where, 200), kind, other, connects,
                "connects to the URL" if other == "url" else "starts the command",
            )  # fmt: skip
    if (n := get("include")) is not None and n.value == []:  # before: read as no filter, all the server's tools
        off = "enabled = false" if client == "codex" else '"disabled": true' if json_format else "enabled: false"
        problem = (
            "an empty list, which would offer none of the server's tools: leave `include` out to offer them all, "
            f"or write `{off}` to leave the server out"
        )
        raise reader.error(problem, n, f"{where}.include")
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
        both = "has both `command` and `url`: `command` starts the server (stdio), `url` reaches one already running"
        problem = f"{both} (HTTP); keep the one it is" if "command" in kw else "needs `command` (stdio) or `url` (HTTP)"
        raise reader.error(f"server {problem}", body, where)
    written_url = reader.string(n, f"{where}.url", expand=False) if (n := get("url")) is not None else None
    if "url" in kw and not kept(kw["url"]) and (bad_url := url_problem(kw["url"], written_url)) is not None:
        raise reader.error(bad_url, n, f"{where}.url")
    for k, conv in (("args", reader.string_list), ("include", reader.string_list), ("exclude", reader.string_list)):
        if (n := get(k)) is not None:
            kw[k] = conv(n, f"{where}.{k}", expand=k == "args")
    for k in ("env", "headers"):
        if (n := get(k)) is not None:
            kw[k] = reader.string_map(n, f"{where}.{k}", variables=k == "env")
            check = header_problem if k == "headers" else env_problem
            check_fields(reader, n, kw[k], f"{where}.{k}", check, kept, unset)
            if k == "headers":
                header_named_twice(reader, n, f"{where}.{k}")
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
    if reader.client is None and not reader.json and kw.get("enabled", True):  # a tooltree.yaml (not a client's file)
        for k in ("command", "args", "env", "cwd", "url", "headers"):
            if (n := get(k)) is not None:
                warn_bare_variables(reader, n, f"{where}.{k}")
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
            kw[k] = expand_home(reader, kw[k], get(k), f"{where}.{k}")
    if (n := get("description")) is not None:
        kw["description"] = reader.string(n, f"{where}.description", expand=False)
        if (reference := re.search(r"\$\{[A-Za-z_][^{}]*\}", kw["description"])) is not None:
            # Copied into the tree as written, so that the tree is the same in every environment (a --from-snapshot
            # check in CI sets no server's variables); before, kept without a word.
            logger.warning(
                "%s:%d: %s.description: %s is not expanded: a description is copied into the tree as written",
                reader.file, n.line, one_line(where, 200), one_line(reference.group(), 80),
            )  # fmt: skip
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
            raise reader.error(f"expected {SERVER_KEYS['protocol']}, got {kw['protocol']!r}", n, f"{where}.protocol")
    if (n := get("client_capabilities")) is not None:
        kw["client_capabilities"] = _client_capabilities(reader, n, f"{where}.client_capabilities")
    if "command" in kw and ("url" in kw or "headers" in kw):
        raise reader.error("`headers` only applies to `url` servers", body, f"{where}.headers")
    if "url" in kw and any(k in kw for k in ("args", "env", "cwd")):
        bad = next(k for k in ("args", "env", "cwd") if k in kw)
        raise reader.error(f"`{bad}` only applies to `command` servers", get(bad), f"{where}.{bad}")
    if reader.folder is not None and "command" in kw:
        # Relative to the config file, not to the shell's working directory.
        if not kept(kw.get("cwd", "")):
            kw["cwd"] = str(_resolved(reader.folder / kw.get("cwd", ".")))
        if "/" in kw["command"] and not os.path.isabs(kw["command"]) and not kept(kw["command"]):
            started = Path(kw["cwd"]) if codex and not kept(kw["cwd"]) else reader.folder
            resolved = _resolved(started / kw["command"])
            # `npx -y @scope/server` is a command line, not a path: left as written, its start says so
            if not any(c.isspace() for c in kw["command"]) or resolved.exists():
                kw["command"] = str(resolved)
    return ServerConfig(**kw)


def _client_capabilities(reader: Reader, node: Node, where: str) -> tuple[str, ...]:
    """The ``client_capabilities`` list: `ASKABLE` names, each once (``roots`` refused with the reason)."""
    names = reader.string_list(node, where, expand=False)
    for i, name in enumerate(names):
        at = node.value[i] if isinstance(node.value, list) else node
        if name == "roots":
            raise reader.error(
                "roots are never passed on: a client's root folders are of its own machine, and a server may take "
                "them for the only folders it may use; give the server its folders in its own arguments",
                at,
                f"{where}[{i}]",
            )
        if name not in ASKABLE:
            raise reader.error(f"expected one of {', '.join(ASKABLE)}, got {name!r}", at, f"{where}[{i}]")
    return tuple(dict.fromkeys(names))


def _resolved(path: Path) -> Path:
    """``path`` resolved; made absolute alone when it goes through a symlink loop (Python 3.11's ``resolve`` raises
    RuntimeError: before, a traceback), which then fails that server's start, not the whole config."""
    try:
        return path.resolve()
    except RuntimeError:
        return Path(os.path.abspath(path))
