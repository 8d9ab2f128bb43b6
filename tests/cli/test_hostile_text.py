"""What a hostile MCP server writes reaches the terminal cleaned: its error on one line, cut, with no escape
sequence (titles, clear screen, OSC 52 clipboard writes, 8-bit CSI), no carriage return or line feed that forges a
line, no tag characters; its stderr line by line, cleaned; and every ``--json`` output escapes what a terminal acts
on (and JSON leaves raw), losing nothing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tool_tree.config import load_config
from tooltree_cli.main import main
from tooltree_cli.output import json_text
from tooltree_cli.serve_cmd import _regenerate

HIDDEN = "".join(chr(0xE0000 + ord(c)) for c in "smuggled")
"""Tag characters: invisible on a terminal, read as ``smuggled`` by a model."""
PADDING = 20_000
MESSAGE = (
    "denied \x1b]0;PWNED-TITLE\x07\x1b[2J\x9b31mRED\x1b[0m\r\x1b[Kforged\ntooltree: fake line\u202eevil"
    + HIDDEN
    + " "
    + "x" * PADDING
)
"""The server's JSON-RPC error for tools/list: a window title, a cleared screen, an 8-bit CSI, a carriage return
and a line feed that start lines of their own, a bidi override, tag characters; then 20,000 characters."""
STDERR = "boom \x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[31mred\x1b[0m\r fake ok line\n\x1b]52;c;ZWNobyBwd25lZA==\x07\n"
SHOWN = "MCPError: denied RED forged tooltree: fake lineevil "
"""The start of the error as the terminal shows it."""
SERVER = f"""\
import json, sys
sys.stderr.write({STDERR!r})
sys.stderr.flush()
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("id") is None:
        continue
    if msg.get("method") == "initialize":
        version = msg["params"]["protocolVersion"]
        info = {{"protocolVersion": version, "capabilities": {{"tools": {{}}}}}}
        info["serverInfo"] = {{"name": "h", "version": "1"}}
        answer = {{"result": info}}
    elif msg.get("method") == "tools/list":
        answer = {{"error": {{"code": -32000, "message": {MESSAGE!r}}}}}
    elif msg.get("method") == "ping":
        answer = {{"result": {{}}}}
    else:
        answer = {{"error": {{"code": -32601, "message": "method not found"}}}}
    print(json.dumps({{"jsonrpc": "2.0", "id": msg["id"], **answer}}), flush=True)
"""
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
"""What must not reach the terminal: controls (but tab and line feed), C1, bidi overrides, tag characters."""
JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
"""What JSON leaves raw (it escapes the C0 controls itself) and must not reach the terminal either."""


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A config of one stdio server that writes escape sequences to stderr and refuses tools/list with them."""
    script = tmp_path / "hostile.py"
    script.write_text(SERVER, encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  hostile:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(script))}]\n",
        encoding="utf-8",
    )
    return config


def test_generate_tree_shows_a_hostile_error_on_one_cleaned_line_cut_at_500_characters(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the error raw in the progress line and the table (a title set, the screen cleared, a forged line
    # "tooltree: fake line"), the table's rule 20,000 dashes wide, and the stderr's escape sequences raw.
    assert main(["generate-tree", "--config", str(hostile), "--out", str(tmp_path / "tree")]) == 3
    err = capsys.readouterr().err
    assert UNSAFE.search(err) is None, repr(UNSAFE.search(err))
    assert "PWNED" not in err and "ZWNobyBwd25lZA" not in err  # escape sequences go whole, not just their ESC
    lines = err.splitlines()
    assert not any(line.startswith(("tooltree: fake", "forged")) for line in lines)
    shown = (SHOWN + "x" * PADDING)[:499] + "…"
    assert f"  FAILED  hostile: {shown}  [1/1]" in lines
    row = next(line for line in lines if line.startswith("hostile "))
    assert row.endswith(f"  {shown}")
    assert max(len(line) for line in lines) < 600  # the table's rule too
    assert "\n--- last lines of hostile's stderr ---\nboom red\n fake ok line\n" in err


def test_generate_tree_json_keeps_the_error_escaped_and_cut_at_4000_characters(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the 8-bit CSI, the bidi override and the tag characters raw on stdout (JSON escapes only < 0x20).
    assert main(["generate-tree", "--config", str(hostile), "--out", str(tmp_path / "tree"), "--json"]) == 3
    out = capsys.readouterr().out
    assert JSON_UNSAFE.search(out) is None, repr(JSON_UNSAFE.search(out))
    (server,) = json.loads(out)["servers"]
    error = server["error"]
    assert len(error) == 4000 and error.endswith("x…")
    assert error.startswith("MCPError: " + MESSAGE[:100])  # the data itself, whole up to the cut
    assert server["stderr_tail"] == STDERR.rstrip("\n").replace("\r", "\n")


def test_serve_says_a_server_failed_on_one_cleaned_line(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "tooltree serve: hostile failed to list its tools (MCPError: denied <escapes>…" raw, 20,000 characters.
    tree = hostile.parent / "tree"
    assert _regenerate(load_config(hostile), tree) == (3, None)
    err = capsys.readouterr().err
    assert UNSAFE.search(err) is None, repr(UNSAFE.search(err))
    shown = (SHOWN + "x" * PADDING)[:499] + "…"
    assert (
        f"tooltree serve: hostile failed to list its tools ({shown}); its tools are not in the tree; "
        "the last lines of its stderr:\n    boom red\n     fake ok line\n"
    ) in err
    assert "PWNED" not in err and "ZWNobyBwd25lZA" not in err


@pytest.mark.parametrize(
    "text",
    [
        "8-bit CSI \x9b2J, NEL \x85, DEL \x7f",
        "bidi \u202eevil\u202c \u2066isolate\u2069 \u200f",
        "tags " + HIDDEN + " \U000e0001\U000e007f",
        "a lone surrogate \ud800 and a pair 😀",
        "ESC \x1b]0;title\x07 and BEL stay escaped by JSON \x00",
    ],
)
def test_json_output_escapes_what_a_terminal_acts_on_and_loses_nothing(text: str) -> None:
    value = {"key " + text: [text, {"nested": text}]}
    out = json_text(value)
    assert JSON_UNSAFE.search(out) is None and re.search("[\x00-\x1f\ud800-\udfff]", out.replace("\n", "")) is None
    assert json.loads(out) == value
    out.encode("utf-8")  # printable: before, a lone surrogate raised UnicodeEncodeError


def test_a_character_past_the_bmp_is_escaped_as_its_surrogate_pair() -> None:
    assert json_text("\U000e0041") == '"\\udb40\\udc41"'
    assert json_text("\x9b") == '"\\u009b"'
    assert json_text("é 日本 😀") == '"é 日本 😀"'  # the rest of Unicode stays readable


def test_generate_tree_shows_a_server_name_with_escapes_and_line_ends_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the name raw in the progress line, the table and the stderr heading (a project's .mcp.json names its
    # servers; one named "a\nforged\x1b]52;c;…\x07" wrote a line of its own and set the clipboard).
    name = "a\nforged line\x1b]52;c;ZWNobyBwd25lZA==\x07\x9b31m"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {name: {"command": sys.executable, "args": ["-c", "boom"]}}}))
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 3
    err = capsys.readouterr().err
    assert UNSAFE.search(err) is None, repr(UNSAFE.search(err))
    assert not any(line.startswith("forged") for line in err.splitlines())
    # Escaped, as the tree's files show it (`shown_name`): the escape sequence is text that does nothing.
    assert "--- last lines of a\\nforged line\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\x9b31m's stderr ---" in err
