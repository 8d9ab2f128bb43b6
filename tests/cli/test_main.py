from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

import tool_tree.search as search
from tooltree_cli import search_cmd
from tooltree_cli.main import build_parser, main


def test_help_lists_every_command() -> None:
    text = build_parser().format_help()
    for command in ("generate-tree", "search", "exec", "image", "sandbox", "agent"):
        assert command in text


def test_every_commands_help_says_what_it_does() -> None:
    # Before: `tooltree sandbox prune --help` and `tooltree image name --help` showed only their options.
    def commands(parser: argparse.ArgumentParser, name: str) -> list[tuple[str, argparse.ArgumentParser]]:
        found = [(name, parser)]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    found += commands(child, f"{name} {sub}")
        return found

    said = {name: parser.description for name, parser in commands(build_parser(), "tooltree")}
    assert [name for name, description in said.items() if not description] == []


def test_the_cli_copies_of_search_constants_match_the_search_package() -> None:
    assert tuple(search_cmd.DETAILS) == tuple(search.DETAILS)
    assert (search_cmd.MIN_LIMIT, search_cmd.MAX_LIMIT) == (search.MIN_LIMIT, search.MAX_LIMIT)


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage: tooltree" in capsys.readouterr().err


def test_starting_the_cli_does_not_import_the_heavy_packages() -> None:
    code = "import sys, tooltree_cli.main; print(sorted(m for m in ('mcp', 'anthropic', 'yaml', 'jsonschema', "
    code += "'generator.render', 'tool_tree.search', 'sandbox.session') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_generate_tree_script_takes_the_same_options(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from tooltree_cli.main import generate_tree_main

    with pytest.raises(SystemExit) as info:
        generate_tree_main(["--help"])
    assert info.value.code == 0
    assert "--from-snapshot" in capsys.readouterr().out


def test_agent_compare_help_names_every_mode_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from agent.defaults import MODES

    with pytest.raises(SystemExit):
        main(["agent", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")
    assert f"default: {','.join(MODES)})" in text
    for mode in MODES:
        assert mode in text.split("Run a task with Claude.")[1].split("Needs ANTHROPIC_API_KEY")[0]
    args = build_parser().parse_args(["agent", "t", "--compare"])
    assert args.compare.split(",") == list(MODES)


def test_a_reader_that_leaves_early_ends_the_command_quietly() -> None:
    # `tooltree search ... | head`: before, "tooltree: error: BrokenPipeError: [Errno 32] Broken pipe" and exit 1.
    code = (
        "import argparse, sys\nfrom tooltree_cli.main import _dispatch\n"
        "def flood(args):\n    for _ in range(1000):\n        print('x' * 1000)\n    return 0\n"
        "sys.exit(_dispatch(argparse.ArgumentParser(), argparse.Namespace(handler=flood)))\n"
    )
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first line
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141 and err == ""


def test_debug_is_taken_after_any_command_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: an error said "run with --debug for the traceback", and `tooltree exec ... --debug` was refused as an
    # unrecognized argument (only `tooltree --debug exec ...` worked).
    import argparse

    from tooltree_cli import exec_cmd

    def unexpected(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(exec_cmd, "run", unexpected)
    assert main(["exec", "-c", "pass"]) == 70
    err = capsys.readouterr().err
    assert err == "tooltree: error: RuntimeError: a bug (unexpected: run with --debug for the traceback)\n"
    for argv in (["exec", "-c", "pass", "--debug"], ["--debug", "exec", "-c", "pass"]):
        with pytest.raises(RuntimeError, match="a bug"):
            main(argv)
    found, todo = [], [build_parser()]
    while todo:  # every command and subcommand has it
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    assert len(found) > 8 and [p.prog for p in found if "--debug" not in p._option_string_actions] == []
    assert build_parser().parse_args(["image", "build", "--debug"]).debug is True
    assert build_parser().parse_args(["--debug", "image", "build"]).debug is True  # not undone by the subcommand
    assert build_parser().parse_args(["image", "build"]).debug is False


@pytest.mark.parametrize("script", ["tooltree", "generate-tree"])
def test_a_ctrl_c_while_the_commands_import_is_one_line_and_exit_130(script: str) -> None:
    # Before: the console script's `from tooltree_cli.main import main` imported every command, so a Ctrl-C in the
    # first tenths of a second printed a traceback of an import. The interrupt is made to land in the import of a
    # command's module (as it does when a user presses Ctrl-C at once), through the entry point pyproject names.
    import tomllib
    from pathlib import Path

    entry = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"][script]
    module, function = entry.split(":")
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'tooltree_cli.generate_cmd':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        f"from {module} import {function} as entry\n"
        "sys.exit(entry(['--help']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (130, "tooltree: interrupted\n", "")
