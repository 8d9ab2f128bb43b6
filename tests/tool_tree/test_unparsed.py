"""`tool_tree.unparsed`: the value count of a server's message, and its id read from its bytes.

The count is an upper bound for any bytes, exact for compact JSON, the same as the container supervisor's copy.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from sandbox._supervisor import wire
from tool_tree import unparsed
from tool_tree.unparsed import count_values, peek, tail_id

TRICKY = ["a", '"', "\\", ",", "[", "]", "{", "}", ":", "é", "\n", " ", "\\u0022"]


def hostile_string(rng: random.Random) -> str:
    return "".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 6)))


def hostile_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        return rng.choice([1, 2.5, None, True, hostile_string(rng)])
    if roll < 0.65:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {hostile_string(rng): hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def values(value: Any) -> int:
    """What parsing builds, keys not counted."""
    if isinstance(value, list):
        return 1 + sum(map(values, value))
    if isinstance(value, dict):
        return 1 + sum(map(values, value.values()))
    return 1


@pytest.mark.parametrize("window", [1 << 20, 7, 2])  # whole, and windows cut anywhere (in strings, escapes, `[]`)
def test_the_count_is_exact_for_compact_json_and_never_under_for_any_other(
    monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    monkeypatch.setattr(unparsed, "_WINDOW", window)
    rng = random.Random(window)
    for _ in range(3000):
        value = hostile_value(rng)
        true = values(value)
        compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        spaced = json.dumps(value, indent=1).encode()
        for limit in (0, 1, true - 1, true, 10**6):
            for body in (compact, spaced):
                counted = count_values(body, limit)
                assert (counted > limit) if true > limit else (counted >= true)  # never lets more through
                exact = count_values(body, limit, exact=True)  # what is added up (listings) is counted exactly
                cuts = len(body) // window  # but for an empty `[]` or `{}` a window's edge may cut: one more each
                assert (exact > limit) if true > limit else (true <= exact <= true + cuts)
        if window == 1 << 20:
            assert unparsed._outside_strings(compact, 10**6) == true


def test_the_count_matches_the_container_supervisors_copy_on_compact_json() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        body = json.dumps(hostile_value(rng), separators=(",", ":"), ensure_ascii=False).encode()
        supervisors = wire._structure(wire._STRING.sub(b'""', body))  # its exact pass, every string blanked
        assert unparsed._outside_strings(body, 10**6) == supervisors == values(json.loads(body))


def test_strings_are_blanked_so_commas_in_text_do_not_count() -> None:
    body = json.dumps({"csv": "1,2,3," * 100_000, "rows": [[1, 2]] * 10}).encode()  # 300,000 commas in one text
    assert count_values(body, 1000) == 3 + 10 * 3


def test_a_body_of_more_strings_than_twice_the_limit_is_over_it_without_being_split() -> None:
    body = json.dumps(["", "a"] * 1000).encode()
    assert count_values(body, 999) > 999 and count_values(body, 2000) == 2001


def test_bytes_that_are_not_json_are_bounded_too() -> None:
    # The parser stops at the first error; what it built before is at most what is counted.
    assert count_values(b"[{}" + b",{}" * 50, 10) > 10  # never closed
    assert count_values(b'["a\\"' + b",x" * 50, 10) == 2  # a string (its quote escaped) never closed
    assert count_values(b"\\" + b"[{}," * 50, 10) > 10  # a stray backslash may only add


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"a":[1]}}', ("response", 7)),
        (b'{"jsonrpc": "2.0", "id": "7", "error": {"code": 1}}', ("response", 7)),  # as the SDK correlates it
        (b' { "id" : "r-1" , "jsonrpc" : "2.0" , "method" : "ping" }', ("request", "r-1")),
        (b'{"id":-3,"result":{}}', ("response", -3)),
    ],
)
def test_the_kind_and_id_of_a_message_that_opens_with_its_id_are_read_unparsed(
    message: bytes, expected: tuple[str, object]
) -> None:
    assert peek(message) == expected


@pytest.mark.parametrize(
    "message",
    [
        b'{"jsonrpc":"2.0","method":"x","params":{"id":1,"result":2}}',  # an "id" further in: not the message's
        b'{"jsonrpc":"2.0","result":{},"id":1}',  # its id last
        b'{"jsonrpc":"2.0","id":"a\\"b","result":{}}',  # written with an escape
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
        b'{"jsonrpc":"2.0","id":null,"error":{}}',
        b'[{"jsonrpc":"2.0","id":1,"result":{}}]',
        b" " * 600 + b'{"jsonrpc":"2.0","id":1,"result":{}}',  # not within the bytes looked at
    ],
)
def test_any_other_message_is_left_to_the_parser(message: bytes) -> None:
    assert peek(message) is None
    json.loads(message)  # each is valid JSON: only the peek passes it by


def test_the_id_of_a_message_that_closes_with_it_is_read_from_its_end() -> None:
    assert tail_id(b'{"result":{"a":[[[]]]},"id":"9","jsonrpc":"2.0"}\r') == 9
    assert tail_id(b'{"jsonrpc":"2.0","result":{"x":1}, "id": "k"}') == "k"
    assert tail_id(b'{"jsonrpc":"2.0","params":{"a":{"id":5}}}') is None  # the id of an inner object
    assert tail_id(b'{"jsonrpc":"2.0","id":5,"result":{}}') is None
