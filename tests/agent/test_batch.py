"""``batch_tool``: independent calls in one turn, run concurrently, each result in order with its types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent import Agent
from agent.budget import NOTE_ROOM
from agent.content import MAX_RESULT_CHARS
from agent.defaults import DEFAULT_BATCH_MAX
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox._supervisor.limits import MAX_IMAGES
from sandbox.host import Runtime
from tests.agent.conftest import Project

ACCOUNT = {"object_type": "account", "id": "0015e000003NWTR"}
OPPORTUNITY = {"object_type": "opportunity", "id": "0065e000009Q3PR"}


def reminder(record: dict[str, str], subject: str) -> dict[str, Any]:
    return {
        "subject": subject,
        "related_to": record,
        "due": {"date": "2027-01-15"},
        "reminders": [{"minutes_before": 60}],
    }


def batch(*calls: tuple[str, Any]) -> dict[str, Any]:
    return tool_use("batch_tool", {"invocations": [{"name": n, "arguments": a} for n, a in calls]})


def agent(project: Project, api: FakeMessagesAPI, runtime: Runtime, **kwargs: Any) -> Agent:
    kwargs.setdefault("mode", "direct")
    return Agent(project.config, tree=project.tree, client=api.client(max_retries=0), runtime=runtime, **kwargs)


def results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]


def open_tasks(runtime: Runtime, record: dict[str, str]) -> list[str]:
    found = runtime.call_tool("crm", "get_record", {"object_type": record["object_type"], "record_id": record["id"]})
    return [t["subject"] for t in found["structuredContent"]["open_tasks"]]


def test_two_reminders_take_one_model_turn_with_batch_tool_and_two_without(project: Project, live: Runtime) -> None:
    first, second = reminder(ACCOUNT, "Call back (batch)"), reminder(OPPORTUNITY, "Send the proposal (batch)")
    script = [reply(batch(("crm__create_task", first), ("crm__create_task", second))), reply("Both reminders set.")]
    with FakeMessagesAPI(script) as api:
        batched = agent(project, api, live).run("Set two reminders: call the lead back, send the proposal")
    assert batched.completed and batched.summary.turns == 2
    assert (batched.summary.tool_calls, batched.summary.batches) == (2, 1)  # each invocation a call (before: 1)
    (answer,) = results(api.requests[1])
    texts = [b["text"] for b in answer["content"] if b["type"] == "text"]
    assert texts[0] == "[1] crm__create_task: ok" and texts[2] == "[2] crm__create_task: ok"
    assert "Call back (batch)" in open_tasks(live, ACCOUNT)
    assert "Send the proposal (batch)" in open_tasks(live, OPPORTUNITY)

    one, two = reminder(ACCOUNT, "Call back (single)"), reminder(OPPORTUNITY, "Send the proposal (single)")
    script = [reply(tool_use("crm__create_task", one)), reply(tool_use("crm__create_task", two)), reply("Both set.")]
    with FakeMessagesAPI(script) as api:
        single = agent(project, api, live, batch=False).run("Set two reminders: call the lead back, send the proposal")
    assert "batch_tool" not in [t["name"] for t in api.requests[0]["tools"]]
    assert single.summary.turns == 3 and single.summary.tool_calls == 2  # one more model turn
    assert "Send the proposal (single)" in open_tasks(live, OPPORTUNITY)


def test_images_survive_a_batch_and_each_result_keeps_its_own_error(project: Project, live: Runtime) -> None:
    chart = {"title": "Pipeline", "values": [3, 1, 4]}
    calls = batch(
        ("media__render_chart", chart),
        ("crm__get_record", {"object_type": "opportunity", "record_id": "006000000000000"}),  # no such record
        ("crm__drop_tables", {}),
        ("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}),
    )
    with FakeMessagesAPI([reply(calls), reply("Done.")]) as api:
        agent(project, api, live).run("Draw the pipeline and read two deals")
    (answer,) = results(api.requests[1])
    assert not answer.get("is_error")
    content = answer["content"]
    headers = [b["text"] for b in content if b["type"] == "text" and b["text"].startswith("[")]
    assert headers == [
        "[1] media__render_chart: ok",
        "[2] crm__get_record: error",
        "[3] crm__drop_tables: error",
        "[4] crm__get_record: ok",
    ]
    image_at = next(i for i, b in enumerate(content) if b["type"] == "image")
    assert content[image_at - 1]["text"] == "[1] media__render_chart: ok"  # the image right after its header
    assert content[image_at]["source"]["data"].startswith("iVBORw0KGgo")
    assert any(b.get("text") == "unknown tool 'crm__drop_tables'" for b in content)
    assert json.loads(content[-1]["text"])["id"] == "0065e000009Q3PR"


def test_the_invocations_of_a_batch_run_at_the_same_time(project: Project, live: Runtime) -> None:
    meet = {"group": "batch", "parties": 2, "timeout": 20}  # returns only while both calls are in progress
    with FakeMessagesAPI(
        [reply(batch(("media__rendezvous", meet), ("media__rendezvous", meet))), reply("Met.")]
    ) as api:
        agent(project, api, live).run("Meet twice")
    (answer,) = results(api.requests[1])
    assert [b["text"] for b in answer["content"]][1] == "group 'batch': 2 parties met"


def test_every_invocation_of_a_full_batch_is_in_progress_at_once(project: Project, live: Runtime) -> None:
    # Before: at most 8 ran at once, so a batch of the default most (10) that waits for each other timed out.
    meet = {"group": "full", "parties": DEFAULT_BATCH_MAX, "timeout": 20}
    with FakeMessagesAPI([reply(batch(*[("media__rendezvous", meet)] * DEFAULT_BATCH_MAX)), reply("Met.")]) as api:
        agent(project, api, live).run("Meet ten times")
    (answer,) = results(api.requests[1])
    texts = [b["text"] for b in answer["content"]]
    assert texts.count(f"group 'full': {DEFAULT_BATCH_MAX} parties met") == DEFAULT_BATCH_MAX, texts


def test_a_batch_in_a_batch_and_arguments_as_a_json_string_are_refused(project: Project, live: Runtime) -> None:
    calls = tool_use(
        "batch_tool",
        {
            "invocations": [
                {"name": "batch_tool", "arguments": {"invocations": []}},
                {"name": "crm__get_record", "arguments": '{"object_type": "lead"}'},
            ]
        },
    )
    with FakeMessagesAPI([reply(calls), reply("ok")]) as api:
        agent(project, api, live).run("Try")
    texts = [b["text"] for b in results(api.requests[1])[0]["content"]]
    assert texts == [
        "[1] batch_tool: error",
        "a batch inside a batch is refused: list the calls in one batch_tool",
        "[2] crm__get_record: error",
        "arguments of crm__get_record must be an object, not a JSON string",
    ]


@pytest.mark.parametrize(
    ("invocations", "said"),
    [
        ([{"name": "media__list_gallery", "arguments": {}}] * 11, "a batch holds at most 10 invocations, got 11"),
        ([], "batch_tool needs invocations: a non-empty list"),
        ('[{"name": "media__list_gallery"}]', "invocations must be a list of {name, arguments} objects, not a JSON"),
    ],
    ids=["too long", "empty", "a JSON string"],
)
def test_a_batch_refused_whole_is_one_batch_tool_call_and_one_error(
    project: Project, live: Runtime, invocations: Any, said: str
) -> None:
    # Before: one tool call and one error, but no batch: the summary said "1 tool call(s) (1 failed)", no batch_tool.
    with FakeMessagesAPI([reply(tool_use("batch_tool", {"invocations": invocations})), reply("ok")]) as api:
        result = agent(project, api, live).run("Try")
    (answer,) = results(api.requests[1])
    assert answer["is_error"] and answer["content"][0]["text"].startswith(said)
    assert (result.summary.tool_calls, result.summary.tool_errors, result.summary.batches) == (1, 1, 1)


def test_a_batch_tool_call_where_it_is_not_offered_is_an_unknown_tool_not_a_batch(
    project: Project, live: Runtime
) -> None:
    with FakeMessagesAPI([reply(batch(("media__list_gallery", {}))), reply("ok")]) as api:
        result = agent(project, api, live, batch=False).run("Try")
    (answer,) = results(api.requests[1])
    assert answer["is_error"] and "unknown tool 'batch_tool'" in answer["content"][0]["text"]
    assert (result.summary.tool_calls, result.summary.tool_errors, result.summary.batches) == (1, 1, 0)


def test_batch_tool_is_offered_in_tool_search_mode_and_calls_deferred_tools(project: Project, live: Runtime) -> None:
    with FakeMessagesAPI([reply(batch(("crm__list_leads", {"limit": 1}))), reply("ok")]) as api:
        agent(project, api, live, mode="tool-search").run("One lead")
    batch_tool = next(t for t in api.requests[0]["tools"] if t.get("name") == "batch_tool")
    assert "defer_loading" not in batch_tool
    assert results(api.requests[1])[0]["content"][0]["text"] == "[1] crm__list_leads: ok"


def test_the_invocations_of_a_batch_share_the_caps_of_one_result(project: Project, live: Runtime) -> None:
    # Before: ten results each at its own cap, summed: one tool_result of 5,001,971 characters, or ten images.
    leads = batch(*[("crm__list_leads", {})] * 10)  # megabytes each, cut to 500,000 characters on its own
    charts = batch(*[("media__render_chart", {"title": f"c{i}", "values": [1, 2, i]}) for i in range(10)])
    with FakeMessagesAPI([reply(leads), reply(charts), reply("Done.")]) as api:
        agent(project, api, live).run("List every lead, then draw ten charts")
    shared = "of this result were left out: the invocations of one batch share at most"

    (listed,) = results(api.requests[1])
    texts = [b["text"] for b in listed["content"]]
    assert sum(map(len, texts)) < MAX_RESULT_CHARS + NOTE_ROOM + 10 * 400
    headers = [t for t in texts if t.startswith("[") and t.endswith(": ok")]
    assert headers == [f"[{n}] crm__list_leads: ok" for n in range(1, 11)]
    per_invocation = "\n".join(texts).split("crm__list_leads: ok")[1:]
    assert shared not in per_invocation[0]  # the first keeps what its own cap gave it
    assert all(shared in part for part in per_invocation[1:])  # each later one says it was cut
    assert not any("the results of one reply" in t for t in texts)  # within its caps, the batch passed whole

    (drawn,) = results(api.requests[2])
    content = drawn["content"]
    assert sum(b["type"] == "image" for b in content) == MAX_IMAGES
    notes = [b["text"] for b in content if b["type"] == "text" and shared in b["text"]]
    assert len(notes) == 10 - MAX_IMAGES and all(n.startswith("[1 image(s) of this result") for n in notes)
    assert content[-1]["text"] == notes[-1] and content[-2]["text"] == "[10] media__render_chart: ok"
