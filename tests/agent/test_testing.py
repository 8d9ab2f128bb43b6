"""The fake Messages API, driven by the real anthropic SDK."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

import agent.testing
from agent.testing import ApiError, CutStream, FakeMessagesAPI, reply, server_tool_use, tool_search_result, tool_use

MODEL = "claude-sonnet-5-5"


def ask(client: anthropic.Anthropic, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return client.messages.create(model=MODEL, max_tokens=1000, messages=messages, **extra)  # type: ignore[arg-type]


def test_the_public_surface_is_exactly_all() -> None:
    assert sorted(agent.testing.__all__) == agent.testing.__all__
    for name in agent.testing.__all__:
        assert getattr(agent.testing, name) is not None


def test_scripted_replies_come_back_in_order_and_every_request_is_recorded() -> None:
    with FakeMessagesAPI([reply("first"), reply(tool_use("lookup", {"q": "x"}))]) as api:
        client = api.client()
        one = ask(client, [{"role": "user", "content": "hi"}])
        two = ask(client, [{"role": "user", "content": "again"}])
    assert one.content[0].text == "first" and one.stop_reason == "end_turn"
    assert two.stop_reason == "tool_use"
    assert two.content[0].name == "lookup" and two.content[0].input == {"q": "x"}
    assert two.content[0].id.startswith("toolu_")
    assert [r["messages"][0]["content"] for r in api.requests] == ["hi", "again"]
    assert api.remaining == 0


def test_a_streamed_reply_carries_the_same_message() -> None:
    code = "print('x')\n" * 2000  # several delta chunks
    with FakeMessagesAPI([reply("thinking it over", tool_use("execute_python", {"code": code}))]) as api:
        client = api.client()
        with client.messages.stream(model=MODEL, max_tokens=1000, messages=[{"role": "user", "content": "go"}]) as s:
            message = s.get_final_message()
    assert message.content[0].text == "thinking it over"  # type: ignore[union-attr]
    assert message.content[1].input == {"code": code}  # type: ignore[union-attr]
    assert message.usage.output_tokens == api.responses[0]["usage"]["output_tokens"] > 1000


def test_server_tool_blocks_parse_as_the_sdk_types() -> None:
    blocks = [server_tool_use("tool_search_tool_bm25", {"query": "leads"}), tool_search_result(["crm__list_leads"])]
    with FakeMessagesAPI([reply(*blocks, tool_use("crm__list_leads", {}))]) as api:
        message = ask(api.client(), [{"role": "user", "content": "go"}])
    search, found, call = message.content
    assert search.type == "server_tool_use" and search.id.startswith("srvtoolu_")
    assert found.type == "tool_search_tool_result" and found.tool_use_id == search.id
    assert [r.tool_name for r in found.content.tool_references] == ["crm__list_leads"]  # type: ignore[union-attr]
    assert call.type == "tool_use"


def test_rate_limits_overloads_and_server_errors_are_retried_by_the_sdk() -> None:
    script = [ApiError.rate_limited(0.01), ApiError.server_error(0.01), ApiError.overloaded(0.01), reply("finally")]
    with FakeMessagesAPI(script) as api:
        message = ask(api.client(max_retries=3), [{"role": "user", "content": "hi"}])
    assert message.content[0].text == "finally"
    assert len(api.requests) == 4
    assert [h.get("x-stainless-retry-count") for h in api.headers] == ["0", "1", "2", "3"]


def test_an_error_past_the_retries_reaches_the_caller_with_its_status() -> None:
    with FakeMessagesAPI([ApiError.overloaded(0.01)] * 2) as api, pytest.raises(anthropic.APIStatusError) as info:
        ask(api.client(max_retries=1), [{"role": "user", "content": "hi"}])
    assert info.value.status_code == 529


def test_a_cut_stream_ends_the_answer_before_the_message_does() -> None:
    with FakeMessagesAPI([CutStream(reply("The deal is in Negotiation."), events=3)] * 2) as api:
        client = api.client(max_retries=0)
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            events = [e.type for e in s]
            message = s.get_final_message()
        with pytest.raises(anthropic.APIConnectionError):  # not streamed: half the JSON, then the connection closes
            ask(client, [{"role": "user", "content": "hi"}])
    assert "message_stop" not in events and message.stop_reason is None
    assert [b.text for b in message.content] == ["The deal is in Negotiation."]  # type: ignore[union-attr]


def test_a_tool_use_without_a_tool_result_is_refused_like_the_real_api() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "no result"}]},
    ]
    with FakeMessagesAPI([reply("never sent")]) as api, pytest.raises(anthropic.BadRequestError, match="toolu_1"):
        ask(api.client(max_retries=0), messages)
    assert api.remaining == 1


def test_an_empty_script_answers_400_not_a_hang() -> None:
    with FakeMessagesAPI() as api, pytest.raises(anthropic.BadRequestError, match="no reply left"):
        ask(api.client(max_retries=0), [{"role": "user", "content": "hi"}])


def test_a_reply_can_be_built_from_the_request() -> None:
    def echo(body: dict[str, Any]) -> dict[str, Any]:
        return reply(f"you said {body['messages'][-1]['content']}")

    with FakeMessagesAPI([echo]) as api:
        message = ask(api.client(), [{"role": "user", "content": "hello"}])
    assert message.content[0].text == "you said hello"


def test_the_prompt_cache_reads_a_prefix_written_by_an_earlier_request() -> None:
    system = [{"type": "text", "text": "s" * 8000, "cache_control": {"type": "ephemeral"}}]
    with FakeMessagesAPI([reply("a"), reply("b")]) as api:
        client = api.client()
        first = ask(client, [{"role": "user", "content": "one"}], system=system)
        second = ask(client, [{"role": "user", "content": "two"}], system=system)
    assert first.usage.cache_creation_input_tokens == 2000 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == 2000 and second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == 1


def test_count_tokens_answers_with_the_same_approximation() -> None:
    with FakeMessagesAPI() as api:
        counted = api.client().messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "x" * 40}])
    assert counted.input_tokens == 10
    assert api.count_requests[0]["messages"][0]["content"] == "x" * 40


def test_mid_conversation_system_text_is_accepted_but_cannot_open_the_conversation() -> None:
    from agent.testing import check_request

    turn = [
        {"role": "user", "content": "go"},
        {"role": "system", "content": [{"type": "text", "text": "# Environment"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    ]
    assert check_request({"model": MODEL, "max_tokens": 10, "messages": turn}) is None
    opening = [{"role": "system", "content": "hi"}, *turn]
    assert check_request({"model": MODEL, "max_tokens": 10, "messages": opening}) == (
        "messages: the first message must use the user role"
    )
    image = [turn[0], {"role": "system", "content": [{"type": "image", "source": {}}]}]
    assert "a system message holds text" in str(check_request({"model": MODEL, "max_tokens": 10, "messages": image}))
