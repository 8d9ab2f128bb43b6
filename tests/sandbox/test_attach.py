"""The attach stream's demultiplexer is strict and bounded, and its stdin closes the way stdin does.

The engine's side is a real socket pair here: the format is the thing under test. The same code
runs against a real engine in every Docker test.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from sandbox._attach import MAX_CHUNK_BYTES, STDERR_KEEP, AttachSocket, AttachStreamError


def piece(stream: int, payload: bytes) -> bytes:
    return struct.pack(">B3xI", stream, len(payload)) + payload


@pytest.fixture
def pair() -> Iterator[tuple[AttachSocket, socket.socket]]:
    ours, engine = socket.socketpair()
    attached = AttachSocket(ours)
    yield attached, engine
    attached.close()
    engine.close()


def read_all(attached: AttachSocket) -> bytes:
    out = bytearray()
    while chunk := attached.stdout.read(7):
        out += chunk
    return bytes(out)


def test_stdout_and_stderr_are_taken_apart(pair: tuple[AttachSocket, socket.socket]) -> None:
    attached, engine = pair
    engine.sendall(piece(1, b"hello ") + piece(2, b"oops\n") + piece(1, b"") + piece(1, b"world"))
    engine.shutdown(socket.SHUT_WR)
    assert read_all(attached) == b"hello world"
    assert attached.stderr.read() == b"oops\n"
    assert attached.stderr.read() == b""  # ended with the stream


def test_a_piece_split_anywhere_arrives_whole(pair: tuple[AttachSocket, socket.socket]) -> None:
    attached, engine = pair
    data = piece(1, b"abc" * 100) + piece(2, b"e") + piece(1, b"xyz")

    def trickle() -> None:
        for i in range(len(data)):
            engine.send(data[i : i + 1])
        engine.shutdown(socket.SHUT_WR)

    threading.Thread(target=trickle).start()
    assert read_all(attached) == b"abc" * 100 + b"xyz"


def test_stderr_nobody_reads_keeps_only_its_end(pair: tuple[AttachSocket, socket.socket]) -> None:
    attached, engine = pair

    def send() -> None:
        for i in range(40):
            engine.sendall(piece(2, bytes([65 + i % 26]) * 4096))
        engine.sendall(piece(1, b"done"))
        engine.shutdown(socket.SHUT_WR)

    threading.Thread(target=send).start()
    assert read_all(attached) == b"done"
    kept = attached.stderr.read()
    assert len(kept) == STDERR_KEEP and kept.endswith(bytes([65 + 39 % 26]) * 4096)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x01\x00\x01\x00\x00\x00\x00\x01x", "non-zero padding"),
        (struct.pack(">B3xI", 0, 1) + b"x", "names stream 0"),
        (struct.pack(">B3xI", 4, 1) + b"x", "names stream 4"),
        (struct.pack(">B3xI", 1, MAX_CHUNK_BYTES + 1), "announces a piece of"),
        (struct.pack(">B3xI", 2, MAX_CHUNK_BYTES + 1), "announces a piece of"),
        (b"\x01\x00\x00", "ended inside a header"),
        (struct.pack(">B3xI", 1, 10) + b"abc", "ended inside a piece of stdout"),
        (struct.pack(">B3xI", 2, 10) + b"abc", "ended inside a piece of stderr"),
        (piece(3, b"the engine broke"), "engine reported an error on the attach stream: the engine broke"),
    ],
)
def test_a_stream_breaking_the_format_is_refused(
    pair: tuple[AttachSocket, socket.socket], raw: bytes, reason: str
) -> None:
    attached, engine = pair
    engine.sendall(raw)
    engine.shutdown(socket.SHUT_WR)
    with pytest.raises(AttachStreamError, match=reason):
        read_all(attached)
    assert attached.stderr.read() == b""  # a reader of stderr is released too


def test_closing_stdin_half_closes_and_output_still_arrives(pair: tuple[AttachSocket, socket.socket]) -> None:
    attached, engine = pair
    attached.stdin.write(b"request")
    attached.stdin.close()
    received = bytearray()
    while chunk := engine.recv(100):
        received += chunk
    assert received == b"request"  # then the end of input, as a closed stdin gives
    engine.sendall(piece(1, b"last words"))
    engine.shutdown(socket.SHUT_WR)
    assert read_all(attached) == b"last words"
    with pytest.raises(ValueError, match="closed"):
        attached.stdin.write(b"more")


def test_abort_releases_a_blocked_reader_with_the_reason(pair: tuple[AttachSocket, socket.socket]) -> None:
    attached, _engine = pair
    outcome: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            attached.stdout.read(10)
        except OSError as e:
            outcome.append(e)
        done.set()

    threading.Thread(target=read).start()
    attached.abort("the container died")
    assert done.wait(10)
    assert isinstance(outcome[0], ConnectionAbortedError) and str(outcome[0]) == "the container died"


def test_a_write_that_would_block_takes_what_fits_and_never_waits(pair: tuple[AttachSocket, socket.socket]) -> None:
    attached, engine = pair
    assert attached.stdin.write_nowait(b"small") == 5
    assert engine.recv(5) == b"small"
    taken = sum(attached.stdin.write_nowait(b"x" * 65536) for _ in range(200))  # nobody reads the other end
    assert 0 < taken < 200 * 65536
    assert attached.stdin.write_nowait(b"x" * 65536) == 0
