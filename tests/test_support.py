"""The helpers of tests/support.py that decide what a test run may remove from the engine."""

from __future__ import annotations

import pytest

from tests import support


def test_the_owner_of_another_run_whose_name_starts_with_this_runs_is_not_this_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two runs at once, of owners `tooltree-test` and `tooltree-test-2` (TOOLTREE_TEST_OWNER): before, the first's
    # engine fixture counted the second's volumes as its own and removed them at its end, while the second used them.
    monkeypatch.setattr(support, "TEST_OWNER", "tooltree-test")
    assert support.is_test_owner("tooltree-test")
    assert not support.is_test_owner("tooltree-test-2")
    assert not support.is_test_owner("tooltree-test-serve-0123abcd")


def test_the_owners_made_for_one_test_are_this_runs_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(support, "TEST_OWNER", "tooltree-test")
    monkeypatch.setattr(support, "_RUN_OWNERS", set())
    made = support.run_owner("serve-0123abcd")
    assert made == "tooltree-test-serve-0123abcd" and support.is_test_owner(made)
    assert not support.is_test_owner("tooltree-test-serve-0123abce")
    assert not support.is_test_owner("tooltree-test-serve")
