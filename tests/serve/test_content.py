"""Code-mode outcomes as MCP results: text stays text, images stay images, errors are flagged; a result too
big for its transport is cut, saying what was left out."""

from __future__ import annotations

import base64
import json
from typing import Any

from agent.content import execution_blocks
from agent.serve.content import call_result, error_result, fit_result, mcp_content
from agent.toolsets.base import ToolOutcome
from sandbox.results import ExecutionResult, ShownImage

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def test_an_execution_with_an_image_becomes_text_then_image_content() -> None:
    result = ExecutionResult(stdout="shown\n", stderr="", exit_status=0, duration=0.1,
                             images=[ShownImage(PNG, "image/png")])  # fmt: skip
    text, image = mcp_content(execution_blocks(result))
    assert text.type == "text" and text.text == "shown"
    assert image.type == "image" and image.mime_type == "image/png" and base64.b64decode(image.data) == PNG


def test_a_failed_script_is_an_error_result_carrying_its_traceback() -> None:
    traceback = "Traceback (most recent call last):\n  File \"<cell-1>\", line 1, in <module>\nKeyError: 'x'\n"
    result = ExecutionResult(stdout="", stderr="", exit_status=1, duration=0.1, error="KeyError: 'x'",
                             traceback=traceback)  # fmt: skip
    mcp = call_result(ToolOutcome(execution_blocks(result), is_error=True))
    assert mcp.is_error is True
    assert mcp.content[0].text == "[error]\n" + traceback.rstrip("\n")  # type: ignore[union-attr]


def test_content_of_an_unknown_kind_is_named_not_dropped() -> None:
    (block,) = mcp_content([{"type": "document", "source": {}}])
    assert block.type == "text" and "document" in block.text


def test_an_error_result_is_one_flagged_text_block() -> None:
    result = error_result("read_file needs a path (a string)")
    assert result.is_error is True and [c.text for c in result.content] == ["read_file needs a path (a string)"]  # type: ignore[union-attr]


WHY = "over HTTP one result must fit in 1 MiB"


def json_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def image(size: int, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "data": base64.b64encode(b"\x89" * size).decode(), "mimeType": mime}


def test_a_result_that_fits_is_returned_as_it_is() -> None:
    result = {"content": [{"type": "text", "text": "é" * 100}, image(300)], "isError": False}
    assert fit_result(result, json_size(result), WHY) is result


def test_the_largest_images_of_a_result_too_big_become_notes_in_their_place_until_it_fits() -> None:
    small, middle, large = image(20_000), image(50_000, "image/jpeg"), image(90_000)
    result: dict[str, Any] = {"content": [{"type": "text", "text": "shown"}, middle, large, small], "isError": False}
    fitted = fit_result(result, 60_000, WHY)
    assert json_size(fitted) <= 60_000 and fitted["isError"] is False
    text, first, second, third = fitted["content"]
    assert text == {"type": "text", "text": "shown"} and third == small
    assert first["type"] == second["type"] == "text"  # the large one went first, then the middle one
    assert first["text"].startswith("[an image (image/jpeg, 50,000 bytes) left out: over HTTP one result must fit")
    assert "(image/png, 90,000 bytes)" in second["text"] and "smaller" in second["text"]
    assert result["content"][1] is middle  # the result given is left as it was


def test_only_as_many_images_as_needed_are_left_out() -> None:
    result = {"content": [image(60_000), image(60_000), image(10_000)]}
    fitted = fit_result(result, 120_000, WHY)
    assert [block["type"] for block in fitted["content"]] == ["text", "image", "image"]


def test_text_too_big_loses_its_middle_and_keeps_its_start_and_end() -> None:
    text = "start " + "€\x01" * 100_000 + " end"  # 3 bytes, and 6 escaped: the byte count is not the length
    result = {"content": [{"type": "text", "text": "[error]"}, {"type": "text", "text": text}], "isError": True}
    fitted = fit_result(result, 50_000, WHY)
    assert json_size(fitted) <= 50_000 and fitted["isError"] is True
    assert fitted["content"][0] == {"type": "text", "text": "[error]"}
    shortened = fitted["content"][1]["text"]
    assert shortened.startswith("start €") and shortened.endswith("€\x01 end")
    assert "characters left out here: over HTTP one result must fit in 1 MiB]" in shortened


def test_structured_content_goes_after_images_and_before_text_and_a_result_that_cannot_fit_becomes_an_error() -> None:
    rows = ["x" * 1000] * 100
    result = {
        "content": [image(50_000), {"type": "text", "text": json.dumps(rows)}],
        "structuredContent": {"rows": rows},
    }
    fitted = fit_result(result, 120_000, WHY)
    assert json_size(fitted) <= 120_000 and "structuredContent" not in fitted
    assert fitted["content"][1]["text"] == json.dumps(rows)  # the text that repeats it is whole
    assert fitted["content"][-1]["text"].startswith("[structuredContent (100,310 bytes) left out: over HTTP")
    many = {"content": [{"type": "text", "text": ""}] * 10_000}
    refused = fit_result(many, 1_000, WHY)
    assert refused["isError"] is True and refused["content"][0]["text"].startswith("the result (")
