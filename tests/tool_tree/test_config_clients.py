"""The MCP configuration file a user's client already has, given to ``--config`` as it is: VS Code's, Cursor's,
Windsurf's, Gemini CLI's, Codex CLI's and Zed's are read as those clients read them, or refused saying what to do.
Each file below has the shape of its client's documented examples."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tool_tree.config import ConfigError, load_config, parse_config
from tool_tree.tree import Manifest
from tooltree_cli.main import main

SERVERS = Path(__file__).resolve().parents[1] / "servers"

VSCODE = """\
{
  // Servers of this workspace. VS Code asks for the key when the server starts.
  "inputs": [
    {
      "type": "promptString",
      "id": "perplexity-key",
      "description": "Perplexity API Key",
      "password": true
    },
  ],
  "servers": {
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask", "${workspaceFolder}/notes"], /* the workspace's notes */
      "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}", "CACHE": "${userHome}/.cache", "PATH": "${env:PATH}"},
      "envFile": "${workspaceFolder}/.env",
      "dev": {"watch": "src/**/*.ts"},
    },
    "context7": {"type": "http", "url": "https://mcp.context7.com/mcp", "headers": {"X-Key": "${input:ctx}"}},
  },
}
"""


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def workspace(tmp_path: Path, folder: str, name: str, text: str) -> Path:
    """``text`` written as ``<tmp>/proj/<folder>/<name>`` (a workspace's file), its path returned."""
    path = tmp_path / "proj" / folder / name
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_vscode_mcp_json_is_read_with_its_comments_inputs_variables_and_env_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: "invalid JSON: Expecting property name enclosed in double quotes" (its comment); without comments,
    # "expected a top-level `mcpServers` object".
    path = workspace(tmp_path, ".vscode", "mcp.json", VSCODE)
    project = path.parent.parent
    (project / ".env").write_text('# secrets\nexport REGION=eu\nPERPLEXITY_API_KEY=from-file\nQUOTED="a b"\n')
    environ = {"HOME": "/home/u", "PATH": "/usr/bin", "TOOLTREE_INPUT_PERPLEXITY_KEY": "pk", "TOOLTREE_INPUT_CTX": "c"}
    perplexity, context7 = load_config(path, environ=environ).servers
    assert (perplexity.command, perplexity.args) == ("npx", ("-y", "server-perplexity-ask", f"{project}/notes"))
    assert dict(perplexity.env) == {  # `env` wins over the envFile
        "REGION": "eu",
        "PERPLEXITY_API_KEY": "pk",
        "QUOTED": "a b",
        "CACHE": "/home/u/.cache",
        "PATH": "/usr/bin",
    }
    assert perplexity.cwd == str(project)  # VS Code starts a workspace's servers in the workspace, not in .vscode
    assert (context7.url, dict(context7.headers)) == ("https://mcp.context7.com/mcp", {"X-Key": "c"})
    assert caplog.messages == []  # `dev`, `type` and `inputs` are VS Code's: not misspellings


def test_a_vscode_input_tooltree_cannot_ask_for_names_the_input_its_description_and_how_to_give_it(
    tmp_path: Path,
) -> None:
    path = workspace(tmp_path, ".vscode", "mcp.json", VSCODE)
    (path.parent.parent / ".env").write_text("")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={"TOOLTREE_INPUT_CTX": "c"})
    assert str(info.value) == (
        f"{path}:16: servers.perplexity.env.PERPLEXITY_API_KEY: ${{input:perplexity-key}} ('Perplexity API Key', "
        'declared in "inputs" at line 4) is a value VS Code asks for when the server starts; tooltree cannot ask: '
        "set the environment variable TOOLTREE_INPUT_PERPLEXITY_KEY to it"
    )
    # Another server's input is needed only when that server is used.
    perplexity, context7 = load_config(path, environ={"TOOLTREE_INPUT_CTX": "c"}, using=["context7"]).servers
    assert context7.unresolved is None and dict(context7.headers) == {"X-Key": "c"}
    assert "TOOLTREE_INPUT_PERPLEXITY_KEY" in str(perplexity.unresolved)


def test_a_comment_or_trailing_comma_does_not_move_the_line_an_error_names(tmp_path: Path) -> None:
    text = (
        '{\n  /* a\n  long\n  comment */\n  "servers": {\n    // x\n    "a": {"command": "x",},\n'
        '    "b": {"command": "x", "args": "y"}\n  }\n}\n'
    )
    path = workspace(tmp_path, ".vscode", "mcp.json", text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:8: servers.b.args: expected a list of strings, got str 'y'"
    path.write_text(text.replace('"args": "y"}', '"args": "y" "z"}'))
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:8: invalid JSON: Expecting ',' delimiter (column 39)"
    path.write_text(text.replace("// x", "/* x"))
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:6: invalid JSON: a /* comment is not closed (*/)"


def test_vscode_settings_json_mcp_servers_are_read(tmp_path: Path) -> None:
    # Before VS Code 1.102 servers lived in settings.json under "mcp"; many servers' READMEs still say so.
    text = (
        '{\n  "editor.fontSize": 14,\n  "mcp": {\n'
        '    "servers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}\n  }\n}\n'
    )
    path = tmp_path / "settings.json"
    path.write_text(text)
    (git,) = load_config(path, environ={}).servers
    assert (git.command, git.args) == ("uvx", ("mcp-server-git",))


def test_cursor_mcp_json_reads_its_variables_and_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: "not a variable reference: '${env:GITHUB_TOKEN}'", and `envFile` was ignored without a word.
    text = json.dumps(
        {
            "mcpServers": {
                "github": {
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-github", "${workspaceFolder}"],
                    "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${env:GITHUB_TOKEN}"},
                    "envFile": "${userHome}/.cursor/github.env",
                },
                "context7": {"url": "https://mcp.context7.com/mcp", "headers": {"KEY": "${env:CONTEXT7_API_KEY}"}},
            }
        },
        indent=2,
    )
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "github.env").write_text("GITHUB_HOST=example.com\n")
    path = workspace(tmp_path, ".cursor", "mcp.json", text)
    environ = {"HOME": str(home), "GITHUB_TOKEN": "gt", "CONTEXT7_API_KEY": "ck"}
    github, context7 = load_config(path, environ=environ).servers
    assert github.args[-1] == str(path.parent.parent)
    assert dict(github.env) == {"GITHUB_HOST": "example.com", "GITHUB_PERSONAL_ACCESS_TOKEN": "gt"}
    assert dict(context7.headers) == {"KEY": "ck"}
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={**environ, "HOME": "/nowhere"})
    assert str(info.value) == (
        f"{path}:{line_of(text, 'envFile')}: mcpServers.github.envFile: cannot read the env file "
        "'/nowhere/.cursor/github.env': No such file or directory"
    )
    environ.pop("CONTEXT7_API_KEY")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ)
    assert str(info.value) == (
        f"{path}:{line_of(text, 'CONTEXT7_API_KEY')}: mcpServers.context7.headers.KEY: "
        "environment variable ${env:CONTEXT7_API_KEY} is not set"
    )
    # An env file's line that is not NAME=value is named in the env file.
    (home / ".cursor" / "github.env").write_text("GITHUB_HOST=example.com\nnot a variable\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={**environ, "CONTEXT7_API_KEY": "ck"})
    assert (
        str(info.value)
        == f"{home}/.cursor/github.env:2: expected NAME=value (the envFile of mcpServers.github.envFile)"
    )


def test_windsurf_server_url_is_the_servers_url(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Before: "mcpServers.remote: server needs `command` (stdio) or `url` (HTTP)": the whole file was refused.
    text = """{
  "mcpServers": {
    "remote": {"serverUrl": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
    "git": {"command": "uvx", "args": ["mcp-server-git"], "disabled": true, "alwaysAllow": ["git_status"],
            "disabledTools": ["git_reset"]}
  }
}"""
    path = tmp_path / "mcp_config.json"
    path.write_text(text)
    remote, git = load_config(path, environ={"TOKEN": "t"}).servers
    assert (remote.url, dict(remote.headers)) == ("https://mcp.example.com/mcp", {"Authorization": "Bearer t"})
    assert (git.enabled, git.exclude) == (False, ("git_reset",))
    assert caplog.messages == []
    path.write_text(text.replace("https://mcp.example.com/mcp", "mcp.example.com"))
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={"TOKEN": "t"})
    assert str(info.value) == (
        f"{path}:3: mcpServers.remote.serverUrl: expected an http:// or https:// URL, got 'mcp.example.com' (write "
        "https://mcp.example.com)"
    )


GEMINI = """\
{
  "theme": "Dracula",
  "mcp": {"allowed": ["pythonTools", "httpServer"]},
  "mcpServers": {
    "pythonTools": {
      "command": "python",
      "args": ["-m", "my_mcp_server", "--port", "8080"],
      "cwd": "./mcp-servers/python",
      "env": {"DATABASE_URL": "$DB_CONNECTION_STRING", "API_KEY": "${EXTERNAL_API_KEY}"},
      "timeout": 15000,
      "trust": true,
      "includeTools": ["safe_tool", "file_reader"],
      // "excludeTools": ["dangerous_tool", "file_deleter"],
      "excludeTools": ["file_reader"]
    },
    "httpServer": {
      "httpUrl": "http://localhost:3000/mcp",
      "headers": {"Authorization": "Bearer your-api-token"},
      "timeout": 5000
    }
  }
}
"""


def test_gemini_settings_are_read_with_http_url_millisecond_timeouts_and_bare_variables(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: its comment was "invalid JSON"; without it, `httpUrl` was "server needs `command` or `url`", and
    # "timeout": 15000 was 15,000 seconds (over 4 hours).
    path = workspace(tmp_path, ".gemini", "settings.json", GEMINI)
    environ = {"DB_CONNECTION_STRING": "db", "EXTERNAL_API_KEY": "key"}
    tools, http = load_config(path, environ=environ).servers
    assert dict(tools.env) == {"DATABASE_URL": "db", "API_KEY": "key"}  # Gemini CLI reads $VAR too
    assert tools.cwd == str(path.parent.parent / "mcp-servers" / "python")
    assert (tools.timeout, tools.include, tools.exclude) == (15.0, ("safe_tool", "file_reader"), ("file_reader",))
    assert (http.url, dict(http.headers), http.timeout) == (
        "http://localhost:3000/mcp",
        {"Authorization": "Bearer your-api-token"},
        5.0,
    )
    assert caplog.messages == [
        f"{path}:10: mcpServers.pythonTools.timeout: 15000 is Gemini CLI's milliseconds; tooltree reads it as 15 s",
        f"{path}:19: mcpServers.httpServer.timeout: 5000 is Gemini CLI's milliseconds; tooltree reads it as 5 s",
    ]
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={"EXTERNAL_API_KEY": "key"})
    assert str(info.value) == (
        f"{path}:9: mcpServers.pythonTools.env.DATABASE_URL: environment variable $DB_CONNECTION_STRING is not set"
    )


def test_a_gemini_entry_elsewhere_is_told_by_its_http_url_and_a_millisecond_looking_timeout_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "gemini.json"
    path.write_text('{"mcpServers": {"web": {"httpUrl": "http://h/mcp", "timeout": 30000}}}')
    assert load_config(path, environ={}).servers[0].timeout == 30.0
    caplog.clear()
    path = tmp_path / "cursor.json"
    path.write_text('{"mcpServers": {"a": {"command": "x",\n "timeout": 30000}}}')
    assert load_config(path, environ={}).servers[0].timeout == 30000.0
    assert caplog.messages == [
        f"{path}:2: mcpServers.a.timeout: 30000 is read as seconds (8.3 h); if it is in milliseconds (Gemini CLI's "
        "unit), write it in seconds, or keep the file as .gemini/settings.json"
    ]


CODEX = """\
model = "gpt-5"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "4000"]
cwd = "/srv/docs"
startup_timeout_sec = 20
tool_timeout_sec = 90
enabled_tools = ["search", "fetch"]
disabled_tools = ["fetch"]
env_vars = ["LANG", "NOT_SET_HERE"]

[mcp_servers.docs.env]
API_KEY = "k"

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
bearer_token_env_var = "FIGMA_OAUTH_TOKEN"
http_headers = { "X-Figma-Region" = "us-east-1" }
env_http_headers = { "X-Org" = "FIGMA_ORG" }
required = true

[mcp_servers.off]
command = "x"
enabled = false
"""


def test_codex_config_toml_is_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Before: "expected a mapping at the top level, got str 'model = "gpt-5" [mcp_servers.docs] …'".
    path = tmp_path / "config.toml"
    path.write_text(CODEX)
    environ = {"LANG": "C.UTF-8", "FIGMA_OAUTH_TOKEN": "ft", "FIGMA_ORG": "acme"}
    docs, figma, off = load_config(path, environ=environ).servers
    assert (docs.command, docs.args, docs.cwd) == ("docs-server", ("--port", "4000"), "/srv/docs")
    assert dict(docs.env) == {"LANG": "C.UTF-8", "API_KEY": "k"}
    assert docs.timeout == 90.0  # one timeout for the start and each call: the larger of Codex's two
    assert (docs.include, docs.exclude) == (("search", "fetch"), ("fetch",))
    assert figma.url == "https://mcp.figma.com/mcp" and figma.timeout == 60.0  # Codex's 60 s for a call
    assert dict(figma.headers) == {"X-Figma-Region": "us-east-1", "X-Org": "acme", "Authorization": "Bearer ft"}
    assert off.enabled is False
    assert caplog.messages == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ((), "18: mcp_servers.figma.bearer_token_env_var: environment variable ${{FIGMA_OAUTH_TOKEN}} is not set"),
        (
            ('args = ["--port", "4000"]', 'args = "--port 4000"'),
            "5: mcp_servers.docs.args: expected a list of strings, got str '--port 4000'\n{path}:18: "
            "mcp_servers.figma.bearer_token_env_var: environment variable ${{FIGMA_OAUTH_TOKEN}} is not set",
        ),
        (
            ("tool_timeout_sec = 90", 'tool_timeout_sec = "90"'),
            "8: mcp_servers.docs.tool_timeout_sec: expected a positive number, got '90'",
        ),
        (("cwd = ", "cwd == "), "6: invalid TOML: Invalid value (column 6)"),
    ],
)
def test_a_bad_codex_config_names_the_line_and_the_key_as_codex_writes_it(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX.replace(*change) if change else CODEX)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={"FIGMA_ORG": "acme"})
    assert str(info.value) == f"{path}:{expected.format(path=path)}"  # every server's error at once


def test_a_codex_config_without_servers_says_what_it_expected(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "gpt-5"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}: expected `[mcp_servers.NAME]` tables (Codex CLI's config.toml)"


ZED = """\
{
  "theme": "One Dark",
  "context_servers": {
    // as Zed's documentation writes one now
    "local-mcp-server": {"source": "custom", "enabled": true, "command": "some-command", "args": ["arg-1"], "env": {}},
    // as older settings files hold one
    "older": {"command": {"path": "uvx", "args": ["mcp-server-git"], "env": {"GIT": "1"}}, "settings": {}},
    "remote-mcp-server": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer <token>"}},
    "off": {"command": "x", "enabled": false},
    "mcp-server-github": {"source": "extension", "enabled": true, "settings": {"github_personal_access_token": "t"}},
  },
}
"""


def test_zed_context_servers_are_read_in_both_shapes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Before: "invalid JSON" (its comments); without them, "expected a top-level `mcpServers` object".
    path = workspace(tmp_path, ".zed", "settings.json", ZED)
    local, older, remote, off = load_config(path, environ={}).servers
    assert (local.command, local.args, local.enabled) == ("some-command", ("arg-1",), True)
    assert (older.command, older.args, dict(older.env)) == ("uvx", ("mcp-server-git",), {"GIT": "1"})
    assert (remote.url, dict(remote.headers)) == ("https://example.com/mcp", {"Authorization": "Bearer <token>"})
    assert off.enabled is False
    assert caplog.messages == [
        f'{path}:10: context_servers.mcp-server-github: a server a Zed extension starts (`"source": "extension"`); '
        "tooltree cannot start it: give it a `command` (and `args`) or a `url`; the server is left out"
    ]
    path.write_text(ZED.replace('"enabled": false', '"enabled": "no"'))
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:9: context_servers.off.enabled: expected true or false, got 'no'"


def test_a_misspelt_key_of_zeds_older_command_object_is_said(caplog: pytest.LogCaptureFixture) -> None:
    # Before: `arg` was dropped without a word, and the server started without its arguments.
    text = '{"context_servers": {"git": {\n"command": {"path": "uvx", "arg": ["mcp-server-git"], "timeout": 5}}}}'
    (server,) = parse_config(text, source=".zed/settings.json", environ={}).servers
    assert (server.command, server.args) == ("uvx", ())
    assert caplog.messages == [
        ".zed/settings.json:2: context_servers.git.command.arg: not a key tooltree reads; ignored (did you mean "
        "'args'?)"
    ]


def test_a_json_file_with_no_server_map_names_the_keys_each_client_uses() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('{"theme": "x"}', source="settings.json", environ={})
    assert str(info.value) == (
        "settings.json:1: expected a top-level `mcpServers` object (Claude, Cursor, Windsurf, Gemini CLI), `servers` "
        "(VS Code's mcp.json) or `context_servers` (Zed)"
    )


def test_a_key_close_to_one_tooltree_reads_is_said_and_other_clients_keys_are_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = (
        '{"servers": {"a": {"type": "stdio", "command": "x", "sandboxEnabled": true, "sandbox": {}, "envFiel": ".e"}}}'
    )
    parse_config(text, source="mcp.json", environ={})
    assert caplog.messages == [
        "mcp.json:1: servers.a.envFiel: not a key tooltree reads; ignored (did you mean 'envFile'?)"
    ]


def test_generate_tree_lists_the_tools_of_a_server_in_a_vscode_mcp_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (
        '{\n  // the workspace\'s server\n  "servers": {\n    "titled": {\n      "type": "stdio",\n'
        f'      "command": {json.dumps(sys.executable)},\n'
        '      "args": ["${workspaceFolder}/titled_server.py"],\n      "env": {"KEY": "${input:key}"},\n'
        '    },\n  },\n  "inputs": [{"type": "promptString", "id": "key", "description": "Key"}],\n}\n'
    )
    path = workspace(tmp_path, ".vscode", "mcp.json", text)
    (path.parent.parent / "titled_server.py").write_text((SERVERS / "titled_server.py").read_text())
    out = tmp_path / "tree"
    args = ["generate-tree", "--config", str(path), "--out", str(out), "--embeddings", "off"]
    monkeypatch.delenv("TOOLTREE_INPUT_KEY", raising=False)
    assert main(args) == 2
    assert "set the environment variable TOOLTREE_INPUT_KEY to it" in capsys.readouterr().err
    monkeypatch.setenv("TOOLTREE_INPUT_KEY", "k")
    assert main(args) == 0
    (server,) = Manifest.load(out).servers
    assert server.name == "titled"
    assert sorted(p.name for p in (out / "servers" / "titled").glob("*.py")) == [
        "__init__.py",
        "flush_cache.py",
        "ping_hosts.py",
    ]


def test_a_line_of_a_list_in_a_multi_line_codex_array_is_not_taken_for_a_table(tmp_path: Path) -> None:
    # Before: `["x"]` alone on its line was taken for the header `[x]`, and every key after it was said at its
    # table's line (here line 1, not 7).
    path = tmp_path / "config.toml"
    path.write_text(
        '[mcp_servers.a]\ncommand = "x"\nargs = [ # a [ in a comment\n  "]",\n["x"]\n]\nstartup_timeout_sec = -1\n'
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:7: mcp_servers.a.startup_timeout_sec: expected a positive number, got -1"


def test_gemini_include_tools_keeps_a_tool_named_with_arguments_as_gemini_cli_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Gemini CLI keeps a tool when an `includeTools` entry is its name or starts with `name(`; its `excludeTools`
    # matches names exactly. Before: `read_file(path)` kept no tool, and `write_file(x)` said nothing.
    path = workspace(
        tmp_path,
        ".gemini",
        "settings.json",
        '{"mcpServers": {"fs": {"command": "x", "includeTools": ["read_file(path)", "list_dir", "stat("],\n'
        '"excludeTools": ["write_file(x)"]}}}',
    )
    (fs,) = load_config(path, environ={}).servers
    assert [t for t in ("read_file", "list_dir", "stat", "read_file(path)", "write_file") if not fs.leaves_out(t)] == [
        "read_file",
        "list_dir",
        "stat",
    ]
    assert fs.named["read_file"] == ("includeTools", "read_file(path)")
    assert caplog.messages == [
        f"{path}:2: mcpServers.fs.excludeTools: 'write_file(x)': Gemini CLI matches these names exactly, so an entry "
        "with arguments leaves no tool out (tooltree does the same); write the tool's name alone"
    ]


@pytest.mark.parametrize(
    ("source", "text", "key"),
    [
        (
            "proj/.gemini/settings.json",
            '{"mcpServers": {"fs": {"command": "x",\n "includeTools": []}}}',
            "includeTools",
        ),
        ("config.toml", '[mcp_servers.fs]\ncommand = "x"\nenabled_tools = []\n', "enabled_tools"),
    ],
)
def test_an_empty_allow_list_of_tools_leaves_the_server_out_as_its_client_offers_none_of_its_tools(
    source: str, text: str, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: an empty list was no filter, and every tool of the server was offered.
    assert parse_config(text, source=source, environ={}).servers == ()
    prefix = "mcp_servers" if key == "enabled_tools" else "mcpServers"
    assert caplog.messages == [
        f"{source}:{2 if key == 'includeTools' else 3}: {prefix}.fs.{key}: an empty list, so the client offers none "
        "of the server's tools; the server is left out"
    ]


def test_a_gemini_entry_with_two_urls_or_a_url_and_a_command_connects_to_the_one_gemini_cli_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: "has both `url` and `httpUrl`; keep one" and "server has both `command` and `url`" refused a file
    # Gemini CLI runs (it takes `httpUrl`, then `url`, before `command`).
    text = (
        '{"mcpServers": {"a": {"httpUrl": "http://h/a", "url": "http://h/old"},\n'
        '"b": {"command": "x", "args": ["y"], "url": "http://h/b"}}}'
    )
    a, b = parse_config(text, source="proj/.gemini/settings.json", environ={}).servers
    assert (a.url, b.url, b.command, b.args) == ("http://h/a", "http://h/b", None, ())
    assert caplog.messages == [
        "proj/.gemini/settings.json:1: mcpServers.a: has both `httpUrl` and `url`; Gemini CLI connects to `httpUrl`, "
        "and so does tooltree",
        "proj/.gemini/settings.json:2: mcpServers.b: has both a URL and `command`; Gemini CLI connects to the URL and "
        "starts nothing, and so does tooltree (command, args ignored)",
    ]


def test_a_codex_command_and_cwd_are_paths_as_codex_runs_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Codex expands no `~` and runs a relative command from the server's cwd (seen with codex-cli 0.171: `~/bin/srv`
    # ran `./~/bin/srv` of the working folder). Before: `~` was the home folder, and `./bin/srv` was the working
    # folder's, not the cwd's.
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    monkeypatch.chdir(project)
    path = home / ".codex" / "config.toml"
    path.write_text(
        '[mcp_servers.a]\ncommand = "~/bin/srv"\n[mcp_servers.b]\ncommand = "./bin/srv"\ncwd = "/srv/other"\n'
        '[mcp_servers.c]\ncommand = "bin/srv"\ncwd = "~/x"\n'
    )
    a, b, c = load_config(path, environ={"HOME": str(home)}).servers
    assert (a.command, a.cwd) == (str(project / "~" / "bin" / "srv"), str(project))
    assert (b.command, b.cwd) == ("/srv/other/bin/srv", "/srv/other")
    assert (c.command, c.cwd) == (str(project / "~" / "x" / "bin" / "srv"), str(project / "~" / "x"))
    # tooltree's own file and Claude's keep the shell's `~`.
    (s,) = parse_config("servers:\n  s:\n    command: ~/bin/srv\n", environ={"HOME": "/h"}, folder=project).servers
    assert s.command == "/h/bin/srv"


def test_gemini_settings_mcp_allowed_and_excluded_leave_out_the_servers_gemini_cli_does_not_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: `mcp.allowed` and `mcp.excluded` were not read, and tooltree served the servers Gemini CLI never starts.
    text = (
        '{"mcp": {"allowed": ["a", "b"], "excluded": ["b"]},\n "mcpServers": {"a": {"command": "x"},\n'
        ' "b": {"command": "x"},\n "c": {"command": "x"}}}'
    )
    source = "proj/.gemini/settings.json"
    assert [s.name for s in parse_config(text, source=source, environ={}).servers] == ["a"]
    assert caplog.messages == [
        f"{source}:3: mcpServers.b: Gemini CLI does not start it (mcp.excluded names it); it is left out",
        f"{source}:4: mcpServers.c: Gemini CLI does not start it (mcp.allowed does not name it); it is left out",
    ]
    assert [s.name for s in parse_config(text, source=".mcp.json", environ={}).servers] == ["a", "b", "c"]
