"""`tooltree agent --token-budget`: a run the budget ended says what the budget counted (real CLI, fake API)."""

from __future__ import annotations

import json

import pytest

from agent.testing import FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tooltree_cli.main import main

GET = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}


def test_a_run_the_budget_ended_says_the_tokens_it_counted_the_prefilters_included(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the last turn's line said "total 3,893" and the summary "3,855 tokens sent, 38 received" under a budget
    # of 4,000 that had stopped the run: the claude pre-filter's tokens, which the budget counts, made up the rest.
    verdicts = {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}
    get = reply(tool_use("crm__get_record", GET))
    script = [reply(tool_use("record_tool_verdicts", verdicts)), get, get]
    api.add(*script)
    args = ["agent", "Read the Northwind opportunity", "--config", str(project.config_path), "--tree",
            str(project.tree), "--mode", "filtered", "--prefilter", "claude", "--token-budget", "4000"]  # fmt: skip
    assert main(args) == 1
    err = capsys.readouterr().err
    assert api.remaining == 0
    api.add(*script)
    assert main([*args, "--json", "--quiet"]) == 1  # the same run again, as JSON
    summary = json.loads(capsys.readouterr().out)
    model, prefilter = summary["usage"]["total"], summary["prefilter"]["usage"]
    paid = prefilter["total"]
    assert paid == sum(
        prefilter[k]
        for k in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    assert summary["stop_reason"] == "token_budget" and model < 4000 <= summary["spent"] == model + paid
    assert (
        f"\ntooltree: the run's token budget (4,000 tokens) was reached: {model + paid:,} tokens spent ({model:,} by "
        f"the model's requests, {paid:,} by the pre-filter's); raise --token-budget (or agent.token_budget in "
        "tooltree.yaml) to let a run go further\n"
    ) in err
