"""Keeping a server's configured secrets out of the text that leaves the host process about it.

A server that fails often says why on stderr, and many name the credential they were given
("authentication failed for API key sk-…"). That text goes into errors that reach the script in
the sandbox, serve's MCP clients and logs, so `redact` replaces every secret value of the server's
configuration with a marker naming where it came from:

- each ``env`` value: ``[redacted FLAKY_API_KEY]``;
- each ``headers`` value, and the credential after its scheme (``Authorization: Bearer X``: X
  alone too): ``[redacted header Authorization]``;
- the ``url``'s password (or its user name when it has no password: a token passed as the user),
  and each query-string value, as written and decoded: ``[redacted url password]``,
  ``[redacted url query key]``;
- in ``args`` (``npx mcp-remote URL --header "Authorization: Bearer …"``, ``--api-key sk-…``), where a server
  that refuses its arguments quotes them (``error: unrecognized arguments: --api-key sk-…``): the value of a flag
  whose name says it holds a credential (`CREDENTIAL`: ``--api-key V``, ``--token=V``) ``[redacted arg --api-key]``;
  a header of such a name and the credential after its scheme (``[redacted arg header Authorization]``); and a
  URL's password and its query values of such names (``[redacted arg url password]``). Only names that say so:
  ``--db postgres://…?sslmode=require`` would otherwise redact every "require" in the text.

A value shorter than `MIN_SECRET_CHARS` is left alone: ``env: {DEBUG: "1"}`` would otherwise turn
every 1 in the text into a marker, and so short a value is no secret. A value of several lines is
also matched line by line; each value also without the whitespace around it, and as a Python ``repr``
shows it (an exception quoting it: ``Illegal header value b'Bearer sk-…\\r'``). Only the text as
configured is matched: this keeps a server from leaking its secret by accident, not one that means to (it
could encode it, or send it in a result).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, unquote_plus, urlsplit

from tool_tree.config import ServerConfig

MIN_SECRET_CHARS = 6
"""Shorter configured values are not redacted."""
CREDENTIAL = re.compile(r"key|token|secret|passw|pwd|credential|cookie|authoriz|(?<![a-z])auth(?![a-z])", re.IGNORECASE)
"""A name (of a flag in ``args``, of a header or URL query key given there) that says its value is a credential."""
NAMES_A_PATH = re.compile(r"file|path|dir|folder", re.IGNORECASE)
"""A flag whose name says its value is where a credential is (``--key-file``): that is no secret, and says where."""
_HEADER = re.compile(r"\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*:\s*(\S.*)", re.DOTALL)
_SCHEME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+ +(\S+)")


def secrets(server: ServerConfig) -> dict[str, str]:
    """The secret values of ``server``'s configuration, each with the marker that replaces it."""
    found: dict[str, str] = {}

    def add(value: str, where: str) -> None:
        lines = [line.strip() for line in value.splitlines()] if "\n" in value else []
        for v in (value, *lines):
            for form in _forms(v):
                if len(form) >= MIN_SECRET_CHARS:
                    found.setdefault(form, f"[redacted {where}]")

    for name, value in server.env.items():
        add(value, name)

    def add_header(name: str, value: str, where: str) -> None:
        add(value, where)
        scheme = _SCHEME.fullmatch(value.strip())
        if scheme is not None:
            add(scheme.group(1), where)

    for name, value in server.headers.items():
        add_header(name, value, f"header {name}")
    for i, arg in enumerate(server.args):
        flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
        credential = bool(flag) and CREDENTIAL.search(flag) is not None and NAMES_A_PATH.search(flag) is None
        if credential and not eq and i + 1 < len(server.args) and not server.args[i + 1].startswith("-"):
            value = server.args[i + 1]  # `--api-key V`: V is checked again as an arg of its own below
            add(value, f"arg {flag}")
        elif credential and eq:
            add(value, f"arg {flag}")
        if (header := _HEADER.fullmatch(value)) is not None and CREDENTIAL.search(header.group(1)):
            add_header(header.group(1), header.group(2), f"arg header {header.group(1)}")
        elif "://" in value:
            parts = urlsplit(value.strip())
            if parts.password:
                add(parts.password, "arg url password")
                add(unquote(parts.password), "arg url password")
            for pair in parts.query.split("&"):
                key, _, secret = pair.partition("=")
                if CREDENTIAL.search(unquote_plus(key)):
                    add(secret, f"arg url query {unquote_plus(key)}")
                    add(unquote_plus(secret), f"arg url query {unquote_plus(key)}")
    if server.url is not None:
        parts = urlsplit(server.url)
        if parts.password:
            add(parts.password, "url password")
            add(unquote(parts.password), "url password")
        elif parts.username:
            add(parts.username, "url user")
            add(unquote(parts.username), "url user")
        for pair in parts.query.split("&"):
            name, _, value = pair.partition("=")
            add(value, f"url query {unquote_plus(name)}")
            add(unquote_plus(value), f"url query {unquote_plus(name)}")
    return found


def _forms(value: str) -> tuple[str, ...]:
    """``value`` as written, without the whitespace around it (a token read from a file ending in ``\\r``),
    and each of those as a Python ``repr`` shows it between its quotes, as text and as UTF-8 bytes: an error
    quoting the value escapes it (httpx: ``Illegal header value b'Bearer sk-…\\r'``)."""
    forms = [value, value.strip()]
    for v in (value, value.strip()):
        forms += [repr(v)[1:-1], repr(v.encode("utf-8", "backslashreplace"))[2:-1]]
    return tuple(dict.fromkeys(forms))


def redact(text: str, server: ServerConfig) -> str:
    """``text`` with every secret of ``server``'s configuration replaced by its marker."""
    found = secrets(server)
    if not found or not text:
        return text
    # One pass, longest first: a secret that holds another is replaced whole, and a marker is never rescanned.
    pattern = re.compile("|".join(re.escape(v) for v in sorted(found, key=len, reverse=True)))
    return pattern.sub(lambda m: found[m.group()], text)


def longest_secret(server: ServerConfig) -> int:
    """How many characters the longest secret of ``server`` has (0: none)."""
    return max(map(len, secrets(server)), default=0)
