"""An ``on_event`` callback that raises ends the run (`EventHandlerError`, stop reason ``on_event_error``) with
``messages`` the Messages API takes back: every ``tool_use`` of the last reply answered. The real SDK against the fake
API (which refuses a ``tool_use`` left without its ``tool_result``), the real sample servers (direct mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent import Agent, EventHandlerError, ModelReplied, RunResult, ToolFinished, read_transcript
from agent.events import Event
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project

GET = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}
NOT_RUN = [{"type": "text", "text": "not run: the run was stopped before this call"}]


def raising_on(kind: type, seen: list[Event]) -> Any:
    """An ``on_event`` that records each event and raises on the first of ``kind``."""

    def handler(event: Event) -> None:
        seen.append(event)
        if isinstance(event, kind):
            raise RuntimeError("dashboard down")

    return handler


def stopped_run(agent: Agent, task: str) -> RunResult:
    with pytest.raises(EventHandlerError) as caught:
        agent.run(task)
    assert caught.value.result is not None and caught.value.result.stop_reason == "on_event_error"
    return caught.value.result


def taken_back(api: FakeMessagesAPI, agent: Agent, messages: list[dict[str, Any]]) -> None:
    """The fake API takes ``messages`` and a next user turn as ``agent``'s request (it answers 400 when a tool_use is
    left without its tool_result, as the real API does)."""
    api.add(reply("Fine."))
    turn = {"role": "user", "content": [{"type": "text", "text": "Go on."}]}
    answer = api.client(max_retries=0).messages.create(**{**agent.request([*messages, turn]), "max_tokens": 64})
    assert answer.content[0].type == "text"


def test_an_on_event_that_raises_on_a_call_leaves_every_call_of_the_reply_answered(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: the reply's tool_use blocks ended result.messages unanswered: the API refused them as they were, and a
    # run going on from them told the model that the call which had run had not.
    seen: list[Event] = []
    transcript = tmp_path / "run.jsonl"
    # An unknown tool among them: the calls run one after another, so the later ones never start.
    calls = [tool_use("crm__get_record", GET), tool_use("crm__nope"), tool_use("crm__get_record", GET)]
    with FakeMessagesAPI([reply(*calls)]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0),
                      runtime=live, on_event=raising_on(ToolFinished, seen), transcript=transcript)  # fmt: skip
        result = stopped_run(agent, "Read the Northwind deal")
        assert [m["role"] for m in result.messages] == ["user", "assistant", "user"]
        first, *rest = result.messages[-1]["content"]
        assert "Northwind" in first["content"][0]["text"] and "is_error" not in first  # the call that ran: its result
        assert [(r["content"], r["is_error"]) for r in rest] == [(NOT_RUN, True), (NOT_RUN, True)]
        assert result.summary.tool_calls == 1 and len([e for e in seen if isinstance(e, ToolFinished)]) == 1
        record = read_transcript(transcript)[-2]
        assert (record["type"], record["turn"], record["results"]) == ("tool_results", 1, [first, *rest])
        taken_back(api, agent, result.messages)

        api.add(reply("Negotiation."))  # a run going on from them sends the result the model's call had
        again = Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0), runtime=live)
        assert again.run("And its stage?", history=result.messages).answer == "Negotiation."
        assert api.requests[-1]["messages"][2]["content"][0]["content"] == first["content"]


def test_calls_running_together_all_end_when_on_event_raises_on_the_first(project: Project, live: Runtime) -> None:
    seen: list[Event] = []
    with FakeMessagesAPI([reply(tool_use("crm__get_record", GET), tool_use("crm__get_record", GET))]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0),
                      runtime=live, on_event=raising_on(ToolFinished, seen))  # fmt: skip
        result = stopped_run(agent, "Read the Northwind deal")
        results = result.messages[-1]["content"]
        assert [("Northwind" in r["content"][0]["text"], r.get("is_error")) for r in results] == [(True, None)] * 2
        assert result.summary.tool_calls == 2 and len([e for e in seen if isinstance(e, ToolFinished)]) == 1
        taken_back(api, agent, result.messages)


def test_an_on_event_that_raises_on_a_reply_with_calls_keeps_the_reply_and_answers_them_as_not_run(
    project: Project, live: Runtime
) -> None:
    # Before: the reply was dropped from result.messages (its answer too), though it had been paid for.
    with FakeMessagesAPI([reply("Reading the deal.", tool_use("crm__get_record", GET))]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0),
                      runtime=live, on_event=raising_on(ModelReplied, []))  # fmt: skip
        result = stopped_run(agent, "Read the Northwind deal")
        assert result.answer == "Reading the deal." and result.summary.tool_calls == 0
        assert [m["role"] for m in result.messages] == ["user", "assistant", "user"]
        assert [(r["content"], r["is_error"]) for r in result.messages[-1]["content"]] == [(NOT_RUN, True)]
        taken_back(api, agent, result.messages)
