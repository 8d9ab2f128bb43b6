"""Full runs in the baseline modes: the real SDK against the fake API, the real sample servers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, ModelAPIError, ModelReplied, RunFinished, ToolFinished, read_transcript
from agent.content import MAX_RESULT_CHARS
from agent.events import Event
from agent.testing import ApiError, CutStream, FakeMessagesAPI, reply, server_tool_use, tool_search_result, tool_use
from agent.tokens import request_tokens
from sandbox.host import Runtime
from tests.agent.conftest import Project

OPPORTUNITY = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}


def agent(project: Project, api: FakeMessagesAPI, runtime: Runtime, **kwargs: Any) -> Agent:
    kwargs.setdefault("mode", "direct")
    return Agent(project.config, tree=project.tree, client=api.client(max_retries=3), runtime=runtime, **kwargs)


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    last = request["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b["type"] == "tool_result"]


def assert_cache_stable(requests: list[dict[str, Any]]) -> None:
    """The tools array and system prompt are byte-identical in every request, with breakpoints."""
    assert len(requests) >= 2
    tools = {json.dumps(r["tools"], sort_keys=False) for r in requests}
    system = {json.dumps(r["system"], sort_keys=False) for r in requests}
    assert len(tools) == 1 and len(system) == 1
    first = requests[0]
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in first["tools"][:-1])
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    for r in requests:  # one moving breakpoint: the last block of the conversation
        marked = [b for m in r["messages"] for b in m["content"] if isinstance(b, dict) and "cache_control" in b]
        assert marked == [r["messages"][-1]["content"][-1]]


@pytest.mark.parametrize("mode", ["direct", "tool-search"])
def test_every_request_of_a_run_sends_the_same_tools_and_system_prompt(
    project: Project, live: Runtime, mode: str
) -> None:
    script = [
        reply(tool_use("crm__get_record", OPPORTUNITY)),
        reply(tool_use("crm__search_records", {"object_type": "account", "query": "Northwind"})),
        reply("Found it."),
    ]
    with FakeMessagesAPI(script) as api:
        result = agent(project, api, live, mode=mode).run("Look up the Northwind opportunity")
    assert result.completed and result.answer == "Found it."
    assert_cache_stable(api.requests)
    if mode == "direct":  # the ~5k-token prefix is cached once and read on every later turn
        usage = [r["usage"] for r in api.responses]
        assert usage[0]["cache_creation_input_tokens"] > 1024 and usage[0]["cache_read_input_tokens"] == 0
        assert all(u["cache_read_input_tokens"] >= usage[0]["cache_creation_input_tokens"] for u in usage[1:])
        assert result.summary.usage.cache_read_input_tokens == sum(u["cache_read_input_tokens"] for u in usage)


def test_a_direct_run_calls_the_mcp_tool_and_sends_its_result_back(project: Project, live: Runtime) -> None:
    with FakeMessagesAPI([reply(tool_use("crm__get_record", OPPORTUNITY)), reply("Stage noted.")]) as api:
        result = agent(project, api, live).run("What stage is the Northwind opportunity in?")
    (answer,) = tool_results(api.requests[1])
    assert answer["tool_use_id"] == api.responses[0]["content"][0]["id"]
    record = json.loads(answer["content"][0]["text"])
    assert record["id"] == "0065e000009Q3PR" and "stage" in record["fields"]
    s = result.summary
    assert (s.turns, s.tool_calls, s.tool_errors, s.script_tool_calls, s.sandbox_bytes) == (2, 1, 0, 0, 0)
    assert s.model_bytes == len(answer["content"][0]["text"].encode("utf-8"))
    assert s.usage.sent == sum(
        r["usage"][k]
        for r in api.responses
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def test_an_image_from_a_tool_reaches_the_model_as_an_image_block(project: Project, live: Runtime) -> None:
    chart = {"title": "Pipeline", "values": [3, 1, 4]}
    with FakeMessagesAPI([reply(tool_use("media__render_chart", chart)), reply("A chart.")]) as api:
        agent(project, api, live).run("Draw the pipeline")
    (answer,) = tool_results(api.requests[1])
    images = [b for b in answer["content"] if b["type"] == "image"]
    assert len(images) == 1 and images[0]["source"]["media_type"] == "image/png"
    assert images[0]["source"]["data"].startswith("iVBORw0KGgo")  # base64 of the PNG signature


def test_tool_errors_go_back_to_the_model_marked_as_errors(project: Project, live: Runtime) -> None:
    calls = reply(
        tool_use("crm__get_record", {"object_type": "opportunity", "record_id": 42}),  # fails validation
        tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "006000000000000"}),  # server error
        tool_use("crm__drop_tables", {}),
        tool_use("crm__get_record", OPPORTUNITY),
    )
    with FakeMessagesAPI([calls, reply("Three failed.")]) as api:
        result = agent(project, api, live).run("Try these")
    results = tool_results(api.requests[1])
    assert [r.get("is_error", False) for r in results] == [True, True, True, False]
    assert "record_id: 42 is not of type 'string'" in results[0]["content"][0]["text"]
    assert "006000000000000" in results[1]["content"][0]["text"]
    assert results[2]["content"][0]["text"] == "unknown tool 'crm__drop_tables'"
    assert result.summary.tool_errors == 3 and result.summary.tool_calls == 4


def test_the_calls_of_one_reply_run_at_the_same_time_and_answer_in_order(project: Project, live: Runtime) -> None:
    meet = {"group": "one-reply", "parties": 2, "timeout": 20}  # returns only while both calls are in progress
    calls = reply(tool_use("media__rendezvous", meet), tool_use("media__rendezvous", meet))
    with FakeMessagesAPI([calls, reply("Both met.")]) as api:
        result = agent(project, api, live).run("Meet twice")
    results = tool_results(api.requests[1])
    assert [r["tool_use_id"] for r in results] == [b["id"] for b in api.responses[0]["content"]]
    assert [r.get("is_error", False) for r in results] == [False, False]
    assert results[0]["content"][0]["text"] == "group 'one-reply': 2 parties met"
    assert result.summary.tool_calls == 2


def test_the_turn_limit_ends_a_run_that_keeps_calling_tools(project: Project, live: Runtime) -> None:
    script = [reply(tool_use("media__list_gallery"))] * 3
    with FakeMessagesAPI(script) as api:
        result = agent(project, api, live, max_turns=2).run("Loop forever")
    assert result.stop_reason == "max_turns" and not result.completed
    assert result.summary.turns == 2 and len(api.requests) == 2 and api.remaining == 1


def test_the_token_budget_ends_a_run_before_the_next_request(project: Project, live: Runtime) -> None:
    with FakeMessagesAPI([reply(tool_use("media__list_gallery")), reply("never")]) as api:
        result = agent(project, api, live, token_budget=1000).run("Spend")
    assert result.stop_reason == "token_budget"
    assert result.summary.usage.total >= 1000 and len(api.requests) == 1


def test_rate_limits_and_overloads_are_retried_and_the_run_goes_on(project: Project, live: Runtime) -> None:
    script = [
        ApiError.rate_limited(0.01),
        ApiError.server_error(0.01),
        reply(tool_use("media__list_gallery")),
        ApiError.overloaded(0.01),
        reply("Listed."),
    ]
    with FakeMessagesAPI(script) as api:
        result = agent(project, api, live).run("List the gallery")
    assert result.completed and result.summary.turns == 2
    assert len(api.requests) == 5 and api.remaining == 0


def test_an_api_error_past_the_retries_raises_with_the_run_so_far(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    script = [reply(tool_use("media__list_gallery"))] + [ApiError.overloaded(0.01)] * 4
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI(script) as api, pytest.raises(ModelAPIError, match="529") as info:
        agent(project, api, live, transcript=transcript).run("List the gallery")
    assert info.value.status_code == 529
    assert info.value.result is not None and info.value.result.summary.turns == 2
    assert info.value.result.summary.tool_calls == 1
    records = read_transcript(transcript)
    assert [r["type"] for r in records][-2:] == ["api_error", "run_end"]


@pytest.mark.parametrize("stop", ["max_tokens", "refusal"])
def test_a_reply_cut_by_max_tokens_or_a_refusal_ends_the_run(project: Project, live: Runtime, stop: str) -> None:
    with FakeMessagesAPI([reply("Partial answer", stop_reason=stop)]) as api:
        result = agent(project, api, live).run("Say a lot")
    assert result.stop_reason == stop and not result.completed and result.answer == "Partial answer"


def test_a_paused_turn_is_sent_back_as_is_to_continue(project: Project, live: Runtime) -> None:
    search = server_tool_use("tool_search_tool_bm25", {"query": "gallery"})
    with FakeMessagesAPI([reply(search, stop_reason="pause_turn"), reply("Continued.")]) as api:
        result = agent(project, api, live, mode="tool-search").run("Find the gallery")
    assert result.answer == "Continued."
    last = api.requests[1]["messages"][-1]
    assert last["role"] == "assistant" and last["content"][0]["type"] == "server_tool_use"


def test_tool_search_blocks_go_back_with_the_turn_and_the_found_tool_is_called(project: Project, live: Runtime) -> None:
    found = reply(
        server_tool_use("tool_search_tool_bm25", {"query": "crm record"}),
        tool_search_result(["crm__get_record"]),
        tool_use("crm__get_record", OPPORTUNITY),
    )
    with FakeMessagesAPI([found, reply("Got it.")]) as api:
        result = agent(project, api, live, mode="tool-search", pinned=["media.list_gallery"]).run("Read the deal")
    first = api.requests[0]
    assert first["tools"][-1]["type"] == "tool_search_tool_bm25_20251119"
    assert [t["name"] for t in first["tools"] if "defer_loading" not in t] == [
        "media__list_gallery",
        "batch_tool",
        "tool_search_tool_bm25",
    ]
    assistant = api.requests[1]["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    assert assistant["content"][1]["content"]["tool_references"] == [
        {"type": "tool_reference", "tool_name": "crm__get_record"}
    ]
    (answer,) = tool_results(api.requests[1])
    assert "0065e000009Q3PR" in answer["content"][0]["text"]
    assert result.summary.tool_calls == 1  # the search ran on the API's side


def test_the_transcript_has_requests_responses_usage_and_tool_timings(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    transcript = tmp_path / "t" / "run.jsonl"
    events: list[Event] = []
    with FakeMessagesAPI([reply(tool_use("crm__get_record", OPPORTUNITY)), reply("Done.")]) as api:
        result = agent(project, api, live, transcript=transcript, on_event=events.append).run("Read the deal")
    records = read_transcript(transcript)
    kinds = ["run_start", "request", "response", "tool", "request", "response", "run_end"]
    assert [r["type"] for r in records] == kinds
    start, request1, response1, tool, request2, _, end = records
    assert start["system"] == api.requests[0]["system"][0]["text"]
    assert [t["name"] for t in start["tools"][:2]] == ["batch_tool", "crm__create_task"]
    assert request1["tools_sha256"] == request2["tools_sha256"] and len(request1["tools_sha256"]) == 16
    assert result.summary.cache_invalidations == 0 and result.summary.prefilter is None
    assert request1["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Read the deal"}]}]
    assert [m["role"] for m in request2["messages"]] == ["assistant", "user"]  # only what is new
    usage = response1["message"]["usage"]
    assert {"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} <= set(usage)
    assert tool["name"] == "crm__get_record" and tool["seconds"] >= 0 and tool["model_bytes"] > 0
    assert end["summary"] == result.summary.to_json()
    assert [type(e) for e in events] == [ModelReplied, ToolFinished, ModelReplied, RunFinished]


def test_the_first_request_is_built_without_starting_anything(project: Project) -> None:
    request = Agent(project.config, tree=project.tree, mode="code").first_request("Hello")
    assert request["model"] == "claude-sonnet-5-5"
    assert [t["name"] for t in request["tools"]] == ["list_files", "read_file", "search_tools", "execute_python"]
    assert request["messages"][0]["content"][0] == {
        "type": "text",
        "text": "Hello",
        "cache_control": {"type": "ephemeral"},
    }


def test_the_agent_is_given_a_config_and_counts_the_command_line_would_take(project: Project) -> None:
    # Before: Agent("tooltree.yaml") was "AttributeError: 'str' object has no attribute 'section'", and
    # max_tokens=0 or token_budget=-1 were taken (the CLI refuses both).
    from agent.errors import AgentSetupError

    with pytest.raises(TypeError) as info:
        Agent("tooltree.yaml", tree=project.tree)  # type: ignore[arg-type]
    assert str(info.value) == (
        "config: expected a Config, got str 'tooltree.yaml'; load the file first: Agent(load_config(path), ...), "
        "with load_config from tool_tree.config"
    )
    for name, value, low in [
        ("max_tokens", 0, 1),
        ("token_budget", -1, 1),
        ("max_turns", 0, 1),
        ("max_retries", -1, 0),
    ]:
        with pytest.raises(AgentSetupError) as setup:
            Agent(project.config, tree=project.tree, **{name: value})
        assert str(setup.value) == f"{name} must be at least {low}, got {value}"
    for name, value, high in [("max_tokens", 10**7, "1,000,000"), ("token_budget", 10**11, "10,000,000,000")]:
        with pytest.raises(AgentSetupError) as setup:  # before: taken (an extra zero), refused by the API later
            Agent(project.config, tree=project.tree, **{name: value})
        assert str(setup.value) == f"{name} must be at most {high}, got {value:,}"
    with pytest.raises(TypeError, match=r"^max_tokens: expected a whole number, at least 1, got str '100'$"):
        Agent(project.config, tree=project.tree, max_tokens="100")  # type: ignore[arg-type]
    assert Agent(project.config, tree=str(project.tree), max_tokens=1, token_budget=1, max_retries=0).max_tokens == 1


def test_pinned_given_as_one_string_or_a_workspace_that_is_a_file_is_refused_before_any_run(
    project: Project, tmp_path: Path
) -> None:
    # Before: "pinned tool 'c' is not in the tree" (the string iterated), and a file as the workspace was
    # taken, to fail once the model had asked for its first script.
    from agent.errors import AgentSetupError

    with pytest.raises(TypeError) as info:
        Agent(project.config, tree=project.tree, pinned="crm.get_record")
    assert str(info.value) == "pinned: expected a list of server.tool names, got the string 'crm.get_record'"
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    with pytest.raises(AgentSetupError) as setup:
        Agent(project.config, tree=project.tree, workspace=notes)
    assert str(setup.value) == f"the workspace {notes} is a file, not a folder"
    assert notes.read_text(encoding="utf-8") == "mine"
    assert Agent(project.config, tree=project.tree, pinned=["crm.get_record"], workspace=tmp_path / "new").workspace


def test_the_default_client_comes_from_the_environment(
    project: Project, live: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeMessagesAPI([reply("Hi.")]) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        result = Agent(project.config, tree=project.tree, mode="direct", runtime=live).run("Hello")
    assert result.answer == "Hi."
    assert "sk-from-env" in (api.headers[0].get("x-api-key") or api.headers[0].get("authorization", ""))


def test_an_enormous_tool_result_reaches_the_model_as_its_head_and_tail(project: Project, live: Runtime) -> None:
    huge = "HEAD" + "x" * 2_000_000 + "TAIL"  # a server may answer with megabytes; each request would resend them
    with FakeMessagesAPI([reply(tool_use("media__slow_echo", {"text": huge, "seconds": 0})), reply("ok")]) as api:
        result = agent(project, api, live).run("Echo it")
    (answer,) = tool_results(api.requests[1])
    texts = [b["text"] for b in answer["content"]]
    assert texts[0].startswith("HEAD") and texts[0].endswith("TAIL") and "characters left out" in texts[0]
    assert f"2,000,008 characters of text; {MAX_RESULT_CHARS:,} are shown" in texts[-1]
    assert sum(len(t) for t in texts) < MAX_RESULT_CHARS + 1000 and len(json.dumps(answer)) < MAX_RESULT_CHARS + 10_000
    assert result.summary.model_bytes < MAX_RESULT_CHARS + 1000


@pytest.mark.parametrize("value", [[1, 2], "{}", None])
def test_a_tool_use_whose_input_is_not_an_object_is_refused_and_not_run(
    project: Project, live: Runtime, value: Any
) -> None:
    call = {"type": "tool_use", "name": "crm__create_task", "input": value}  # all-default arguments would not run
    with FakeMessagesAPI([reply(call), reply("ok")]) as api:
        result = agent(project, api, live).run("Make a task")
    (answer,) = tool_results(api.requests[1])
    assert answer["is_error"] and answer["content"][0]["text"].startswith("the input of crm__create_task must be")
    assert result.summary.tool_errors == 1


@pytest.mark.parametrize("stop", ["max_tokens", "refusal"])
def test_a_conversation_cut_in_the_middle_of_a_tool_call_can_go_on(project: Project, live: Runtime, stop: str) -> None:
    cut = reply("Let me look", tool_use("crm__create_task", {"subject": "half"}), stop_reason=stop)
    with FakeMessagesAPI([cut, reply("Carrying on.")]) as api:
        bot = agent(project, api, live)
        first = bot.run("Make a task")
        second = bot.run("Go on", history=first.messages)
    assert first.stop_reason == stop and first.summary.tool_calls == 0
    assert second.completed and second.answer == "Carrying on."
    last = api.requests[1]["messages"][-1]
    assert last["content"][0]["type"] == "tool_result" and last["content"][0]["is_error"] is True
    assert last["content"][0]["tool_use_id"] == api.responses[0]["content"][1]["id"]
    assert last["content"][-1]["text"] == "Go on"


def test_an_overload_inside_the_stream_is_retried(
    project: Project, live: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.request.STREAM_RETRY_DELAY", 0.0)
    script = [ApiError.overloaded(in_stream=True), reply(tool_use("media__list_gallery")), reply("Listed.")]
    with FakeMessagesAPI(script) as api:
        result = agent(project, api, live).run("List the gallery")
    assert result.completed and result.summary.turns == 2 and len(api.requests) == 3


def test_an_overload_inside_the_stream_past_the_retries_says_what_happened(
    project: Project, live: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.request.STREAM_RETRY_DELAY", 0.0)
    with (
        FakeMessagesAPI([ApiError.overloaded(in_stream=True)] * 4) as api,
        pytest.raises(ModelAPIError) as info,
    ):
        agent(project, api, live).run("List the gallery")
    assert str(info.value) == "the Messages API failed inside its stream (overloaded_error): Overloaded"
    assert len(api.requests) == 4  # the first try and max_retries=3


def test_a_reply_whose_stream_is_cut_is_asked_again_and_never_taken_as_the_answer(
    project: Project, live: Runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: the cut reply's half sentence was the answer, its tool call was dropped, and the run "completed".
    monkeypatch.setattr("agent.request.STREAM_RETRY_DELAY", 0.0)
    cut = CutStream(reply("I will read the record and then", tool_use("crm__get_record", OPPORTUNITY)), events=3)
    with FakeMessagesAPI([cut, reply(tool_use("crm__get_record", OPPORTUNITY)), reply("Negotiation.")]) as api:
        result = agent(project, api, live, transcript=tmp_path / "run.jsonl").run("Read the deal")
    assert result.completed and result.answer == "Negotiation." and result.summary.tool_calls == 1
    assert len(api.requests) == 3 and api.requests[0] == api.requests[1]
    # The cut reply's input was read and billed: counted too (before: only the two whole replies were).
    assert result.summary.usage.sent == sum(request_tokens(r) for r in api.requests)
    errors = [r for r in read_transcript(tmp_path / "run.jsonl") if r["type"] == "api_error"]
    assert [(e["status"], e["message"]) for e in errors] == [
        (200, "the stream ended before the reply did (after 1 content block(s))")
    ]


def test_a_stream_cut_past_the_retries_is_an_api_error_with_the_run_so_far(
    project: Project, live: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.request.STREAM_RETRY_DELAY", 0.0)
    cut = CutStream(reply("Half a"), events=2)
    with FakeMessagesAPI([cut] * 4) as api, pytest.raises(ModelAPIError) as info:
        agent(project, api, live).run("Read the deal")
    assert (
        str(info.value) == "the Messages API failed: the stream ended before the reply did (after 1 content block(s))"
    )
    assert info.value.result is not None and info.value.result.stop_reason == "api_error"
    assert info.value.result.answer == "" and len(api.requests) == 4
