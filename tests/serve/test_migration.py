"""Moving a Claude Code user's servers behind tooltree: tooltree added to the ``.mcp.json`` it reads, and Claude Code
told by its own settings not to start the others (README: "Moving your servers behind tooltree").

The first test runs the real Claude Code (an npm package pinned in tests/real_servers/clients/, installed by
`make real-servers` into ``$TOOLTREE_REAL_SERVERS/clients``; without it the test skips, ``REQUIRE_REAL_SERVERS=1``
fails it) in a home folder of its own, headless against the project's fake Messages API. The others need no client:
`tooltree serve` warns when Claude Code also starts the servers it serves, and says which setting stops it.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sandbox.config import OWNER_ENV
from tests.serve.conftest import processes_with
from tests.serve.test_real_clients import INSTALL_HINT, RUN_WAIT, claude, claude_env, tool_results
from tests.support import REPO, SAMPLE_SERVERS, require_install, run_owner, wait_until
from tool_tree.config import load_config
from tooltree_cli.main import main

TITLED = REPO / "tests" / "servers" / "titled_server.py"
SERVERS = {
    "titled": {"command": sys.executable, "args": [str(TITLED)]},  # ping_hosts, flush_cache
    "docs": {"command": sys.executable, "args": [str(SAMPLE_SERVERS / "docs.py")]},  # search_documents, ...
}
DISABLED = {"enabledMcpjsonServers": ["tooltree"], "disabledMcpjsonServers": ["titled", "docs"]}
WARNING = "tooltree serve: warning: "


def project_with_tooltree(folder: Path, tooltree: dict[str, Any]) -> Path:
    """``folder/.mcp.json`` listing the two servers and tooltree (``tooltree``: its entry); the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"mcpServers": {**SERVERS, "tooltree": tooltree}}
    (folder / ".mcp.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def write_settings(project: Path, settings: dict[str, Any], name: str = "settings.local.json") -> None:
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / name).write_text(json.dumps(settings), encoding="utf-8")


@pytest.fixture(scope="module")
def clients() -> Path:
    """``$TOOLTREE_REAL_SERVERS/clients``, installed; skips (or fails) without it."""
    root = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers")
    folder = root.resolve() / "clients"
    require_install(folder / ".stamp", "the MCP clients", INSTALL_HINT)
    return folder


def owned_processes(owner: str) -> list[int]:
    """Pids of the live processes started with ``$TOOLTREE_SANDBOX_OWNER`` set to ``owner``."""
    return processes_with(OWNER_ENV, owner)


def mcp_servers_offered(requests: list[dict[str, Any]]) -> set[str]:
    """The MCP servers whose tools Claude Code offered the model (by name, deferred or loaded) in ``requests``."""
    return set(re.findall(r"mcp__([A-Za-z0-9-]+)__", json.dumps(requests)))  # deferred ones: "\nmcp__docs__…"


def use_tooltree(body: dict[str, Any]) -> dict[str, Any]:
    """A model that loads tooltree's list_files and search_tools, lists the tree's servers, searches, and answers."""
    from agent.testing import reply, tool_use

    if not body.get("tools"):  # a side request (no tools)
        return reply("ok")
    steps = [
        ("ToolSearch", {"query": "select:mcp__tooltree__list_files,mcp__tooltree__search_tools"}),
        ("mcp__tooltree__list_files", {"path": "servers"}),
        ("mcp__tooltree__search_tools", {"query": "ping every host on the network"}),
    ]
    done = len(tool_results(body))
    return reply(tool_use(*steps[done]) if done < len(steps) else "done")


@pytest.mark.docker
@pytest.mark.real_servers
@pytest.mark.anyio
async def test_claude_code_starts_only_tooltree_which_serves_the_servers_it_was_told_not_to_start(
    clients: Path, tmp_path: Path, docker_engine: Any
) -> None:
    import anyio

    from agent.testing import FakeMessagesAPI
    from sandbox.prune import remove_containers, remove_volumes

    owner = run_owner(f"migration-{os.getpid()}")
    entry = {"command": sys.executable, "args": ["-m", "tooltree_cli.main", "serve", "--config", ".mcp.json",
             "--tree", "tree"], "env": {"TOOLTREE_SANDBOX_OWNER": owner}}  # fmt: skip
    project = project_with_tooltree(tmp_path / "project", entry).resolve()
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    trusted = {"projects": {str(project): {"hasTrustDialogAccepted": True}}}  # as after `claude`'s trust dialog
    (home / ".claude" / ".claude.json").write_text(json.dumps(trusted), encoding="utf-8")

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = claude_env(home, ANTHROPIC_API_KEY="sk-fake", **extra)
        return subprocess.run([claude(clients), *args], capture_output=True, text=True, env=env, cwd=project,
                              timeout=RUN_WAIT, check=False)  # fmt: skip

    async def headless(tools: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
        with FakeMessagesAPI([use_tooltree] * 10) as api:
            done = await anyio.to_thread.run_sync(
                lambda: run("-p", "Which hosts answer?", "--allowedTools", tools, ANTHROPIC_BASE_URL=api.base_url)
            )
            return done, list(api.requests)

    try:
        # Before: Claude Code offers the model each server's own tools besides tooltree's.
        ran, requests = await headless("ToolSearch")
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert mcp_servers_offered(requests) == {"tooltree", "titled", "docs"}

        write_settings(project, DISABLED)
        listed = run("mcp", "list")
        assert listed.returncode == 0, listed.stderr
        lines = [line for line in listed.stdout.splitlines() if ": " in line and " - " in line]
        assert len(lines) == 1 and lines[0].startswith("tooltree:") and "Connected" in lines[0], listed.stdout
        got = run("mcp", "get", "titled")
        assert "Rejected (see disabledMcpjsonServers in settings)" in got.stdout, got.stdout + got.stderr

        allowed = "ToolSearch,mcp__tooltree__list_files,mcp__tooltree__search_tools"
        ran, requests = await headless(allowed)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert mcp_servers_offered(requests) == {"tooltree"}  # the servers' own tools reach the model no more
        _, files, found = tool_results(requests[-1])  # and tooltree, reading the same .mcp.json, serves them
        assert "titled/" in files and "docs/" in files, files
        assert "titled.ping_hosts" in found, found
    finally:  # Claude Code has stopped tooltree, which may still be closing its sandboxes
        wait_until(lambda: not owned_processes(owner), "the tooltree serve processes to exit")
        remove_containers(docker_engine, label=f"tooltree.owner={owner}")
        remove_volumes(docker_engine, label=f"tooltree.owner={owner}")


TOOLTREE_ENTRY = {"command": "tooltree", "args": ["serve", "--config", ".mcp.json", "--tree", "tree"]}


def serve_warnings(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The warnings `tooltree serve --config config` prints before it finds no tree to serve (and exits 2)."""
    capsys.readouterr()
    assert main(["serve", "--config", str(config), "--tree", str(tmp_path / "no-tree"), "--no-regenerate"]) == 2
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(WARNING)]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose ``.mcp.json`` lists two servers and tooltree (the working folder)."""
    folder = project_with_tooltree(tmp_path / "project", TOOLTREE_ENTRY)
    monkeypatch.chdir(folder)
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # Claude Code's own ~/.claude.json: none unless written
    return folder


def disable(state: Path, project: Path, names: Any) -> None:
    """Write ``state`` (Claude Code's ``.claude.json``) as `/mcp disable` leaves it: ``names`` under the project."""
    state.parent.mkdir(parents=True, exist_ok=True)
    entry = {"hasTrustDialogAccepted": True, "disabledMcpServers": names}
    history = {"history": [{"display": "x" * 100}] * 50}  # what else Claude Code keeps there, scanned not read
    state.write_text(json.dumps({"projects": {str(project.resolve()): {**history, **entry}}}), encoding="utf-8")


def test_serve_warns_that_claude_code_also_starts_the_servers_of_its_mcp_json(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (warning,) = serve_warnings(Path(".mcp.json"), tmp_path, capsys)
    assert "Claude Code also starts 2 of its server(s) directly" in warning
    assert 'add "disabledMcpjsonServers": ["titled", "docs"] to .claude/settings.local.json' in warning
    assert "Moving your servers behind tooltree" in warning


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        (DISABLED, "settings.local.json"),
        ({"disabledMcpjsonServers": ["titled", "docs"]}, "settings.json"),  # the team's
        ({"deniedMcpServers": [{"serverName": "titled"}, {"serverName": "docs"}]}, "settings.local.json"),
    ],
)
def test_serve_says_nothing_once_claude_code_starts_none_of_them_and_still_serves_them(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: dict[str, Any], name: str
) -> None:
    write_settings(project, settings, name)
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []
    # tooltree reads the file's servers whatever Claude Code's settings say: the point is that it serves them
    assert [s.name for s in load_config(".mcp.json").enabled_servers] == ["titled", "docs"]


def test_serve_names_only_the_servers_claude_code_still_starts(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(project, {"disabledMcpjsonServers": "titled"})  # one name as a string: Claude Code takes it too
    (warning,) = serve_warnings(Path(".mcp.json"), tmp_path, capsys)
    assert "starts 1 of its server(s)" in warning and '"disabledMcpjsonServers": ["docs"]' in warning


@pytest.mark.parametrize("config_dir", [False, True])
def test_serve_says_nothing_of_the_servers_disabled_for_the_project_with_mcp_disable(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, config_dir: bool
) -> None:
    # Before: a server the user stopped with Claude Code's `/mcp disable` was still named as started twice.
    state = tmp_path / "home" / ".claude.json"
    if config_dir:
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
        state = tmp_path / "claude" / ".claude.json"
    disable(state, project, ["titled"])
    (warning,) = serve_warnings(Path(".mcp.json"), tmp_path, capsys)
    assert "starts 1 of its server(s)" in warning and '"disabledMcpjsonServers": ["docs"]' in warning
    disable(state, project, ["titled", "docs"])
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []


def test_serve_without_a_home_folder_says_nothing_of_mcp_disable_and_runs_on(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No HOME and no passwd entry (a bare UID in a container): before, Path.home()'s RuntimeError was serve's exit 70.
    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME")
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []  # where Claude Code keeps its state is unknown


def test_mcp_disable_is_read_from_the_entry_of_the_git_work_trees_root_as_claude_code_keys_it(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Claude Code run in a folder of a git work tree keeps its state under the tree's root; of a linked worktree,
    # under the main one's (checked with `claude mcp list` in each).
    state = tmp_path / "home" / ".claude.json"
    (project / ".git").mkdir()
    (project / "sub").mkdir()
    monkeypatch.chdir(project / "sub")
    disable(state, project / "sub", ["titled", "docs"])  # an entry Claude Code does not read here
    assert len(serve_warnings(project / ".mcp.json", tmp_path, capsys)) == 1
    disable(state, project, ["titled", "docs"])
    assert serve_warnings(project / ".mcp.json", tmp_path, capsys) == []
    linked = project_with_tooltree(tmp_path / "linked", TOOLTREE_ENTRY)
    (project / ".git" / "worktrees" / "linked").mkdir(parents=True)
    (project / ".git" / "worktrees" / "linked" / "commondir").write_text("../..\n", encoding="utf-8")
    (linked / ".git").write_text(f"gitdir: {project / '.git' / 'worktrees' / 'linked'}\n", encoding="utf-8")
    monkeypatch.chdir(linked)
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []  # the main work tree's entry
    disable(state, linked, ["titled", "docs"])
    assert len(serve_warnings(Path(".mcp.json"), tmp_path, capsys)) == 1


def test_a_worktree_whose_commondir_is_a_symlink_loop_is_keyed_by_its_own_folder(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: Path.resolve()'s RuntimeError on the loop was serve's exit 70.
    (project / "gitdir").mkdir()
    (project / "gitdir" / "loop").symlink_to("loop")
    (project / "gitdir" / "commondir").write_text("loop/x\n", encoding="utf-8")
    (project / ".git").write_text("gitdir: gitdir\n", encoding="utf-8")
    assert len(serve_warnings(Path(".mcp.json"), tmp_path, capsys)) == 1
    disable(tmp_path / "home" / ".claude.json", project, ["titled", "docs"])
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []


def test_mcp_disable_is_honoured_for_the_servers_of_claude_json_too_but_only_as_a_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(project)
    user_file = home / ".claude.json"
    entry = {"command": "/opt/tooltree/.venv/bin/tooltree", "args": ["serve", "--config", str(user_file)]}
    servers = {"mcpServers": {**SERVERS, "tooltree": entry}}
    for names, warned in ((["titled", "docs", 7], False), ("titled", True)):  # Claude Code takes a list alone
        disable(user_file, project, names)
        text = json.loads(user_file.read_text(encoding="utf-8"))
        user_file.write_text(json.dumps({**servers, **text}), encoding="utf-8")
        assert len(serve_warnings(user_file, tmp_path, capsys)) == int(warned)


@pytest.mark.parametrize("how", ["fifo", "deep", "large", "twice"])
def test_a_claude_json_that_is_a_fifo_nests_without_end_is_too_large_or_repeats_a_key_is_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    from tool_tree import client_settings

    state, project = tmp_path / ".claude.json", tmp_path / "project"
    key = json.dumps(str(project))
    if how == "fifo":
        os.mkfifo(state)  # never waited on
    elif how == "deep":  # nesting past what the json module scans, in the project's own entry
        state.write_text(f'{{"projects": {{{key}: {{"x": {"[" * 100_000}{"]" * 100_000}}}}}}}', encoding="utf-8")
    elif how == "large":
        monkeypatch.setattr(client_settings, "MAX_JSON_CONFIG_BYTES", 1000)
        disable(state, project, ["titled"])
    else:  # JSON.parse keeps the last, the scanner cannot tell which Claude Code read
        twice = '{"disabledMcpServers": ["a"], "disabledMcpServers": ["b"]}'
        state.write_text(f'{{"projects": {{{key}: {twice}}}}}', encoding="utf-8")
    assert client_settings._disabled(state, project) is None
    state.unlink()
    assert client_settings._disabled(state, project) == set()  # none: Claude Code has disabled nothing


def test_serve_says_nothing_when_the_file_does_not_list_tooltree_or_the_settings_cannot_be_read(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(project, {})
    (project / ".claude" / "settings.local.json").write_text("{not json", encoding="utf-8")
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []  # Claude Code's choice is not known
    (project / ".claude" / "settings.local.json").unlink()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": SERVERS}), encoding="utf-8")
    assert serve_warnings(Path(".mcp.json"), tmp_path, capsys) == []  # tooltree is not Claude Code's server here


@pytest.mark.parametrize("config_dir", [False, True])
def test_serve_warns_of_the_user_scope_of_claude_json_until_the_servers_are_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], config_dir: bool
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    claude_dir = home / ".claude"
    claude_dir.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    if config_dir:  # the file and the settings both in $CLAUDE_CONFIG_DIR
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
        user_file, shown = claude_dir / ".claude.json", "~/.claude/settings.json"
    else:
        monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
        user_file, shown = home / ".claude.json", "~/.claude/settings.json"
    entry = {"command": "/opt/tooltree/.venv/bin/tooltree", "args": ["serve", "--config", str(user_file)]}
    text = {"mcpServers": {"titled": SERVERS["titled"], "tooltree": entry},
            "projects": {str(project.resolve()): {"mcpServers": {"docs": SERVERS["docs"]}}}}  # fmt: skip
    user_file.write_text(json.dumps(text), encoding="utf-8")
    (warning,) = serve_warnings(user_file, tmp_path, capsys)
    denied = '"deniedMcpServers": [{"serverName": "titled"}, {"serverName": "docs"}]'
    assert f"add {denied} to {shown}" in warning
    (claude_dir / "settings.json").write_text("{" + denied + "}", encoding="utf-8")
    assert serve_warnings(user_file, tmp_path, capsys) == []


@pytest.mark.parametrize("how", ["fifo", "deep"])
def test_a_settings_file_that_is_a_fifo_or_nests_without_end_is_no_answer_and_no_hang(tmp_path: Path, how: str) -> None:
    from tool_tree.client_settings import _json_object

    settings = tmp_path / "settings.local.json"
    if how == "fifo":
        os.mkfifo(settings)  # before: read_text waited for a writer for ever
    else:
        settings.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")  # before: RecursionError, exit 70
    assert _json_object(settings) is None
