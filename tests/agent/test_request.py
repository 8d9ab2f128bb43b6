"""Request building: breakpoints on a copy, response blocks sent back as params."""

from __future__ import annotations

import copy

from anthropic.types import TextBlock, ToolUseBlock

from agent.request import block_param, cached_system, cached_tools, with_last_breakpoint

EPHEMERAL = {"type": "ephemeral"}


def test_breakpoints_go_on_the_last_tool_the_system_prompt_and_the_last_block() -> None:
    tools = [{"name": "a", "input_schema": {}}, {"name": "b", "input_schema": {}}]
    assert [t.get("cache_control") for t in cached_tools(tools)] == [None, EPHEMERAL]
    assert "cache_control" not in tools[1]
    assert cached_system("You help.") == [{"type": "text", "text": "You help.", "cache_control": EPHEMERAL}]
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    before = copy.deepcopy(messages)
    marked = with_last_breakpoint(messages)
    assert messages == before  # the stored conversation never carries markers
    assert marked[-1]["content"][0]["cache_control"] == EPHEMERAL
    assert marked[:2] == messages[:2]


def test_a_string_message_becomes_a_text_block_to_carry_the_breakpoint() -> None:
    marked = with_last_breakpoint([{"role": "user", "content": "hi"}])
    assert marked == [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}]


def test_response_blocks_are_sent_back_without_fields_the_api_does_not_take() -> None:
    tool = ToolUseBlock(id="t1", name="a", input={"x": 1}, type="tool_use", toolset_name=None)
    assert block_param(tool) == {"type": "tool_use", "id": "t1", "name": "a", "input": {"x": 1}}
    assert block_param(TextBlock(text="hi", type="text", citations=None)) == {"type": "text", "text": "hi"}
    unknown = {"type": "tool_search_tool_result", "tool_use_id": "s1", "content": {"type": "x"}}
    assert block_param(unknown) == unknown
