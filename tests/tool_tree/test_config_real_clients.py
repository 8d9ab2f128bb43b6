"""``--config`` given the files that the real clients' own ``mcp add`` commands write: Claude Code (``claude mcp add``
in its local, project and user scopes, ``add-json``), Gemini CLI (``gemini mcp add``, project and user) and Codex
(``codex mcp add``), each run in a home and a project folder of the test's own. Each server is read as its client runs
it: command, args, env, url, headers, timeout, tool filters, the scope that wins, and the folder it starts in.

The clients are npm packages pinned in tests/real_servers/clients/ and installed by `make real-servers` into
``$TOOLTREE_REAL_SERVERS/clients``; without one, its test skips (``REQUIRE_REAL_SERVERS=1`` fails it). The tests
at the end need no client: they read the same shapes written out, for the rules those files showed.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, require_install
from tool_tree.config import ConfigError, ServerConfig, load_config, parse_config
from tooltree_cli.main import main

RUN_WAIT = 60
INSTALL_HINT = "run `make real-servers` (scripts/install-real-clients.sh) to install the MCP clients"
TITLED = REPO / "tests" / "servers" / "titled_server.py"
URL = "http://127.0.0.1:9/mcp"  # never connected to: only what the config reads is checked
RECORDER = f"""\
import json, os, runpy, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ran.json"), "w") as f:
    json.dump({{"cwd": os.getcwd(), "env": {{k: os.environ.get(k) for k in ("TOKEN", "FROM_ENV", "PRICE")}}}}, f)
sys.argv = [{str(TITLED)!r}]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
"""A stdio server that writes down (in ``ran.json`` beside it) the folder it started in and the variables it was given,
then is titled_server.py (tools ``ping_hosts`` and ``flush_cache``)."""


@pytest.fixture(scope="module")
def clients() -> Path:
    """``$TOOLTREE_REAL_SERVERS/clients``, installed; skips (or fails) without it."""
    root = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers")
    folder = root.resolve() / "clients"
    require_install(folder / ".stamp", "the MCP clients", INSTALL_HINT)
    return folder


def client(clients: Path, pattern: str, what: str) -> str:
    """The client's program matching ``pattern`` under ``clients``; skips (or fails) when an older install lacks it."""
    found = sorted(clients.glob(pattern))
    if not found:
        message = f"{what} is not installed in {clients}: {INSTALL_HINT}"
        if os.environ.get("REQUIRE_REAL_SERVERS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return str(found[0])


def run(argv: list[str], home: Path, cwd: Path, **extra: str) -> str:
    """``argv`` run in ``cwd`` with ``home`` as its home folder and no variable of the user's but PATH; its output."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=RUN_WAIT, check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout + done.stderr


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A home folder, a project folder (the working folder from here on) and the recorder server in it."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    recorder = project / "recorder.py"
    recorder.write_text(RECORDER, encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.setenv("HOME", str(home))
    return home, project, recorder


def generated(config: Path, out: Path, record: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, object]:
    """``tooltree generate-tree --config config --server titled`` with the variables ``env`` set: the tools it wrote
    and what the recorder server wrote in ``record``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = ["generate-tree", "--config", str(config), "--out", str(out), "--server", "titled", "--embeddings", "off"]
    assert main(args) == 0
    tools = sorted(p.stem for p in (out / "servers" / "titled").glob("*.py") if p.stem != "__init__")
    return {"tools": tools, **json.loads(record.read_text(encoding="utf-8"))}


def by_name(servers: tuple[ServerConfig, ...]) -> dict[str, ServerConfig]:
    return {s.name: s for s in servers}


CLAUDE_QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


@pytest.mark.real_servers
def test_claude_code_mcp_add_in_each_scope_is_read_as_claude_code_runs_it(
    clients: Path,
    places: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    claude = client(clients, "node_modules/@anthropic-ai/claude-code-*/claude", "Claude Code")
    home, project, recorder = places
    py, rec = sys.executable, str(recorder)

    def add(*args: str) -> str:
        return run([claude, "mcp", *args], home, project, **CLAUDE_QUIET)

    add("add", "titled", "-e", "TOKEN=abc", "-e", "FROM_ENV=${MY_TOKEN}", "--", py, rec, "--local")
    add("add", "-s", "user", "titled", "--", py, rec, "--user")
    add("add-json", "-s", "user", "js", json.dumps({"type": "stdio", "command": py, "args": [rec], "env": {"A": "1"}}))
    add("add", "-s", "project", "--transport", "http", "web", URL, "--header", "Authorization: Bearer xyz",
        "--header", "X-Api-Key: k1:v")  # fmt: skip
    add("add", "--transport", "sse", "old", "http://127.0.0.1:9/sse")
    user_file, project_file = home / ".claude.json", project / ".mcp.json"
    assert sorted(json.loads(user_file.read_text())["projects"][str(project)]["mcpServers"]) == ["old", "titled"]

    caplog.set_level(logging.WARNING, "tool_tree.config")
    servers = by_name(load_config(user_file, environ={"HOME": str(home), "MY_TOKEN": "tok"}).servers)
    assert sorted(servers) == ["js", "titled"]  # the SSE server is left out, with a warning
    assert "mcpServers.old.type: an SSE server" in caplog.text
    titled, js = servers["titled"], servers["js"]
    assert (titled.command, titled.args) == (py, (rec, "--local"))  # the local scope wins over the user's
    assert dict(titled.env) == {"TOKEN": "abc", "FROM_ENV": "tok"}
    assert dict(js.env) == {"A": "1"} and js.args == (rec,)
    assert titled.cwd == js.cwd == str(project)  # where Claude Code starts them (before: ~, the file's folder)
    (web,) = load_config(project_file, environ={}).servers
    assert (web.url, dict(web.headers)) == (URL, {"Authorization": "Bearer xyz", "X-Api-Key": "k1:v"})
    assert web.timeout == 30.0

    ran = generated(user_file, tmp_path / "tree", recorder.with_name("ran.json"), monkeypatch, MY_TOKEN="tok")
    assert ran == {
        "tools": ["flush_cache", "ping_hosts"],
        "cwd": str(project),
        "env": {"TOKEN": "abc", "FROM_ENV": "tok", "PRICE": None},
    }


GEMINI_QUIET = {
    "GEMINI_CLI_TRUST_WORKSPACE": "true",  # else a project's settings are not loaded, and each add keeps only its own
    "GEMINI_CLI_NO_RELAUNCH": "true",  # one process, not two (0.7 s a command instead of 1.5)
}


@pytest.mark.real_servers
def test_gemini_cli_mcp_add_is_read_as_gemini_cli_runs_it(
    clients: Path,
    places: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    gemini = client(clients, "node_modules/.bin/gemini", "Gemini CLI")
    home, project, recorder = places
    py, rec = sys.executable, str(recorder)

    def add(*args: str) -> str:
        return run([gemini, "mcp", "add", *args], home, project, **GEMINI_QUIET)

    add("titled", py, rec, "-e", "TOKEN=abc", "-e", "FROM_ENV=$MY_TOKEN", "--timeout", "15000",
        "--include-tools", "ping_hosts", "--include-tools", "flush_cache", "--exclude-tools", "flush_cache",
        "--description", "Recorded titled tools", "--trust")  # fmt: skip
    add("-t", "http", "web", URL, "-H", "Authorization: Bearer xyz", "-H", "X-Api-Key: k1:v", "--timeout", "5000")
    add("-t", "sse", "old", "http://127.0.0.1:9/sse")
    add("-s", "user", "titled", py, rec, "--user")
    # Written as one name, which Gemini CLI compares whole with each tool's: it offers none of them.
    add("-s", "user", "commas", py, rec, "--include-tools", "ping_hosts,flush_cache")
    project_file, user_file = project / ".gemini" / "settings.json", home / ".gemini" / "settings.json"

    caplog.set_level(logging.WARNING, "tool_tree.config")
    servers = by_name(load_config(project_file, environ={"HOME": str(home), "MY_TOKEN": "tok"}).servers)
    assert sorted(servers) == ["titled", "web"]
    titled, web = servers["titled"], servers["web"]
    assert (titled.command, titled.args, titled.cwd) == (py, (rec,), str(project))
    assert dict(titled.env) == {"TOKEN": "abc", "FROM_ENV": "tok"}  # Gemini CLI's $VAR
    assert titled.timeout == 15.0  # milliseconds
    assert (titled.include, titled.exclude) == (("ping_hosts", "flush_cache"), ("flush_cache",))
    assert titled.description == "Recorded titled tools"
    assert (web.url, dict(web.headers), web.timeout) == (URL, {"Authorization": "Bearer xyz", "X-Api-Key": "k1:v"}, 5.0)
    assert "mcpServers.old.type: an SSE server" in caplog.text

    user = by_name(load_config(user_file, environ={"HOME": str(home)}).servers)
    assert user["titled"].args == (rec, "--user")
    assert user["titled"].cwd == str(project)  # where Gemini CLI starts a user's server (before: ~/.gemini)
    assert user["commas"].include == ("ping_hosts,flush_cache",)
    assert user["commas"].leaves_out("ping_hosts") == "include"  # Gemini CLI matches whole names: none

    ran = generated(project_file, tmp_path / "tree", recorder.with_name("ran.json"), monkeypatch, MY_TOKEN="tok")
    assert ran == {
        "tools": ["ping_hosts"],
        "cwd": str(project),
        "env": {"TOKEN": "abc", "FROM_ENV": "tok", "PRICE": None},
    }


@pytest.mark.real_servers
def test_codex_mcp_add_is_read_as_codex_runs_it(
    clients: Path, places: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex = client(clients, "node_modules/.bin/codex", "Codex")
    home, project, recorder = places
    py, rec = sys.executable, str(recorder)

    def add(*args: str) -> str:
        return run([codex, "mcp", "add", *args], home, project)

    add("titled", "--env", "TOKEN=abc", "--env", "FROM_ENV=${MY_TOKEN}", "--env", "PRICE=$5", "--", py, rec)
    add("web", "--url", URL, "--bearer-token-env-var", "WEB_TOKEN")
    config = home / ".codex" / "config.toml"

    # Before: "mcp_servers.titled.env.FROM_ENV: environment variable ${MY_TOKEN} is not set"; Codex passes it on as is.
    servers = by_name(load_config(config, environ={"HOME": str(home), "WEB_TOKEN": "wt"}).servers)
    titled, web = servers["titled"], servers["web"]
    assert (titled.command, titled.args, titled.cwd) == (py, (rec,), str(project))  # before: ~/.codex
    assert dict(titled.env) == {"TOKEN": "abc", "FROM_ENV": "${MY_TOKEN}", "PRICE": "$5"}
    assert titled.timeout == web.timeout == 60.0  # Codex's 10 s start-up and 60 s a call
    assert (web.url, dict(web.headers)) == (URL, {"Authorization": "Bearer wt"})
    with pytest.raises(ConfigError, match=r"mcp_servers\.web\.bearer_token_env_var: environment variable"):
        load_config(config, environ={"HOME": str(home)})  # Codex does not start it either

    monkeypatch.setenv("WEB_TOKEN", "wt")
    ran = generated(config, tmp_path / "tree", recorder.with_name("ran.json"), monkeypatch, MY_TOKEN="tok")
    assert ran == {
        "tools": ["flush_cache", "ping_hosts"],
        "cwd": str(project),
        "env": {"TOKEN": "abc", "FROM_ENV": "${MY_TOKEN}", "PRICE": "$5"},
    }


# --- the same rules, on files written out (no client needed) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "name"),
    [("", ".claude.json"), (".gemini", "settings.json"), (".cursor", "mcp.json"), (".codex", "config.toml")],
)
def test_a_users_client_file_starts_its_servers_in_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, name: str
) -> None:
    # Before: in the folder of the file (~ or ~/.gemini), where Claude Code, Gemini CLI and Codex never start them.
    home, project = tmp_path / "home", tmp_path / "project"
    (home / folder).mkdir(parents=True, exist_ok=True)
    project.mkdir()
    path = home / folder / name
    if name == "config.toml":
        path.write_text('[mcp_servers.s]\ncommand = "./bin/s"\nargs = ["."]\n')
    else:
        path.write_text('{"mcpServers": {"s": {"command": "./bin/s", "args": ["."]}}}')
    monkeypatch.chdir(project)
    (server,) = load_config(path, environ={"HOME": str(home)}).servers
    assert (server.cwd, server.command, server.args) == (str(project), str(project / "bin" / "s"), (".",))


def test_a_workspaces_codex_file_starts_its_servers_in_the_workspace(tmp_path: Path) -> None:
    path = tmp_path / "home" / "project" / ".codex" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[mcp_servers.s]\ncommand = "s"\n')
    (server,) = load_config(path, environ={"HOME": str(tmp_path / "home")}).servers
    assert server.cwd == str(path.parent.parent)


def test_a_dollar_in_a_codex_config_is_text(tmp_path: Path) -> None:
    # Before: `${MY_TOKEN}` was looked up (and refused the file, unset), `$$` became `$`, `${A:?x}` was refused.
    text = (
        '[mcp_servers.s]\ncommand = "s$$"\nargs = ["${A:?x}", "$HOME"]\ncwd = "/srv/$d"\n'
        'env = { FROM_ENV = "${MY_TOKEN}", PRICE = "$5" }\nenv_vars = ["FORWARDED"]\n\n'
        '[mcp_servers.w]\nurl = "http://h/$x"\nhttp_headers = { X = "a$$b" }\nenv_http_headers = { Y = "Y_VAR" }\n'
    )
    s, w = parse_config(text, source="config.toml", environ={"FORWARDED": "f", "Y_VAR": "y", "HOME": "/h"}).servers
    assert (s.command, s.args, s.cwd) == ("s$$", ("${A:?x}", "$HOME"), "/srv/$d")
    assert dict(s.env) == {"FORWARDED": "f", "FROM_ENV": "${MY_TOKEN}", "PRICE": "$5"}
    assert (w.url, dict(w.headers)) == ("http://h/$x", {"X": "a$$b", "Y": "y"})
