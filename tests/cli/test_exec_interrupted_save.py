"""A Ctrl-C, SIGTERM or SIGHUP that comes while `tooltree exec` saves the workspace, once the script has ended: the
first lets the save finish, then the script's result is printed as usual and the command ends by the signal; a
second Ctrl-C stops the save, and the result is printed with why the workspace was not saved.

Before: the first one stopped the save midway and `exec` printed only ``tooltree: interrupted``: the script's output
and tool calls were lost, and nothing said that what it wrote in /workspace was not saved."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from sandbox.session import Sandbox
from tests.support import sample_project
from tooltree_cli.main import main

SCRIPT = """\
from servers.crm import list_leads
list_leads(limit=1)
open('made.txt', 'w').write('by the script')
print('done')
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sample_project(tmp_path_factory.mktemp("exec-save"), "crm", timeout=60)


def _signalled_at_the_save(monkeypatch: pytest.MonkeyPatch, *signals: signal.Signals) -> None:
    """Each of ``signals`` is sent to this process as the workspace's save begins (after the script ended)."""
    real_save = Sandbox.save_workspace

    def signalled(self: Sandbox, dest: str | Path | None = None) -> Path:
        for sig in signals:
            os.kill(os.getpid(), sig)
        return real_save(self, dest)

    monkeypatch.setattr(Sandbox, "save_workspace", signalled)


@pytest.mark.docker
@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_during_the_save_lets_it_finish_prints_the_result_and_ends_by_the_signal(
    docker_engine: object,
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sig: signal.Signals,
    code: int,
    said: str,
) -> None:
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _signalled_at_the_save(monkeypatch, sig)
    argv = ["exec", "-c", SCRIPT, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    assert main(argv) == code
    out, err = capsys.readouterr()
    assert out == "done\n"
    assert f"tooltree: {said}: finishing the workspace's save first (Ctrl-C again quits at once" in err
    assert "  call crm.list_leads  ok  " in err and "during the workspace's save" in err
    assert err.endswith(f"tooltree: {said}\n"), err
    assert (workspace / "made.txt").read_text(encoding="utf-8") == "by the script"


@pytest.mark.docker
def test_a_second_ctrl_c_stops_the_save_and_the_result_says_the_workspace_was_not_saved(
    docker_engine: object,
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _signalled_at_the_save(monkeypatch, signal.SIGINT, signal.SIGINT)
    argv = ["exec", "-c", SCRIPT, "--json", "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    assert main(argv) == 130
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["stdout"] == "done\n" and printed["exit_code"] == 0
    assert [(c["server"], c["tool"], c["ok"]) for c in printed["calls"]] == [("crm", "list_leads", True)]
    assert printed["workspace_error"].startswith(f"the workspace's save into {workspace} was stopped midway: ")
    assert err.endswith("tooltree: interrupted\n"), err
    assert list(workspace.iterdir()) == []
