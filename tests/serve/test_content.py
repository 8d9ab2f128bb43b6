"""Code-mode outcomes as MCP results: text stays text, images stay images, errors are flagged."""

from __future__ import annotations

import base64

from agent.content import execution_blocks
from agent.serve.content import call_result, error_result, mcp_content
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
