"""The transcript holds the whole conversation: a run going on from ``history``, the agent's runs one after the other,
and the results of a run stopped by its turn limit or token budget. The real SDK against the fake API, the real
sample servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent import Agent, read_transcript
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project

GET = tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})


def direct(project: Project, api: FakeMessagesAPI, runtime: Runtime, transcript: Path, **kwargs: Any) -> Agent:
    return Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0), runtime=runtime,
                 transcript=transcript, **kwargs)  # fmt: skip


def runs(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The records of each run, from its ``run_start``."""
    out: list[list[dict[str, Any]]] = []
    for record in records:
        if record["type"] == "run_start":
            out.append([])
        out[-1].append(record)
    return out


def conversation(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run's conversation rebuilt from its records, as `agent.transcript` says."""
    messages = [m for r in records if r["type"] == "request" for m in r["messages"]]
    for r in records:
        if r["type"] in ("tool_results", "tools_interrupted"):
            messages.append({"role": "user", "content": r["results"]})
    return messages


def without_markers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]} for m in messages
    ]


def test_a_run_going_on_from_history_is_complete_in_the_transcript_after_the_first(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: the second run emptied the file (the first run's records were gone), and its first request record held
    # the new user turn only, while the API received five messages.
    path = tmp_path / "t.jsonl"
    with FakeMessagesAPI([reply("Reading.", GET), reply("Negotiation."), reply("Its amount is 48,000.")]) as api:
        agent = direct(project, api, live, path)
        first = agent.run("What stage is the Northwind opportunity in?")
        second = agent.run("And its amount?", history=first.messages)
    one, two = runs(read_transcript(path))
    assert one[0]["task"] == "What stage is the Northwind opportunity in?" and one[-1]["type"] == "run_end"
    assert two[0]["task"] == "And its amount?" and two[0]["history"] == 4 and one[0]["history"] == 0
    (sent,) = [r for r in two if r["type"] == "request"]
    assert len(api.requests[2]["messages"]) == 5 == len(sent["messages"])
    assert without_markers(api.requests[2]["messages"]) == sent["messages"] == second.messages[:-1]
    assert conversation(one) == first.messages[:-1]  # the last reply is in its response record

    again = Agent(project.config, tree=project.tree, mode="direct", transcript=path)  # a new agent starts it afresh
    with FakeMessagesAPI([reply("Hi.")]) as api:
        again.client = api.client()
        again.runtime = live
        again.run("Hello")
    assert [len(r) for r in runs(read_transcript(path))] == [4]


@pytest.mark.parametrize("limit", [{"max_turns": 2}, {"token_budget": 1}])
def test_the_results_of_the_last_reply_of_a_stopped_run_are_in_the_transcript(
    project: Project, live: Runtime, tmp_path: Path, limit: dict[str, int]
) -> None:
    # Before: they ran and ended result.messages, but no record held them (only a next request would have).
    path = tmp_path / "t.jsonl"
    with FakeMessagesAPI(
        [reply(GET), reply(tool_use("crm__get_record", {"object_type": "account", "record_id": "x"}))]
    ) as api:
        result = direct(project, api, live, path, **limit).run("Look it up")
    assert result.stop_reason in ("max_turns", "token_budget")
    records = read_transcript(path)
    assert [r["type"] for r in records][-2:] == ["tool_results", "run_end"]
    last = records[-2]
    assert last["turn"] == result.summary.turns and last["results"] == result.messages[-1]["content"]
    assert [b["type"] for b in last["results"]] == ["tool_result"]
