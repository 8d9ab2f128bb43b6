"""An unexpected error (an exception no command handled: a bug) exits 70, a status no command gives an outcome.

Before: exit 1, which `generate-tree --check` uses for drift, `exec` for a failed script and `agent` for a run a
limit ended, so a script or CI job could not tell a crash from one of those.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tooltree_cli
from tests.support import REPO, sample_config_yaml
from tooltree_cli.common import EXIT_UNEXPECTED, UNEXPECTED_HELP
from tooltree_cli.main import build_parser, main

# A command run in a fresh interpreter with one library function replaced by one that fails as a bug would.
BROKEN = """
import importlib, sys
module, name, entry = sys.argv[1:4]
def broken(*args, **kwargs):
    raise RuntimeError("a bug")
setattr(importlib.import_module(module), name, broken)
import tooltree_cli.main
sys.exit(getattr(tooltree_cli.main, entry)(sys.argv[4:]))
"""


def run_broken(
    cwd: Path, target: str, entry: str, *argv: str, debug_env: bool = False
) -> subprocess.CompletedProcess[str]:
    module, name = target.rsplit(".", 1)
    env = {k: v for k, v in os.environ.items() if k != "TOOLTREE_DEBUG"}
    if debug_env:
        env["TOOLTREE_DEBUG"] = "1"
    return subprocess.run(
        [sys.executable, "-c", BROKEN, module, name, entry, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tooltree.yaml").write_text(sample_config_yaml("crm"), encoding="utf-8")
    (tmp_path / "tree").mkdir()  # a tree to search (its index is never read: loading it is what breaks)
    (tmp_path / "tree/manifest.json").write_text("{}", encoding="utf-8")
    return tmp_path


def test_generate_tree_check_that_crashes_exits_70_not_the_drift_status(project: Path) -> None:
    # The CI case: `generate-tree --check` exits 1 for drift; a crash must not read as drift.
    done = run_broken(project, "generator.generate.generate", "generate_tree_main", "--check")
    assert done.returncode == EXIT_UNEXPECTED == 70, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last == "tooltree: error: RuntimeError: a bug (unexpected: run with --debug for the traceback)"
    assert "Traceback" not in done.stderr


def test_a_tooltree_command_that_crashes_exits_70(project: Path) -> None:
    done = run_broken(project, "tool_tree.search.load_index", "main", "search", "leads", "--tree", "tree")
    assert done.returncode == 70, done.stderr
    assert done.stdout == ""
    assert done.stderr == "tooltree: error: RuntimeError: a bug (unexpected: run with --debug for the traceback)\n"


@pytest.mark.parametrize(
    ("argv", "debug_env"),
    [
        (["search", "leads", "--debug"], False),
        (["--debug", "search", "leads"], False),
        (["search", "leads"], True),  # TOOLTREE_DEBUG=1
    ],
)
def test_debug_shows_the_traceback_instead(project: Path, argv: list[str], debug_env: bool) -> None:
    done = run_broken(project, "tool_tree.search.load_index", "main", *argv, debug_env=debug_env)
    assert "Traceback (most recent call last):" in done.stderr
    assert f'{Path("tooltree_cli", "search_cmd.py")}", line ' in done.stderr  # through the command's handler
    assert done.stderr.endswith(", in broken\nRuntimeError: a bug\n")
    assert "tooltree: error:" not in done.stderr and done.returncode != 0


def test_in_process_the_status_is_70_and_the_line_names_the_exception(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooltree_cli import agent_cmd

    def unexpected(args: argparse.Namespace) -> int:
        raise KeyError("model")

    monkeypatch.setattr(agent_cmd, "run", unexpected)
    assert main(["agent", "a task"]) == 70  # 1 would say "a limit ended the run"
    err = capsys.readouterr().err
    assert err == "tooltree: error: KeyError: 'model' (unexpected: run with --debug for the traceback)\n"


def test_no_command_gives_70_another_meaning() -> None:
    statuses: dict[str, int] = {}
    for info in pkgutil.iter_modules(tooltree_cli.__path__):
        module = vars(importlib.import_module(f"tooltree_cli.{info.name}"))
        statuses |= {f"{info.name}.{k}": v for k, v in module.items() if k.startswith("EXIT_") and isinstance(v, int)}
    assert len(statuses) > 15, statuses  # every command's statuses were found
    assert {name.split(".")[1] for name, value in statuses.items() if value == 70} == {"EXIT_UNEXPECTED"}


def every_help() -> list[tuple[str, str]]:
    """Each (sub)command's help text, whitespace folded."""
    texts, todo = [], [build_parser()]
    while todo:
        parser = todo.pop()
        texts.append((parser.prog, " ".join(parser.format_help().split())))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return texts


def test_standalone_generate_tree_help_lists_70(capsys: pytest.CaptureFixture[str]) -> None:
    from tooltree_cli.main import generate_tree_main

    with pytest.raises(SystemExit):
        generate_tree_main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"\bExit 0 ", text) and UNEXPECTED_HELP in text


LISTING = {
    "tooltree",
    "tooltree generate-tree",
    "tooltree agent",
    "tooltree serve",
    "tooltree exec",
    "tooltree sandbox prune",
}
"""The helps that list exit statuses (`tooltree`'s epilog says 70 for every command)."""


@pytest.mark.parametrize("prog", sorted(LISTING))
def test_every_help_that_lists_exit_statuses_lists_70(prog: str) -> None:
    helps = dict(every_help())
    listing = {p for p, text in helps.items() if re.search(r"\bExit \d", text)} | {"tooltree"}
    assert listing == LISTING  # a help that starts listing statuses is checked here too
    assert UNEXPECTED_HELP in helps[prog]


@pytest.mark.parametrize("command", ["generate-tree", "exec"])
def test_the_readmes_exit_codes_say_70(command: str) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    # The sentence right after the list of codes under the heading "Exit codes of `exec`".
    (after,) = re.findall(rf"^#+ Exit codes of `{command}`\n\n(?:- .*\n(?:  .*\n)*)+\n(.*?\.)(?: |$)", readme, re.M)
    bug = "(a bug: run with `--debug` and report the traceback)"
    assert after == f"Like every command, it exits 70 on an unexpected error {bug}."
