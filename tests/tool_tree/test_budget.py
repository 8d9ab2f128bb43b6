"""`tool_tree.budget`: the value count of a server's message, and the notification and request budgets.

The transports' tests (`test_stdio.py`, `test_http_client.py`) show each budget against a real hostile
server; these pin down the count (an upper bound for any bytes, exact for compact JSON, the same as the
container supervisor's copy) and the two ledgers.
"""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import pytest

from sandbox._supervisor import wire
from tool_tree import budget
from tool_tree.budget import NotificationBudget, ServerRequests, count_values

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
    monkeypatch.setattr(budget, "_WINDOW", window)
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
        if window == 1 << 20:
            assert budget._outside_strings(compact, 10**6) == true


def test_the_count_matches_the_container_supervisors_copy_on_compact_json() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        body = json.dumps(hostile_value(rng), separators=(",", ":"), ensure_ascii=False).encode()
        supervisors = wire._structure(wire._STRING.sub(b'""', body))  # its exact pass, every string blanked
        assert budget._outside_strings(body, 10**6) == supervisors == values(json.loads(body))


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


def test_the_notification_budget_lets_a_burst_through_then_a_rate_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    notes = NotificationBudget("chatty", burst=10, rate=2.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="tool_tree.budget"):
        assert [notes.take() for _ in range(12)] == [True] * 10 + [False] * 2
        now[0] = 1.0  # two more a second
        assert [notes.take() for _ in range(3)] == [True, True, False]
        now[0] = 100.0  # refilled up to the burst, no more
        assert sum(notes.take() for _ in range(20)) == 10
    assert notes.dropped == 13
    assert [r.getMessage() for r in caplog.records] == [
        "server 'chatty' sent more than 10 notifications at once (then 2 a second), the budget for one server: "
        "tooltree drops the rest unread (it uses none of them)"
    ]


@pytest.mark.anyio
async def test_requests_from_a_server_count_until_answered_or_settled_unanswered() -> None:
    requests = ServerRequests("eager", limit=3)
    assert [requests.received(i) for i in (1, 2, 2)] == [None] * 3  # an id reused still costs a task
    assert requests.received(4) == (
        "server 'eager' sent more than 3 requests to tooltree without taking their answers, the limit for one server"
    )
    requests.answered(2)
    requests.answered(2)
    requests.answered(2)  # no third request 2 was waiting: nothing to uncount
    requests.answered("unknown")
    hook = requests.metadata(1).on_request_unanswered
    assert hook is not None
    await hook()  # what the SDK calls when it settles a request without an answer (the server cancelled it)
    assert requests.received(5) is None and requests.received(6) is None
    assert requests.received(7) is not None
