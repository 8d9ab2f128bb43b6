"""`DockerEngine`: the Docker Engine API through docker-py, with the sandbox's errors.

One engine object serves a whole process (`default_engine`): its HTTP connections are pooled, and
one stream of engine events tells every live connection at once when its container dies
(`watch_death`).

Where the engine is found, and how every call's exceptions become `EngineError` or
`EngineUnavailableError`, is `sandbox._docker_calls`; the image calls (listing, building with its
deadline and log tail, importing, pulling, removing) are `sandbox._docker_images`; the attach
channel is `_attach`.

(Over 400 lines: one class around one docker-py client — the Engine API calls the sandbox makes for
containers, volumes and the engine's events, each turning the engine's errors into the sandbox's.)
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import docker
import docker.errors
import requests.exceptions

from sandbox._attach import AttachSocket
from sandbox._docker_calls import _bound_idle_connections, _found, _labels, _removed
from sandbox._docker_calls import engine_address as engine_address
from sandbox._docker_calls import translated as translated
from sandbox._docker_images import LOG_TAIL_CHARS as LOG_TAIL_CHARS
from sandbox._docker_images import ImageEntry as ImageEntry
from sandbox._docker_images import LogTail as LogTail
from sandbox._docker_images import _Images
from sandbox.errors import EngineError, EngineUnavailableError

logger = logging.getLogger(__name__)


API_TIMEOUT = 120.0
"""Seconds any one API call may take (builds and imports pass their own)."""
CREATE_REPLY_WAIT = 30.0
"""Seconds an interrupted container create waits for the engine's reply, to remove what it made."""

DeathHandler = Callable[[Mapping[str, Any]], None]
"""Called with a container's ``die`` event (``Actor.Attributes`` holds ``exitCode``), whose key `OOM_KEY` says whether
the engine reported the container out of memory (an ``oom`` event) before it died."""
OOM_KEY = "tooltree.oom"


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


class DockerEngine(_Images):
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

    # ---- volumes (the image calls are `_Images`') --------------------------------------------

    def volume_exists(self, name: str) -> bool:
        """Whether a volume of that name exists.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return _found("volume inspect", lambda: self.api.inspect_volume(name)) is not None

    def volume_labels(self, name: str) -> dict[str, str] | None:
        """The labels of a volume, or None when there is no volume of that name.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        found = _found("volume inspect", lambda: self.api.inspect_volume(name))
        return None if found is None else {str(k): str(v) for k, v in (found.get("Labels") or {}).items()}

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
        return _removed("volume remove", lambda: self.api.remove_volume(name, force=True))

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
