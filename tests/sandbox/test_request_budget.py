"""A sandbox's requests spend a burst of host CPU, then a steady share; past it the host waits, never refuses."""

from __future__ import annotations

import pytest

from sandbox.request_budget import RequestBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_burst_is_spent_free_then_each_request_waits_for_its_share() -> None:
    clock = Clock()
    budget = RequestBudget(burst=1.0, rate=0.5, clock=clock)
    assert budget.charge(0.4) == 0 and budget.charge(0.4) == 0
    assert budget.charge(0.4) == pytest.approx(0.4)  # 0.2 s in debt, repaid at 0.5 s per second
    clock.now += 0.4
    assert budget.charge(0.0) == 0
    assert budget.charge(0.1) == pytest.approx(0.2)


def test_an_idle_sandbox_earns_back_no_more_than_its_burst() -> None:
    clock = Clock()
    budget = RequestBudget(burst=1.0, rate=0.5, clock=clock)
    budget.charge(1.0)
    clock.now += 3600
    assert budget.charge(1.0) == 0
    assert budget.charge(0.5) == pytest.approx(1.0)
