"""`sandbox._docker.DockerEngine`'s image calls (`_Images`, which `DockerEngine` takes them from): whether an image
is there and its ID, the images carrying a label (`ImageEntry`), removing one, building one from a tar of its context
within a deadline, importing a root filesystem tarball and pulling; and reading the streams a build, an import or a
pull answers with, of a build's log only the end kept (`LogTail`, `LOG_TAIL_CHARS`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from sandbox._docker_calls import _found, _labels, _removed, engine_address, translated
from sandbox.errors import EngineError


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


class _Images:
    """`DockerEngine`'s image calls; the client they use is `DockerEngine`'s (`DockerEngine.api`)."""

    if TYPE_CHECKING:

        @property
        def api(self) -> docker.APIClient: ...

    def image_exists(self, name: str) -> bool:
        """Whether an image of that name is present.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        return _found("image inspect", lambda: cast(Any, self.api).inspect_image(name)) is not None

    def image_id(self, name: str) -> str | None:
        """The ID (``sha256:…``) of the image called ``name``, or None when there is none.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        found = _found("image inspect", lambda: cast(Any, self.api).inspect_image(name))
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
        return _removed("image remove", lambda: self.api.remove_image(name, force=False))

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
