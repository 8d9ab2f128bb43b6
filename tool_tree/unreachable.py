"""Why a connection to an HTTP server failed, and what to check, in words a user can act on.

httpx words a failed connection vaguely ("All connection attempts failed"); `reason` says it from the innermost
operating-system error. An ``https://`` URL of a port that answers the TLS handshake in plain text (a plain-HTTP
server's "400 Bad Request") says so, and to use ``http://`` (before: "TLS handshake failed: [SSL:
WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)", and to check that the server runs); one whose port takes
the connection and never answers the handshake says that the handshake got no answer, when the connection's
timeout ends (`tool_tree.http_client.http_client`'s ``connect``; before: the whole start-up timeout, then a warning
that the server left ``server/discover`` unanswered, as if it had been asked).
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import httpx2

CHECK_URL = "check that the server is running and listening there, and its URL"
"""What to check of a server that could not be reached, in general (`to_check`)."""
_NOT_TLS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE")
"""OpenSSL's reasons for an answer to the TLS handshake that is no TLS record (a plain-HTTP server's "HTTP/1.1 400")."""


def host(url: str) -> str:
    """``host:port`` of a URL (no path, query or credentials: they may hold secrets)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


class Handshake:
    """The ``trace`` of a request to an ``https://`` URL: whether its connection began the TLS handshake."""

    def __init__(self) -> None:
        self.began = False

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.start_tls.started":
            self.began = True


class Unreachable(ConnectionError):
    """A server's URL that a session could not open at: "cannot connect to host:port: why", and `check`, what to
    check (`to_check`)."""

    def __init__(self, url: str, e: BaseException) -> None:
        super().__init__(f"cannot connect to {host(url)}: {reason(e)}")
        self.check = to_check(e)


def to_check(e: BaseException) -> str:
    """What to check of a server that could not be reached for ``e`` (an error of httpx, or an `Unreachable`),
    without the setting."""
    if isinstance(e, Unreachable):
        return e.check
    if _not_tls(e):
        return "if the server speaks plain HTTP, use http:// in its URL"
    if _handshake_unanswered(e) is not None:
        return "check that the port serves HTTPS, or use http:// in its URL if the server speaks plain HTTP"
    return CHECK_URL


def _causes(e: BaseException) -> Iterator[BaseException]:
    """``e`` and what it was raised from, inward (the first of a group)."""
    seen: set[int] = set()
    cause: BaseException | None = e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        else:
            cause = cause.__cause__ or cause.__context__


def _not_tls(e: BaseException) -> bool:
    """Whether the port answered the TLS handshake with something that is not TLS."""
    return any(isinstance(c, ssl.SSLError) and c.reason in _NOT_TLS for c in _causes(e))


def _handshake_unanswered(e: BaseException) -> float | None:
    """The seconds a TLS handshake waited for an answer, if ``e`` is its timeout (None: not that)."""
    if not isinstance(e, httpx2.ConnectTimeout):
        return None
    try:
        request = e.request
    except RuntimeError:  # raised outside a request
        return None
    trace, timeout = request.extensions.get("trace"), request.extensions.get("timeout", {}).get("connect")
    return float(timeout) if isinstance(trace, Handshake) and trace.began and timeout is not None else None


def reason(e: BaseException) -> str:
    """Why a connection failed, from the innermost operating-system error (httpx words it vaguely)."""
    if (waited := _handshake_unanswered(e)) is not None:
        return f"the TLS handshake got no answer in {waited:g} s (the port took the connection and said nothing)"
    if isinstance(e, httpx2.ConnectTimeout):
        return "timed out connecting"
    if _not_tls(e):
        return "the port does not speak TLS: it answered the TLS handshake in plain text, as a plain-HTTP server does"
    said = str(e) or type(e).__name__
    for cause in _causes(e):
        if isinstance(cause, socket.gaierror):
            return f"host name not resolved: {cause.strerror or cause}"
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed: {cause.strerror or cause}"
        if isinstance(cause, OSError) and cause.errno is not None and cause.errno > 0:
            said = os.strerror(cause.errno)
        elif isinstance(cause, OSError) and cause.strerror:
            said = cause.strerror
    return said
