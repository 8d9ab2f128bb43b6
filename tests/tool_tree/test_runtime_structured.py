"""The stub of a tool that declares an output schema returns its structured content as a dict that also carries the
result's other content (`tool_tree.runtime.StructuredResult`).

Before: the stub returned the structured content alone, so an image or a resource link the tool sent beside it (only
in its content, as MCP allows) never reached the script, nor the model.
"""

from __future__ import annotations

import base64
import copy
import json
import pickle
import sys
from typing import Any

import pytest

from tests.servers.content_server import png
from tests.support import REPO, run_on_tree
from tool_tree.runtime import ResourceLink, StructuredResult, ToolResult, structured
from tooltree_cli.main import main

IMAGE = png(100, 80, 200_000)  # as structured_server.py's
SIZE = {"title": "March", "width": 100, "height": 80}


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What a script gets of ``chart`` of `tests/servers/structured_server.py` (live, its stub generated)."""
    folder = tmp_path_factory.mktemp("structured")
    config = folder / "tooltree.yaml"
    server = json.dumps(str(REPO / "tests" / "servers" / "structured_server.py"))
    config.write_text(
        f"servers:\n  charts:\n    command: {json.dumps(sys.executable)}\n    args: [{server}]\n", encoding="utf-8"
    )
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    script = "from servers.charts import chart\nresult = chart(title='March')\nprinted = str(result)\n"
    return run_on_tree(tree, config, script, "chart.py")


def test_a_stub_s_structured_result_is_the_dict_and_carries_the_image_and_link_beside_it(chart: dict[str, Any]) -> None:
    result = chart["result"]
    assert result == SIZE and dict(SIZE) == result and isinstance(result, dict)
    assert json.loads(json.dumps(result)) == SIZE
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", base64.b64decode(IMAGE))]
    assert result.resource_links == [
        ResourceLink(uri="file:///charts/data.csv", name="data.csv", mime_type="text/csv", size=2_048)
    ]
    assert [b["type"] for b in result.content] == ["text", "image", "resource_link"]
    assert result.resources == []
    assert result.tool_result.structured_content == SIZE


def test_a_printed_structured_result_names_the_blocks_its_dict_does_not_hold(chart: dict[str, Any]) -> None:
    # The text block is the structured content's JSON: not named again.
    assert chart["printed"] == (
        "{'title': 'March', 'width': 100, 'height': 80}\n"
        f"[Image(image/png, {len(base64.b64decode(IMAGE)):,} bytes): result.images[0]]\n"
        "[ResourceLink(file:///charts/data.csv, 'data.csv', text/csv): result.resource_links[0]]"
    )
    assert repr(chart["result"]) == repr(SIZE)


def test_a_structured_result_survives_pickle_and_copy_with_its_content(chart: dict[str, Any]) -> None:
    result = chart["result"]
    for again in (pickle.loads(pickle.dumps(result)), copy.copy(result), copy.deepcopy(result)):
        assert type(again) is StructuredResult
        assert again == SIZE
        assert again.tool_result == result.tool_result
    shallow = copy.copy(result)
    shallow["title"] = "April"
    assert result["title"] == "March"
    assert type(result.copy()) is dict and type(dict(result)) is dict


IMAGE_BLOCK = {"type": "image", "data": base64.b64encode(b"\x89PNG\r\n\x1a\n1234").decode(), "mimeType": "image/png"}


class _Said:
    """A value whose ``repr`` is ``said``: what a printed result shows in place of a block's data."""

    def __init__(self, said: str) -> None:
        self.said = said

    def __repr__(self) -> str:
        return self.said


def _structured(content: list[dict[str, Any]], value: dict[str, Any]) -> StructuredResult:
    result: StructuredResult = structured(ToolResult(content=content, structured_content=value), "s", "t")
    return result


def test_a_structured_result_that_repeats_its_blocks_prints_as_its_dict() -> None:
    # As server-filesystem's tools answer: read_media_file's image is in the structured content too, read_text_file's
    # text is its one string; and the JSON text the spec asks for, however it is laid out.
    media = _structured([IMAGE_BLOCK], {"content": [IMAGE_BLOCK]})
    assert str(media) == repr(
        {"content": [{**IMAGE_BLOCK, "data": _Said("<image/png, 12 bytes as base64: result.images[0]>")}]}
    )
    text = _structured([{"type": "text", "text": "hello\n"}], {"content": "hello\n"})
    assert str(text) == "{'content': 'hello\\n'}"
    blocks = [{"type": "text", "text": '{\n  "a": [1, 2]\n}'}, {"type": "text", "text": ""}]
    laid_out = _structured(blocks, {"a": [1, 2]})
    assert str(laid_out) == "{'a': [1, 2]}"


def test_a_structured_result_whose_text_is_the_json_of_one_of_its_values_prints_as_its_dict() -> None:
    # As server-memory answers: structured content must be an object, so its list comes wrapped, and its text block is
    # the list's JSON (before: printed after the dict as a block it does not hold, "[text '[\\n  {…': result.text]").
    entities = [{"name": "Alice", "entityType": "person", "observations": ["likes tea"]}]
    wrapped = _structured([{"type": "text", "text": json.dumps(entities, indent=2)}], {"entities": entities})
    assert str(wrapped) == repr({"entities": entities})
    # JSON of something else is still named.
    other = _structured([{"type": "text", "text": '[{"name": "Bob"}]'}], {"entities": entities, "n": 1})
    assert str(other) == repr({"entities": entities, "n": 1}) + '\n[text \'[{"name": "Bob"}]\': result.text]'


def test_a_printed_structured_result_shows_the_base64_data_of_its_blocks_as_their_size_and_keeps_it_whole() -> None:
    # As server-filesystem's read_media_file answers: the image's base64 in the structured content too. Before: a
    # print showed all of it (267,000 characters for a 195 KB PNG), up to the output's cap.
    image = {"type": "image", "data": IMAGE, "mimeType": "image/png"}
    audio = {"type": "audio", "data": base64.b64encode(b"RIFF" + bytes(996)).decode(), "mimeType": "audio/wav"}
    blob = {"uri": "file:///a.pdf", "mimeType": "application/pdf", "blob": base64.b64encode(bytes(2_000)).decode()}
    content = [image, audio, {"type": "resource", "resource": blob}]
    value = {"content": [image, audio], "pdf": blob["blob"], "name": "chart.png", "short": "aGk="}
    media = _structured(content, value)
    size = f"{len(base64.b64decode(IMAGE)):,}"
    assert str(media) == (
        f"{{'content': [{{'type': 'image', 'data': <image/png, {size} bytes as base64: result.images[0]>, "
        "'mimeType': 'image/png'}, {'type': 'audio', 'data': <audio/wav, 1,000 bytes as base64: result.content[1]>, "
        "'mimeType': 'audio/wav'}], 'pdf': <application/pdf, 2,000 bytes as base64: result.resources[0]>, "
        "'name': 'chart.png', 'short': 'aGk='}\n"
        "[Resource(file:///a.pdf, application/pdf, 2,000 bytes): result.resources[0]]"
    )
    # The value is whole for the script, and so is its repr.
    assert media == value and media["content"][0]["data"] == IMAGE and repr(media) == repr(value)


def test_a_printed_structured_result_names_other_text_and_counts_many_blocks() -> None:
    said = _structured([{"type": "text", "text": "3 rows found"}], {"rows": 3})
    assert str(said) == "{'rows': 3}\n[text '3 rows found': result.text]"
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    many = _structured([IMAGE_BLOCK, IMAGE_BLOCK, link, {"type": "audio", "data": "", "mimeType": "audio/wav"}], {})
    assert str(many) == (
        "{}\n[+ 2 images: result.images, 1 resource link: result.resource_links, 1 'audio' block: result.content]"
    )
