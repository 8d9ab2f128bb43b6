"""Messages that name a server's setting name it as its file writes it (`tool_tree.config.setting_named`): another
client's key (Codex's ``mcp_servers.NAME.tool_timeout_sec``, Windsurf's ``serverUrl``), with the file, and the default
that applies to that file (before: ``servers.NAME.timeout in …/config.toml, default 30`` for every format)."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import mcp
import pytest

from tool_tree.config import load_config, setting_named
from tool_tree.http_errors import marked, status_named
from tool_tree.pool import ServerPool, ServerUnavailable
from tooltree_cli.main import main

MEDIA = str(Path(__file__).resolve().parents[2] / "examples" / "sample_servers" / "media.py")
pytestmark = pytest.mark.anyio
CODEX_TIMEOUT = "Codex's default 60; tooltree waits the larger of it and startup_timeout_sec"


def _entry(**keys: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [MEDIA], **keys}


# Each format with a media server whose calls wait at most 8 s, and how its timeout is named. The timeout bounds the
# server's start too: 3 s, as before, was less than the media server takes to start on a loaded machine.
TIMEOUTS = {
    "tooltree.yaml": (
        f"servers:\n  media:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(MEDIA)}]\n"
        "    timeout: 8\n",
        "servers.media.timeout in {path}, default 30",
    ),
    ".mcp.json": (
        json.dumps({"mcpServers": {"media": _entry(timeout=8)}}),
        "mcpServers.media.timeout in {path}, default 30",
    ),
    ".gemini/settings.json": (
        json.dumps({"mcpServers": {"media": _entry(timeout=8000)}}),
        "mcpServers.media.timeout in {path}, in milliseconds, default 30000",
    ),
    ".vscode/mcp.json": (
        json.dumps({"servers": {"media": _entry(timeout=8)}}),
        "servers.media.timeout in {path}, default 30",
    ),
    "config.toml": (
        f"[mcp_servers.media]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(MEDIA)}]\n"
        "startup_timeout_sec = 2\ntool_timeout_sec = 8\n",
        f"mcp_servers.media.tool_timeout_sec in {{path}}, {CODEX_TIMEOUT}",
    ),
}


def _written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", TIMEOUTS)
async def test_a_call_that_runs_out_of_its_timeout_names_the_key_its_file_has(tmp_path: Path, name: str) -> None:
    text, setting = TIMEOUTS[name]
    path = _written(tmp_path, name, text)
    config = load_config(path)
    async with ServerPool(config) as pool:
        result = await pool.call("media", "slow_echo", {"text": "x", "seconds": 60})
    said = result["content"][0]["text"]
    assert said == f"the call timed out after 8 s ({setting.format(path=path)})"


def test_a_codex_timeout_is_named_by_the_key_it_was_taken_from(tmp_path: Path) -> None:
    # tool_timeout_sec = 2 alone: Codex's 10 s start-up bound is the larger, so calls wait 10 s
    path = _written(tmp_path, "config.toml", "[mcp_servers.media]\ncommand = 'x'\ntool_timeout_sec = 2\n")
    server = load_config(path).server("media")
    assert server.timeout == 10
    assert setting_named(server, "timeout", str(path), default=True) == (
        f"mcp_servers.media.startup_timeout_sec in {path}, Codex's default 10; tooltree waits the larger of it and "
        "tool_timeout_sec"
    )


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


UNREACHED = {
    "mcp_config.json": ('{{"mcpServers": {{"web": {{"serverUrl": "{url}"}}}}}}', "mcpServers.web.serverUrl"),
    ".gemini/settings.json": ('{{"mcpServers": {{"web": {{"httpUrl": "{url}"}}}}}}', "mcpServers.web.httpUrl"),
    ".vscode/mcp.json": ('{{"servers": {{"web": {{"type": "http", "url": "{url}"}}}}}}', "servers.web.url"),
    "config.toml": ('[mcp_servers.web]\nurl = "{url}"\n', "mcp_servers.web.url"),
}


@pytest.mark.parametrize("name", UNREACHED)
async def test_a_server_that_cannot_be_reached_names_the_url_key_its_file_has(tmp_path: Path, name: str) -> None:
    text, key = UNREACHED[name]
    port = _refused_port()
    path = _written(tmp_path, name, text.format(url=f"http://127.0.0.1:{port}/mcp"))
    async with ServerPool(load_config(path)) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("web", "x", {})
    assert str(info.value) == (
        f"server 'web' is unavailable: could not reach the server at its URL (127.0.0.1:{port}: Connection refused); "
        f"no call was sent: check that the server is running and listening there, and its URL ({key} in {path})"
    )


async def test_a_zed_program_not_found_names_its_command_path(tmp_path: Path) -> None:
    text = json.dumps({"context_servers": {"z": {"command": {"path": "no-such-program", "args": []}}}})
    path = _written(tmp_path, ".zed/settings.json", text)
    async with ServerPool(load_config(path)) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("z", "x", {})
    assert str(info.value).endswith(
        f"; give its full path in context_servers.z.command.path in {path} (`command -v` in a shell finds it)"
    )


def test_generate_tree_of_a_server_that_cannot_start_names_the_setting_with_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `servers.nope.command` and `servers.lost.cwd` alone, where a timeout or a URL names its file too: with
    # a project's .mcp.json beside ~/.claude.json, which file to fix was left to guess.
    text = (
        "servers:\n  nope:\n    command: no-such-program-xyz\n"
        f"  lost:\n    command: {sys.executable}\n    cwd: {tmp_path / 'gone'}\n"
    )
    path = _written(tmp_path, "tooltree.yaml", text)
    assert main(["generate-tree", "--config", str(path), "--out", str(tmp_path / "tree"), "--json"]) == 3
    errors = {s["name"]: s["error"] for s in json.loads(capsys.readouterr().out)["servers"]}
    assert errors["nope"].endswith(
        f"; give its full path in servers.nope.command in {path} (`command -v` in a shell finds it)"
    )
    assert (
        errors["lost"]
        == f"cannot start: the working folder {tmp_path / 'gone'} does not exist (servers.lost.cwd in {path})"
    )


def test_a_refused_codex_token_names_its_bearer_token_env_var(tmp_path: Path) -> None:
    text = '[mcp_servers.web]\nurl = "http://127.0.0.1:1/mcp"\nbearer_token_env_var = "TOKEN"\n'
    path = _written(tmp_path, "config.toml", text)
    server = load_config(path, environ={"TOKEN": "t"}).server("web")
    refused = mcp.MCPError(-32603, "HTTP 401 Unauthorized", marked(401))
    assert status_named(refused, server, str(path)) == f" (mcp_servers.web.bearer_token_env_var in {path})"
    assert status_named(mcp.MCPError(-32603, "gone", marked(404)), server, None) == " (mcp_servers.web.url)"


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (".mcp.json", '{"mcpServers": {"c": {"command": "x", "disabled": true}}}', "mcpServers.c.disabled is true"),
        ("config.toml", "[mcp_servers.c]\ncommand = 'x'\nenabled = false\n", "mcp_servers.c.enabled is false"),
        ("tooltree.yaml", "servers:\n  c: {command: x, enabled: false}\n", "servers.c.enabled is false"),
    ],
)
def test_generate_tree_of_a_disabled_server_names_the_key_that_disables_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, said: str
) -> None:
    path = _written(tmp_path, name, text)
    assert main(["generate-tree", "--config", str(path), "--out", str(tmp_path / "tree"), "--server", "c"]) == 2
    assert f"{path}: {said}: enable it to list it (--server c)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("server", "typed"), [("my crm", "'my crm'"), ("crm\u200b", "$'crm\\u200b'"), ("it's", "'it'\"'\"'s'")]
)
def test_generate_tree_of_a_disabled_server_says_its_name_as_a_word_to_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: str, typed: str
) -> None:
    # Before: "(--server my crm)", its zero-width space raw: a command that typed as shown lists another server.
    path = _written(tmp_path, ".mcp.json", json.dumps({"mcpServers": {server: {"command": "x", "disabled": True}}}))
    assert main(["generate-tree", "--config", str(path), "--out", str(tmp_path / "tree"), "--server", server]) == 2
    assert capsys.readouterr().err.endswith(f": enable it to list it (--server {typed})\n")


def test_a_setting_of_servers_whose_names_differ_by_invisible_characters_names_each_escaped(tmp_path: Path) -> None:
    # Before: cleaned, so a timeout of `crm\u200b` or `crm\u202e` was said as `mcpServers.crm.timeout`, another
    # server's setting (the error of a start that timed out, generate-tree's summary table, a call's error).
    servers = {name: _entry(timeout=3) for name in ("crm", "crm\u200b", "crm\u202e")}
    path = _written(tmp_path, ".mcp.json", json.dumps({"mcpServers": servers}))
    config = load_config(path)
    assert [setting_named(config.server(n), "timeout") for n in servers] == [
        "mcpServers.crm.timeout",
        "mcpServers.crm\\u200b.timeout",
        "mcpServers.crm\\u202e.timeout",
    ]
    yaml = _written(
        tmp_path, "tooltree.yaml", "servers:\n" + "".join(f"  {json.dumps(n)}: {{command: x}}\n" for n in servers)
    )
    assert setting_named(load_config(yaml).server("crm\u200b"), "timeout") == "servers.crm\\u200b.timeout"
