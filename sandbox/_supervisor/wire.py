"""Length-prefixed JSON frames over file descriptors (the container side of the channel).

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON holding one object.
"""

from __future__ import annotations

import json
import os
import struct
import threading
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 64 * 1024 * 1024


class WireError(Exception):
    """A frame could not be read or written."""


def dumps(message: dict[str, Any]) -> bytes:
    """One message as frame bytes.

    Raises:
        ValueError: a non-finite float in the message.
        TypeError: a value JSON cannot represent.
    """
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(body)) + body


class FrameWriter:
    """Writes whole frames to a file descriptor; safe to share between threads."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        """Write one message.

        Raises:
            OSError: the descriptor is closed (the peer went away).
            ValueError: the message is not valid JSON.
            TypeError: the message is not valid JSON.
        """
        data = memoryview(dumps(message))
        with self._lock:
            while data:
                written = os.write(self.fd, data)
                data = data[written:]


class FrameReader:
    """Reads frames from a file descriptor."""

    def __init__(self, fd: int, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._file = os.fdopen(fd, "rb", closefd=False)
        self.max_frame_bytes = max_frame_bytes

    def _read(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = self._file.read(n)
            if not chunk:
                break
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read(self) -> dict[str, Any] | None:
        """The next message, or None at end of stream.

        Raises:
            WireError: a truncated, oversized or unparsable frame.
        """
        header = self._read(HEADER.size)
        if not header:
            return None
        if len(header) < HEADER.size:
            raise WireError("stream ended inside a frame header")
        (length,) = HEADER.unpack(header)
        if length > self.max_frame_bytes:
            raise WireError(f"frame of {length} bytes exceeds the cap")
        body = self._read(length)
        if len(body) < length:
            raise WireError("stream ended inside a frame")
        try:
            value = json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise WireError(f"bad frame: {e}") from None
        if not isinstance(value, dict):
            raise WireError("a frame must hold an object")
        return value
