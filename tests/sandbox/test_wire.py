"""The one framing of the channel treats every byte as hostile, and never sends a frame its peer must refuse."""

from __future__ import annotations

import io
import json
import math
import struct
import tracemalloc
from typing import Any

import pytest

from sandbox._supervisor.limits import (
    MAX_CALL_VALUES,
    MAX_ERROR_CHARS,
    MAX_IMAGES,
    MAX_IMAGES_TOTAL_BYTES,
    MAX_LIST_ENTRIES,
    MAX_OUTPUT_CHARS,
    MAX_TRACEBACK_CHARS,
    largest_execute_result,
)
from sandbox._supervisor.transfer import BATCH_ITEMS
from sandbox._supervisor.wire import (
    MAX_DEPTH,
    MAX_FRAME_BYTES,
    MAX_FRAME_VALUES,
    FrameDecoder,
    FrameReader,
    FrameTooLarge,
    TooManyValues,
    WireError,
    count_values,
    encode_frame,
    parse_message,
)
from sandbox.call_limits import measure


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
    with pytest.raises(WireError, match="exceeds"):
        FrameReader(stream, max_frame_bytes=1_000_000).read()


def test_truncated_header_and_body_are_refused() -> None:
    with pytest.raises(WireError, match="header"):
        read_one(b"\x00\x00")
    with pytest.raises(WireError, match="inside a frame"):
        read_one(struct.pack(">I", 10) + b"{}")


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_constants_are_refused(constant: bytes) -> None:
    with pytest.raises(WireError, match="non-finite"):
        parse_message(b'{"x": ' + constant + b"}")


def test_a_float_that_overflows_to_infinity_is_refused() -> None:
    with pytest.raises(WireError, match="out of range"):
        parse_message(b'{"x": 1e999}')


def test_duplicate_keys_are_refused_even_when_nested() -> None:
    with pytest.raises(WireError, match="duplicate key 'id'"):
        parse_message(b'{"id": 1, "id": 2}')
    with pytest.raises(WireError, match="duplicate key 'a'"):
        parse_message(b'{"result": {"a": 1, "a": 1}}')


def test_nesting_past_the_depth_cap_is_refused() -> None:
    shallow = b'{"a": ' + b"[" * (MAX_DEPTH - 2) + b"]" * (MAX_DEPTH - 2) + b"}"
    assert parse_message(shallow)
    deep = b'{"a": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    with pytest.raises(WireError, match="nested deeper"):
        parse_message(deep)


def test_nesting_deep_enough_to_exhaust_the_parser_stack_is_refused() -> None:
    with pytest.raises(WireError, match="nested deeper"):
        parse_message(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")  # within the value budget


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(WireError, match="UTF-8"):
        parse_message(b'{"a": "\xff\xfe"}')


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"42", b"null"])
def test_only_objects_are_messages(body: bytes) -> None:
    with pytest.raises(WireError, match="JSON object"):
        parse_message(body)


@pytest.mark.parametrize("body", [b"{", b"{'a': 1}", b'{"a": 1} trailing', b"", b"\x00\x01"])
def test_garbage_is_refused(body: bytes) -> None:
    with pytest.raises(WireError, match="not valid JSON"):
        parse_message(body)


def test_an_integer_with_too_many_digits_is_refused() -> None:
    with pytest.raises(WireError):
        parse_message(b'{"a": ' + b"9" * 50_000 + b"}")


def test_encoding_refuses_non_finite_floats() -> None:
    with pytest.raises(ValueError):
        encode_frame({"x": float("nan")})


def test_a_message_over_the_cap_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(FrameTooLarge, match="over the 1000-byte frame cap") as info:
        encode_frame({"pad": "x" * 2000}, max_frame_bytes=1000)
    assert info.value.size > 2000


def test_a_file_descriptor_is_read_like_a_stream() -> None:
    import os

    r, w = os.pipe()
    os.write(w, encode_frame({"a": 1}) + encode_frame({"b": [2]}))
    os.close(w)
    reader = FrameReader(r)
    assert [reader.read(), reader.read(), reader.read()] == [{"a": 1}, {"b": [2]}, None]
    os.close(r)


def test_the_decoder_yields_frames_split_anywhere_and_refuses_an_oversized_header_at_once() -> None:
    data = encode_frame({"a": 1}) + encode_frame({"b": "é" * 10})
    decoder = FrameDecoder()
    got = [m for i in range(len(data)) for m in decoder.feed(data[i : i + 1])]
    assert got == [{"a": 1}, {"b": "é" * 10}]
    with pytest.raises(WireError, match="exceeds"):
        list(FrameDecoder(max_frame_bytes=100).feed(struct.pack(">I", 101)))
    with pytest.raises(WireError, match="duplicate key"):
        list(FrameDecoder().feed(frame(b'{"a": 1, "a": 2}')))


def test_the_largest_execution_result_fits_one_frame() -> None:
    assert largest_execute_result() <= MAX_FRAME_BYTES
    worst_text = "\x01" * MAX_OUTPUT_CHARS  # each escapes to six bytes
    image_bytes = MAX_IMAGES_TOTAL_BYTES // MAX_IMAGES
    result = {
        "id": 2**31,
        "result": {
            "exit_status": -255,
            "error": "\x01" * MAX_ERROR_CHARS,
            "traceback": "\x01" * MAX_TRACEBACK_CHARS,
            "timed_out": True,
            "state_reset": True,
            "stdout": {"head": worst_text[: MAX_OUTPUT_CHARS // 2], "tail": worst_text[: MAX_OUTPUT_CHARS // 2],
                       "truncated": True, "bytes": 2**62,
                       "path": "/workspace/.tooltree/outputs/999999999-0a1b2c-stdout.txt"},
            "stderr": {"head": worst_text, "tail": "", "truncated": False, "bytes": 2**62, "path": None},
            "images": [{"mime": "image/webp", "data": "A" * (4 * ((image_bytes + 2) // 3))}] * MAX_IMAGES,
            "duration": 123456.123456,
        },
    }  # fmt: skip
    assert len(encode_frame(result)) - 4 <= largest_execute_result()


def test_a_reader_of_the_trusted_side_skips_only_the_strict_checks() -> None:
    assert parse_message(b'{"a": 1, "a": 2}', strict=False) == {"a": 2}
    assert math.isnan(parse_message(b'{"b": NaN}', strict=False)["b"])
    with pytest.raises(WireError, match="JSON object"):
        parse_message(b"[1]", strict=False)
    with pytest.raises(WireError, match="exceeds"):
        FrameReader(io.BytesIO(struct.pack(">I", 101)), max_frame_bytes=100, strict=False).read()


def values_in(value: Any) -> int:
    """The values ``json.loads`` builds for ``value`` (keys not counted)."""
    count, todo = 1, [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict | list):
            count += len(item)
            todo.extend(item.values() if isinstance(item, dict) else item)
    return count


TRICKY = [
    {"a": [1, "x,[{", {}, [], {"k,[{": [None, True]}], "": ""},
    {"s": 'quote " and backslash \\ then ,[{ and [] {}', "t": ["\\", '\\"', ",", "["]},
    {"nested": [[[[]]], [{}], {"x": {"y": []}}], "n": -1.5e10},
    {"ключ,[": "значение {[,", "emoji": "😀,"},
    {"empty": ""},
]


@pytest.mark.parametrize("value", TRICKY)
def test_values_are_counted_before_parsing_exactly_where_a_limit_needs_it_and_never_under(value: Any) -> None:
    true = values_in(value)
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    spaced = json.dumps(value, indent=1).encode()
    for limit in range(true + 2):
        assert count_values(compact, limit) >= true
        assert (count_values(compact, limit) > limit) == (true > limit)
        assert count_values(spaced, limit) >= true


def test_counting_stops_blanking_strings_once_there_are_more_than_two_per_value_allowed() -> None:
    body = b"[" + b",".join([b'"a,b,c"'] * 10_000) + b"]"
    assert count_values(body, 10) > 10  # 10,001 values; only the first 22 strings needed blanking
    assert count_values(body, 10_001) == 10_001


def test_a_frame_over_the_value_budget_is_refused_before_it_is_parsed() -> None:
    head = b'{"id":"c1","method":"tool_call","params":{"server":"s","tool":"t","arguments":{"pad":['
    body = head + b",".join([b"{}"] * ((MAX_FRAME_BYTES - 100) // 3)) + b"]}}}"
    tracemalloc.start()
    try:
        with pytest.raises(TooManyValues, match=f"more than {MAX_FRAME_VALUES:,} values") as info:
            parse_message(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(body)  # a copy or two of the bytes; parsed, its 5.6 million objects would take 400 MiB
    assert info.value.head.startswith(head[:60])
    assert parse_message(head + b"{}]}}}")["params"]["arguments"] == {"pad": [{}]}


def test_a_writer_given_the_budget_refuses_what_its_strict_reader_would() -> None:
    message = {"id": 1, "params": {"pad": [0] * MAX_FRAME_VALUES}}
    with pytest.raises(TooManyValues):
        encode_frame(message, max_values=MAX_FRAME_VALUES)
    with pytest.raises(TooManyValues):
        read_one(encode_frame(message))
    assert read_one(encode_frame(message), strict=False) == message  # the trusted side is not counted


def test_every_message_an_honest_container_sends_fits_the_value_budget() -> None:
    arguments = {"pad": [0] * (MAX_CALL_VALUES - 2)}
    assert measure(arguments).nodes == MAX_CALL_VALUES  # the most one call may carry
    call = {"server": "s" * 256, "tool": "t" * 256, "arguments": arguments}
    worker_call = {"type": "call", "id": 2**31, "method": "tool_call", "params": call}
    host_call = {"id": "c" * 64, "method": "tool_call", "params": call}
    listing = {"id": 2**31, "result": {"entries": [{"name": "n", "type": "file", "size": 1}] * MAX_LIST_ENTRIES}}
    item = {"path": {"b64": "/w=="}, "data": "", "append": True}  # a name that is not UTF-8: five values
    batch = {"method": "workspace.entries", "params": {"entries": [item] * BATCH_ITEMS}}
    for message in (worker_call, host_call, listing, batch):
        assert read_one(encode_frame(message, max_values=MAX_FRAME_VALUES)) == message


@pytest.mark.parametrize("length", [0, 199, 200, 201, 5_000, 1_000_000])
def test_cut_middle_keeps_the_start_and_the_end_within_the_limit_and_counts_what_it_cut(length: int) -> None:
    from sandbox._supervisor.limits import cut_middle

    text = "".join(chr(0x41 + i % 26) for i in range(length))
    cut = cut_middle(text, 200)
    if length <= 200:
        assert cut == text
        return
    assert len(cut) <= 200
    head, marker, tail = cut.split("\n")
    assert text.startswith(head) and text.endswith(tail) and len(head) == 80
    assert marker == f"[… {length - len(head) - len(tail):,} characters of the traceback cut …]"


@pytest.mark.parametrize("length", [200, 201, 1_000, 1_000_000])
def test_a_cut_text_says_where_its_whole_is_within_the_same_limit_and_counts_what_it_cut(length: int) -> None:
    from sandbox._supervisor.limits import cut_middle, say_where_whole

    text = "".join(chr(0x41 + i % 26) for i in range(length))
    where = "; the whole traceback is in /workspace/.tooltree/outputs/1-abcdef-traceback.txt"
    said = say_where_whole(cut_middle(text, 400), 400, where)
    if length <= 400:
        assert said == text
        return
    assert len(said) <= 400
    head, marker, tail = said.split("\n")
    assert text.startswith(head) and text.endswith(tail) and len(head) == 160
    assert marker == f"[… {length - len(head) - len(tail):,} characters of the traceback cut{where} …]"
