"""SIGTERM to `tooltree exec` when the stopped script's result does not come in time: what the script printed as far
as the sandbox sent it and the tool calls it made are printed (``--json``: one object), then ``tooltree: terminated``
and exit 143. Before: only the workspace's notes, its output and calls lost.

`exec_cmd.execute` stands in for the sandbox here (what it raises is what `Sandbox.execute` gives a SIGTERM the
sandbox did not answer); `tests/cli/test_exec_interrupt.py` makes the same report with a real container (a second
Ctrl-C).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox.errors import Unreported
from sandbox.results import ToolCallRecord
from tests.support import sample_project
from tooltree_cli import exec_cmd
from tooltree_cli.main import main

UNREPORTED = Unreported(
    stdout="step 1 of 3\n",
    stderr="loading\n",
    tool_calls=(ToolCallRecord("crm", "list_leads", True, 20, 1_500, 12.0),),
    tool_calls_omitted=0,
)


@pytest.fixture
def terminated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """`exec`'s arguments for a script whose run a SIGTERM ended before its result came."""

    def execute(*args: Any, **kwargs: Any) -> Any:
        raise exec_cmd.TerminatedAfter(None, ["a note of the save"], UNREPORTED)

    monkeypatch.setattr(exec_cmd, "execute", execute)
    config, tree = sample_project(tmp_path, "crm", timeout=60)
    return ["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree)]


def test_what_the_script_printed_and_its_calls_are_printed(
    terminated: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(terminated) == 143
    out, err = capsys.readouterr()
    assert out == "step 1 of 3\n"
    assert "loading\n" in err and "  call crm.list_leads  ok  1.5 KB  12 ms\n" in err
    assert (
        "tooltree: the script's end was not reported (the output above is what it sent before) · 1 tool call(s) · "
        "1.5 KB of tool results received in the sandbox · tooltree exit 143 because tooltree was terminated (SIGTERM)"
        "\ntooltree: workspace: a note of the save\ntooltree: terminated\n"
    ) in err, err


def test_json_holds_them(terminated: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*terminated, "--json"]) == 143
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert (printed["stdout"], printed["stderr"], printed["exit_code"]) == ("step 1 of 3\n", "loading\n", None)
    assert printed["interrupted"] is True and printed["sandbox_error"] is None
    assert [(c["server"], c["tool"], c["ok"]) for c in printed["calls"]] == [("crm", "list_leads", True)]
    assert err.endswith("tooltree: terminated\n")


def test_json_is_one_object_when_no_script_ran(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a SIGTERM while the sandbox or the servers were starting printed no JSON at all (an empty stdout, which
    # a reader of --json could not parse), though one during the script printed its object.
    def execute(*args: Any, **kwargs: Any) -> Any:
        raise exec_cmd.TerminatedAfter(None, [], None)

    monkeypatch.setattr(exec_cmd, "execute", execute)
    config, tree = sample_project(tmp_path, "crm", timeout=60)
    assert main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree), "--json"]) == 143
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["error"] == "quit before the script ran" and printed["interrupted"] is True
    assert printed["exit_code"] is None and printed["stdout"] is None and printed["sandbox_error"] is None
    assert printed["calls"] == [] and err.endswith("tooltree: terminated\n"), err
