"""A server as the configuration gives it (`ServerConfig`), the bounds of its settings, and which tools it offers.

`tool_tree.config_entries` reads a server's entry into a `ServerConfig`; `filtered_out` decides, for the generator and
the bridge alike, which tools its ``include`` and ``exclude`` patterns leave out, and `starts_tooltree_serve` finds
an entry that would start tooltree itself. Import these from `tool_tree.config`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from tool_tree.config_read import ConfigError
from tool_tree.text import cut_name

DEFAULT_TIMEOUT = 30.0
MAX_CONCURRENCY = 1024
"""The most calls in flight to one server a config may allow (``servers.NAME.concurrency``)."""
MAX_DESCRIPTION = 2000
"""Characters a server's ``description`` may have. It is one line saying what the server is for, copied into
INDEX.md, the manifest, the search index and the agent's tool list (the longest of LiveMCPBench's 70
servers has 429); a 50 MB one went into all of them."""


PROTOCOLS = ("auto", "legacy")
ASKABLE = ("elicitation", "sampling")
"""The client capabilities a server's configuration may declare (``client_capabilities``; `tool_tree.server_asks`);
roots are never passed on (a client's roots are folders of its machine, and a server may take them as the only ones it
may touch)."""
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
    client_capabilities: tuple[str, ...] = ()
    """The client capabilities tooltree declares to the server (`ASKABLE`: ``elicitation``,
    ``sampling``); a question of one is passed on to whoever made the call, when it can be (`tooltree serve`'s client,
    for a passthrough tool), else refused. Declared at listing too: some servers offer tools only to such clients."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    description: str = ""
    named: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """The patterns of ``include`` and ``exclude`` that stand for one exact tool name from another client's list in
    an ``mcpServers`` entry, each with that list's key and the name as written: ``{"get_[*]": ("includeTools",
    "get_*")}``. A warning about such a pattern words it with them (`unmatched_filter`)."""
    keys: Mapping[str, tuple[str, str]] = field(default_factory=dict, repr=False, compare=False)
    """Each setting as the server's file writes it, where that is not tooltree.yaml's ``servers.NAME.FIELD``: by
    tooltree's field (or a field's key, ``headers.Authorization``), its key path in the file and what the file's format
    takes when it is unset (``{"timeout": ("mcp_servers.media.tool_timeout_sec", "Codex's default 60; …")}``),
    recorded when the file is read. A message names a setting with `setting_named`."""
    unresolved: ConfigError | None = field(default=None, repr=False, compare=False)
    """Why the server cannot be used yet: a variable one of its settings names is not set (the error names the
    file, line and key; the reference is kept as written in the setting), or gives a header or environment variable
    a value that cannot be sent. Only a server `parse_config` was told is not used (``using``) keeps it;
    `Config.server` and `Config.enabled_servers`, which pick the servers to use, raise it (before: an unset variable
    of any server, even one not used, refused the whole file)."""

    def __repr__(self) -> str:
        """The fields, with every ``env`` and header value, the URL's password and query values and the credentials in
        ``args`` replaced by markers (`tool_tree.redact`): a config printed, logged or shown by a failed assertion
        holds no secret (before: ``headers={'Authorization': 'Bearer sk-…'}``, ``env={'API_KEY': 'sk-…'}``)."""
        from tool_tree.redact import redact

        hidden = {
            "env": {k: f"[redacted {k}]" for k in self.env},
            "headers": {k: f"[redacted header {k}]" for k in self.headers},
        }
        shown = ", ".join(f"{f.name}={hidden.get(f.name, getattr(self, f.name))!r}" for f in fields(self) if f.repr)
        return redact(f"{type(self).__name__}({shown})", self)

    def leaves_out(self, tool: str) -> str | None:
        """Which of this server's filters leaves ``tool`` out (`filtered_out`), or None: it is offered."""
        return filtered_out(tool, self.include, self.exclude)

    def list_leaving_out(self, tool: str) -> str | None:
        """The key of this server's file whose list leaves ``tool`` out: `leaves_out`'s, or another client's list of
        tool names (``disabledTools``) when the pattern that leaves it out, or every include pattern, is a name of it
        (`named`)."""
        if (kind := self.leaves_out(tool)) == "exclude":
            pattern = next(p for p in self.exclude if fnmatch.fnmatchcase(tool, p))
            return self.named.get(pattern, (kind, ""))[0]
        lists = {self.named.get(p, ("include", ""))[0] for p in self.include} if kind == "include" else set()
        return lists.pop() if len(lists) == 1 else kind

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


def setting_named(server: ServerConfig, key: str, source: str | None = None, *, default: bool = False) -> str:
    """``key`` of ``server`` (a field, ``env.TOKEN``, ``args[2]``, or "" for its entry) as its file writes it, with the
    file ``source`` when given: ``mcp_servers.media.tool_timeout_sec in config.toml`` (`ServerConfig.keys`;
    tooltree.yaml's ``servers.NAME.KEY`` when the server has none), and with ``default``, what the file's format takes
    when the setting is unset (``default 30``, tooltree's, in tooltree.yaml). The path is escaped, not cleaned
    (`cut_name`): ``mcpServers.crm\\u200b.timeout`` (before: ``mcpServers.crm.timeout``, another server's setting)."""
    head = re.split(r"[.\[]", key, maxsplit=1)[0]
    own = server.keys.get(key) if key != head else None  # env.TOKEN of Codex's env_vars: a variable's case is kept
    if own is None and head == "headers":  # a header's name, in any case
        own = next((v for k, v in server.keys.items() if k != head and k.lower() == key.lower()), None)
    if own is not None:
        path, unset = own[0], ""
    elif head in server.keys:
        path, unset = server.keys[head][0] + key[len(head) :], server.keys[head][1]
    else:
        path = f"servers.{server.name}" + (f".{key}" if key else "")
        unset = f"default {DEFAULT_TIMEOUT:g}" if key == "timeout" else ""
    named = cut_name(path, 200) + (f" in {source}" if source is not None else "")
    return named + (f", {unset}" if default and unset else "")


def filtered_out(tool: str, include: Sequence[str], exclude: Sequence[str]) -> str | None:
    """Which of a server's tool filters leaves ``tool`` out: ``"include"`` (there are patterns and none
    matches), ``"exclude"`` (a pattern matches), or None (the tool is kept). Patterns are shell-style
    (``search_*``), matched case-sensitively; the generator and the bridge both decide with this."""
    if include and not any(fnmatch.fnmatchcase(tool, pattern) for pattern in include):
        return "include"
    if any(fnmatch.fnmatchcase(tool, pattern) for pattern in exclude):
        return "exclude"
    return None


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
