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
    assert lines[0] == "tool calls from the script: 537, 51.8 KB of results kept in the sandbox"
    assert lines[1] == "  crm.get_record ×30: all ok (2.9 KB)"  # the tool called most comes first
    assert len(lines) == 1 + LEDGER_GROUPS + 2
    assert lines[-2] == f"  … {500 - LEDGER_GROUPS + 1} more tools, {500 - LEDGER_GROUPS + 1} calls ({481} failed)"
    assert lines[-1] == "  … 7 more call(s) not listed"
    few = ledger([record("get_record")], omitted=2).splitlines()
    assert few == [
        "tool calls from the script: 3, 100 B of results kept in the sandbox",
        "  crm.get_record ok (100 B, 1 ms)",
        "  … 2 more call(s) not listed",
    ]
