"""MCP results as content blocks: a server's result is untrusted in size as in content."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agent import content as content_module
from agent.content import MAX_BLOCKS, MAX_RESULT_CHARS, mcp_result_blocks
from sandbox._supervisor.limits import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_IMAGES_TOTAL_BYTES, base64_size
from tests.servers.content_server import png

PNG = png(8, 8, 64)
ESCAPES = "A\x1b]52;c;cHduZWQ=\x07B\x1b[2J\x1b[31mRED\u202eevil\x9b31m\r\x08\x08fake"
CLEANED = "ABREDevil\nfake"


def test_thousands_of_text_blocks_are_cut_to_the_limit_with_a_note() -> None:
    blocks = mcp_result_blocks({"content": [{"type": "text", "text": "y" * 10_000}] * 500})
    assert sum(len(b["text"]) for b in blocks[:-1]) <= MAX_RESULT_CHARS + 100
    assert len(blocks) <= MAX_RESULT_CHARS // 10_000 + 2
    shown = f"[the tool returned 5,000,000 characters of text; {MAX_RESULT_CHARS:,} are shown"
    assert blocks[-1]["text"].startswith(shown)


def test_a_short_result_is_unchanged() -> None:
    assert mcp_result_blocks({"content": [{"type": "text", "text": "ok"}]}) == [{"type": "text", "text": "ok"}]


def test_an_image_over_the_apis_limit_and_images_past_the_count_are_left_out_with_a_note() -> None:
    big = {"type": "image", "mimeType": "image/png", "data": PNG + "A" * (MAX_IMAGE_BYTES * 4 // 3 + 8)}
    small = {"type": "image", "mimeType": "image/png", "data": PNG}
    blocks = mcp_result_blocks({"content": [big, *[small] * (MAX_IMAGES + 2)]})
    assert blocks[0]["type"] == "text" and "was left out: the API takes at most 5.0 MB" in blocks[0]["text"]
    # as a script's: the first MAX_IMAGES images are looked at, the one refused among them
    assert [b["type"] for b in blocks[1:]] == ["image"] * (MAX_IMAGES - 1) + ["text"]
    assert blocks[-1]["text"].startswith(f"[3 images past the first {MAX_IMAGES} were left out. Ask the tool for less")


def test_images_are_held_to_the_rules_of_a_scripts_images() -> None:
    # Before: five images of 3,900,008 bytes all went to the model (26 MB of base64, near the API's 32 MB
    # request), and so did base64 valid only in its first 64 characters (only those were decoded).
    large = png(10, 10, 3_900_000)
    blocks = mcp_result_blocks({"content": [{"type": "image", "mimeType": "image/png", "data": large}] * 5})
    assert [b["type"] for b in blocks] == ["image"] * 2 + ["text"] * 3
    assert sum(len(b["source"]["data"]) for b in blocks if b["type"] == "image") <= base64_size(MAX_IMAGES_TOTAL_BYTES)
    total = "[an image of 3.7 MB was left out: the images and binary data of one result take at most 8.0 MB]"
    assert [b["text"] for b in blocks[2:]] == [total] * 3

    def image(data: str, mime: str = "image/png") -> dict[str, Any]:
        return {"type": "image", "mimeType": mime, "data": data}

    garbage = PNG[:64] + "!" * 1000
    html = base64.b64encode(b"<svg onload=alert(1)>").decode()
    blocks = mcp_result_blocks(
        {"content": [image(garbage), image(html, "text/html"), image(html), image(PNG, ESCAPES)]}
    )
    assert [b["text"] for b in blocks] == [
        "[an image whose data is not valid base64 was left out]",
        "[an image of type text/html that is not PNG, JPEG, GIF or WebP was left out]",
        "[an image whose bytes are not image/png was left out]",
        f"[an image of type {CLEANED.replace(chr(10), ' ')} that is not PNG, JPEG, GIF or WebP was left out]",
    ]
    # Before: "[an image whose bytes are not image/png was left out]", as if they were of another type.
    assert mcp_result_blocks({"content": [image("")]}) == [{"type": "text", "text": "[an empty image was left out]"}]


def test_blocks_past_the_count_are_counted_not_sent() -> None:
    # Before: 1,200,000 empty text blocks all went into the tool_result.
    blocks = mcp_result_blocks({"content": [{"type": "text", "text": ""}] * 1_200_000})
    assert blocks == [
        {
            "type": "text",
            "text": f"[{1_200_000 - MAX_BLOCKS:,} content blocks past the first {MAX_BLOCKS:,} were left out. "
            "Ask the tool for less: a filter, a page, fewer fields.]",
        }
    ]
    links = mcp_result_blocks({"content": [{"type": "resource_link", "name": "n", "uri": "a:"}] * 5_000})
    assert len(links) == MAX_BLOCKS + 1 and links[0] == {"type": "text", "text": "[resource link] n a:"}


def test_escapes_are_cleaned_from_every_string_that_reaches_the_model() -> None:
    # Before: ESC, OSC 52, clear screen, U+202E, U+009B, CR and BS reached the model raw (a script's output,
    # and the same content through passthrough, were cleaned).
    result = {
        "content": [
            {"type": "text", "text": ESCAPES},
            {"type": "resource_link", "name": ESCAPES, "uri": "file:///etc/" + ESCAPES},
            {"type": "resource", "resource": {"uri": "x:" + ESCAPES, "text": ESCAPES}},
            {"type": "resource", "resource": {"uri": "y:" + ESCAPES, "blob": "AAAA", "mimeType": ESCAPES}},
            {"type": ESCAPES},
        ]
    }
    blocks = mcp_result_blocks(result)
    one_line = CLEANED.replace("\n", " ")
    assert [b["text"] for b in blocks] == [
        CLEANED,
        f"[resource link] {CLEANED} file:///etc/{CLEANED}",
        f"[resource x:{CLEANED}]\n{CLEANED}",
        f"[binary resource y:{one_line} (3 B, {one_line}) not shown: the model reads only text]",
        f"[content of type {one_line} left out]",
    ]
    structured = mcp_result_blocks({"content": [], "structuredContent": {ESCAPES: [ESCAPES, 1]}})
    assert structured == [{"type": "text", "text": json.dumps({CLEANED: [CLEANED, 1]}, ensure_ascii=False)}]


def test_a_text_past_the_cap_is_cut_before_it_is_cleaned(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only what is kept is joined and cleaned: a link's 2,000,000-character URI costs what the cap lets through.
    cleaned: list[int] = []
    clean_text = content_module.clean_text
    monkeypatch.setattr(content_module, "clean_text", lambda text: cleaned.append(len(text)) or clean_text(text))
    long = "\x1b[2J" + "x" * 2_000_000 + "\u202eEND"
    blocks = mcp_result_blocks({"content": [{"type": "resource_link", "name": "n", "uri": long}] * 3})
    assert max(cleaned) <= MAX_RESULT_CHARS // 2 + 1
    assert blocks[0]["text"].startswith("[resource link] n xxx") and blocks[0]["text"].endswith("xxxEND")
    assert len(blocks) == 2 and "6,000,078 characters of text" in blocks[1]["text"]


def test_structured_content_is_shown_to_the_cap_however_large_or_deep() -> None:
    # Before: json.dumps of the whole value (a RecursionError for one nested 100,000 deep).
    deep: Any = 1
    for _ in range(100_000):
        deep = {"a": deep}
    (text, note) = mcp_result_blocks({"content": [], "structuredContent": deep}, max_chars=1_000)
    assert text["text"] == ('{"a": ' * 1_000)[:1_000]
    assert note["text"].startswith("[the structured content is longer than 1,000 characters: its start is shown.")
    empty = mcp_result_blocks({"content": [{"type": "text", "text": ""}], "structuredContent": {"a": 1}})
    assert empty == [{"type": "text", "text": '{"a": 1}'}]  # an empty text block (the API refuses it) says nothing
    wide = {"rows": ["y" * 10_000_000] * 100}
    (text, note) = mcp_result_blocks({"content": [], "structuredContent": wide}, max_chars=1_000)
    assert text["text"] == '{"rows": ["' + "y" * 989


def test_the_short_ledger_names_at_most_its_groups_of_tools_and_counts_the_rest() -> None:
    # Before: one line per distinct tool name, so a script calling 21,000 made-up names (each refused) put
    # 21,000 lines into the model's context.
    from agent.content import LEDGER_GROUPS, ledger
    from sandbox.results import ToolCallRecord

    def record(tool: str, ok: bool = True) -> ToolCallRecord:
        return ToolCallRecord("crm", tool, ok, 10, 100, 1.0, None if ok else "not in the manifest")

    calls = [record("get_record")] * 30 + [record(f"made_up_{i}", ok=False) for i in range(500)]
    text = ledger(calls, omitted=7)
    lines = text.splitlines()
    assert lines[0] == "tool calls from the script: 537, 51.8 KB of results received in the sandbox"
    assert lines[1] == "  crm.get_record ×30: all ok (2.9 KB)"  # the tool called most comes first
    assert len(lines) == 1 + LEDGER_GROUPS + 2
    assert lines[-2] == f"  … {500 - LEDGER_GROUPS + 1} more tools, {500 - LEDGER_GROUPS + 1} calls ({481} failed)"
    assert lines[-1] == "  … 7 more call(s) not listed"
    few = ledger([record("get_record")], omitted=2).splitlines()
    assert few == [
        "tool calls from the script: 3, 100 B of results received in the sandbox",
        "  crm.get_record ok (100 B, 1 ms)",
        "  … 2 more call(s) not listed",
    ]


def test_a_text_resource_sent_as_a_blob_is_shown_as_text_and_a_binary_one_as_a_note() -> None:
    # server-everything's "Blob" resources are text/plain in base64: before, "[binary resource … not shown: the
    # model reads only text]", though it was text.
    import base64

    def blob(data: bytes, mime: str) -> dict[str, Any]:
        return {
            "type": "resource",
            "resource": {"uri": "demo://r", "blob": base64.b64encode(data).decode(), "mimeType": mime},
        }

    blocks = [blob("héllo\x1b[2J".encode(), "text/plain"), blob(b'{"a": 1}', "application/json; charset=utf-8"),
              blob(b"\xff\xfe", "text/plain"), blob(b"PK\x03\x04", "application/zip")]  # fmt: skip
    result = {"content": blocks}
    assert [b["text"] for b in mcp_result_blocks(result)] == [
        "[resource demo://r]\nhéllo",
        '[resource demo://r]\n{"a": 1}',
        "[binary resource demo://r (2 B, text/plain) not shown: the model reads only text]",  # not UTF-8
        "[binary resource demo://r (4 B, application/zip) not shown: the model reads only text]",
    ]


def test_a_huge_text_blob_is_decoded_from_its_start_only() -> None:
    import base64

    from tool_tree.text import text_of_blob

    data = base64.b64encode(b"x" * 3_000_000).decode()
    text = text_of_blob(data, 1 << 20)
    assert text is not None and text.startswith("x" * 786_432 + "\n[… ") and text.endswith(" more not shown]")
    assert text_of_blob("not base64!", 100) is None and text_of_blob(None, 100) is None


def test_a_count_of_one_is_said_in_the_singular() -> None:
    # Before: "[1 images past the first 8 were left out", "… 1 more tools, 1 calls (0 failed)".
    from agent.content import LEDGER_GROUPS, ledger
    from agent.serve.bounded_result import capped
    from agent.serve.upstream_extras import bounded_prompt
    from sandbox.results import ToolCallRecord

    image = {"type": "image", "mimeType": "image/png", "data": PNG}
    blocks = mcp_result_blocks({"content": [image] * (MAX_IMAGES + 1)})
    assert blocks[-1]["text"].startswith(f"[1 image past the first {MAX_IMAGES} was left out. Ask the tool for less")
    served = capped({"content": [image] * (MAX_IMAGES + 1)}, 1_000)
    assert served is not None
    assert f"[... 1 image past the first {MAX_IMAGES} left out: " in served["content"][-1]["text"]
    prompt = bounded_prompt({"messages": [{"role": "user", "content": image}] * (MAX_IMAGES + 1) + ["x"]}, "p", 1_000)
    note = prompt.messages[-1].content
    assert note.type == "text"
    assert f"1 image past the first {MAX_IMAGES} left out; 1 message left out (malformed" in note.text
    calls = [ToolCallRecord("crm", f"tool_{i}", True, 10, 100, 1.0, None) for i in range(LEDGER_GROUPS + 1)]
    assert ledger(calls).splitlines()[-1] == "  … 1 more tool, 1 call (0 failed)"
    assert (
        "[2 images past the first" in mcp_result_blocks({"content": [image] * (MAX_IMAGES + 2)})[-1]["text"]
    )  # and more than one in the plural
