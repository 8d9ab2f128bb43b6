"""``tool_use`` ids and their ``tool_result`` answers: one answer per id, so every later request stays valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import Agent, read_transcript
from agent.testing import FakeMessagesAPI, check_request, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project

ACCOUNT = {"object_type": "account", "id": "0015e000003NWTR"}


def agent(project: Project, api: FakeMessagesAPI, runtime: Runtime, **kwargs: Any) -> Agent:
    return Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0), runtime=runtime,
                 **kwargs)  # fmt: skip


def task(subject: str) -> dict[str, Any]:
    return {"subject": subject, "related_to": ACCOUNT, "due": {"date": "2027-03-01"}}


def open_tasks(runtime: Runtime) -> list[str]:
    found = runtime.call_tool("crm", "get_record", {"object_type": "account", "record_id": ACCOUNT["id"]})
    return [t["subject"] for t in found["structuredContent"]["open_tasks"]]


def conversation(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "go"}, *messages]}


def test_the_fake_api_refuses_a_repeated_tool_use_id_and_a_second_result_for_one() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    twice = conversation({"role": "assistant", "content": [use, use]}, {"role": "user", "content": [answer]})
    assert check_request(twice) == "messages.1.content.1: `tool_use` ids must be unique"
    again = conversation(
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [answer]},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [answer]},
    )
    assert check_request(again) == "messages.3.content.0: `tool_use` ids must be unique"
    answered_twice = conversation(
        {"role": "assistant", "content": [use]}, {"role": "user", "content": [answer, answer]}
    )
    assert check_request(answered_twice) == (
        "messages.2.content.1: each tool_use must have a single result. Found multiple `tool_result` blocks with id: "
        "toolu_1"
    )
    assert check_request(conversation({"role": "assistant", "content": [use]}, {"role": "user", "content": [answer]}))\
        is None  # fmt: skip


def test_a_repeated_tool_use_id_runs_once_is_renamed_and_the_run_goes_on(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    first, repeat = "Call back (first of the id)", "Call back (repeated id)"
    calls = reply(
        tool_use("crm__create_task", task(first), id="toolu_same"),
        tool_use("crm__create_task", task(repeat), id="toolu_same"),
        tool_use("media__list_gallery", {}, id="toolu_other"),
    )
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([calls, reply("Done."), reply("Still fine.")]) as api:
        runner = agent(project, api, live, transcript=transcript)
        result = runner.run("Set a reminder and list the gallery")
        assert result.completed and result.answer == "Done."  # the second request was accepted
        (refused,) = [r for r in read_transcript(transcript) if r["type"] == "tools_refused"]
        later = runner.run("Anything else?", history=result.messages)  # and so is every later one
    assert later.completed and later.answer == "Still fine."
    sent = api.requests[1]["messages"]
    assert [b["id"] for b in sent[-2]["content"]] == ["toolu_same", "toolu_same_2", "toolu_other"]
    answers = sent[-1]["content"]
    assert [a["tool_use_id"] for a in answers] == ["toolu_same", "toolu_same_2", "toolu_other"]
    assert [a.get("is_error", False) for a in answers] == [False, True, False]
    assert answers[1]["content"][0]["text"].startswith("not run: this call repeated the id 'toolu_same'")
    assert "img_" in answers[2]["content"][0]["text"]
    tasks = open_tasks(live)
    assert first in tasks and repeat not in tasks  # the repeated call did not run
    assert (result.summary.tool_calls, result.summary.refused_tool_calls) == (2, 1)
    assert refused["count"] == 1 and "toolu_same" in refused["reason"]


def test_an_id_an_earlier_reply_had_is_renamed_and_not_run_so_the_next_request_is_accepted(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: only the ids of one reply were compared. The call ran, and the next request was refused (400, "`tool_use`
    # ids must be unique"): the run ended with an API error, and so would every run going on from its messages.
    first, repeat = "Call back (first reply)", "Call back (a later reply, same id)"
    transcript = tmp_path / "run.jsonl"
    script = [
        reply(tool_use("crm__create_task", task(first), id="toolu_old")),
        reply(tool_use("crm__create_task", task(repeat), id="toolu_old")),
        reply("Done."),
    ]
    with FakeMessagesAPI(script) as api:
        result = agent(project, api, live, transcript=transcript).run("Set two reminders")
    assert result.completed and result.answer == "Done."
    *_, again, answers = api.requests[2]["messages"]
    assert [b["id"] for b in again["content"]] == ["toolu_old_2"]
    (answer,) = answers["content"]
    assert answer["tool_use_id"] == "toolu_old_2" and answer["is_error"] is True
    assert answer["content"][0]["text"].startswith("not run: this call repeated the id 'toolu_old' of an earlier call "
                                                   "in an earlier reply")  # fmt: skip
    tasks = open_tasks(live)
    assert first in tasks and repeat not in tasks
    assert (result.summary.tool_calls, result.summary.refused_tool_calls) == (1, 1)
    (refused,) = [r for r in read_transcript(transcript) if r["type"] == "tools_refused"]
    assert "of an earlier reply" in refused["reason"] and "toolu_old" in refused["reason"]


def test_the_calls_of_the_last_turn_allowed_run_so_the_history_carries_on(project: Project, live: Runtime) -> None:
    subject = "Call back (last turn)"
    with FakeMessagesAPI([reply(tool_use("crm__create_task", task(subject))), reply("Set earlier.")]) as api:
        runner = agent(project, api, live, max_turns=1)
        stopped = runner.run("Set a reminder")
        assert stopped.stop_reason == "max_turns" and stopped.summary.tool_calls == 1
        assert subject in open_tasks(live)
        (answer,) = stopped.messages[-1]["content"]
        assert answer["type"] == "tool_result" and not answer.get("is_error")
        later = runner.run("Did it work?", history=stopped.messages)
    assert later.answer == "Set earlier."
    *_, results, turn = api.requests[1]["messages"]  # the real result, then the next turn
    assert [b["type"] for b in results["content"]] == ["tool_result"] and turn["content"][0]["text"] == "Did it work?"
    assert subject in str(results["content"][0]["content"])
