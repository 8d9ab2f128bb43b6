"""What a script sees of a tool's result: `ToolResult.json()` says what came back when it is not JSON."""

from __future__ import annotations

import json

import pytest

from tool_tree.runtime import ToolResult


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def test_json_prefers_structured_content_then_parses_the_text() -> None:
    assert ToolResult([text("not json")], {"rows": 3}).json() == {"rows": 3}
    assert ToolResult([text('{"rows": [1, 2]}')]).json() == {"rows": [1, 2]}


def test_json_of_plain_text_names_what_came_back_and_points_to_text() -> None:
    # Before: "tool result text is not JSON: Expecting value: line 1 column 1 (char 0)", nothing of what it was.
    result = ToolResult([text("The sum of 1 and 2 is 3.")])
    with pytest.raises(ValueError) as caught:
        result.json()
    message = str(caught.value)
    assert "'The sum of 1 and 2 is 3.'" in message and "no structured content" in message
    assert ".text" in message


def test_json_of_long_text_shows_only_its_start_and_its_length() -> None:
    result = ToolResult([text("x" * 100_000)])
    with pytest.raises(ValueError, match=r"100,000 characters") as caught:
        result.json()
    assert len(str(caught.value)) < 1_000


def test_json_of_a_result_without_text_names_its_blocks() -> None:
    # Before: "Expecting value: line 1 column 1 (char 0)" for an image, as for an empty string.
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    with pytest.raises(ValueError, match=r"no text block.*1 image") as caught:
        ToolResult([image]).json()
    assert ".images" in str(caught.value)
    with pytest.raises(ValueError, match=r"no content"):
        ToolResult([]).json()
    with pytest.raises(ValueError, match=r"it is 'Here it is:'; .*its content is 1 text, 1 image"):
        ToolResult([text("Here it is:"), image]).json()


def test_json_of_several_json_text_blocks_says_how_to_parse_each() -> None:
    # Joined with newlines they are not one JSON document; each block is.
    blocks = [text(json.dumps({"id": i})) for i in range(3)]
    with pytest.raises(ValueError, match=r"each of its 3 text blocks is JSON"):
        ToolResult(blocks).json()
