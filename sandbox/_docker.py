"""`DockerEngine`: the Docker Engine API through docker-py, with the sandbox's errors.

The engine is found as the ``docker`` command finds it, from the environment: ``DOCKER_HOST``
(``unix://``, ``tcp://``, ``ssh://``), ``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH``; by default the
local socket. One engine object serves a whole process (`default_engine`): its HTTP connections
are pooled, and one stream of engine events tells every live connection at once when its
container dies (`watch_death`).

Every call turns docker-py's and requests' exceptions into `EngineError` (the call failed; the
engine's explanation attached) or `EngineUnavailableError` (no engine answers: start Docker or
set ``DOCKER_HOST``).

(Over 400 lines: one class around one docker-py client — the Engine API calls the sandbox makes,
each with its error translation, and the build's deadline and log tail; the attach channel is `_attach`.)
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

import docker
import docker.errors
import docker.transport.unixconn
import requests.exceptions
import urllib3.exceptions

from sandbox._attach import AttachSocket
from sandbox.errors import EngineError, EngineUnavailableError

logger = logging.getLogger(__name__)


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

API_TIMEOUT = 120.0
"""Seconds any one API call may take (builds and imports pass their own)."""
_CONNECTION_POOLS = 4
CREATE_REPLY_WAIT = 30.0
"""Seconds an interrupted container create waits for the engine's reply, to remove what it made."""

DeathHandler = Callable[[Mapping[str, Any]], None]
"""Called with a container's ``die`` event (``Actor.Attributes`` holds ``exitCode``), whose key `OOM_KEY` says whether
the engine reported the container out of memory (an ``oom`` event) before it died."""
OOM_KEY = "tooltree.oom"


class ImageEntry(NamedTuple):
    """An image as the engine lists it."""

    id: str
    names: list[str]
    """Its ``repository:tag`` names."""
    labels: dict[str, str]
    size: int = 0
    """Bytes, as the engine lists it (shared layers counted in each image)."""
    created: float = 0.0
    """When it was built (Unix time; 0 when unknown)."""


class ContainerEntry(NamedTuple):
    """A container as the engine lists it."""

    id: str
    name: str
    labels: dict[str, str]
    image_id: str
    status: str
    """The engine's words for its state and age: ``Exited (0) 3 minutes ago``, ``Up 2 hours``, ``Created``."""
    volumes: list[str]
    """The named volumes it mounts."""
    running: bool = False
    """Its state is ``running`` (or ``paused``, ``restarting``): a process may still be using it."""
    created: float = 0.0
    """When it was made (Unix time; 0 when the engine does not say): ``status`` gives no age of one never started."""


class VolumeEntry(NamedTuple):
    """A volume as the engine lists it."""

    name: str
    labels: dict[str, str]
    created: str
    """When it was made (RFC 3339, as the engine says it; empty when it does not)."""


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


LOG_TAIL_CHARS = 3000
"""How much of the end of a build log is kept (the rest is read and dropped) and reported on failure."""


class LogTail:
    """The last ``limit`` characters of a stream of text, without keeping the rest in memory."""

    def __init__(self, limit: int = LOG_TAIL_CHARS) -> None:
        self.limit = limit
        self._parts: collections.deque[str] = collections.deque()
        self._size = 0

    def append(self, text: str) -> None:
        """Add ``text`` at the end, dropping what falls out of the tail."""
        text = text[-self.limit :]
        self._parts.append(text)
        self._size += len(text)
        while self._size - len(self._parts[0]) >= self.limit:
            self._size -= len(self._parts.popleft())

    def text(self) -> str:
        """The tail: at most ``limit`` characters."""
        return "".join(self._parts)[-self.limit :]


def _collect(item: Any, log: LogTail | None, what: str) -> None:
    """One decoded line of a build, pull or import stream: its text kept, its error raised."""
    if not isinstance(item, dict):
        return
    if item.get("error"):
        raise EngineError(
            f"{what} failed: {str(item['error'])[-2000:]}", command=[what], output=log.text() if log else ""
        )
    if log is not None and isinstance(item.get("stream"), str):
        log.append(item["stream"])


def _shut(response: requests.Response) -> None:
    """Shut a streamed response's connection, waking the thread blocked reading it (which alone may
    close the response: two threads closing it race). The engine then cancels the request: a build
    kills its running step's container and removes it."""
    raw: Any = response.raw
    sock: Any = getattr(getattr(getattr(raw, "_fp", None), "fp", None), "raw", None)  # http.client's SocketIO
    sock = getattr(sock, "_sock", sock)  # the socket under it (unix, tcp, tls)
    with contextlib.suppress(OSError, AttributeError):
        sock.shutdown(socket.SHUT_RDWR)  # close() would not wake a blocked recv


_STREAM_BROKE = (
    urllib3.exceptions.HTTPError, requests.exceptions.RequestException, docker.errors.StreamParseError, OSError,
    ValueError,
)  # fmt: skip
"""What reading a streamed response raises when its connection is shut, times out or breaks."""
_TIMEOUTS = (urllib3.exceptions.ReadTimeoutError, requests.exceptions.Timeout, TimeoutError)


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


class DockerEngine:
    """One Docker engine, reached through docker-py.

    Args:
        client: a docker-py client to use; default ``docker.from_env()`` on first use.
    """

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._watched: dict[str, DeathHandler] = {}
        self._out_of_memory: set[str] = set()
        """Watched containers the engine said ran out of memory (``oom``), until they die."""
        self._events: Any = None
        self._events_thread: threading.Thread | None = None

    @property
    def client(self) -> docker.DockerClient:
        """The docker-py client (connected on first use).

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with self._lock:
            if self._client is None:
                address = engine_address()
                if address.startswith("unix://") and not os.path.exists(address[len("unix://") :]):
                    raise EngineUnavailableError(
                        f"no Docker engine answers at {address}: there is no socket there. Start Docker (Debian: "
                        "apt-get install docker.io, then dockerd) or point DOCKER_HOST at a running engine"
                    )
                try:
                    self._client = docker.from_env(timeout=int(API_TIMEOUT))
                except docker.errors.DockerException as e:
                    raise EngineUnavailableError(
                        f"no Docker engine answers at {engine_address()}: {e}. Start Docker (Debian: apt-get "
                        "install docker.io, then dockerd) or point DOCKER_HOST at a running engine"
                    ) from None
                _bound_idle_connections(self._client)
            return self._client

    @property
    def api(self) -> docker.APIClient:
        """The low-level client.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return self.client.api

    def ping(self) -> str:
        """The engine's server version.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return str(self.version().get("Version", "unknown"))

    def version(self) -> dict[str, Any]:
        """The engine's ``GET /version``: among the rest ``Version`` and ``Components`` (which name the engine: a
        Docker engine's ``Engine``, Podman's ``Podman Engine``).

        Raises:
            EngineUnavailableError: no engine answers.
        """
        try:
            with translated("docker version"):
                found = self.api.version()
        except EngineUnavailableError:
            raise
        except EngineError as e:
            raise EngineUnavailableError(f"the Docker engine at {engine_address()} does not answer: {e}") from None
        return dict(found) if isinstance(found, dict) else {}

    def info(self) -> dict[str, Any]:
        """The engine's ``GET /info``: among the rest its runtimes (``Runtimes``) and ``DefaultRuntime``.

        Raises:
            EngineUnavailableError: no engine answers.
            EngineError: the engine failed the call.
        """
        with translated("docker info"):
            found = self.api.info()
        return dict(found) if isinstance(found, dict) else {}

    # ---- images and volumes -----------------------------------------------------------------

    def image_exists(self, name: str) -> bool:
        """Whether an image of that name is present.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return self._found("image inspect", lambda: cast(Any, self.api).inspect_image(name)) is not None

    def image_id(self, name: str) -> str | None:
        """The ID (``sha256:…``) of the image called ``name``, or None when there is none.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        found = self._found("image inspect", lambda: cast(Any, self.api).inspect_image(name))
        return None if found is None else str(found.get("Id") or "") or None

    def images(self, label: str) -> list[ImageEntry]:
        """Every image carrying ``label`` (``key=value`` or ``key``).

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with translated("image list"):
            found = self.api.images(filters={"label": [label]})
        return [
            ImageEntry(
                str(i.get("Id", "")),
                [str(t) for t in i.get("RepoTags") or []],
                _labels(i),
                int(i.get("Size") or 0),
                float(i.get("Created") or 0),
            )
            for i in found or []
        ]

    def remove_image(self, name: str) -> bool:
        """Remove the name ``name`` (and the image, when it was its last name), never by force; False when the
        engine keeps it (a container uses it, or another image is built on it) or it is gone already.

        Raises:
            EngineUnavailableError: no engine answers.
            EngineError: the engine failed otherwise.
        """
        return self._removed("image remove", lambda: self.api.remove_image(name, force=False))

    def volume_exists(self, name: str) -> bool:
        """Whether a volume of that name exists.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return self._found("volume inspect", lambda: self.api.inspect_volume(name)) is not None

    def volume_labels(self, name: str) -> dict[str, str] | None:
        """The labels of a volume, or None when there is no volume of that name.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        found = self._found("volume inspect", lambda: self.api.inspect_volume(name))
        return None if found is None else {str(k): str(v) for k, v in (found.get("Labels") or {}).items()}

    @staticmethod
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

    def build_image(
        self, context: bytes, tag: str, *, build_args: Mapping[str, str], labels: Mapping[str, str], deadline: float
    ) -> str:
        """Build an image from a tar of its context (Dockerfile at the top), never pulling; the end of its log.

        The whole build gets ``deadline`` seconds: then its connection is closed, which makes the
        engine stop it (kill and remove the running step's container). Only the last
        `LOG_TAIL_CHARS` of the log are kept.

        Raises:
            EngineError: the build failed or passed its deadline (``output`` holds the end of the log).
        """
        what = f"image build {tag}"
        params = {
            "t": tag, "buildargs": json.dumps(dict(build_args)), "labels": json.dumps(dict(labels)),
            "pull": False, "rm": True, "forcerm": True, "q": False, "nocache": False,
        }  # fmt: skip
        headers = {"Content-Type": "application/tar"}
        # docker-py's `build` posts the same, but hides the response this needs to close at the deadline.
        api: Any = self.api
        log = LogTail()
        started = time.monotonic()
        with translated(what):
            api._set_auth_headers(headers)
            response = api._post(
                api._url("/build"), data=context, params=params, headers=headers, stream=True, timeout=deadline
            )
        passed = threading.Event()

        def stop() -> None:
            passed.set()
            _shut(response)

        timer = threading.Timer(max(0.0, deadline - (time.monotonic() - started)), stop)
        timer.daemon = True
        timer.start()
        try:
            with translated(what):
                try:
                    for item in api._stream_helper(response, decode=True):
                        _collect(item, log, what)
                except docker.errors.APIError:
                    raise  # the engine refused the build: `translated` says why
                except _STREAM_BROKE as e:
                    if not (passed.is_set() or isinstance(e, _TIMEOUTS)):
                        raise EngineError(
                            f"{what}: the connection to the Docker engine at {engine_address()} broke ({e})",
                            command=[what], output=log.text(),
                        ) from None  # fmt: skip
                    passed.set()  # shut at the deadline, or one read waited as long: the build is past it
        finally:
            timer.cancel()
            _shut(response)
            with contextlib.suppress(OSError, AttributeError, requests.exceptions.RequestException):
                response.close()
        if passed.is_set():
            raise EngineError(
                f"{what} did not finish within {deadline:.0f} s and was stopped", command=[what], output=log.text()
            )
        return log.text()

    def import_image(self, tarball: Path, name: str, *, changes: list[str]) -> None:
        """Import a root filesystem tarball as image ``name`` (``repository:tag``), with Dockerfile ``changes``.

        Raises:
            EngineError: the import failed.
        """
        repository, _, tag = name.partition(":")
        with translated(f"image import {name}"):
            output = self.api.import_image(src=str(tarball), repository=repository, tag=tag or None, changes=changes)
        for line in str(output).splitlines():
            with contextlib.suppress(ValueError):
                _collect(json.loads(line), None, f"image import {name}")

    def pull_image(self, name: str) -> None:
        """Pull ``name`` from its registry.

        Raises:
            EngineError: the pull failed.
        """
        repository, _, tag = name.partition(":")
        with translated(f"image pull {name}"):
            for item in self.api.pull(repository, tag=tag or None, stream=True, decode=True):
                _collect(item, None, f"image pull {name}")

    # ---- containers ---------------------------------------------------------------------------

    def create_container(self, spec: Mapping[str, Any]) -> str:
        """Create (not start) a container from `sandbox.hardening.container_spec`-style arguments; its id.

        Interrupted (Ctrl-C) while the engine has the request, this waits for the reply (up to
        `CREATE_REPLY_WAIT` seconds, or a second interrupt), removes the container it names, and raises
        the interrupt: the engine may make the container after anything the caller could do without its id.

        Raises:
            EngineError: the engine refused it.
        """
        outcome: list[Any] = []
        replied = threading.Event()

        def create() -> None:
            try:
                with translated("container create"):
                    outcome.append(str(self.api.create_container(**spec)["Id"]))
            except BaseException as e:  # handed to the caller's thread
                outcome.append(e)
            finally:
                replied.set()

        try:
            # Started inside: the thread may send the request before `start` returns here.
            threading.Thread(target=create, name="docker-create", daemon=True).start()
            replied.wait()
        except BaseException:
            with contextlib.suppress(BaseException):  # a second interrupt stops the wait; the first is raised
                replied.wait(CREATE_REPLY_WAIT)
            if outcome and isinstance(outcome[0], str):
                with contextlib.suppress(EngineError):
                    self.remove_container(outcome[0])
            raise
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return str(outcome[0])

    def inspect_container(self, container: str) -> dict[str, Any]:
        """The engine's view of a container (the shape ``docker inspect`` prints).

        Raises:
            EngineError: no such container, or the engine failed.
        """
        with translated("container inspect"):
            details = self.api.inspect_container(container)
        return dict(details)

    def attach(self, container: str) -> AttachSocket:
        """Attach to a created container's stdin, stdout and stderr (before starting it, so nothing is missed).

        Raises:
            EngineError: the engine refused the attach.
        """
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        with translated("container attach"):
            raw = self.api.attach_socket(container, params=params)
        sock = getattr(raw, "_sock", raw)  # the socket under a SocketIO (unix, tcp, tls); else a channel
        with contextlib.suppress(AttributeError, OSError):
            sock.settimeout(None)  # an idle session must not time out
        return AttachSocket(sock, keepalive=getattr(raw, "_response", None))

    def start(self, container: str) -> None:
        """Start a created container.

        Raises:
            EngineError: the engine could not start it.
        """
        with translated("container start"):
            self.api.start(container)

    def remove_container(self, container: str) -> None:
        """Remove a container and its anonymous volumes, killing it if it runs; gone already is fine.

        Raises:
            EngineUnavailableError: no engine answers.
            EngineError: the engine could not remove it.
        """
        try:
            with translated("container remove"):
                self.api.remove_container(container, force=True, v=True)
        except EngineUnavailableError:
            raise
        except EngineError as e:
            if e.returncode == 409:  # the engine is removing it already (AutoRemove): wait until it is gone
                self._wait_removed(container)
            elif e.returncode != 404:
                raise

    def _wait_removed(self, container: str) -> None:
        try:
            with translated("container wait"):
                self.api.wait(container, condition="removed", timeout=math.ceil(API_TIMEOUT))
        except EngineUnavailableError:
            raise
        except EngineError as e:
            if e.returncode != 404:
                raise

    def wait(self, container: str, timeout: float) -> int:
        """Wait for a container to stop; its exit status.

        Raises:
            EngineError: it did not stop within ``timeout`` seconds, or the engine failed.
        """
        with translated("container wait"):
            status = self.api.wait(container, timeout=math.ceil(timeout))
        return int(status.get("StatusCode", -1))

    def containers(self, label: str) -> list[str]:
        """The ids of every container, running or not, that carries ``label`` (``key=value`` or ``key``).

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with translated("container list"):
            found = self.api.containers(all=True, quiet=True, filters={"label": [label]})
        return [str(c["Id"]) for c in found]

    def container_labels(self, label: str) -> dict[str, dict[str, str]]:
        """The labels of every container, running or not, that carries ``label``, by container id.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with translated("container list"):
            found = self.api.containers(all=True, filters={"label": [label]})
        return {str(c["Id"]): {str(k): str(v) for k, v in (c.get("Labels") or {}).items()} for c in found}

    def container_entries(self, label: str | None = None) -> list[ContainerEntry]:
        """Every container, running or not, whoever made it (what `tooltree sandbox prune` leaves may use a volume
        or an image it would remove); only those carrying ``label`` (``key=value``) when given.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with translated("container list"):
            found = self.api.containers(all=True, filters={"label": [label]} if label is not None else None)
        return [
            ContainerEntry(
                str(c.get("Id", "")),
                str((c.get("Names") or [""])[0]).lstrip("/"),
                _labels(c),
                str(c.get("ImageID") or ""),
                str(c.get("Status") or c.get("State") or ""),
                [str(m["Name"]) for m in c.get("Mounts") or [] if m.get("Type") == "volume" and m.get("Name")],
                str(c.get("State") or "") in ("running", "paused", "restarting"),
                float(c.get("Created") or 0) if isinstance(c.get("Created"), int | float) else 0.0,
            )
            for c in found or []
        ]

    def volume_entries(self, label: str) -> list[VolumeEntry]:
        """Every volume that carries ``label``, with its labels and when it was made.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with translated("volume list"):
            found = self.api.volumes(filters={"label": [label]})
        return [
            VolumeEntry(str(v["Name"]), _labels(v), str(v.get("CreatedAt") or ""))
            for v in (found or {}).get("Volumes") or []
        ]

    def volumes(self, label: str) -> list[str]:
        """The names of every volume that carries ``label``.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        with translated("volume list"):
            found = self.api.volumes(filters={"label": [label]})
        return [str(v["Name"]) for v in (found or {}).get("Volumes") or []]

    def create_volume(self, name: str, labels: Mapping[str, str]) -> None:
        """Create a named volume (a no-op when it exists).

        Raises:
            EngineError: the engine refused.
        """
        with translated("volume create"):
            self.api.create_volume(name, labels=dict(labels))

    def remove_volume(self, name: str) -> bool:
        """Remove a volume; False when it is in use or already gone.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return self._removed("volume remove", lambda: self.api.remove_volume(name, force=True))

    @staticmethod
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

    # ---- deaths -------------------------------------------------------------------------------

    def watch_death(self, container: str, handler: DeathHandler) -> None:
        """Call ``handler`` (on the events thread) when ``container`` dies.

        The first call subscribes to the engine's container events; the subscription lives as
        long as this engine object (`close` ends it).

        Raises:
            EngineError: the engine refused the subscription.
        """
        with self._lock:
            self._watched[container] = handler
            if self._events_thread is not None and self._events_thread.is_alive():
                return
        filters = {"type": ["container"], "event": ["die", "oom"], "label": ["tooltree.owner"]}
        with translated("events"):
            events = self.api.events(filters=filters, decode=True)
        thread = threading.Thread(target=self._read_events, args=(events,), name="docker-events", daemon=True)
        with self._lock:
            self._events, self._events_thread = events, thread
        thread.start()

    def unwatch(self, container: str) -> None:
        """Stop reporting ``container``'s death."""
        with self._lock:
            self._watched.pop(container, None)
            self._out_of_memory.discard(container)

    def _read_events(self, events: Any) -> None:
        try:
            for event in events:
                container = event.get("id") if isinstance(event, dict) else None
                if not isinstance(container, str):
                    continue
                with self._lock:
                    if event.get("Action", event.get("status")) == "oom":  # the kernel killed in it; `die` follows
                        if container in self._watched:
                            self._out_of_memory.add(container)
                        continue
                    handler = self._watched.pop(container, None)
                    oom = container in self._out_of_memory
                    self._out_of_memory.discard(container)
                if handler is not None:
                    handler({**event, OOM_KEY: oom})
        except (requests.exceptions.RequestException, OSError, ValueError) as e:
            logger.debug("the Docker events stream ended: %s", e)
        finally:
            with self._lock:
                if self._events is events:
                    self._events, self._events_thread = None, None
            # The stream ended (the engine stopped or restarted): release its connection now, not at
            # garbage collection, which would leave an unclosed socket behind.
            with contextlib.suppress(OSError, AttributeError, requests.exceptions.RequestException):
                events.close()

    def close(self) -> None:
        """End the events subscription and the client's connections."""
        with self._lock:
            events, self._events, self._events_thread = self._events, None, None
            client, self._client = self._client, None
        if events is not None:
            with contextlib.suppress(OSError, AttributeError, requests.exceptions.RequestException):
                events.close()
        if client is not None:
            client.close()


_ENVIRONMENT = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONFIG")
_defaults: dict[tuple[str | None, ...], DockerEngine] = {}
_default_lock = threading.Lock()


def default_engine() -> DockerEngine:
    """The process's engine for the current environment (``DOCKER_HOST`` and friends), made on first use.

    One per environment: an engine once made is kept (with its connections and its events
    subscription) and handed out again while the environment names the same engine.
    """
    key = tuple(os.environ.get(name) for name in _ENVIRONMENT)
    with _default_lock:
        engine = _defaults.get(key)
        if engine is None:
            engine = _defaults[key] = DockerEngine()
        return engine
