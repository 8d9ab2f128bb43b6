"""A passthrough call whose server answers a huge JSON-RPC error full of escape sequences: the error comes back
held to a passthrough result's rules (cleaned, cut to ``output_chars`` with a note), and so does a direct-mode
call's (cleaned, cut as code mode's ledger shows it).

In process, with the real hostile server (tests/servers/hostile_text_server.py) behind a real `Runtime` (no
sandbox is started: these calls go from the runtime's bridge to the server); then `tooltree serve` as a process
of its own (``--warm 0``: no sandbox either) driven by the official MCP SDK client.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from agent.serve.bounded_result import failed
from agent.serve.passthrough import Passthrough
from agent.toolsets.direct import DirectToolset
from sandbox.config import SandboxConfig
from sandbox.host import Runtime
from sandbox.results import LEDGER_ERROR_CHARS
from tests.support import hostile_text_config, raw_server_tree
from tool_tree.config import Config, ServerConfig, load_config
from tooltree_cli.main import main

EMOJI = 300_000
OUTPUT_CHARS = 1_000
"""Under the 2,000 characters of a server's error the pool quotes (`tool_tree.pool.SAID_CHARS`): the cut shows."""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    folder = tmp_path_factory.mktemp("passthrough-errors")
    config = hostile_text_config(folder)
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    with Runtime(load_config(config), tree, sandbox_config=SandboxConfig(output_chars=OUTPUT_CHARS)) as live:
        yield live


def test_a_servers_huge_error_comes_back_cleaned_and_cut_to_output_chars_with_a_note(runtime: Runtime) -> None:
    # Before: 300,160 characters, the server's escape sequences (OSC 52 clipboard write, title, CSI) raw in them.
    result = Passthrough(runtime.tree, ["hostile.fail"]).call("hostile__fail", {"n": EMOJI}, runtime)
    assert result.is_error
    (block,) = result.content
    text = block.text  # type: ignore[union-attr]
    assert text.startswith("hostile.fail failed (server_error): server error -32000: REDevil\nforged\n😀😀")
    shown, note = text.rsplit("\n", 1)
    assert OUTPUT_CHARS - 100 < len(shown) <= OUTPUT_CHARS and shown.endswith("😀")  # cut, then its escapes dropped
    cut = re.fullmatch(r"\[\.\.\. ([\d,]+) of ([\d,]+) characters of the error cut: a passthrough result is "
                       r"capped at 1,000 characters \.\.\.\]", note)  # fmt: skip
    assert cut is not None, note
    left_out, whole = (int(n.replace(",", "")) for n in cut.groups())
    assert whole > 2_000 and whole - left_out == OUTPUT_CHARS  # the pool quotes 2,000 characters of it
    assert all(c.isprintable() for c in text.replace("\n", ""))


def test_an_error_that_fits_is_only_cleaned() -> None:
    result = failed("x failed (server_error): \x1b]0;title\x07\x1b[31mred\u202e", 100)
    assert [b.text for b in result.content] == ["x failed (server_error): red"]  # type: ignore[union-attr]
    assert result.is_error


def test_a_direct_mode_call_shows_a_servers_huge_error_cleaned_and_cut_as_the_ledger_does(runtime: Runtime) -> None:
    # Before: the error raw (escapes and all) to the model, 300,000 emoji, cut only by the reply's budget of 500,000.
    outcome = DirectToolset(runtime.tree).call_native("hostile__fail", {"n": EMOJI}, runtime)
    assert outcome.is_error
    (block,) = outcome.content
    text = block["text"]
    assert text.startswith("hostile.fail failed (server_error): server error -32000: REDevil\n    forged\n    😀😀")
    assert len(text) == LEDGER_ERROR_CHARS and text.endswith("😀…")
    assert all(c.isprintable() for c in text.replace("\n", ""))


def test_serve_answers_an_sdk_client_the_error_cut_and_logs_a_notification_flood_in_one_line(
    runtime: Runtime, tmp_path: Path
) -> None:
    # Before: the client got the error whole and raw; serve's stderr (the client's log) got a 20-line traceback
    # for each of the 300 notifications the SDK could not read (460 KB; without end, 150 KB a second).
    import anyio
    import mcp
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    config = hostile_text_config(tmp_path, "300")
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(runtime.tree),
            "--no-regenerate", "--warm", "0", "--passthrough", "hostile.fail"]  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(Path(__file__).resolve().parents[2]))

    async def client(errlog: TextIO) -> mcp.types.CallToolResult:
        async with mcp.Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as session:
            return await session.call_tool("hostile__fail", {"n": EMOJI})

    log = tmp_path / "serve.err"
    with open(log, "w", encoding="utf-8") as errlog:
        result = anyio.run(client, errlog)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and text.startswith("hostile.fail failed (server_error): server error -32000: REDevil\n")
    assert len(text) < 2_300 and "characters more)" in text  # as the pool quotes it (under the default output_chars)
    err = log.read_text(encoding="utf-8")
    assert "Traceback" not in err and err.count("Failed to validate notification: notifications/progress") == 1


def test_a_failed_passthrough_call_names_the_tool_escaped_not_cleaned(tmp_path: Path) -> None:
    # Before: "raw.get_item failed (server_unavailable): …" for the tool get\u200b_item, another tool's name.
    tree, _ = raw_server_tree(tmp_path, [{"name": "get\u200b_item", "inputSchema": {"type": "object"}}])
    gone = Config(servers=(ServerConfig(name="raw", command=str(tmp_path / "no-such-server")),))
    with Runtime(gone, tree) as live:
        passthrough = Passthrough(tree, ["raw.get\u200b_item"])
        (name,) = passthrough.entries
        result = passthrough.call(name, {}, live)
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith("raw.get\\u200b_item failed (server_unavailable): "), text
