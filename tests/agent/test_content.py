"""MCP results as content blocks: a server's result is untrusted in size as in content."""

from __future__ import annotations

import base64

from agent.content import MAX_RESULT_CHARS, mcp_result_blocks
from sandbox._supervisor.limits import MAX_IMAGE_BYTES, MAX_IMAGES

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()


def test_thousands_of_text_blocks_are_cut_to_the_limit_with_a_note() -> None:
    blocks = mcp_result_blocks({"content": [{"type": "text", "text": "y" * 1000}] * 5000})
    assert sum(len(b["text"]) for b in blocks[:-1]) <= MAX_RESULT_CHARS + 100
    assert len(blocks) <= MAX_RESULT_CHARS // 1000 + 2
    shown = f"[the tool returned 5,000,000 characters of text; {MAX_RESULT_CHARS:,} are shown"
    assert blocks[-1]["text"].startswith(shown)


def test_a_short_result_is_unchanged() -> None:
    assert mcp_result_blocks({"content": [{"type": "text", "text": "ok"}]}) == [{"type": "text", "text": "ok"}]


def test_an_image_over_the_apis_limit_and_images_past_the_count_are_left_out_with_a_note() -> None:
    big = {"type": "image", "mimeType": "image/png", "data": PNG + "A" * (MAX_IMAGE_BYTES * 4 // 3 + 8)}
    small = {"type": "image", "mimeType": "image/png", "data": PNG}
    blocks = mcp_result_blocks({"content": [big, *[small] * (MAX_IMAGES + 2)]})
    assert blocks[0]["type"] == "text" and "was left out: the API takes at most 5.0 MB" in blocks[0]["text"]
    assert [b["type"] for b in blocks[1:]] == ["image"] * MAX_IMAGES + ["text", "text"]
    assert blocks[-1]["text"] == f"[an image past the first {MAX_IMAGES} was left out]"
