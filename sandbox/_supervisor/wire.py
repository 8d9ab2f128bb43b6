"""Length-prefixed JSON frames: the one framing of the channel, used by the host and in the container.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON encoding one
object. Standard library only, because it runs in the container too (as
``tooltree_supervisor.wire``); the host imports this same module (``sandbox._supervisor.wire``).

Reading treats every byte as hostile. A frame longer than `MAX_FRAME_BYTES` is refused before
its body is read; a body that would parse to more than `MAX_FRAME_VALUES` values is refused
before it is parsed (`count_values`: a few linear passes in C, so 16 MiB of ``[{}, {}, …]``
never become millions of objects); the body must then be valid UTF-8 and strict JSON — no
``NaN`` or ``Infinity``, no duplicate keys, no integer longer than the interpreter's digit limit,
no nesting deeper than `MAX_DEPTH` — and hold an object. Nothing is ever unpickled or evaluated.
Only a reader whose peer is the trusted side (the supervisor reading the host, the worker
reading the supervisor) may skip the strict checks; the size cap and the object rule hold always.

Writing refuses (`FrameTooLarge`) a message whose frame would be over the cap — and, for a
writer given ``max_values``, (`TooManyValues`) one over the value budget — so an honest sender
can never produce a frame its peer must refuse: the caller turns the refusal into an error
answer instead.
"""

from __future__ import annotations

import json
import os
import re
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Protocol

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest frame body either side sends or accepts (the limits in `limits` are sized to fit it)."""
MAX_DEPTH = 32
"""The deepest nesting of objects and arrays a message may have."""
MAX_FRAME_VALUES = 150_000
"""The most values (objects, arrays, strings, numbers, booleans, nulls; keys not counted) a strict reader
parses in one frame. Every honest message fits (`limits` says how: a tool call's arguments hold at
most 100,000, a directory listing at most 32,768 entries of four, a workspace batch at most 16,384
items of five); parsing that many costs the host tens of MiB at most, whatever the bytes."""


class Readable(Protocol):
    """A blocking byte stream: ``read(n)`` returns 1 to n bytes, b"" at its end."""

    def read(self, size: int = -1, /) -> bytes: ...


class WireError(ValueError):
    """A frame broke the framing or parsing rules."""


class FrameTooLarge(WireError):
    """A message would not fit in one frame. ``size`` is its encoded size in bytes."""

    def __init__(self, size: int, limit: int = MAX_FRAME_BYTES) -> None:
        super().__init__(f"a message of {size} bytes is over the {limit}-byte frame cap")
        self.size = size
        self.limit = limit


class TooDeep(WireError):
    """A message nests deeper than allowed."""


class TooManyValues(WireError):
    """A frame holds more values than allowed. ``head``: its first bytes, for routing a refusal."""

    def __init__(self, values: int, limit: int, head: bytes = b"") -> None:
        super().__init__(f"a frame of more than {limit:,} values (at least {values:,} counted before parsing)")
        self.values = values
        self.limit = limit
        self.head = head


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""A JSON string as the parser sees it, from its opening quote to its closing one (or to the end of the
bytes, where the parser would stop): it matches at every quote, so a scan never backtracks."""


def _structure(data: bytes | bytearray) -> int:
    """1 + commas + openings of non-empty objects and arrays: the values of compact JSON without strings."""
    opened = data.count(b"[") + data.count(b"{")
    return 1 + data.count(b",") + opened - data.count(b"[]") - data.count(b"{}")


def count_values(body: bytes | bytearray, limit: int) -> int:
    """How many values ``json.loads(body)`` would build (keys not counted), as far as ``limit`` needs to know.

    At most ``limit`` means the parser builds at most that many, whatever the bytes (valid JSON or not).
    Over ``limit`` means a valid compact frame (no space inside an empty ``[]`` or ``{}``, as `encode_frame`
    writes) holds more. Every value but the first follows a comma, the ``[`` of a non-empty array or the
    ``{`` of a non-empty object, outside strings. Counted first with the strings in (their ``,[{`` counted
    too: an upper bound, in C passes over the bytes); only a body over ``limit`` that way has its strings
    blanked and is counted again — at most ``2 * limit + 2`` of them, since each value is at most one
    string and one key.
    """
    values = 1 + len(body) - len(body.translate(None, b",[{"))
    if values <= limit:
        return values
    values = _structure(body)
    if values <= limit:
        return values
    return _structure(_STRING.sub(b'""', body, count=2 * limit + 2))


def _reject_constant(name: str) -> Any:
    raise WireError(f"non-finite number {name} is not allowed")


def _reject_infinite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise WireError("number out of range")
    return number


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise WireError(f"duplicate key {key[:40]!r}")
        obj[key] = value
    return obj


def check_depth(value: Any, max_depth: int) -> None:
    """No value deeper than ``max_depth`` (the message itself is at depth 1, a tuple an array), else `TooDeep`; level
    by level, in C where it can."""
    level = [value] if isinstance(value, dict | list | tuple) else []
    depth = 1
    while level:
        children: list[Any] = []
        for item in level:
            children += item.values() if isinstance(item, dict) else item
        depth += 1
        if children and depth > max_depth:
            raise TooDeep(f"message nested deeper than {max_depth} levels")
        level = [child for child in children if isinstance(child, dict | list | tuple)]


def parse_message(
    payload: bytes | bytearray, *, max_depth: int = MAX_DEPTH, strict: bool = True, max_values: int = MAX_FRAME_VALUES
) -> dict[str, Any]:
    """Parse one frame body; strictly unless the sender is trusted (``strict=False``: the host, seen from
    the container), which skips the checks for the number of values, non-finite numbers, duplicate keys
    and depth (a frame of 200 bytes parses in a fifth of the time).

    Raises:
        TooManyValues: (strict) the body would parse to more than ``max_values`` values; nothing was parsed.
        WireError: the bytes are not one (strict) JSON object within the limits.
    """
    if strict and (values := count_values(payload, max_values)) > max_values:
        raise TooManyValues(values, max_values, bytes(payload[:256]))
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("frame is not valid UTF-8") from None
    try:
        value = (
            json.loads(
                text, parse_constant=_reject_constant, object_pairs_hook=_unique_object, parse_float=_reject_infinite
            )
            if strict
            else json.loads(text)
        )
    except RecursionError:
        raise TooDeep(f"message nested deeper than {max_depth} levels") from None
    except WireError:
        raise
    except ValueError as e:  # JSONDecodeError, and ints longer than the interpreter's digit limit
        raise WireError(f"frame is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(value, dict):
        raise WireError(f"a frame must hold a JSON object, not {type(value).__name__}")
    if strict:
        check_depth(value, max_depth)
    return value


def encode_frame(
    message: dict[str, Any], *, max_frame_bytes: int = MAX_FRAME_BYTES, max_values: int | None = None
) -> bytes:
    """One message as frame bytes.

    Raises:
        FrameTooLarge: the encoded message is over ``max_frame_bytes``.
        TooManyValues: ``max_values`` is given and the message holds more values.
        TooDeep: ``max_values`` is given and the message nests deeper than a strict reader takes (`MAX_DEPTH`).
        ValueError: a non-finite float or a lone surrogate in the message.
        TypeError: a value JSON cannot represent.
    """
    body = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(body) > max_frame_bytes:
        raise FrameTooLarge(len(body), max_frame_bytes)
    if max_values is not None and (values := count_values(body, max_values)) > max_values:
        raise TooManyValues(values, max_values)
    if max_values is not None:  # checked once the values are known to be few
        check_depth(message, MAX_DEPTH)
    return HEADER.pack(len(body)) + body


def _check_length(length: int, max_frame_bytes: int) -> None:
    if length > max_frame_bytes:
        raise WireError(f"frame of {length} bytes exceeds the {max_frame_bytes}-byte cap")


class FrameReader:
    """Reads frames from a blocking byte stream (or a file descriptor), the size cap checked before a body."""

    def __init__(
        self,
        stream: Readable | int,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        max_depth: int = MAX_DEPTH,
        strict: bool = True,
    ) -> None:
        self._stream: Readable = os.fdopen(stream, "rb", closefd=False) if isinstance(stream, int) else stream
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = max_depth
        self.strict = strict

    def _read_exactly(self, n: int) -> bytearray:
        data = bytearray()  # one growing buffer: a 16 MiB body is held once, not once in pieces and once joined
        while len(data) < n:
            chunk = self._stream.read(n - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def read(self) -> dict[str, Any] | None:
        """The next message, or None at a clean end of stream (between frames).

        Raises:
            WireError: a truncated or oversized frame, or a body that fails `parse_message`.
        """
        body = self.read_body()
        return None if body is None else self.parse(body)

    def read_body(self) -> bytearray | None:
        """The next frame's body, unparsed (see `parse`), or None at a clean end of stream.

        Raises:
            WireError: a truncated or oversized frame.
        """
        header = self._read_exactly(HEADER.size)
        if not header:
            return None
        if len(header) < HEADER.size:
            raise WireError("stream ended inside a frame header")
        (length,) = HEADER.unpack(header)
        _check_length(length, self.max_frame_bytes)
        body = self._read_exactly(length)
        if len(body) < length:
            raise WireError("stream ended inside a frame")
        return body

    def parse(self, body: bytes | bytearray) -> dict[str, Any]:
        """A body from `read_body` as a message, under this reader's rules.

        Raises:
            WireError: the body fails `parse_message`.
        """
        return parse_message(body, max_depth=self.max_depth, strict=self.strict)


class FrameDecoder:
    """Frames out of bytes that arrive in pieces (from a non-blocking descriptor)."""

    def __init__(self, *, max_frame_bytes: int = MAX_FRAME_BYTES, max_depth: int = MAX_DEPTH) -> None:
        self._buffer = bytearray()
        self.max_frame_bytes = max_frame_bytes
        self.max_depth = max_depth

    def feed(self, data: bytes) -> Iterator[dict[str, Any]]:
        """Add ``data``; yields every message completed by it.

        Raises:
            WireError: an oversized frame (refused as soon as its header is in), or a bad body.
        """
        self._buffer += data
        while len(self._buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buffer)
            _check_length(length, self.max_frame_bytes)
            end = HEADER.size + length
            if len(self._buffer) < end:
                return
            body = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            yield parse_message(body, max_depth=self.max_depth)


class FrameWriter:
    """Writes whole frames to a file descriptor; safe to share between threads."""

    def __init__(self, fd: int, *, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.fd = fd
        self.max_frame_bytes = max_frame_bytes
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any], *, max_values: int | None = None) -> None:
        """Write one message; with ``max_values``, only if its strict reader would not refuse it (values, depth).

        Raises:
            FrameTooLarge: the message does not fit in a frame (nothing was written).
            TooManyValues: the message holds more than ``max_values`` values (nothing was written).
            TooDeep: with ``max_values``, the message nests deeper than `MAX_DEPTH` (nothing was written).
            OSError: the descriptor is closed (the peer went away).
            ValueError: the message is not valid JSON.
            TypeError: the message is not valid JSON.
        """
        frame = encode_frame(message, max_frame_bytes=self.max_frame_bytes, max_values=max_values)
        data = memoryview(frame)
        with self._lock:
            while data:
                written = os.write(self.fd, data)
                data = data[written:]


class FrameSender:
    """Sends frames in order without letting a reader that stops reading block the sender.

    A frame is written at once, from the sending thread, when ``try_write`` (a write that never
    blocks and says how many bytes it took) takes all of it and nothing is queued before it —
    the common case, which costs no thread switch. Whatever is left goes to a background thread
    that finishes it with the blocking ``write_all``, in order. `close` lets that thread finish
    the queue, then calls ``on_close``; a failed write calls ``on_error`` and drops the rest.
    """

    def __init__(
        self,
        write_all: Callable[[bytes], object],
        *,
        try_write: Callable[[bytes], int] | None = None,
        on_error: Callable[[Exception], None] = lambda e: None,
        on_close: Callable[[], None] = lambda: None,
        name: str = "frame-sender",
    ) -> None:
        self._write_all = write_all
        self._try_write = try_write
        self._on_error = on_error
        self._on_close = on_close
        self._queue: deque[bytes | None] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._failed = False
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def send(self, data: bytes) -> None:
        """Write ``data`` now, or queue it behind what is queued. Silently dropped after a failure or `close`."""
        try:
            with self._cond:
                if self._closed or self._failed:
                    return
                if not self._queue and self._try_write is not None:
                    data = data[self._try_write(data) :]
                    if not data:
                        return
                self._queue.append(data)
                self._cond.notify()
        except (OSError, ValueError) as e:
            self._fail(e)

    def _fail(self, error: Exception) -> None:
        with self._cond:
            self._failed = True
            self._cond.notify()
        self._on_error(error)

    def close(self) -> None:
        """Finish what is queued (in the background), then call ``on_close``."""
        with self._cond:
            if not self._closed:
                self._closed = True
                self._queue.append(None)
                self._cond.notify()

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._failed:
                        self._cond.wait()
                    if self._failed:
                        return
                    data = self._queue[0]
                if data is None:
                    return
                try:
                    self._write_all(data)
                except (OSError, ValueError) as e:
                    self._fail(e)
                    return
                with self._cond:
                    self._queue.popleft()
        finally:
            self._on_close()
