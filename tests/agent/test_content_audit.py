"""Content an MCP tool or a script sends that the Messages API would refuse with a 400 (on that request and every
later one, since the result stays in the conversation): each becomes a note saying what was left out, and the
kinds the API cannot carry are named with their type and size. Direct mode runs against the real SDK server
`tests/servers/content_server.py` and the fake API, which refuses what the real one does (`check_content`)."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import Agent
from agent.content import execution_blocks, mcp_result_blocks
from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.testing._server import check_content
from sandbox.host import Runtime
from sandbox.results import image_size, parse_execution
from tests import image_samples
from tests.agent.test_loop import tool_results
from tests.servers.content_server import png
from tool_tree.config import load_config
from tool_tree.runtime import ToolResult
from tooltree_cli.main import main

CONTENT_SERVER = Path(__file__).parents[1] / "servers" / "content_server.py"
SMALL = png(10, 10)


def image(data: str, mime: str = "image/png") -> dict[str, object]:
    return {"type": "image", "mimeType": mime, "data": data}


def request_with(*blocks: dict[str, object]) -> dict[str, object]:
    return {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": list(blocks)}]}


def api_image(data: str, mime: str = "image/png") -> dict[str, object]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}


def test_the_fake_api_refuses_the_content_the_real_one_does() -> None:
    assert check_content(request_with({"type": "text", "text": "ok"}, api_image(SMALL))) is None
    refused = {
        "empty text": [{"type": "text", "text": ""}],
        "white space": [{"type": "text", "text": " \n"}],
        "surrogate": [{"type": "text", "text": "a\ud800"}],
        "6 MB of base64": [api_image(png(10, 10, 4_500_000))],
        "9000 px": [api_image(png(9_000, 10))],
        "bytes not png": [api_image(base64.b64encode(b"<html>").decode())],
        "a signature alone": [api_image(base64.b64encode(b"GIF89a" + bytes(30)).decode(), "image/gif")],
        "svg": [api_image(SMALL, "image/svg+xml")],
        "21 images of 2001 px": [api_image(png(2_001, 10))] * 21,
        "101 images": [api_image(SMALL)] * 101,
    }
    for why, blocks in refused.items():
        assert check_content(request_with(*blocks)) is not None, why
    inside = {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "\t"}]}
    assert "non-whitespace" in str(check_content(request_with(inside)))


def test_an_image_over_5_mb_of_base64_is_a_note_though_under_5_mib_of_bytes() -> None:
    # Before: the API's limit was taken as 5 MiB of image; it is 5 MiB of base64 (3.75 MiB of image), so a
    # 4.5 MB image went to the model and every later request was refused.
    (note,) = mcp_result_blocks({"content": [image(png(10, 10, 4_500_000))]})
    assert note["text"].startswith("[an image of 4.3 MB (5.7 MB as base64) was left out: the API takes at most 5.0 MB")
    assert check_content(request_with(note)) is None


def test_an_image_wider_than_the_api_takes_is_a_note() -> None:
    # Before: a 9,000-pixel-wide PNG went to the model (the API refuses more than 8,000 a side).
    (note,) = mcp_result_blocks({"content": [image(png(9_000, 10))]})
    assert note["text"] == (
        "[an image of 9,000×10 pixels was left out: the API takes at most 8,000 on a side; show it smaller]"
    )
    assert mcp_result_blocks({"content": [image(png(8_000, 8_000))]})[0]["type"] == "image"


def test_image_sizes_are_read_from_every_types_header() -> None:
    gif, jpeg = image_samples.gif(8_001, 3), image_samples.jpeg(9_001, 600)
    vp8x, vp8l = image_samples.webp_extended(9_000, 2), image_samples.webp_lossless(200, 100)
    assert image_size(base64.b64decode(png(7, 9)), "image/png") == (7, 9)
    assert image_size(gif, "image/gif") == (8_001, 3)
    assert image_size(jpeg, "image/jpeg") == (9_001, 600)
    assert image_size(vp8x, "image/webp") == (9_000, 2)
    assert image_size(vp8l, "image/webp") == (200, 100)
    assert image_size(b"\xff\xd8\xff", "image/jpeg") is None  # a header cut short
    gif_b64 = base64.b64encode(gif).decode()
    assert "8,001×3 pixels" in mcp_result_blocks({"content": [image(gif_b64, "image/gif")]})[0]["text"]


def test_white_space_text_is_left_out_and_structured_content_shown_instead() -> None:
    # Before: a text block of white space went to the model (the API refuses one), and hid the structured content.
    assert mcp_result_blocks({"content": [{"type": "text", "text": " \n\t"}], "structuredContent": {"a": 1}}) == [
        {"type": "text", "text": '{"a": 1}'}
    ]
    assert mcp_result_blocks({"content": [{"type": "text", "text": "\r\n \x1b[2J"}]}) == [
        {"type": "text", "text": "(the tool returned no content)"}
    ]


def test_audio_and_binary_resources_are_named_with_their_type_and_size_and_an_image_resource_is_shown() -> None:
    # Before: "[content of type audio left out]", and an image sent as an embedded resource was not shown.
    wav = base64.b64encode(bytes(3_000)).decode()
    blocks = mcp_result_blocks(
        {
            "content": [
                {"type": "audio", "mimeType": "audio/wav", "data": wav},
                {"type": "resource", "resource": {"uri": "file:///a.zip", "mimeType": "application/zip", "blob": wav}},
                {"type": "resource", "resource": {"uri": "file:///c.png", "mimeType": "image/png", "blob": SMALL}},
            ]
        }
    )
    assert [b.get("text") for b in blocks[:2]] == [
        "[audio (2.9 KB, audio/wav) not shown: the model cannot hear audio]",
        "[binary resource file:///a.zip (2.9 KB, application/zip) not shown: the model reads only text]",
    ]
    assert blocks[2] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": SMALL}}


def test_a_mime_type_with_parameters_or_in_capitals_is_read_as_the_api_spells_it() -> None:
    # Before: each was refused as "not PNG, JPEG, GIF or WebP".
    for mime in ("IMAGE/PNG", "image/png; charset=x", " image/png "):
        (block,) = mcp_result_blocks({"content": [image(SMALL, mime)]})
        assert block["source"]["media_type"] == "image/png", mime
    (note,) = mcp_result_blocks({"content": [image(SMALL, "image/svg+xml")]})
    assert note["text"] == "[an image of type image/svg+xml that is not PNG, JPEG, GIF or WebP was left out]"


def test_a_lone_surrogate_never_reaches_the_request() -> None:
    # Before: json.loads lets "\ud800" through; the API then refuses the body as invalid JSON, every request after.
    result = json.loads('{"content": [{"type": "text", "text": "a\\ud800b"}], "structuredContent": {"k": "\\udfff"}}')
    blocks = mcp_result_blocks(result)
    assert blocks == [{"type": "text", "text": "ab"}]
    assert check_content(request_with(*blocks)) is None


def test_a_shown_image_the_api_would_refuse_is_a_note_in_the_scripts_result() -> None:
    # Before: show_image took up to 5 MiB of image, the host passed it on (a 400 on every later request), and an
    # image the host refused was dropped without a word; a script printing only spaces sent a blank text block.
    shown = [{"mime": "image/png", "data": png(10, 10, 4_500_000)}]
    report = {"exit_status": 0, "stdout": {"head": "  \n"}, "images": shown}
    result = parse_execution(report, max_chars=1_000, duration=0.0, tool_calls=[])
    (block,) = execution_blocks(result)
    assert block["text"].startswith("  \n\n[a shown image of 4.3 MB (5.7 MB as base64) was left out: the API takes")
    spaces = {"exit_status": 0, "stdout": {"head": " \t\n"}}
    blank = parse_execution(spaces, max_chars=1_000, duration=0.0, tool_calls=[])
    assert execution_blocks(blank) == [{"type": "text", "text": "(the script printed only white space)"}]


def test_a_tools_image_that_is_not_base64_is_a_clear_error_in_the_script() -> None:
    # Before: "binascii.Error: Incorrect padding" (or, for other garbage, bytes that were not the image at all).
    result = ToolResult.from_wire({"content": [image(SMALL), image("!!not base64")]})
    with pytest.raises(ValueError, match=r"content block 1 is an image whose data is not valid base64"):
        _ = result.images
    assert [i.data[:4] for i in ToolResult.from_wire({"content": [image(SMALL)]}).images] == [b"\x89PNG"]


@pytest.fixture(scope="module")
def content_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Runtime]]:
    folder = tmp_path_factory.mktemp("content-audit")
    config = folder / "tooltree.yaml"
    command = f"    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(CONTENT_SERVER))}]\n"
    config.write_text(f"servers:\n  content:\n{command}", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(folder / "tree")]) == 0
    with Runtime(load_config(config), folder / "tree") as runtime:
        yield config, runtime


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("big_image", ["text:[an image of 4.3 MB (5.7 MB as base64) was left out"]),
        ("wide_image", ["text:[an image of 9,000×10 pixels was left out"]),
        ("blank_text", ["image"]),
        ("audio", ["text:[audio (2.9 KB, audio/wav) not shown"]),
        ("resource_image", ["image"]),
        ("mime_params", ["image"]),
        ("mislabelled_images", ["image", "image"]),
        (
            "corrupt_images",
            [
                "text:[an image was left out: the GIF's logical screen is 0×0 pixels]",
                "text:[an image was left out: the PNG's IHDR chunk is corrupt (CRC mismatch)]",
            ],
        ),
        (
            "corrupt_resource_images",
            [
                "text:[an image was left out: the GIF's logical screen is 0×0 pixels]",
                "text:[an image was left out: the PNG's IHDR chunk is corrupt (CRC mismatch)]",
                "text:[an image whose bytes are not image/png was left out]",
            ],
        ),
    ],
)
def test_a_direct_run_gives_the_model_what_the_api_takes_and_a_note_for_the_rest(
    content_runtime: tuple[Path, Runtime], case: str, expected: list[str]
) -> None:
    # Before: big_image, wide_image, blank_text and corrupt_images made the next request a 400 (the run failed; for
    # corrupt_images "Could not process image", its bytes starting as a GIF's and a PNG's must); audio lost its type
    # and size; resource_image and mime_params were not shown.
    config, runtime = content_runtime
    tree = config.parent / "tree"
    with FakeMessagesAPI([reply(tool_use("content__show", {"case": case})), reply("Seen.")]) as api:
        agent = Agent(load_config(config), tree=tree, mode="direct", client=api.client(max_retries=0), runtime=runtime)
        result = agent.run("Show it")
    assert result.answer == "Seen."
    (answer,) = tool_results(api.requests[1])
    got = [b["type"] if b["type"] == "image" else "text:" + b["text"] for b in answer["content"]]
    assert len(got) == len(expected) and all(g.startswith(e) for g, e in zip(got, expected, strict=True)), got
