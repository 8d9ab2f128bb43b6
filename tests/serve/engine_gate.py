"""`EngineGate`: a relay in front of the Docker engine's socket that holds every container creation until
the test releases it, so a test knows a sandbox is still starting for as long as it wants."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from types import TracebackType

WAIT = 90.0


class EngineGate:
    """Relays a unix socket to the engine's, byte for byte, but for requests to create a container:
    `creating` is set when one arrives, and it goes on to the engine only after `release`.

    Give a serve process ``DOCKER_HOST=`` `address`. Use as a context manager: leaving closes every
    connection, and a creation still held never reaches the engine (no container is left behind).

    Args:
        folder: where the socket is made (its path must stay under 108 bytes).
        engine: the engine's socket.
    """

    def __init__(self, folder: Path, engine: str) -> None:
        self.path = folder / "docker.sock"
        self.address = f"unix://{self.path}"
        self.creating = threading.Event()
        self._released = threading.Event()
        self._engine = engine
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closing = False
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(str(self.path))
        self._listener.listen()
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def release(self) -> None:
        """Let the held creations, and every later one, through."""
        self._released.set()

    def __enter__(self) -> EngineGate:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._closing = True
        self._released.set()
        with socket.socket(socket.AF_UNIX) as wake:  # accept() returns, and sees it is closing
            wake.connect(str(self.path))
            self._accepting.join(WAIT)
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:  # shutdown wakes the pumps blocked reading them
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closing:
                client.close()
                return
            engine = socket.socket(socket.AF_UNIX)
            with self._lock:
                self._sockets += [client, engine]
            try:
                engine.connect(self._engine)
            except OSError:
                client.shutdown(socket.SHUT_RDWR)
                continue
            threading.Thread(target=self._pump, args=(client, engine, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(engine, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, dest: socket.socket, requests: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                if requests and b"/containers/create" in data:
                    self.creating.set()
                    self._released.wait(WAIT)
                    if self._closing:
                        break
                dest.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dest.shutdown(socket.SHUT_WR)
