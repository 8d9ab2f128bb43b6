"""SIGTERM to `tooltree exec` (``timeout``, ``docker stop``, a cancelled CI job) stops the script as Ctrl-C does and
prints what it did until then: its output, its traceback and its tool calls (``--json``: one object), then exits 143
with the workspace saved, as its help says. Before: only ``tooltree: terminated``, the output and the calls lost,
and the help said nothing of the workspace was saved, though it was.

In a real `tooltree exec` process with a real container and the sample crm server.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.cli.test_exec_interrupt import _signalled_once_called, project, stopped_in_script
from tests.docker_cli import EngineWithCLI

__all__ = ["project"]  # a fixture


@pytest.mark.docker
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "human"])
def test_sigterm_prints_what_the_stopped_script_did_saves_the_workspace_and_exits_143(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], owner: str, tmp_path: Path, as_json: bool
) -> None:
    code, out, err, workspace = _signalled_once_called(signal.SIGTERM, project, owner, tmp_path, as_json)
    assert code == 143, err
    assert err.endswith("tooltree: terminated\n")
    if as_json:
        printed = json.loads(out)
        assert printed["stdout"] == "first\n" and printed["interrupted"] is True
        assert stopped_in_script(printed["traceback"])
        assert [(c["server"], c["tool"], c["ok"]) for c in printed["calls"]] == [("crm", "list_leads", True)]
    else:
        assert out == "first\n"
        assert stopped_in_script(err[: err.index("KeyboardInterrupt\n") + 18]) and "  call crm.list_leads  ok  " in err
        assert "· tooltree exit 143 because tooltree was terminated (SIGTERM), which stopped the script\n" in err
    assert (workspace / "partial.txt").read_text(encoding="utf-8") == "made before the interrupt"
    assert docker_engine.owned(owner) == []


def test_exec_help_says_the_workspace_is_saved_when_terminated(capsys: pytest.CaptureFixture[str]) -> None:
    from tooltree_cli.main import main

    with pytest.raises(SystemExit):
        main(["exec", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "143 when terminated (SIGTERM stops the script and prints what it did so far" in text
    assert "129 when its terminal closed (SIGHUP: the same, printed where it still can be)" in text
    assert "The workspace is saved in each case." in text and "nothing of the workspace is saved" not in text
