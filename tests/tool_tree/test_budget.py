"""`tool_tree.budget` and `tool_tree.ledgers`: the notification, request, answer and CPU ledgers.

The transports' tests (`test_stdio.py`, `test_http_client.py`) show each budget against a real hostile
server; these pin down the ledgers themselves.
"""

from __future__ import annotations

import logging

import pytest

from tool_tree.budget import (
    GIVEN_UP_KEPT,
    LEAST_WAIT,
    NotificationBudget,
    ReaderBudget,
    more_values_than,
    notification_cost,
)
from tool_tree.ledgers import Outstanding, ServerRequests


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


def test_a_notification_is_charged_one_and_one_more_for_each_thousand_values() -> None:
    assert [notification_cost(v) for v in (1, 999, 1000, 1_000_000)] == [1, 1, 2, 1001]
    notes = NotificationBudget("big", burst=2000, rate=100.0, clock=lambda: 0.0)
    assert [notes.take(notification_cost(1_000_000)) for _ in range(2)] == [True, False]
    assert notes.take(notification_cost(900_000))  # what is left still takes a smaller one


def test_the_reader_budget_lets_a_burst_through_then_a_rate_and_asks_only_for_waits_worth_a_sleep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    cpu = ReaderBudget("busy", burst=1.0, rate=0.1, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="tool_tree.budget"):
        assert cpu.charge(1.0) == 0.0  # the burst
        assert cpu.charge(LEAST_WAIT * 0.1 / 2) == 0.0  # a debt too small to sleep for is carried
        assert cpu.charge(LEAST_WAIT * 0.1 / 2) == pytest.approx(LEAST_WAIT)
        now[0] += LEAST_WAIT  # the reader slept: the debt is paid
        assert cpu.charge(0.0) == 0.0
        assert cpu.charge(0.5) == pytest.approx(5.0)  # half a second of CPU at 10% of a core
    assert cpu.charged == pytest.approx(1.5 + LEAST_WAIT * 0.1) and cpu.waited == pytest.approx(5.0 + LEAST_WAIT)
    assert [r.getMessage() for r in caplog.records] == [
        "server 'busy' sent more than 1 s of the host's CPU of messages tooltree did not ask for (then 10% of a "
        "core), the budget for one server: tooltree reads it more slowly"
    ]


def test_answers_are_awaited_late_or_stray_and_strays_have_a_small_allowance() -> None:
    now = [0.0]
    outstanding = Outstanding("s", burst=2, rate=1.0, clock=lambda: now[0])
    for request_id in (1, "two", 3):
        outstanding.sent(request_id)
    outstanding.given_up("3")  # cancelled as "3": its answer, as 3, is late
    assert outstanding.awaits("1") and not outstanding.awaits(3)
    assert [outstanding.answer(i) for i in ("1", "two", 3, 3, 1, None)] == [
        "awaited", "awaited", "late", "stray", "stray", "stray",
    ]  # fmt: skip
    assert outstanding.stray() is None and outstanding.stray() is None
    assert outstanding.stray() == (
        "server 's' sent more than 2 answers to requests tooltree did not make or had answered (then 1 a second), "
        "the limit for one server"
    )
    now[0] = 1.0
    assert outstanding.stray() is None  # one a second goes on
    outstanding.sent(5)
    assert outstanding.pending() == [5] and outstanding.pending() == []


def test_the_requests_given_up_on_are_kept_up_to_a_bound() -> None:
    outstanding = Outstanding("s")
    for request_id in range(GIVEN_UP_KEPT + 10):
        outstanding.sent(request_id)
        outstanding.given_up(request_id)
    assert outstanding.answer(0) == "stray" and outstanding.answer(GIVEN_UP_KEPT + 9) == "late"


def test_a_parsed_value_is_counted_no_further_than_the_limit() -> None:
    assert not more_values_than({"_meta": {"progressToken": 1}}, 3)
    assert more_values_than({"_meta": {"progressToken": 1}, "x": [1]}, 3)
    assert more_values_than({"pad": list(range(10**6))}, 1000)
