"""Host-side framing of the channel: every byte from the container is treated as hostile.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON encoding one
object. The reader refuses, before parsing, any frame longer than the cap, and after parsing:
invalid UTF-8, anything that is not strict JSON (``NaN``, ``Infinity``, duplicate keys,
oversized integers), nesting deeper than the depth cap, and top-level values that are not
objects. Nothing is ever unpickled or evaluated.
"""

from __future__ import annotations

import json
import struct
from typing import IO, Any

from sandbox.errors import ProtocolError

MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 32
_HEADER = struct.Struct(">I")


class FrameError(ProtocolError):
    """A frame broke the framing or parsing rules."""


def _reject_constant(name: str) -> Any:
    raise FrameError(f"non-finite number {name} is not allowed")


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise FrameError(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def _check_depth(value: Any, max_depth: int) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise FrameError(f"message nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _reject_float(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise FrameError("number out of range")
    return number


def parse_message(payload: bytes, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Parse one frame body strictly.

    Raises:
        FrameError: the bytes are not one strict JSON object within the limits.
    """
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError("frame is not valid UTF-8") from None
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_unique_object, parse_float=_reject_float
        )
    except RecursionError:
        raise FrameError(f"message nested deeper than {max_depth} levels") from None
    except FrameError:
        raise
    except ValueError as e:  # JSONDecodeError, and ints longer than the interpreter's digit limit
        raise FrameError(f"frame is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(value, dict):
        raise FrameError(f"a frame must hold a JSON object, not {type(value).__name__}")
    _check_depth(value, max_depth)
    return value


def encode_frame(message: dict[str, Any]) -> bytes:
    """Serialise one message as a frame.

    Raises:
        ValueError: the message holds a non-finite float or is not JSON-serialisable.
    """
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return _HEADER.pack(len(body)) + body


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    chunks: list[bytes] = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Reads frames from a byte stream, enforcing the size cap before reading a body."""

    def __init__(self, stream: IO[bytes], *, max_frame_bytes: int = MAX_FRAME_BYTES, max_depth: int = MAX_DEPTH):
        self._stream = stream
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = max_depth

    def read(self) -> dict[str, Any] | None:
        """The next message, or None at a clean end of stream.

        Raises:
            FrameError: a truncated or oversized frame, or a body that fails `parse_message`.
        """
        header = _read_exactly(self._stream, _HEADER.size)
        if not header:
            return None
        if len(header) < _HEADER.size:
            raise FrameError("stream ended inside a frame header")
        (length,) = _HEADER.unpack(header)
        if length > self.max_frame_bytes:
            raise FrameError(f"frame of {length} bytes exceeds the {self.max_frame_bytes}-byte cap")
        body = _read_exactly(self._stream, length)
        if len(body) < length:
            raise FrameError("stream ended inside a frame")
        return parse_message(body, max_depth=self.max_depth)
