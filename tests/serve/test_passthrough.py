"""`Passthrough`: an upstream tool offered as a tool of `tooltree serve`, its definition and result cleaned
like the tree's stubs and a script's output, and its text capped like a script's output.

In process, with a real upstream (tests/servers/raw_server.py, and tests/serve/hostile_results.py for results
built to break the caps) behind a real `Runtime` (no sandbox is started: a passthrough call goes from the
runtime's bridge to the server).
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from agent.content import MAX_BLOCKS
from agent.serve import bounded_result
from agent.serve.bounded_result import capped
from agent.serve.passthrough import Passthrough
from sandbox._supervisor.limits import MAX_IMAGES, MAX_IMAGES_TOTAL_BYTES
from sandbox.config import SandboxConfig
from sandbox.host import Runtime
from tests.servers.content_server import png
from tests.support import raw_server_tree

HOSTILE = Path(__file__).with_name("hostile_results.py")
PNG = base64.b64decode(png(1, 1))

ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[1;31mRED\x1b[0m\u202etxt.exe\x9b2J"
TOOLS = [
    {
        "name": "say",
        "description": "Says a text.\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202eevil",
        "inputSchema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to say\x1b[31m."},
                "mode": {"enum": ["a\x1b"], "default": "a\x1b"},
                "structured": {"type": "object"},
            },
        },
    },
    {"name": "big", "inputSchema": {"type": "object", "properties": {"chars": {"type": "integer"}}}},
]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Passthrough, Runtime]]:
    from tooltree_cli.common import load

    folder = tmp_path_factory.mktemp("passthrough")
    tree, _ = raw_server_tree(folder, TOOLS)
    with Runtime(load(folder / "tooltree.yaml"), tree, sandbox_config=SandboxConfig()) as runtime:
        yield Passthrough(tree, ["raw.say", "raw.big"]), runtime


def test_a_description_is_cleaned_like_the_trees_and_values_are_left_alone(
    upstream: tuple[Passthrough, Runtime],
) -> None:
    passthrough, runtime = upstream
    say = next(d for d in passthrough.definitions if d.name == "raw__say")
    assert say.description == "Says a text.]52;c;cHduZWQ=[2Jevil"  # as in the stub: the escapes' ESC and BEL gone
    assert say.input_schema["properties"]["text"]["description"] == "What to say[31m."
    # values a call may send stay as the server's schema has them: the bridge validates against that schema
    assert say.input_schema["properties"]["mode"] == {"enum": ["a\x1b"], "default": "a\x1b"}
    stub = (runtime.tree / "servers" / "raw" / "say.py").read_text(encoding="utf-8")
    assert "Says a text.]52;c;cHduZWQ=[2Jevil" in stub


def test_a_result_is_cleaned_like_a_scripts_output(upstream: tuple[Passthrough, Runtime]) -> None:
    passthrough, runtime = upstream
    result = passthrough.call("raw__say", {"text": f"ok{ESCAPES}", "structured": {"k\x1b[31m": ESCAPES}}, runtime)
    assert not result.is_error
    assert [c.text for c in result.content] == ["okREDtxt.exe"]  # type: ignore[union-attr]
    assert result.structured_content == {"k": "REDtxt.exe"}


def test_a_huge_result_is_capped_like_a_scripts_output_with_a_note(upstream: tuple[Passthrough, Runtime]) -> None:
    passthrough, runtime = upstream
    cap = SandboxConfig().output_chars
    result = passthrough.call("raw__big", {"chars": 1_000_000}, runtime)
    text, note = (c.text for c in result.content)  # type: ignore[union-attr]
    assert text == "x" * cap
    assert f"{1_000_000 - cap:,} of 1,000,000 characters of text cut" in note
    assert f"capped at {cap:,} characters" in note and "execute_python" in note


def test_text_blocks_share_the_cap_and_large_structured_content_is_left_out() -> None:
    image = {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    raw = {
        "content": [
            {"type": "text", "text": "a" * 6},
            image,
            {"type": "resource", "resource": {"uri": "r:", "text": "b" * 20}},
            {"type": "text", "text": "c" * 6},
        ],
        "structuredContent": {"rows": "d" * 30},
    }
    out = capped(raw, 20)
    assert out is not None
    # the resource's URI counts too: 1 for the value, 3 for its key, 1 + 2 for "r:" (`copy_json`)
    assert out["content"][:3] == [
        {"type": "text", "text": "a" * 6},
        image,
        {"type": "resource", "resource": {"uri": "r:", "text": "b" * 7}},
    ]
    assert "structuredContent" not in out
    assert "19 of 32 characters of text cut; the structured content left out" in out["content"][-1]["text"]
    assert capped({"content": [{"type": "text", "text": "short"}], "structuredContent": {}}, 10) == {
        "content": [{"type": "text", "text": "short"}],
        "structuredContent": {},
    }


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Passthrough, Runtime]]:
    from tooltree_cli.common import load
    from tooltree_cli.main import main

    folder = tmp_path_factory.mktemp("hostile")
    config = folder / "tooltree.yaml"
    config.write_text(
        f"servers:\n  hostile:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(HOSTILE))}]\n"
    )
    assert main(["generate-tree", "--config", str(config), "--out", str(folder / "tree")]) == 0
    with Runtime(load(config), folder / "tree", sandbox_config=SandboxConfig()) as runtime:
        yield Passthrough(folder / "tree", ["hostile.send"]), runtime


def send(hostile: tuple[Passthrough, Runtime], recipe: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The hostile server's result for ``recipe`` through passthrough as the client reads it: its content, and all."""
    passthrough, runtime = hostile
    result = passthrough.call("hostile__send", {"recipe": recipe}, runtime)
    assert not result.is_error, result
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped["content"], dumped


def test_images_are_held_to_the_rules_of_a_scripts_images(hostile: tuple[Passthrough, Runtime]) -> None:
    # Before: each was forwarded as the server sent it (an HTML "image", base64 that is not, 6 MB, 500 images).
    assert send(hostile, "html_image")[0] == [
        {"type": "text", "text": "[an image of type text/html that is not PNG, JPEG, GIF or WebP was left out]"}
    ]
    assert send(hostile, "bad_base64")[0] == [
        {"type": "text", "text": "[an image whose data is not valid base64 was left out]"}
    ]
    assert send(hostile, "big_image")[0] == [
        {
            "type": "text",
            "text": "[an image of 5.7 MB (7.6 MB as base64) was left out: the API takes at most 5.0 MB of base64 "
            "(3.8 MB of image); show it smaller (fewer pixels, or as JPEG)]",
        }
    ]
    content, _ = send(hostile, "many_images")
    assert [b["type"] for b in content] == ["image"] * MAX_IMAGES + ["text"]
    assert all(base64.b64decode(b["data"], validate=True).startswith(PNG[:8]) for b in content[:-1])
    assert f"{500 - MAX_IMAGES} images past the first {MAX_IMAGES} left out" in content[-1]["text"]


def test_images_are_kept_up_to_the_total_of_a_scripts_images() -> None:
    # Before: all three kept here, and the result (16 MiB of JSON) then refused whole; a script may show 8 MiB.
    half = png(1, 1, MAX_IMAGES_TOTAL_BYTES * 45 // 100 - 33)  # 5 MB as base64
    image = {"type": "image", "data": half, "mimeType": "image/png"}
    out = capped({"content": [image, image, image]}, 100)
    assert out is not None
    assert out["content"][:2] == [image, image]
    assert out["content"][2]["text"] == (
        "[an image of 3.6 MB was left out: the images and binary data of one result take at most 8.0 MB]"
    )


def test_a_resource_whose_blob_is_an_image_counts_among_the_images() -> None:
    # Before: a blob of image/png was charged only its bytes, so a result sent 8 images and as many image blobs.
    image = {"type": "image", "data": png(1, 1), "mimeType": "image/png"}
    shown = {"type": "resource", "resource": {"uri": "file:///a.png", "mimeType": "image/png", "blob": png(1, 1)}}
    zipped = {"type": "resource", "resource": {"uri": "file:///a.zip", "mimeType": "application/zip", "blob": "AAAA"}}
    out = capped({"content": [shown] + [image] * (MAX_IMAGES - 1) + [shown, zipped]}, 1_000)
    assert out is not None
    assert out["content"][:-1] == [shown] + [image] * (MAX_IMAGES - 1) + [zipped]
    assert f"1 image past the first {MAX_IMAGES} left out" in out["content"][-1]["text"]  # before: "1 images"


def test_blocks_past_the_count_are_counted_not_sent(hostile: tuple[Passthrough, Runtime]) -> None:
    # Before: 20,000 empty text blocks and 5,000 links went out whole (they hold no text to count).
    content, whole = send(hostile, "empty_blocks")
    assert len(content) == MAX_BLOCKS + 1
    assert f"{20_000 - MAX_BLOCKS:,} content blocks past the first {MAX_BLOCKS:,} left out" in content[-1]["text"]
    content, whole = send(hostile, "links")
    assert [b["type"] for b in content] == ["resource_link"] * MAX_BLOCKS + ["text"]
    assert len(json.dumps(whole)) < MAX_BLOCKS * 60


def test_every_field_counts_against_the_cap_and_nothing_longer_is_cleaned(
    hostile: tuple[Passthrough, Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a link's 2,000,000-character URI (or description, or a block's _meta) went out whole, every string
    # of the result cleaned before anything was cut.
    cleaned: list[int] = []
    clean_text = bounded_result.clean_text
    monkeypatch.setattr(bounded_result, "clean_text", lambda text: cleaned.append(len(text)) or clean_text(text))
    cap = SandboxConfig().output_chars
    content, whole = send(hostile, "long_fields")
    assert max(cleaned) <= cap
    assert len(json.dumps(whole)) < 2 * cap
    assert content[:-1] == [{"type": "text", "text": "ok"}, {"type": "text", "text": "after"}]
    assert "3 content blocks left out (malformed, or too long for what was left)" in content[-1]["text"]
    assert "the annotations or _meta of 1 content block left out" in content[-1]["text"]  # before: "blocks"


def test_escapes_are_cleaned_from_every_field(hostile: tuple[Passthrough, Runtime]) -> None:
    content, whole = send(hostile, "escapes")
    shown = json.dumps(whole, ensure_ascii=False)
    for bad in ("\x1b", "\x07", "\x9b", "\u202e", "\r", "\x08"):
        assert bad not in shown and json.dumps(bad)[1:-1] not in shown
    assert content[0] == {"type": "text", "text": "ABREDevil\nfake"}
    assert (
        content[1]["uri"] == "file:///etc/ABREDevil\nfake" and content[2]["resource"]["mimeType"] == "ABREDevil\nfake"
    )
    assert content[3] == {
        "type": "text",
        "text": "[an image of type ABREDevil fake that is not PNG, JPEG, GIF or WebP was left out]",
    }
    assert whole["structuredContent"] == {"ABREDevil\nfake": "ABREDevil\nfake"}


def test_structured_content_nested_deeper_than_the_sdk_writes_is_left_out() -> None:
    # Before: kept, and the SDK failed to write the answer ("Maximum serialization depth exceeded").
    deep: Any = 1
    for _ in range(1_000):
        deep = {"a": deep}
    out = capped({"content": [], "structuredContent": deep}, 20_000)
    assert out is not None and "structuredContent" not in out
    types.CallToolResult.model_validate(out, by_name=False).model_dump_json()


def test_the_results_meta_keys_mcp_reserves_are_the_upstreams_and_never_passed_on() -> None:
    # Before: an upstream of the 2026-07-28 protocol had its result carry `io.modelcontextprotocol/serverInfo` naming
    # itself, and serve passed it on to its client as if that server were the one the client talks to.
    meta = {
        "io.modelcontextprotocol/serverInfo": {"name": "asking", "version": ""},
        "modelcontextprotocol.io/x": 1,
        "dev.mcp/y": 2,
        "example.com/trace": "t1",
        "plain": True,
    }
    out = capped({"content": [{"type": "text", "text": "ok"}], "_meta": meta}, 1000)
    assert out is not None and out["_meta"] == {"example.com/trace": "t1", "plain": True}
    only_reserved = capped({"content": [], "_meta": {"io.modelcontextprotocol/serverInfo": {}}}, 1000)
    assert only_reserved == {"content": []}


def test_a_long_name_is_cut_so_that_claude_codes_prefix_keeps_it_within_the_apis_64(tmp_path: Path) -> None:
    # Before: `raw__` and the tool's 53 characters (58, under direct mode's 64) became Claude Code's 73-character
    # `mcp__tooltree__raw__…`, and the Messages API refused every request of the conversation that offered it.
    from agent.naming import NAME_PATTERN

    long = "get_the_quarterly_pipeline_review_summary_for_account"
    tree, _ = raw_server_tree(tmp_path, [{"name": long, "inputSchema": {"type": "object"}}, *TOOLS])
    passthrough = Passthrough(tree, [f"raw.{long}", "raw.say"])
    names = [d.name for d in passthrough.definitions]
    assert names[1] == "raw__say" and len(names[0]) == 49 and names[0].startswith("raw__get_the_quarterly_")
    assert all(NAME_PATTERN.fullmatch(f"mcp__tooltree__{name}") for name in names)
    assert passthrough.entries[names[0]].tool == long
