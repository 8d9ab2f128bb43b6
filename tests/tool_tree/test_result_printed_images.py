"""``print(result)`` of a result with text and images names the images after the text (`ToolResult.__str__`).

Before: ``str`` was ``.text`` whenever any text came back, so a script that printed such a result never learned
that an image came with it unless it knew to look at ``.images``.
"""

from __future__ import annotations

import base64
from typing import Any

from tool_tree.runtime import ToolResult

PNG = b"\x89PNG\r\n\x1a\n" + bytes(513)  # 521 bytes


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def image(data: bytes = PNG, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime}


def test_printing_text_and_an_image_names_the_image_after_the_text() -> None:
    result = ToolResult([text("Here is the chart"), image()])
    assert str(result) == "Here is the chart\n[Image(image/png, 521 bytes): result.images[0]]"
    assert result.text == "Here is the chart"  # .text itself leaves images out, as before
    # Resources are in .text already: a result without images prints byte for byte what it printed before.
    link = {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"}
    embedded = {"type": "resource", "resource": {"uri": "file:///b.txt", "text": "B"}}
    for blocks in ([text("plain\n")], [text("x"), link, embedded], [text("")], []):
        assert str(ToolResult(blocks)) == ToolResult(blocks).text


def test_each_of_a_few_images_gets_its_line_with_its_index_in_images() -> None:
    result = ToolResult([image(), text("a"), image(PNG + bytes(9), "image/jpeg"), text("b\n")])
    assert str(result) == (
        "a\nb\n[Image(image/png, 521 bytes): result.images[0]]\n[Image(image/jpeg, 530 bytes): result.images[1]]"
    )


def test_many_images_after_a_text_are_counted_on_one_line() -> None:
    audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    result = ToolResult([text("frames"), *[image()] * 5, audio])
    assert str(result) == "frames\n[+ 5 images: result.images[0..4]]\n[+ 1 block of type 'audio': result.content]"
    assert len(result.images) == 5


def test_another_block_after_a_text_is_named_like_in_a_result_without_text() -> None:
    result = ToolResult([text("hi"), {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}])
    assert str(result) == "hi\n[a block of type 'audio': result.content[1]]"
