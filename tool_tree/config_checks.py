"""What a server's settings must be to be handed on: a home folder found, an address, headers an HTTP client can
send and environment variables a program can be given (`tool_tree.config_entries` reads the settings)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping

from tool_tree.config_read import ConfigError, Node, Reader
from tool_tree.text import one_line

logger = logging.getLogger("tool_tree.config")


def expand_home(reader: Reader, path: str, node: Node | None, key: str) -> str:
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


def header_problem(name: str, value: str) -> str | None:
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


def header_named_twice(reader: Reader, node: Node, key: str) -> None:
    """Refuse two headers of the mapping ``node`` whose names differ in case alone: HTTP reads them as one name, and
    the client sent both (two ``Authorization`` headers, which a server reads as it likes).

    Raises:
        ConfigError: at the second one's line, naming the first.
    """
    seen: dict[str, str] = {}
    for name, (knode, _) in node.value.items():
        if (first := seen.setdefault(name.lower(), name)) != name:
            problem = f"the same header as {first!r} (HTTP header names are case-insensitive: both would be sent)"
            raise reader.error(problem, knode, f"{key}.{name}")


def env_problem(name: str, value: str) -> str | None:
    """What is wrong with the environment variable ``name=value`` for a program to be started, or None."""
    if not name or "=" in name or "\x00" in name:
        return "not a valid environment variable name (it may not be empty or hold `=`)"
    if "\x00" in value:
        return "the value holds a NUL character, which no program can be given"
    return None


def check_fields(
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


_DOLLAR = re.compile(r"\$(\$|[A-Za-z_][A-Za-z0-9_]*)")
"""``$$`` (a literal ``$``) or a ``$NAME`` without braces."""


def warn_bare_variables(reader: Reader, node: Node, key: str) -> None:
    """Warn of each ``$NAME`` without braces, in the strings of ``node`` at ``key`` as written, whose NAME is a variable
    that is set: it reaches the server as text (a tooltree.yaml expands ``${NAME}`` alone), which ``$HOME/notes``
    in ``args`` is seldom meant to (before: the server got ``$HOME/notes`` without a word). A name no variable has
    (a password's ``$x``) is not said."""
    if isinstance(node.value, dict):
        items = [(f"{key}.{k}", v) for k, (_, v) in node.value.items()]
    elif isinstance(node.value, list):
        items = [(f"{key}[{i}]", v) for i, v in enumerate(node.value)]
    else:
        items = [(key, node)]
    for where, item in items:
        if not isinstance(item.value, str):
            continue
        for m in _DOLLAR.finditer(item.value):
            if (name := m.group(1)) != "$" and name in reader.environ:
                logger.warning(
                    "%s:%s: %s: $%s is passed on as text, not the variable's value: write ${%s} to have it "
                    "expanded, or $$%s to keep the $ and not be told", reader.file, item.line, one_line(where, 200),
                    name, name, name,
                )  # fmt: skip


def url_problem(url: str, written: str | None = None) -> str | None:
    """What is wrong with ``url`` as a server's address, or None. ``written`` is the URL as the file has it: when its
    variables made ``url`` (``?key=${KEY}``), the problem shows it instead, as headers never show their values: a
    variable may hold a secret (before: "got 'https:///mcp?key=sk-…'" for an empty ``${HOST}``)."""
    from urllib.parse import urlsplit

    got = repr(url) if written is None or written == url else f"{written!r} once its variables are set"
    if not re.match(r"^https?://", url, re.IGNORECASE):  # as HTTP reads a scheme (before: HTTPS://… refused)
        return f"expected an http:// or https:// URL, got {got}{_scheme_hint(url, written)}"
    if any(c.isspace() or not c.isprintable() for c in url):
        return f"expected a URL without spaces or control characters, got {got}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- reading it checks it: a port out of range raises ValueError
    except ValueError as e:
        return f"not a valid URL ({e}): {got}"
    if not parts.hostname:
        return f"expected a URL with a host (http://host:port/path), got {got}"
    return None


def _scheme_hint(url: str, written: str | None) -> str:
    """For an address written without a scheme (``example.com/mcp``, ``localhost:8080/mcp``), the URL to write: http://
    for this machine, else https:// (before: "expected an http:// or https:// URL" alone). Not of one its variables
    made: a variable may hold a secret."""
    host = re.match(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+)(?::[0-9]{1,5})?(?:[/?#]|$)", url)
    if (written is not None and written != url) or "://" in url or host is None:
        return ""
    name = host[1].lower()
    local = name in ("localhost", "127.0.0.1", "[::1]", "0.0.0.0") or name.endswith(".localhost")
    if not local and "." not in name.strip("."):  # `mcp`: no host
        return ""
    return f" (write {one_line(('http://' if local else 'https://') + url, 120)})"
