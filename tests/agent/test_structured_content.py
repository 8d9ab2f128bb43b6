"""Structured content in the native tool modes (direct, tool-search, filtered, ``batch_tool``): it is for programs,
so the model gets it as JSON only when the content gives it nothing, and never a string of base64 in it.

Before: it went to the model as JSON whenever the content had no text block, so an image alone let it through,
and server-filesystem's ``read_media_file`` repeats the image's base64 there: a PNG reached the model as its
image plus its base64 again as text (a 270 KB PNG grew the next request from 11,000 to 101,000 input tokens).

Runs the real server-filesystem (installed by `make real-servers`; skipped without it, a failure under
REQUIRE_REAL_SERVERS=1) and the real SDK server `tests/servers/structured_server.py`, with the fake Messages API.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agent import Agent
from agent.content import BASE64_RUN, mcp_result_blocks
from agent.prefilter import ClaudeFilter
from agent.prefilter.claude import VERDICT_TOOL
from agent.testing import FakeMessagesAPI, reply, server_tool_use, tool_search_result, tool_use
from sandbox.host import Runtime
from tests.agent.test_loop import tool_results
from tests.servers.content_server import png
from tests.support import REPO, require_install
from tool_tree.config import load_config
from tooltree_cli.main import main

STRUCTURED_SERVER = Path(__file__).parents[1] / "servers" / "structured_server.py"
IMAGE = png(100, 80, 200_000)  # as structured_server.py's
MODES = ["direct", "tool-search", "filtered", "batch"]


def tree_of(folder: Path, servers: str) -> tuple[Path, Path]:
    """A config naming ``servers`` (a YAML ``servers:`` body) and the tree generated from it."""
    config = folder / "tooltree.yaml"
    config.write_text(f"servers:\n{servers}", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(folder / "tree"), "--embeddings", "off"]) == 0
    return config, folder / "tree"


@pytest.fixture(scope="module")
def structured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Runtime]]:
    """The SDK server of structured content, live."""
    command = f"    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(STRUCTURED_SERVER))}]\n"
    config, tree = tree_of(tmp_path_factory.mktemp("structured"), f"  structured:\n{command}")
    with Runtime(load_config(config), tree) as runtime:
        yield config, tree, runtime


@pytest.fixture(scope="module")
def filesystem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Runtime]]:
    """The real server-filesystem, live, confined to a folder holding ``chart.png`` (195 KB)."""
    root = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
    hint = "run `make real-servers` (scripts/install-real-servers.sh) to install the third-party MCP servers"
    require_install(root / ".stamp", "third-party MCP servers", hint)
    folder = tmp_path_factory.mktemp("filesystem")
    files = folder / "files"
    files.mkdir()
    (files / "chart.png").write_bytes(base64.b64decode(IMAGE))
    command = json.dumps(str(root / "node" / "node_modules" / ".bin" / "mcp-server-filesystem"))
    config, tree = tree_of(folder, f"  filesystem:\n    command: {command}\n    args: [{json.dumps(str(files))}]\n")
    with Runtime(load_config(config), tree) as runtime:
        yield config, files, runtime


def ask(live: tuple[Path, Path, Runtime], mode: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the agent in ``mode`` (``batch``: direct, with one ``batch_tool`` call) for a model that calls ``name``
    once; the content of the tool result the next request carried."""
    config, _, runtime = live
    call = tool_use(name, arguments)
    if mode == "batch":
        call = tool_use("batch_tool", {"invocations": [{"name": name, "arguments": arguments}]})
    first = reply(call)
    if mode == "tool-search":
        search = server_tool_use("tool_search_tool_bm25", {"query": name})
        first = reply(search, tool_search_result([name]), call)
    with ExitStack() as stack:
        api = stack.enter_context(FakeMessagesAPI([first, reply("Seen.")]))
        extra: dict[str, Any] = {}
        if mode == "filtered":
            verdict = {"tool": name, "needed": True, "probability": 0.9}
            judge = stack.enter_context(FakeMessagesAPI([reply(tool_use(VERDICT_TOOL, {"verdicts": [verdict]}))]))
            extra["prefilter"] = ClaudeFilter(judge.client())
        agent = Agent(
            load_config(config),
            tree=config.parent / "tree",
            mode="direct" if mode == "batch" else mode,
            client=api.client(max_retries=0),
            runtime=runtime,
            **extra,
        )
        assert agent.run("Show it").answer == "Seen."
    (answer,) = tool_results(api.requests[1])
    assert not answer.get("is_error"), answer
    content: list[dict[str, Any]] = answer["content"]
    return content


def texts(content: list[dict[str, Any]]) -> list[str]:
    return [b["text"] for b in content if b["type"] == "text"]


def images(content: list[dict[str, Any]]) -> list[str]:
    return [b["source"]["data"] for b in content if b["type"] == "image"]


def headers(mode: str, name: str) -> list[str]:
    """The text a result has besides its content: ``batch_tool``'s header for its one call."""
    return [f"[1] {name}: ok"] if mode == "batch" else []


@pytest.mark.real_servers
@pytest.mark.parametrize("mode", MODES)
def test_an_image_from_the_real_filesystem_server_reaches_the_model_once_as_an_image(
    filesystem: tuple[Path, Path, Runtime], mode: str
) -> None:
    # Before: the image block and a 267,000-character text block '{"content": [{"type": "image", "data": "iVBOR…'
    # (the server repeats the image in its structured content, and the content has no text block).
    _, files, _ = filesystem
    name = "filesystem__read_media_file"
    content = ask(filesystem, mode, name, {"path": str(files / "chart.png")})
    assert images(content) == [IMAGE]
    assert texts(content) == headers(mode, name)


@pytest.mark.parametrize("mode", MODES)
def test_structured_content_that_repeats_or_adds_to_an_image_is_left_to_programs(
    structured: tuple[Path, Path, Runtime], mode: str
) -> None:
    # Before: each image came with its structured content as text: the image again, as base64, or its size.
    name = "structured__show"
    for case in ("repeated", "image_and_size"):
        content = ask(structured, mode, name, {"case": case})
        assert images(content) == [IMAGE], case
        assert texts(content) == headers(mode, name), case


def test_structured_content_alone_is_shown_with_its_base64_strings_as_notes(
    structured: tuple[Path, Path, Runtime],
) -> None:
    # Before: the JSON carried the PNG twice, 534,000 characters of base64 (cut at 500,000, with a note).
    (text,) = texts(ask(structured, "direct", "structured__show", {"case": "alone"}))
    assert json.loads(text) == {
        "name": "chart.png",
        "png": "[base64 data (195.3 KB) left out]",
        "preview": "[base64 data (195.3 KB, image/png) left out]",
        "digest": "0123456789abcdef" * 80,  # hex is no binary data: kept
    }


def test_base64_in_structured_content_is_a_note_however_it_is_written_and_whatever_is_left_of_the_budget() -> None:
    # Before: every string below reached the model as it was (cut to the budget's head and tail when over it).
    lines = "\r\n".join(IMAGE[i : i + 76] for i in range(0, 4_000, 76)) + "\r\n"  # MIME's line breaks
    url_safe = base64.urlsafe_b64encode(bytes(range(256)) * 8).decode().rstrip("=")
    result = {"content": [{"type": "text", "text": " "}], "structuredContent": {"a": [lines, url_safe]}}
    (block,) = mcp_result_blocks(result, max_chars=100)
    assert json.loads(block["text"]) == {"a": ["[base64 data (3.0 KB) left out]", "[base64 data (2.0 KB) left out]"]}
    short = IMAGE[: BASE64_RUN - 1]  # under the run: kept, as a string a model may need (a key, a token)
    then_words = IMAGE[:5_000] + " and then some words"
    kept = mcp_result_blocks({"content": [], "structuredContent": [short, then_words]})
    assert json.loads(kept[0]["text"]) == [short, then_words]
