"""The stated token approximation: text, JSON, images, deferred tools."""

from __future__ import annotations

import base64
import struct
import zlib

from agent.tokens import (
    IMAGE_TOKENS_MAX,
    content_tokens,
    image_size,
    image_tokens,
    json_tokens,
    request_tokens,
    text_tokens,
)


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def test_text_counts_one_token_per_four_characters_rounded_up() -> None:
    assert text_tokens("") == 0
    assert text_tokens("abcd") == 1
    assert text_tokens("abcde") == 2


def test_cache_markers_do_not_count() -> None:
    tool = {"name": "t", "input_schema": {"type": "object"}}
    assert json_tokens({**tool, "cache_control": {"type": "ephemeral"}}) == json_tokens(tool)


def test_an_image_counts_by_its_pixels_up_to_the_cap() -> None:
    small = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png(200, 120)).decode()}
    big = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png(4000, 3000)).decode()}
    assert image_size(png(200, 120)) == (200, 120)
    assert image_tokens(small) == 32  # 200 * 120 / 750
    assert image_tokens(big) == IMAGE_TOKENS_MAX
    assert image_tokens({"data": "not base64!"}) == IMAGE_TOKENS_MAX


def test_a_deferred_tool_counts_only_where_a_search_references_it() -> None:
    deferred = {"name": "crm__list_leads", "description": "x" * 400, "input_schema": {}, "defer_loading": True}
    search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    body = {"tools": [deferred, search], "messages": [{"role": "user", "content": "go"}]}
    before = request_tokens(body)
    assert before == json_tokens(search) + 1
    reference = {
        "type": "tool_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": "crm__list_leads"}],
        },
    }
    body["messages"].append({"role": "assistant", "content": [reference]})
    assert request_tokens(body) - before == text_tokens("crm__list_leads") + json_tokens(deferred)


def test_tool_use_counts_its_name_and_input() -> None:
    block = {"type": "tool_use", "id": "t1", "name": "run", "input": {"code": "print(1)"}}
    assert content_tokens([block]) == text_tokens("run") + json_tokens({"code": "print(1)"})
