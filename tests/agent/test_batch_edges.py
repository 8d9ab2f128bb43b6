"""``batch_tool`` edges: an invocation that raises, invocations without arguments, and invocations with names of
thousands of characters; a ``tool_use`` block that raises outside a batch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from agent import Agent
from agent.budget import NOTE_ROOM
from agent.content import MAX_RESULT_CHARS
from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.toolsets.base import ToolOutcome
from agent.toolsets.batch import LABEL_NAME
from sandbox.host import Runtime
from tests.agent.conftest import Project

DEAL = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}
ACCOUNT = {"object_type": "account", "id": "0015e000003NWTR"}


def agent(project: Project, api: FakeMessagesAPI, runtime: Runtime) -> Agent:
    return Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0), runtime=runtime)


def batch(*invocations: dict[str, Any]) -> dict[str, Any]:
    return tool_use("batch_tool", {"invocations": list(invocations)})


def texts(request: dict[str, Any]) -> list[str]:
    (answer,) = [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert not answer.get("is_error")
    return [b["text"] for b in answer["content"] if b["type"] == "text"]


def test_an_invocation_that_raises_is_its_own_error_and_the_others_keep_their_results(
    project: Project, live: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    subject = "Follow up (batch that raised)"
    task = {"subject": subject, "related_to": ACCOUNT, "due": {"date": "2027-02-01"}}
    calls = batch(
        {"name": "crm__get_record", "arguments": DEAL},
        {"name": "media__list_gallery", "arguments": {}},
        {"name": "crm__create_task", "arguments": task},
    )
    with FakeMessagesAPI([reply(calls), reply("Done.")]) as api:
        runner = agent(project, api, live)
        real = runner.toolset.call_native  # type: ignore[attr-defined]

        def call_native(name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
            if name == "media__list_gallery":  # a toolset's bug, or a runtime closed by another thread
                raise RuntimeError("the gallery index is corrupt")
            outcome: ToolOutcome = real(name, arguments, runtime)
            return outcome

        runner.toolset.call_native = call_native  # type: ignore[attr-defined]
        result = runner.run("Read the deal, list the gallery and set a follow-up")
    assert result.completed and result.answer == "Done."
    got = texts(api.requests[1])
    assert got[0] == "[1] crm__get_record: ok" and "0065e000009Q3PR" in got[1]
    assert got[2:4] == [
        "[2] media__list_gallery: error",
        "the call of media__list_gallery failed: RuntimeError: the gallery index is corrupt",
    ]
    assert got[4] == "[3] crm__create_task: ok"
    found = live.call_tool("crm", "get_record", {"object_type": "account", "record_id": ACCOUNT["id"]})
    assert subject in [t["subject"] for t in found["structuredContent"]["open_tasks"]]
    assert "the call of media__list_gallery raised" in caplog.text  # the trace is logged for the developer


@pytest.mark.parametrize("concurrent", [True, False], ids=["run-together", "one-by-one"])
def test_a_tool_use_block_that_raises_is_its_own_error_and_the_run_goes_on(
    project: Project, live: Runtime, caplog: pytest.LogCaptureFixture, concurrent: bool
) -> None:
    # Before: the exception left Agent.run, the other blocks' results were lost and the run ended without an answer.
    blocks = [tool_use("crm__get_record", DEAL), tool_use("media__list_gallery", {}), tool_use("crm__get_record", DEAL)]
    with FakeMessagesAPI([reply(*blocks), reply("Done.")]) as api:
        runner = agent(project, api, live)
        real = runner.toolset.call_native  # type: ignore[attr-defined]

        def call_native(name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
            if name == "media__list_gallery":
                raise RuntimeError("the gallery index is corrupt")
            outcome: ToolOutcome = real(name, arguments, runtime)
            return outcome

        runner.toolset.call_native = call_native  # type: ignore[attr-defined]
        runner.toolset.concurrent = lambda name: concurrent  # type: ignore[method-assign]
        result = runner.run("Read the deal twice and list the gallery")
    assert result.completed and result.answer == "Done."
    answers = [b for b in api.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [bool(a.get("is_error")) for a in answers] == [False, True, False]
    assert all("0065e000009Q3PR" in a["content"][0]["text"] for a in (answers[0], answers[2]))
    assert answers[1]["content"] == [
        {"type": "text", "text": "the call of media__list_gallery failed: RuntimeError: the gallery index is corrupt"}
    ]
    assert result.summary.tool_errors == 1
    assert "the call of media__list_gallery raised" in caplog.text


def test_arguments_left_out_or_null_both_mean_no_arguments_and_the_tool_schema_decides(
    project: Project, live: Runtime
) -> None:
    calls = batch(
        {"name": "media__list_gallery"},
        {"name": "media__list_gallery", "arguments": None},
        {"name": "crm__get_record", "arguments": None},
        {"name": "crm__get_record", "arguments": [DEAL]},
    )
    with FakeMessagesAPI([reply(calls), reply("ok")]) as api:
        agent(project, api, live).run("List the gallery")
    got = texts(api.requests[1])
    assert got[0] == "[1] media__list_gallery: ok" and got[2] == "[2] media__list_gallery: ok"
    assert got[1] == got[3] and "img_" in got[1]  # the same real result both ways
    assert got[4] == "[3] crm__get_record: error"
    assert "'object_type' is a required property" in got[5]
    assert got[6:] == ["[4] crm__get_record: error", "arguments of crm__get_record must be an object, not an array"]


def test_status_lines_show_a_long_invocation_name_cut_so_the_batch_stays_within_one_results_caps(
    project: Project, live: Runtime
) -> None:
    long_names = [f"{n}{'x' * 60_000}" for n in range(10)]  # the model's own words, no tool
    with FakeMessagesAPI([reply(batch(*({"name": n, "arguments": {}} for n in long_names))), reply("Done.")]) as api:
        agent(project, api, live).run("Call the tools")
    got = texts(api.requests[1])
    # The status lines are never cut: past the caps ten of them add a few hundred characters (before: 841,493 in all).
    assert sum(map(len, got)) <= MAX_RESULT_CHARS + NOTE_ROOM + 10 * 100
    assert got[0] == f"[1] 0{'x' * (LABEL_NAME - 1)}… (60,001 characters): error"
    assert got[0].endswith(": error") and "unknown tool '0xxx" in got[1]
