"""``show_image`` takes an MCP image content block (a dict), as a tool's structured output holds one, and a script
printing a result of text and an image learns of the image.

Before: server-filesystem's ``read_media_file`` answered with structured output whose ``content[0]`` is
``{'type': 'image', 'data': <base64>, 'mimeType': 'image/png'}``, and ``show_image`` of it raised "TypeError:
show_image() takes a path, bytes or an image object, not dict"; ``print(result)`` of text and an image showed only
the text.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox._supervisor import worker
from sandbox._supervisor.limits import MAX_IMAGE_BYTES
from tests.sandbox.test_sandbox_session import PNG

BLOCK = {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}


def test_show_image_of_a_dict_that_is_no_image_block_names_what_it_takes() -> None:
    # Refused before the sandbox connection is needed, so this runs in-process.
    with pytest.raises(TypeError) as refused:
        worker.show_image({"type": "text", "text": "a chart"})
    assert str(refused.value) == (
        "show_image() takes a path, bytes, an image object (a tool result's .images[i], a figure), an MCP image "
        "content block ({'type': 'image', 'data': <base64>, 'mimeType': ...}), a tool result with images (or a tool's "
        "structured result of image blocks, {'content': [...]}), or a list of these, not a dict with type 'text'"
    )


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ("iVBORw0KGgo=\n", "the image block's 'data' is not valid base64"),  # strict: no newline, no junk
        ("iVBO*w0KGgo=", "the image block's 'data' is not valid base64"),
        ("iVBORw0KGg", "the image block's 'data' is not valid base64"),  # cut short: no padding
        ("ï" * 8, "the image block's 'data' is not valid base64"),
        (b"iVBORw0KGgo=", "the image block's 'data' is not a base64 string"),
        (
            "A" * ((MAX_IMAGE_BYTES + 2) // 3 * 4 + 4),
            "the image block's data is 5,242,884 characters of base64, over the 3,932,160 bytes one image may have: "
            "show it smaller (fewer pixels, or as JPEG)",
        ),
    ],
)
def test_show_image_of_an_image_block_decodes_its_data_strictly_and_bounds_it(data: object, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        worker.show_image({"type": "image", "data": data, "mimeType": "image/png"})
    assert str(refused.value) == f"show_image(): {said}"


def _media_tools(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """server-filesystem's ``read_media_file`` answers with its image in the structured content too."""
    if tool == "read_media_file":
        return {"content": [BLOCK], "structuredContent": {"content": [BLOCK]}}
    return {"content": [{"type": "text", "text": "the chart of March"}, BLOCK]}


@pytest.mark.docker
def test_a_script_shows_a_tool_s_image_block_and_sees_an_image_in_a_printed_result(backend: DockerBackend) -> None:
    code = (
        "from tool_tree.runtime import call_tool\n"
        "media = call_tool('fs', 'read_media_file', {'path': 'chart.png'})\n"
        "show_image(media.json()['content'][0])\n"
        "print(call_tool('fs', 'chart', {}))\n"
    )
    with Sandbox(backend, tools=_media_tools) as sb:
        result = sb.execute(code)
    assert result.ok, result.traceback
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", PNG)]
    assert result.stdout == f"the chart of March\n[Image(image/png, {len(PNG)} bytes): result.images[0]]\n"


@pytest.mark.docker
def test_a_script_shows_the_structured_result_a_media_stub_returns(backend: DockerBackend) -> None:
    # server-filesystem's read_media_file declares an output schema, so its stub returns the structured result,
    # {"content": [<image block>]}. Before: show_image of it raised "not a dict with type 'None'".
    code = (
        "from tool_tree.runtime import call_tool, structured\n"
        "media = structured(call_tool('fs', 'read_media_file', {'path': 'chart.png'}), 'fs', 'read_media_file')\n"
        "show_image(media)\n"
    )
    with Sandbox(backend, tools=_media_tools) as sb:
        result = sb.execute(code)
    assert result.ok, result.traceback
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", PNG)]


def test_show_image_of_a_structured_result_without_an_image_block_says_so() -> None:
    resource = {"type": "resource", "resource": {"uri": "file:///a.txt", "blob": "aGk="}}
    with pytest.raises(ValueError, match=r"^show_image\(\): the structured result's content holds no image block$"):
        worker.show_image({"content": [resource, "junk"]})


def test_show_image_of_an_empty_list_or_a_nested_one_says_so() -> None:
    with pytest.raises(ValueError, match=r"^show_image\(\): the list holds no image$"):
        worker.show_image([])
    with pytest.raises(TypeError, match=r"not a list inside a list$"):
        worker.show_image([[PNG]])


@pytest.mark.docker
def test_a_script_shows_a_tool_result_s_images_and_a_list_of_images(backend: DockerBackend) -> None:
    # Before: show_image(result) raised "TypeError: show_image() takes …, not ToolResult", though print(result) names
    # its image; a list of images (result.images) likewise.
    code = (
        "from tool_tree.runtime import call_tool\n"
        "chart = call_tool('fs', 'chart', {})\n"
        "show_image(chart)\n"
        "show_image(chart.images)\n"
        "try:\n"
        "    show_image(call_tool('fs', 'words', {}))\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )

    def tools(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == "words":
            return {"content": [{"type": "text", "text": "no picture"}]}
        return {"content": [{"type": "text", "text": "the chart of March"}, BLOCK, BLOCK]}

    with Sandbox(backend, tools=tools) as sb:
        result = sb.execute(code)
    assert result.ok, result.traceback
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", PNG)] * 4
    assert result.stdout == "show_image(): the tool result holds no image\n"


@pytest.mark.docker
def test_a_script_shows_and_sees_the_image_a_structured_result_holds_only_in_its_content(
    backend: DockerBackend,
) -> None:
    # A tool with an output schema that sends an image and a resource link beside its structured content. Before: its
    # stub returned the structured content alone; show_image of it raised "not a dict with type None", and printed it
    # said nothing of the image.
    code = (
        "from tool_tree.runtime import call_tool, structured\n"
        "chart = structured(call_tool('fs', 'chart', {}), 'fs', 'chart')\n"
        "show_image(chart)\n"
        "print(chart)\n"
        "print(chart == {'width': 100}, chart['width'])\n"
        "try:\n"
        "    show_image(structured(call_tool('fs', 'size', {}), 'fs', 'size'))\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    link = {"type": "resource_link", "uri": "file:///data.csv", "name": "data.csv"}

    def tools(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        text = {"type": "text", "text": '{"width": 100}'}
        if tool == "size":
            return {"content": [text], "structuredContent": {"width": 100}}
        return {"content": [text, BLOCK, link], "structuredContent": {"width": 100}}

    with Sandbox(backend, tools=tools) as sb:
        result = sb.execute(code)
    assert result.ok, result.traceback
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", PNG)]
    assert result.stdout == (
        "{'width': 100}\n"
        f"[Image(image/png, {len(PNG)} bytes): result.images[0]]\n"
        "[ResourceLink(file:///data.csv, 'data.csv'): result.resource_links[0]]\n"
        "True 100\n"
        "show_image(): the tool result holds no image\n"
    )
