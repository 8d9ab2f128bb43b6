"""A request's images within the Messages API's limits as a conversation grows (`agent.images`)."""

from __future__ import annotations

import base64
from typing import Any

from agent import Agent
from agent.images import within_image_limits
from agent.testing import FakeMessagesAPI, reply
from agent.testing._content import check_content
from tests.agent.conftest import Project
from tests.servers.content_server import png


def shown(width: int) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png(width, 10)}}


def turns(*widths: int) -> list[dict[str, Any]]:
    """A conversation whose tool results each show one PNG ``width`` pixels wide."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "draw"}]}]
    for i, width in enumerate(widths):
        use = {"type": "tool_use", "id": f"t{i}", "name": "media__render_chart", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": [shown(width)]}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    return messages


def widths(messages: list[dict[str, Any]]) -> list[int | None]:
    """Each tool result's image width, None where a note took its place."""
    out: list[int | None] = []
    for block in (b for m in messages for b in m["content"] if b["type"] == "tool_result"):
        inner = block["content"][0]
        raw = base64.b64decode(inner["source"]["data"]) if inner["type"] == "image" else None
        out.append(int.from_bytes(raw[16:20], "big") if raw is not None else None)
    return out


def test_within_the_limits_the_messages_are_sent_as_they_are() -> None:
    messages = turns(*[3000] * 20)
    assert within_image_limits(messages) == messages and check_content({"messages": messages}) is None


def test_past_twenty_images_the_oldest_over_2000_pixels_give_way_to_notes_until_twenty_remain() -> None:
    messages = turns(3000, 100, 3000, 3000, *[100] * 18, 3000)  # 23 images, 4 of them wide
    assert check_content({"messages": messages}) is not None  # what the API would refuse
    sent = within_image_limits(messages)
    assert widths(sent) == [None, 100, None, None, *[100] * 18, 3000]
    assert check_content({"messages": sent}) is None
    note = sent[2]["content"][0]["content"][0]
    assert note["type"] == "text" and "left out of this request" in note["text"]
    assert widths(messages)[0] == 3000  # the conversation keeps its images; only the request's copy changes


def test_past_a_hundred_images_the_oldest_give_way() -> None:
    sent = within_image_limits(turns(*[100] * 103))
    assert widths(sent) == [None] * 3 + [100] * 100 and check_content({"messages": sent}) is None


def test_a_conversation_continued_past_the_limits_is_still_answered(project: Project) -> None:
    # Before: every request of a conversation holding 21 images, one of them wide, was refused with a 400.
    history = [*turns(3000, *[100] * 20), {"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]
    with FakeMessagesAPI([reply("It shows the pipeline.")]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0))
        result = agent.run("What did the first chart show?", history=history)
    assert result.answer == "It shows the pipeline." and widths(api.requests[0]["messages"])[0] is None
