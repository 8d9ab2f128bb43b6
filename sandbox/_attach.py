"""A container's attach socket as three streams: stdin to write, stdout and stderr to read.

The engine's attach endpoint (``POST /containers/{id}/attach?stdin=1&stdout=1&stderr=1&stream=1``,
upgraded to a raw stream) carries the container's stdin one way and, without a TTY, its stdout
and stderr multiplexed the other way, each piece behind an 8-byte header::

    [stream: 1 stdout | 2 stderr | 3 engine error] [0, 0, 0] [length: uint32 big-endian] payload

The payloads are the container's bytes (hostile); the headers are the engine's. The
demultiplexer is strict and bounded all the same: another stream number, non-zero padding, a
length over `MAX_CHUNK_BYTES` or a stream that ends inside a header or a payload is an
`AttachStreamError`. Nothing is ever buffered whole: stdout goes to its reader as it arrives
(in pieces of at most `_RECV_BYTES`), and stderr keeps only its last `STDERR_KEEP` bytes when
nobody reads it fast enough.

Closing ``stdin`` half-closes the socket: the engine then closes the container's stdin
(``StdinOnce``), which is how the supervisor learns to exit. `AttachSocket.abort` shuts the
socket both ways at once, so nobody blocks on it any more — neither a reader here nor the
engine writing to us.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Any, Protocol

from sandbox.errors import ProtocolError

MAX_CHUNK_BYTES = 1 << 20
"""The longest piece the engine may send behind one header (it copies in pieces of 32 KiB)."""
STDERR_KEEP = 64 * 1024
"""Bytes of stderr held for a slow reader; older ones are dropped."""
_HEADER = struct.Struct(">B3xI")
_RECV_BYTES = 64 * 1024
_STDOUT, _STDERR, _SYSTEM_ERROR = 1, 2, 3


class AttachStreamError(ProtocolError):
    """The attach stream broke the engine's multiplexing format."""


class RawSocket(Protocol):
    """What the streams need of the upgraded connection (a socket; paramiko channels have the same)."""

    def recv(self, size: int, /) -> bytes: ...

    def sendall(self, data: Any, /) -> Any: ...

    def shutdown(self, how: int, /) -> Any: ...

    def close(self) -> Any: ...


class _StderrTap:
    """The stderr side: a readable that blocks until the demultiplexer hands it bytes or the stream ends."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._ended = False
        self._cond = threading.Condition()

    def put(self, data: bytes) -> None:
        with self._cond:
            self._data += data
            del self._data[:-STDERR_KEEP]
            self._cond.notify_all()

    def end(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def read(self, size: int = -1) -> bytes:
        with self._cond:
            while not self._data and not self._ended:
                self._cond.wait()
            n = len(self._data) if size < 0 else min(size, len(self._data))
            out = bytes(self._data[:n])
            del self._data[:n]
            return out

    def close(self) -> None:
        self.end()


class _Stdin:
    """The stdin side: writes go straight to the socket; closing half-closes it."""

    def __init__(self, owner: AttachSocket) -> None:
        self._owner = owner
        self.closed = False

    def write(self, data: bytes) -> int:
        if self.closed:
            raise ValueError("write to a closed stdin")
        self._owner.sock.sendall(data)
        return len(data)

    def write_nowait(self, data: bytes) -> int:
        """Write what the socket takes without blocking; how many bytes that was (0 when it would block).

        Raises:
            OSError: the connection failed.
            ValueError: stdin is closed.
        """
        if self.closed:
            raise ValueError("write to a closed stdin")
        sock = self._owner.sock
        if type(sock) is not socket.socket:  # TLS and SSH channels take no flags: the writer thread does it
            return 0
        try:
            return sock.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0

    def flush(self) -> None:
        """Nothing is buffered here."""

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError):
                self._owner.sock.shutdown(socket.SHUT_WR)


class _Stdout:
    """The stdout side: demultiplexes the stream as it is read (only ever from one thread)."""

    def __init__(self, owner: AttachSocket) -> None:
        self._owner = owner

    def read(self, size: int = -1) -> bytes:
        return self._owner.read_stdout(_RECV_BYTES if size < 0 else size)

    def close(self) -> None:
        self._owner.stderr.end()


class AttachSocket:
    """The upgraded attach connection of one container, demultiplexed.

    Args:
        sock: the raw connection after the HTTP upgrade (no bytes of it read yet).
        keepalive: objects that must live as long as the socket (the HTTP response that owns it).
    """

    def __init__(self, sock: RawSocket, *, keepalive: Any = None) -> None:
        self.sock = sock
        self._keepalive = keepalive
        self._buffer = bytearray()
        self._stdout_left = 0
        self._ended: str | None = None
        self.stdin = _Stdin(self)
        self.stdout = _Stdout(self)
        self.stderr = _StderrTap()

    # ---- reading ------------------------------------------------------------------------------

    def _fill(self, n: int) -> bool:
        """At least ``n`` bytes buffered; False when the stream ended first."""
        while len(self._buffer) < n:
            chunk = self.sock.recv(_RECV_BYTES)
            if not chunk:
                if self._ended is not None:  # aborted here, not ended by the engine
                    raise ConnectionAbortedError(self._ended)
                return False
            self._buffer += chunk
        return True

    def _take(self, n: int) -> bytes:
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data

    def _next_header(self) -> tuple[int, int] | None:
        if not self._fill(_HEADER.size):
            if self._buffer:
                raise AttachStreamError("the attach stream ended inside a header")
            return None
        if self._buffer[1:4] != b"\0\0\0":
            raise AttachStreamError("the attach stream has a malformed header (non-zero padding)")
        stream, length = _HEADER.unpack_from(self._buffer)
        if stream not in (_STDOUT, _STDERR, _SYSTEM_ERROR):
            raise AttachStreamError(f"the attach stream names stream {stream}, not stdout or stderr")
        if length > MAX_CHUNK_BYTES:
            raise AttachStreamError(
                f"the attach stream announces a piece of {length} bytes (at most {MAX_CHUNK_BYTES})"
            )
        del self._buffer[: _HEADER.size]
        return stream, length

    def read_stdout(self, size: int) -> bytes:
        """Up to ``size`` bytes of stdout; b"" at the end of the stream.

        Raises:
            AttachStreamError: the stream broke the format, or the engine reported an error on it.
            OSError: the connection failed, or was aborted (the reason is in the message).
        """
        try:
            while self._stdout_left == 0:
                header = self._next_header()
                if header is None:
                    self.stderr.end()
                    return b""
                stream, length = header
                if stream == _STDOUT:
                    self._stdout_left = length
                    continue
                if not self._fill(length):
                    raise AttachStreamError("the attach stream ended inside a piece of stderr")
                payload = self._take(length)
                if stream == _SYSTEM_ERROR:
                    text = payload[:500].decode("utf-8", errors="replace")
                    raise AttachStreamError(f"the engine reported an error on the attach stream: {text}")
                self.stderr.put(payload)
            if not self._fill(1):
                raise AttachStreamError("the attach stream ended inside a piece of stdout")
            data = self._take(min(size, self._stdout_left, len(self._buffer)))
            self._stdout_left -= len(data)
            return data
        except OSError as e:
            self.stderr.end()
            if self._ended is not None and not isinstance(e, ConnectionAbortedError):
                raise ConnectionAbortedError(self._ended) from None
            raise
        except AttachStreamError:
            self.stderr.end()
            raise

    # ---- ending -------------------------------------------------------------------------------

    def abort(self, reason: str = "the connection to the container was closed") -> None:
        """Shut the socket both ways: readers see the end at once (or ``reason``), the engine stops writing."""
        if self._ended is None:
            self._ended = reason
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.stderr.end()

    def close(self) -> None:
        """Abort and release the socket."""
        self.abort()
        with contextlib.suppress(OSError):
            self.sock.close()
        response, self._keepalive = self._keepalive, None
        if response is not None:
            with contextlib.suppress(OSError, AttributeError):
                response.close()
