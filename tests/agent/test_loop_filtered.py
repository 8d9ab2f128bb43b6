"""`filtered` mode end to end: the real SDK against the fake Messages API (for the agent and for the
``claude`` pre-filter), the real sample servers; grow-only, cache-stable, fail-open, images."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, RunResult, read_transcript
from agent.prefilter import ClaudeFilter
from agent.prefilter.claude import VERDICT_TOOL
from agent.prefilter.options import PrefilterOptions
from agent.testing import ApiError, FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.prefilter_support import ScriptedFilter, catalog
from tool_tree.tree import Manifest

OPPORTUNITY = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}
CHART = {"title": "Pipeline", "values": [3, 1, 4]}


def verdicts(*names: str) -> dict[str, Any]:
    items = [{"tool": n, "needed": True, "probability": 0.9} for n in names]
    return reply(tool_use(VERDICT_TOOL, {"verdicts": items}))


def filtered(project: Project, api: FakeMessagesAPI, runtime: Runtime, prefilter: Any, **kwargs: Any) -> Agent:
    return Agent(
        project.config,
        tree=project.tree,
        mode="filtered",
        client=api.client(max_retries=0),
        runtime=runtime,
        prefilter=prefilter,
        **kwargs,
    )


def names(request: dict[str, Any]) -> list[str]:
    return [t["name"] for t in request["tools"]]


def unmarked(tools: list[dict[str, Any]]) -> str:
    return json.dumps([{k: v for k, v in t.items() if k != "cache_control"} for t in tools])


def test_the_set_grows_over_three_user_turns_and_the_tools_block_is_stable_after_growth(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    judge = [verdicts("media__render_chart"), verdicts("crm__get_record"), verdicts("media__render_chart")]
    model = [
        reply(tool_use("media__render_chart", CHART)),
        reply("Here is the chart."),
        reply(tool_use("crm__get_record", OPPORTUNITY)),
        reply("It is in negotiation."),
        reply(tool_use("media__render_chart", CHART)),
        reply("Drawn again."),
    ]
    with FakeMessagesAPI(judge) as judge_api, FakeMessagesAPI(model) as api:
        agent = filtered(project, api, live, ClaudeFilter(judge_api.client()), transcript=tmp_path / "t.jsonl")
        first = agent.run("Draw the pipeline as a chart")
        second = agent.run("What stage is the Northwind opportunity in?", history=first.messages)
        third = agent.run("Draw the chart once more", history=second.messages)
    requests = api.requests
    offered = [names(r) for r in requests]
    for before, after in itertools.pairwise(offered):
        assert after[: len(before)] == before  # never shrinks, never reorders: new tools are appended
    assert offered[0][:2] == ["batch_tool", "media__render_chart"]
    assert "media__get_image_info" in offered[0] and "media__thumbnail" in offered[0]  # named by render_chart
    assert "crm__get_record" not in offered[1] and "crm__get_record" in offered[2]
    assert "crm__search_records" in offered[2]  # it names get_record
    # after the last growth (second user turn) the tools block is byte-identical, markers included
    assert len({json.dumps(r["tools"]) for r in requests[2:]}) == 1
    assert all(unmarked(r["tools"]).startswith(unmarked(requests[0]["tools"])[:-1]) for r in requests)
    assert (first.summary.cache_invalidations, second.summary.cache_invalidations) == (0, 0)
    assert third.summary.prefilter is not None and third.summary.prefilter.growths == 0
    assert second.summary.prefilter is not None and second.summary.prefilter.growths == 1
    # the transcript fingerprints the tools block of every request
    records = read_transcript(tmp_path / "t.jsonl")  # the agent's three runs, one after the other: the last one's
    starts = [i for i, r in enumerate(records) if r["type"] == "run_start"]
    assert len(starts) == 3 and [records[i]["history"] for i in starts] == [0, 4, 8]
    records = records[starts[-1] :]
    prints = [r["tools_sha256"] for r in records if r["type"] == "request"]
    assert len(prints) == 2 and len(set(prints)) == 1
    assert [r["asked"] for r in records if r["type"] == "prefilter"] == [True, False]


def test_growth_within_a_run_is_logged_and_counted_as_one_cache_invalidation(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    judge = [verdicts("media__render_chart"), verdicts("crm__list_leads")]
    model = [reply("I will draw it, then look at the leads.", tool_use("media__render_chart", CHART)), reply("Done.")]
    with FakeMessagesAPI(judge) as judge_api, FakeMessagesAPI(model) as api:
        agent = filtered(project, api, live, ClaudeFilter(judge_api.client()), transcript=tmp_path / "t.jsonl")
        result = agent.run("Draw the pipeline")
    assert result.summary.cache_invalidations == 1
    assert "crm__list_leads" in names(api.requests[1]) and "crm__list_leads" not in names(api.requests[0])
    records = read_transcript(tmp_path / "t.jsonl")
    grew = [r for r in records if r["type"] == "tools_grew"]
    assert [t["name"] for t in grew[-1]["tools"]] == ["crm__list_leads"] and grew[-1]["turn"] == 2
    prints = [r["tools_sha256"] for r in records if r["type"] == "request"]
    assert prints[0] != prints[1]
    p = result.summary.prefilter
    assert p is not None and p.requests == 2 and p.usage.sent > 0 and p.seconds > 0
    assert result.summary.to_json()["prefilter"]["usage"]["input_tokens"] == p.usage.input_tokens


def test_the_token_budget_counts_the_claude_prefilters_tokens_too(project: Project, live: Runtime) -> None:
    # Before: only the model's tokens counted: a run spent its budget and the pre-filter's requests on top.
    def run(**limits: int) -> RunResult:
        judge = [verdicts("media__render_chart")] * 3
        model = [reply("Drawing it.", tool_use("media__render_chart", CHART)), reply("Drawn.")]
        with FakeMessagesAPI(judge) as judge_api, FakeMessagesAPI(model) as api:
            return filtered(project, api, live, ClaudeFilter(judge_api.client()), **limits).run("Draw the pipeline")

    one_turn = run(max_turns=1).summary
    p = one_turn.prefilter
    assert p is not None and p.usage.total > 0 and one_turn.spent == one_turn.usage.total + p.usage.total
    # Above the pre-filter's first request, so the model's request goes out; the model's tokens alone stay below it.
    result = run(token_budget=p.usage.total + 1)
    assert one_turn.usage.total < p.usage.total + 1
    assert result.stop_reason == "token_budget" and result.summary.turns == 1
    assert result.summary.to_json()["spent"] == result.summary.spent == one_turn.spent


def test_an_image_reaches_the_model_as_an_image_in_filtered_mode(project: Project, live: Runtime) -> None:
    with FakeMessagesAPI([reply(tool_use("media__render_chart", CHART)), reply("A chart.")]) as api:
        result = filtered(project, api, live, "local").run("Render a bar chart of the values 3, 1, 4 as an image")
    assert "media__render_chart" in names(api.requests[0])
    (answer,) = [b for b in api.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert not answer.get("is_error")
    images = [b for b in answer["content"] if b["type"] == "image"]
    assert len(images) == 1 and images[0]["source"]["data"].startswith("iVBORw0KGgo")
    p = result.summary.prefilter
    assert p is not None and p.classifier == "local" and p.admitted < p.catalog and not p.fail_open


def test_a_tool_that_was_not_admitted_cannot_be_called(project: Project, live: Runtime) -> None:
    judge = [verdicts("media__render_chart")]
    script = [reply(tool_use("crm__list_leads", {})), reply("no")]
    with FakeMessagesAPI(judge) as judge_api, FakeMessagesAPI(script) as api:
        filtered(project, api, live, ClaudeFilter(judge_api.client())).run("Draw the pipeline")
    (answer,) = [b for b in api.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert answer["is_error"] and answer["content"][0]["text"] == (
        "tool 'crm__list_leads' is not among the tools offered in this conversation (the pre-filter left it out, "
        "and it is not run); use one that is"
    )


def test_a_conversation_continued_by_another_agent_keeps_offering_the_tools_it_called(
    project: Project, live: Runtime
) -> None:
    # Before: a new Agent given ``history`` started from an empty set, so the tool the conversation had called
    # (its tool_use and tool_result blocks still in the messages) was no longer offered: the set shrank.
    model = [
        reply(tool_use("media__render_chart", CHART)),
        reply("Here is the chart."),
        reply(tool_use("crm__get_record", OPPORTUNITY)),
        reply("It is in negotiation."),
    ]
    with (
        FakeMessagesAPI([verdicts("media__render_chart")]) as first_judge,
        FakeMessagesAPI([verdicts("crm__get_record")]) as second_judge,
        FakeMessagesAPI(model) as api,
    ):
        first = filtered(project, api, live, ClaudeFilter(first_judge.client())).run("Draw the pipeline as a chart")
        again = filtered(project, api, live, ClaudeFilter(second_judge.client()))
        second = again.run("What stage is the Northwind opportunity in?", history=first.messages)
    offered = [names(r) for r in api.requests]
    assert "media__render_chart" in offered[2] and "crm__get_record" in offered[2]
    assert offered[2].index("media__render_chart") < offered[2].index("crm__get_record")
    assert second.summary.stop_reason == "end_turn"


def test_a_conversation_continued_does_not_offer_or_save_the_tools_whose_calls_were_refused(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: a call refused as not offered (its tool_use still in the messages) counted as a call made, so the
    # continued conversation offered the tool and saved it in the state file for every later conversation.
    state = tmp_path / "profile.json"
    update = {"object_type": "opportunity", "record_id": "0065e000009Q3PR", "fields": {"stage": "Closed Won"}}
    batch = {"invocations": [{"name": "docs__list_documents", "arguments": {}}, {"name": "crm__get_record",
                                                                              "arguments": OPPORTUNITY}]}  # fmt: skip
    model = [
        reply(tool_use("crm__update_record", update), tool_use("batch_tool", batch)),
        reply("I may not change it."),
        reply("Still in negotiation."),
    ]
    with (
        FakeMessagesAPI([verdicts("crm__get_record")]) as first_judge,
        FakeMessagesAPI([verdicts()]) as second_judge,
        FakeMessagesAPI(model) as api,
    ):
        options = PrefilterOptions(state=state)
        first = filtered(project, api, live, ClaudeFilter(first_judge.client()), prefilter_options=options)
        done = first.run("Mark the Northwind opportunity won")
        again = filtered(project, api, live, ClaudeFilter(second_judge.client()), prefilter_options=options)
        again.run("And now?", history=done.messages)
    refused = [b for b in api.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert refused[0]["is_error"] and "[1] docs__list_documents: error" in json.dumps(refused[1])
    offered = names(api.requests[2])
    assert "crm__get_record" in offered  # called, and run: still offered
    assert "crm__update_record" not in offered and "docs__list_documents" not in offered
    assert "crm.update_record" not in json.loads(state.read_text(encoding="utf-8"))["admitted"]
    assert "docs.list_documents" not in json.loads(state.read_text(encoding="utf-8"))["admitted"]


def every_tool(project: Project) -> list[str]:
    return sorted(t.name for t in catalog(project.tree))


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (ApiError.server_error(), "error"),
        (ApiError(404, "model: claude-nope", type="not_found_error"), "missing_model"),
        (reply("Probably the CRM."), "error"),
    ],
)
def test_a_failing_classifier_sends_the_full_catalog_and_the_run_records_why(
    project: Project, live: Runtime, answer: Any, kind: str
) -> None:
    with FakeMessagesAPI([answer]) as judge_api, FakeMessagesAPI([reply("Done.")]) as api:
        judge = ClaudeFilter(judge_api.client(max_retries=0))
        result = filtered(project, api, live, judge).run("Look up the Northwind opportunity")
    assert sorted(n for n in names(api.requests[0]) if n != "batch_tool") == every_tool(project)
    p = result.summary.prefilter
    assert p is not None and len(p.fail_open) == 1 and p.fail_open[0].startswith(f"{kind}: ")


def test_a_classifier_timeout_sends_the_full_catalog(project: Project, live: Runtime) -> None:
    release = threading.Event()

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return verdicts()

    with FakeMessagesAPI([slow]) as judge_api, FakeMessagesAPI([reply("Done.")]) as api:
        judge = ClaudeFilter(judge_api.client(max_retries=0))
        try:
            result = filtered(project, api, live, judge, prefilter_options=PrefilterOptions(timeout=0.2)).run("x y z")
        finally:
            release.set()
    assert sorted(n for n in names(api.requests[0]) if n != "batch_tool") == every_tool(project)
    p = result.summary.prefilter
    assert p is not None and p.fail_open[0].startswith("timeout: ")


@pytest.mark.parametrize("text", ['{"format": "something else"}', "[" * 1000 + "]" * 1000])
def test_a_corrupt_state_file_sends_the_full_catalog_and_is_kept(
    project: Project, live: Runtime, tmp_path: Path, text: str
) -> None:
    # Nested too deep to parse: before, Agent() raised RecursionError.
    state = tmp_path / "state.json"
    state.write_text(text, encoding="utf-8")
    options = PrefilterOptions(state=state)
    with FakeMessagesAPI([reply("Done.")]) as api:
        agent = filtered(project, api, live, "local", prefilter_options=options, transcript=tmp_path / "t.jsonl")
        result = agent.run("Draw a chart")
    assert sorted(n for n in names(api.requests[0]) if n != "batch_tool") == every_tool(project)
    p = result.summary.prefilter
    assert p is not None and p.fail_open[0].startswith("corrupt_state: ")
    assert state.read_text(encoding="utf-8") == text
    # Every tool was offered from the first request on: nothing grew (before: "grew 1 time(s)", a record of none).
    assert p.growths == 0 and result.summary.cache_invalidations == 0
    assert [r for r in read_transcript(tmp_path / "t.jsonl") if r["type"] == "tools_grew"] == []


def test_a_tree_without_search_index_makes_the_local_filter_fail_open(project: Project, tmp_path: Path) -> None:
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    (tree / "search_index.json").unlink()
    request = Agent(project.config, tree=tree, mode="filtered").first_request("Draw a chart")
    assert sorted(n for n in names(request) if n != "batch_tool") == every_tool(project)


def test_the_state_file_carries_the_set_into_the_next_conversation(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    state = tmp_path / "profile.json"
    options = PrefilterOptions(state=state)
    with FakeMessagesAPI([verdicts("crm__list_leads"), verdicts()]) as judge_api:
        judge = ClaudeFilter(judge_api.client())
        with FakeMessagesAPI([reply("Many leads."), reply("Hello.")]) as api:
            agent = filtered(project, api, live, judge, prefilter_options=options)
            first = agent.run("How many leads do we have?")
            second = agent.run("Hello")  # a new conversation: starts from the file, nothing new to admit
    assert "crm__list_leads" in names(api.requests[1])
    assert json.loads(state.read_text(encoding="utf-8"))["admitted"] == ["crm.list_leads"]
    # how big the persisted set has grown, in the summary (before: only the tools offered)
    assert first.summary.prefilter is not None and second.summary.prefilter is not None
    assert (first.summary.prefilter.saved, second.summary.prefilter.saved) == (1, 1)
    assert first.summary.to_json()["prefilter"]["saved"] == 1


def test_prefilter_claude_asks_through_the_client_the_agent_was_given(
    project: Project, live: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the classifier made its own client from the environment, so with no key there it failed open on every
    # request (a TypeError), and with one it asked the real API while the run's client pointed at a fake.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with FakeMessagesAPI([verdicts("docs__get_document"), reply("Done.")]) as api:
        result = filtered(project, api, live, "claude").run("read the onboarding document")
    p = result.summary.prefilter
    assert p is not None and p.requests == 1 and p.fail_open == []
    assert [r["tools"][0]["name"] for r in api.requests][:1] == [VERDICT_TOOL]
    assert api.requests[0]["model"] == "claude-haiku-5-5" and api.requests[1]["model"] == result.summary.model
    assert "docs__get_document" in names(api.requests[1]) and "crm__update_record" not in names(api.requests[1])
    assert result.stop_reason == "end_turn" and result.answer == "Done."


def test_a_request_with_no_tool_admitted_and_no_batch_tool_sends_no_tools_key(project: Project, live: Runtime) -> None:
    # Before: "tools": [] went out (the SDK leaves the parameter out rather than send it empty), and a dry run's
    # request held it too.
    scripted = ScriptedFilter([{}, {}, {"crm.get_record": 0.9}])
    with FakeMessagesAPI([reply("Which deal?"), reply(tool_use("crm__get_record", OPPORTUNITY)), reply("Won.")]) as api:
        agent = filtered(project, api, live, scripted, batch=False)
        assert "tools" not in agent.first_request("Hello")
        first = agent.run("Hello")
        second = agent.run("What stage is the Northwind deal in?", history=first.messages)
    assert second.answer == "Won." and second.summary.tool_calls == 1
    assert "tools" not in api.requests[0]
    admitted = names(api.requests[1])
    assert "crm__get_record" in admitted and names(api.requests[2]) == admitted  # with its siblings
    assert first.summary.cache_invalidations == 0 and second.summary.cache_invalidations == 0


def test_a_filtered_agent_reads_each_server_s_snapshot_once_for_its_pre_filter_and_its_tools(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, the pre-filter's catalog and the toolset each read every snapshot and checked every schema: an 8,020-tool
    # catalog of large schemas spent 3.5 s on each before the first request. A copy of the tree: no other test's
    # agent has read it.
    import shutil

    import agent.toolsets.direct

    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    servers = sorted(s.name for s in Manifest.load(tree).servers)
    read: list[str] = []
    load = agent.toolsets.direct.load_snapshot

    def counted(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        read.append(args[1].name)
        return load(*args, **kwargs)

    monkeypatch.setattr(agent.toolsets.direct, "load_snapshot", counted)
    first = Agent(project.config, tree=tree, mode="filtered", prefilter="local")
    assert sorted(read) == servers and len(first.toolset.names) == 18
    (tree / "snapshots" / "crm.json").write_bytes((tree / "snapshots" / "crm.json").read_bytes())  # a new version
    read.clear()
    Agent(project.config, tree=tree, mode="filtered", prefilter="local")
    assert sorted(read) == servers  # read again, once
