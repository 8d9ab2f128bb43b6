"""`SandboxBackend`: the one seam between sessions and whatever runs containers.

A backend starts a confined supervisor and hands back a `Connection`: the supervisor's
stdin and stdout as byte streams (plus stderr for diagnostics) and a way to destroy it.
Everything above — the protocol, tool relay, results, workspace transfer, the pool — is
backend-independent, so Docker today and Kubernetes exec streams later plug in here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Protocol

from sandbox.config import SandboxConfig


class ByteSink(Protocol):
    """Where the host writes the supervisor's stdin (a pipe, a socket's write side)."""

    def write(self, data: bytes, /) -> int | None: ...

    def flush(self) -> None: ...

    def close(self) -> None:
        """End of input: the supervisor exits when it reads it."""


class ByteSource(Protocol):
    """Where the host reads the supervisor's stdout or stderr; ``read`` blocks, b"" at the end."""

    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """A running supervisor's attached stdio."""

    name: str
    """A human-readable name (the container name)."""

    @property
    def stdin(self) -> ByteSink: ...

    @property
    def stdout(self) -> ByteSource: ...

    @property
    def stderr(self) -> ByteSource | None:
        """Diagnostics only; None when the backend has none."""

    def close(self, timeout: float = 5.0) -> None:
        """End the supervisor gracefully (close its stdin), then destroy what is left."""

    def kill(self) -> None:
        """Destroy the supervisor and its container at once."""


class SandboxBackend(ABC):
    """Starts sandboxes."""

    config: SandboxConfig

    @abstractmethod
    def prepare(self) -> None:
        """Make everything sessions need ready (engine reachable, image, tree); idempotent.

        Raises:
            SandboxError: something needed is missing.
        """

    def refresh_tree(self) -> bool:
        """Take the tree again after it was regenerated, for the sandboxes launched from now on; whether it changed.

        Raises:
            SandboxError: the tree cannot be taken (the sandboxes launched from now on keep the old one).
        """
        return False

    @abstractmethod
    def launch(self, session_id: str) -> Connection:
        """Start one confined supervisor for ``session_id``.

        Raises:
            HardeningError: the sandbox would not be confined as required (nothing was started).
            SandboxError: it could not be started.
        """

    @abstractmethod
    def verify_ready(self, connection: Connection, status: Mapping[str, Any]) -> None:
        """Check the supervisor's self-report (sent before any user code ran).

        Raises:
            HardeningError: the supervisor runs with privileges it must not have.
        """
