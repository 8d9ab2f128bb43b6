"""Reaching the Docker engine through docker-py, and its errors as the sandbox's: where the engine is
(`engine_address`), docker-py's connections kept in bounds (`_bound_idle_connections`; a unix socket closed when its
``connect`` fails), every call's exceptions translated (`translated`), with an object the engine does not have read
as None or False (`_found`, `_removed`), and the labels of what the engine lists (`_labels`). `sandbox._docker`'s
`DockerEngine` makes its calls through them.

The engine is found as the ``docker`` command finds it, from the environment: ``DOCKER_HOST``
(``unix://``, ``tcp://``, ``ssh://``), ``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH``; by default the
local socket.

Every call turns docker-py's and requests' exceptions into `EngineError` (the call failed; the
engine's explanation attached) or `EngineUnavailableError` (no engine answers: start Docker or
set ``DOCKER_HOST``).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import docker
import docker.errors
import docker.transport.unixconn
import requests.exceptions
import urllib3.exceptions

from sandbox.errors import EngineError, EngineUnavailableError


def _close_socket_when_connect_fails() -> None:
    """docker-py 7.1's unix-socket connection leaks its socket when ``connect`` fails (the engine is
    down or restarting): wrap it so the socket is closed before the error goes on."""
    connection = docker.transport.unixconn.UnixHTTPConnection
    if getattr(connection.connect, "_tooltree_closes", False):
        return

    def connect(self: Any) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_socket)
        except BaseException:
            sock.close()
            raise
        self.sock = sock

    connect._tooltree_closes = True  # type: ignore[attr-defined]
    connection.connect = connect  # type: ignore[method-assign]


_close_socket_when_connect_fails()

_CONNECTION_POOLS = 4


def _labels(found: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (found.get("Labels") or {}).items()}


def engine_address() -> str:
    """Where the engine is looked for: ``DOCKER_HOST`` or the local socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn docker-py's exceptions inside the block into the sandbox's.

    Raises:
        EngineUnavailableError: no engine answers.
        EngineError: the engine refused or failed the call.
    """
    try:
        yield
    except docker.errors.APIError as e:
        explanation = str(e.explanation or e)
        raise EngineError(
            f"{what} failed: {explanation[-2000:]}", command=[what], returncode=e.status_code, stderr=explanation
        ) from None
    except (requests.exceptions.Timeout, urllib3.exceptions.ReadTimeoutError):
        # urllib3's own error escapes requests when a streamed response (a build, a pull) is read.
        raise EngineError(f"{what}: the Docker engine at {engine_address()} did not answer in time") from None
    except urllib3.exceptions.ProtocolError as e:
        raise EngineError(f"{what}: the connection to the Docker engine at {engine_address()} broke ({e})") from None
    except requests.exceptions.ConnectionError as e:
        raise EngineUnavailableError(
            f"{what}: no Docker engine answers at {engine_address()} ({e}); start Docker or set DOCKER_HOST"
        ) from None
    except docker.errors.DockerException as e:
        raise EngineError(f"{what} failed: {e}") from None


def _bound_idle_connections(client: docker.DockerClient) -> None:
    """Keep at most `_CONNECTION_POOLS` idle connections to the engine.

    docker-py's adapters keep one connection pool per request URL, and every container id makes
    new URLs; it holds 25 pools (its ``num_pools`` argument is ignored except over ssh), each with
    an idle connection. Fewer pools keep fewer sockets open for nothing; a pool dropped closes
    only its idle connections (an attach or events stream in use is not idle).
    """
    adapter = getattr(client.api, "_custom_adapter", None)
    pools = getattr(adapter, "pools", None)
    if pools is not None and hasattr(pools, "_maxsize"):
        adapter.pools = type(pools)(_CONNECTION_POOLS, dispose_func=lambda pool: pool.close())  # type: ignore[union-attr]


def _is_gone(error: EngineError) -> bool:
    """The object is not there (404), or the engine is already removing it (409)."""
    return error.returncode in (404, 409)


def _found(what: str, call: Callable[[], Any]) -> Any:
    """What ``call`` returns, or None when the engine has no such object (404)."""
    try:
        with translated(what):
            return call()
    except EngineUnavailableError:
        raise
    except EngineError as e:
        if e.returncode == 404:
            return None
        raise


def _removed(what: str, remove: Callable[[], object]) -> bool:
    """Whether ``remove`` removed its object: False when the engine keeps it (in use) or it is gone already."""
    try:
        with translated(what):
            remove()
    except EngineUnavailableError:
        raise
    except EngineError as e:
        if _is_gone(e):
            return False
        raise
    return True
