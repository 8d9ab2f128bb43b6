"""Mistakes a new user makes while following the README, and the one line each gets back."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.support import REPO
from tooltree_cli.main import main


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``tooltree ARGV`` says when argparse refuses it (exit 2)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


def test_a_mistyped_option_names_the_command_its_usage_and_the_option_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before: "usage: tooltree [-h] [--debug] COMMAND ..." and "tooltree: error: unrecognized arguments: --chek",
    # the usage of the wrong parser and no hint.
    err = _refused(["generate-tree", "--chek"], capsys)
    assert err.startswith("usage: tooltree generate-tree ")
    assert err.endswith("tooltree generate-tree: error: unrecognized arguments: --chek (did you mean --check?)\n")
    err = _refused(["exec", "-c", "pass", "--tiemout=5"], capsys)
    assert err.endswith("tooltree exec: error: unrecognized arguments: --tiemout=5 (did you mean --timeout?)\n")
    err = _refused(["sandbox", "prune", "--owner", "x", "--everything"], capsys)
    assert err.startswith("usage: tooltree sandbox prune ")
    assert err.endswith("tooltree sandbox prune: error: unrecognized arguments: --everything\n")


def test_an_option_given_before_its_command_says_to_put_it_after(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(["--json", "search", "leads"], capsys)
    assert err.endswith(
        "tooltree search: error: unrecognized arguments: --json (an option of `tooltree search`: "
        "put it after the command)\n"
    )


@pytest.mark.parametrize(
    ("argv", "command", "given"),
    [
        (["--config", "tooltree.yaml", "generate-tree", "--check"], "generate-tree", "--config tooltree.yaml"),
        (["--debug", "--tree", "tree", "exec", "-c", "pass"], "exec", "--tree tree"),
    ],
)
def test_an_option_given_before_its_command_with_its_value_says_to_put_it_after(
    argv: list[str], command: str, given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: argparse took the value for the command: "tooltree: error: argument COMMAND: invalid choice:
    # 'tooltree.yaml' (choose from 'generate-tree', 'search', …)", with tooltree's usage.
    err = _refused(argv, capsys)
    assert err.startswith(f"usage: tooltree {command} ")
    assert err.endswith(
        f"tooltree {command}: error: unrecognized arguments: {given} (an option of `tooltree {command}`: "
        "put it after the command)\n"
    )


def test_an_unquoted_query_or_task_is_told_to_be_quoted(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(["search", "export", "leads", "filtered", "--limit", "3"], capsys)
    assert err.endswith(
        "tooltree search: error: unrecognized arguments: leads filtered "
        '(a query of several words goes in quotes: "export leads filtered")\n'
    )
    err = _refused(["agent", "Copy", "the", "transcript", "--dry-run"], capsys)
    assert err.endswith(
        "tooltree agent: error: unrecognized arguments: the transcript "
        '(a task of several words goes in quotes: "Copy the transcript")\n'
    )


@pytest.mark.parametrize("option", [["--port", "9000"], ["--host", "127.0.0.2"], ["--allow-remote"]])
def test_an_http_option_without_http_is_refused_instead_of_serving_stdio(
    option: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `tooltree serve --port 9000 ...` served stdio, ignoring the port, and waited on the terminal.
    monkeypatch.chdir(tmp_path)
    assert main(["serve", *option, "--no-regenerate", "--tree", str(tmp_path / "tree")]) == 2
    name = option[0]
    assert capsys.readouterr().err == (
        f"tooltree: error: {name} is an option of --http; add --http to serve Streamable HTTP (without it, "
        "serve speaks MCP over stdin and stdout)\n"
    )


def _tree(folder: Path) -> Path:
    """A tree of one server generated offline from its stored tools/list result."""
    snapshots = folder / "snaps"
    snapshots.mkdir()
    tool = {"name": "send_email", "description": "Send an email.", "inputSchema": {"type": "object"}}
    (snapshots / "mail.json").write_text(json.dumps({"server": "mail", "info": {}, "tools": [tool]}), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tree), "--json"]) == 0
    return tree


def test_serve_over_stdio_typed_at_a_terminal_says_it_waits_for_a_client(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `tooltree serve --config tooltree.yaml` at a terminal printed nothing and seemed to hang.
    tree = _tree(tmp_path)
    capsys.readouterr()
    leader, follower = pty.openpty()  # the user's terminal as its stdin
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--no-regenerate", "--tree", str(tree), "--warm", "0"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen(argv, stdin=follower, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=tmp_path, env=env) as proc:  # fmt: skip
        os.close(follower)
        assert proc.stderr is not None
        stderr, lines = proc.stderr, []
        said = threading.Event()

        def read() -> None:
            for line in stderr:
                lines.append(line)
                if "waiting for an MCP client" in line:
                    said.set()
            said.set()  # it ended without saying so

        threading.Thread(target=read, daemon=True).start()
        try:
            said.wait(60)
        finally:
            proc.terminate()  # the note may come before its signal handling starts: the exit code is not checked
            proc.wait(timeout=60)
            os.close(leader)
    # First, but for the warning that no config names the tree's server (`mail`: generated from a snapshot).
    assert [line for line in lines if "warning:" not in line][:1] == [
        "tooltree serve: waiting for an MCP client on stdin (an MCP client starts this command itself, e.g. "
        "`claude mcp add tooltree -- tooltree serve ...`; to try it by hand, add --http); Ctrl-C stops it\n"
    ]


def test_a_tree_option_naming_a_folder_inside_the_tree_says_which_tree_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `--tree tree/servers` (the folder of the stubs the README lists) was told to run
    # `tooltree generate-tree --out tree/servers` first, a tree inside the tree, which generate-tree then refuses.
    from tests.support import sample_config_yaml

    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off", "--json"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    assert main(["search", "leads", "--tree", "tree/servers"]) == 2
    said = "a folder inside a tree, not a tree itself: pass --tree"
    assert capsys.readouterr().err == f"tooltree: error: tree/servers: {said} tree\n"
    assert main(["exec", "-c", "pass", "--config", str(config), "--tree", "tree/servers/crm"]) == 2
    assert capsys.readouterr().err == f"tooltree: error: tree/servers/crm: {said} tree\n"
    monkeypatch.chdir(tree)
    assert main(["exec", "-c", "pass", "--config", str(config), "--tree", "snapshots"]) == 2
    assert capsys.readouterr().err == f"tooltree: error: snapshots: {said} .\n"
    assert main(["search", "leads", "--tree", str(tmp_path / "elsewhere")]) == 2  # no tree around it: as before
    assert "no tree there (no such folder)" in capsys.readouterr().err
