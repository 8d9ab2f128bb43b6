"""What `tooltree serve` hands an MCP client for content the Messages API would refuse: a passthrough tool's
images (from the real SDK server `tests/servers/content_server.py`) and a script's shown images are held to the
API's limits (5 MB of base64, 8,000 pixels a side), each one refused becoming a note in its place."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest

from agent.content import execution_blocks
from agent.serve.content import call_result
from agent.serve.passthrough import Passthrough
from agent.toolsets.base import ToolOutcome
from sandbox.config import SandboxConfig
from sandbox.host import Runtime
from sandbox.results import parse_execution
from tests.servers.content_server import png
from tool_tree.config import load_config
from tooltree_cli.main import main

CONTENT_SERVER = Path(__file__).parents[1] / "servers" / "content_server.py"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Passthrough, Runtime]]:
    folder = tmp_path_factory.mktemp("serve-content-audit")
    config = folder / "tooltree.yaml"
    command = f"    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(CONTENT_SERVER))}]\n"
    config.write_text(f"servers:\n  content:\n{command}", encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    with Runtime(load_config(config), tree, sandbox_config=SandboxConfig()) as runtime:
        yield Passthrough(tree, ["content.show"]), runtime


def texts(passthrough: Passthrough, runtime: Runtime, case: str) -> list[str]:
    result = passthrough.call("content__show", {"case": case}, runtime)
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return [b["type"] if b["type"] != "text" else b["text"] for b in dumped["content"]]


def test_a_passthrough_image_the_api_would_refuse_is_a_note_in_its_place(upstream: tuple[Passthrough, Runtime]) -> None:
    # Before: both were forwarded as sent, and a client that gives them to Claude (Claude Code) got a 400 on every
    # later request.
    assert texts(*upstream, "big_image") == [
        "[an image of 4.3 MB (5.7 MB as base64) was left out: the API takes at most 5.0 MB of base64 (3.8 MB of "
        "image); show it smaller (fewer pixels, or as JPEG)]"
    ]
    assert texts(*upstream, "wide_image") == [
        "[an image of 9,000×10 pixels was left out: the API takes at most 8,000 on a side; show it smaller]"
    ]
    # Before: forwarded, though only their signatures were images ("Could not process image" from the API).
    assert texts(*upstream, "corrupt_images") == [
        "[an image was left out: the GIF's logical screen is 0×0 pixels]",
        "[an image was left out: the PNG's IHDR chunk is corrupt (CRC mismatch)]",
    ]
    assert texts(*upstream, "audio") == ["audio"]  # the client's to show or not: kept, within the byte budget
    assert texts(*upstream, "resource_image") == ["resource"]


def test_a_passthrough_resource_whose_blob_says_it_is_an_image_is_held_to_an_images_rules(
    upstream: tuple[Passthrough, Runtime],
) -> None:
    # Before: each was forwarded as a binary resource, only its size counted, and a client that shows an image blob
    # as an image (Claude Code) gave Claude what it cannot process ("Could not process image" on every later request).
    assert texts(*upstream, "corrupt_resource_images") == [
        "[an image was left out: the GIF's logical screen is 0×0 pixels]",
        "[an image was left out: the PNG's IHDR chunk is corrupt (CRC mismatch)]",
        "[an image whose bytes are not image/png was left out]",
    ]


def test_a_passthrough_image_labelled_as_another_image_type_goes_out_as_the_type_its_bytes_are(
    upstream: tuple[Passthrough, Runtime],
) -> None:
    # Before: "[an image whose bytes are not image/jpeg was left out]", a whole PNG lost for its label (show_image in a
    # script reads the type from the bytes and showed it).
    passthrough, runtime = upstream
    result = passthrough.call("content__show", {"case": "mislabelled_images"}, runtime)
    image, resource = result.model_dump(by_alias=True, mode="json", exclude_none=True)["content"]
    assert image == {"type": "image", "data": png(10, 10), "mimeType": "image/png"}
    assert resource == {
        "type": "resource",
        "resource": {"uri": "file:///d.webp", "mimeType": "image/png", "blob": png(10, 10)},
    }
    # Before: "[an image of type IMAGE/PNG; charset=x that is not PNG, JPEG, GIF or WebP was left out]" (direct mode
    # read the type as the API spells it, passthrough did not).
    (image,) = passthrough.call("content__show", {"case": "mime_params"}, runtime).content
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"


def test_the_execute_tools_result_says_which_shown_images_were_left_out() -> None:
    # Before: an image the host refused was dropped from the result without a word.
    report = {"exit_status": 0, "stdout": {"head": "done\n"}, "images": [{"mime": "image/png", "data": png(9_000, 9)}]}
    result = parse_execution(report, max_chars=1_000, duration=0.0, tool_calls=[])
    out = call_result(ToolOutcome(content=execution_blocks(result)))
    (block,) = out.content
    assert isinstance(block, types.TextContent) and block.text == (
        "done\n\n[a shown image of 9,000×9 pixels was left out: the API takes at most 8,000 on a side; show it smaller]"
    )
