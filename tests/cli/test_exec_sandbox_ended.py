"""`tooltree exec` whose sandbox ended under the script (its container killed: ``docker kill``, the whole gVisor
sandbox past its memory limit) lists the tool calls the script had made, and with ``--json`` prints one object
(the calls, ``sandbox_error``, what the sandbox never reported null). Before: one error line on stderr, nothing on
stdout under ``--json``, and no word of the calls, whose side effects happened.

Real parts: the sample servers, a real sandbox container, the container killed through the engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.docker_cli import EngineWithCLI
from tests.support import exec_killed_after, sample_project
from tooltree_cli.main import main

pytestmark = pytest.mark.usefixtures("sandbox_owner")  # the container to kill is found by the test label

SCRIPT = (
    "from servers.media import list_gallery\n"
    "first = list_gallery()\n"
    "second = list_gallery()\n"
    "import threading\n"
    "threading.Event().wait()  # until its container is killed\n"
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sample_project(tmp_path_factory.mktemp("exec-ended"), "media", timeout=60)


def _exec_killed_after_two_calls(
    docker: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, *options: str
) -> int:
    """`tooltree exec` of `SCRIPT`, its container killed once the audit log shows both calls (the second is sent
    only once the first was answered, so the first is in the ledger by then)."""
    return exec_killed_after(docker, project, tmp_path, SCRIPT, 2, *options)


@pytest.mark.docker
def test_exec_whose_sandbox_was_killed_lists_the_calls_the_script_made(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exec_killed_after_two_calls(docker_engine, project, tmp_path) == 4
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert lines[0].startswith("tooltree: error: the sandbox failed: ") and "status 137" in lines[0]
    assert lines[1].startswith("  call media.list_gallery  ok  ")
    assert lines[2].startswith("  call media.list_gallery  ")  # ok, or cancelled when the kill came first
    assert lines[-1].startswith("tooltree: the sandbox did not report the script's end · 2 tool call(s) · ")
    assert lines[-1].endswith(" · tooltree exit 4 because the sandbox failed")


@pytest.mark.docker
def test_exec_json_whose_sandbox_was_killed_prints_one_object_with_the_calls(
    docker_engine: EngineWithCLI, project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exec_killed_after_two_calls(docker_engine, project, tmp_path, "--json") == 4
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["sandbox_error"].startswith("the sandbox failed: ") and "status 137" in printed["sandbox_error"]
    assert printed["error"] == printed["sandbox_error"]
    assert printed["exit_code"] is None and printed["stdout"] is None and printed["duration_ms"] is None
    assert [(c["server"], c["tool"]) for c in printed["calls"]] == [("media", "list_gallery")] * 2
    assert printed["calls"][0]["ok"] is True and printed["calls_not_listed"] == 0
    assert printed["tool_result_bytes"] >= printed["calls"][0]["response_bytes"] > 0
    assert err.splitlines()[-1].endswith(" · tooltree exit 4 because the sandbox failed")


def test_exec_json_whose_sandbox_could_not_start_prints_one_object(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No engine: no script ran, and --json still prints its object (before: nothing on stdout).
    from sandbox.errors import EngineUnavailableError
    from tooltree_cli import exec_cmd

    def no_engine(*args: object, **kwargs: object) -> None:
        raise EngineUnavailableError("no container engine answers: start Docker")

    monkeypatch.setattr(exec_cmd, "execute", no_engine)
    config, tree = project
    assert main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree), "--json"]) == 4
    out, err = capsys.readouterr()
    printed = json.loads(out)
    assert printed["sandbox_error"] == printed["error"] == "no container engine answers: start Docker"
    assert printed["calls"] == [] and printed["exit_code"] is None
    assert err.splitlines() == ["tooltree: error: no container engine answers: start Docker"]  # as without --json


def test_the_json_of_a_failed_sandbox_has_the_keys_of_a_finished_scripts_in_their_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before: it lacked `image_notes` (added to a finished script's object alone), so a reader of `--json` that took
    # the keys of one for the other met a KeyError.
    from sandbox.results import ExecutionResult
    from tooltree_cli.exec_calls import print_sandbox_failed
    from tooltree_cli.exec_cmd import result_json

    print_sandbox_failed("no container engine answers: start Docker", [], 0, code=4, as_json=True, ran=False)
    printed = json.loads(capsys.readouterr().out)
    finished = result_json(ExecutionResult(stdout="", stderr="", exit_status=0, duration=0.0))
    assert list(printed) == [*finished, "workspace_error", "workspace_notes", "sandbox_error"]
    assert printed["image_notes"] == [] and printed["images"] == []
