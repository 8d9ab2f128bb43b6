"""Host-side frame parsing treats every byte from the container as hostile."""

from __future__ import annotations

import io
import struct

import pytest

from sandbox.framing import MAX_DEPTH, FrameError, FrameReader, encode_frame, parse_message


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def read_one(data: bytes, **kwargs: int) -> object:
    return FrameReader(io.BytesIO(data), **kwargs).read()


def test_a_valid_frame_round_trips() -> None:
    message = {"id": 1, "result": {"text": "héllo", "n": [1, 2.5, None, True]}}
    assert read_one(encode_frame(message)) == message


def test_end_of_stream_between_frames_is_a_clean_end() -> None:
    assert read_one(b"") is None


def test_oversized_frame_is_refused_before_its_body_is_read() -> None:
    class NoBody(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            data = super().read(n)
            if self.tell() > 4:
                raise AssertionError("the body of an oversized frame was read")
            return data

    stream = NoBody(struct.pack(">I", 1_000_001) + b"x" * 10)
    with pytest.raises(FrameError, match="exceeds"):
        FrameReader(stream, max_frame_bytes=1_000_000).read()


def test_truncated_header_and_body_are_refused() -> None:
    with pytest.raises(FrameError, match="header"):
        read_one(b"\x00\x00")
    with pytest.raises(FrameError, match="inside a frame"):
        read_one(struct.pack(">I", 10) + b"{}")


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_constants_are_refused(constant: bytes) -> None:
    with pytest.raises(FrameError, match="non-finite"):
        parse_message(b'{"x": ' + constant + b"}")


def test_a_float_that_overflows_to_infinity_is_refused() -> None:
    with pytest.raises(FrameError, match="out of range"):
        parse_message(b'{"x": 1e999}')


def test_duplicate_keys_are_refused_even_when_nested() -> None:
    with pytest.raises(FrameError, match="duplicate key 'id'"):
        parse_message(b'{"id": 1, "id": 2}')
    with pytest.raises(FrameError, match="duplicate key 'a'"):
        parse_message(b'{"result": {"a": 1, "a": 1}}')


def test_nesting_past_the_depth_cap_is_refused() -> None:
    shallow = b'{"a": ' + b"[" * (MAX_DEPTH - 2) + b"]" * (MAX_DEPTH - 2) + b"}"
    assert parse_message(shallow)
    deep = b'{"a": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    with pytest.raises(FrameError, match="nested deeper"):
        parse_message(deep)


def test_nesting_deep_enough_to_exhaust_the_parser_stack_is_refused() -> None:
    with pytest.raises(FrameError, match="nested deeper"):
        parse_message(b'{"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}")


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(FrameError, match="UTF-8"):
        parse_message(b'{"a": "\xff\xfe"}')


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"42", b"null"])
def test_only_objects_are_messages(body: bytes) -> None:
    with pytest.raises(FrameError, match="JSON object"):
        parse_message(body)


@pytest.mark.parametrize("body", [b"{", b"{'a': 1}", b'{"a": 1} trailing', b"", b"\x00\x01"])
def test_garbage_is_refused(body: bytes) -> None:
    with pytest.raises(FrameError, match="not valid JSON"):
        parse_message(body)


def test_an_integer_with_too_many_digits_is_refused() -> None:
    with pytest.raises(FrameError):
        parse_message(b'{"a": ' + b"9" * 50_000 + b"}")


def test_encoding_refuses_non_finite_floats() -> None:
    with pytest.raises(ValueError):
        encode_frame({"x": float("nan")})
