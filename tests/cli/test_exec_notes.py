"""What `tooltree exec` says beside the script's output: the workspace's notes once, and, without --workspace,
how to keep the whole of an output that was cut (its file in the sandbox goes with the container)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import sample_project
from tooltree_cli.main import main

pytestmark = pytest.mark.usefixtures("sandbox_owner")  # its containers and volumes removed by the engine fixture


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A config whose sandbox returns at most 200 characters of each output, and its tree."""
    return sample_project(tmp_path_factory.mktemp("exec-notes"), "crm", timeout=60, output_chars=200)


NOTE = "1 link(s) or special file(s) made in the sandbox's workspace were not saved (they never leave the sandbox)"


@pytest.mark.docker
@pytest.mark.parametrize("as_json", [False, True], ids=["human", "json"])
def test_exec_prints_each_workspace_note_once(
    docker_engine: object, project: tuple[Path, Path], tmp_path: Path, as_json: bool
) -> None:
    # Its own process: Python's last-resort log handler, which printed each note a second time, is not pytest's.
    # Before: "workspace DIR: NOTE" then "tooltree: workspace: NOTE" (with --json: only the first).
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = "import os\nos.symlink('/etc/passwd', 'passwd')\nprint('done')\n"
    argv = ["exec", "-c", script, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    proc = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", *argv, *(["--json"] if as_json else [])],
        capture_output=True, text=True, encoding="utf-8", timeout=120, env={**os.environ},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(NOTE) == 1 and f"tooltree: workspace: {NOTE}\n" in proc.stderr
    if as_json:
        assert json.loads(proc.stdout)["workspace_notes"] == [NOTE]
    else:
        assert proc.stdout == "done\n"
    assert not (workspace / "passwd").exists()


SPILL = "print('a' * 150 + 'b' * 700 + 'c' * 150)\nimport sys\nprint('e' * 1000, file=sys.stderr)\n"


@pytest.mark.docker
def test_exec_without_a_workspace_says_how_to_keep_the_whole_output_not_where_it_was(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: "[... stdout cut: ...; the whole stdout is in /workspace/.tooltree/outputs/1-stdout.txt ...]", a file
    # gone with the container once exec ends.
    config, tree = project
    argv = ["exec", "-c", SPILL, "--config", str(config), "--tree", str(tree)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "/workspace/" not in out + err
    for name, said in (("stdout", out), ("stderr", err)):
        note = f"[... {name} cut: 1,001 bytes in all; the whole {name} was not kept: run with --workspace DIR to keep"
        kept = rf"DIR/\.tooltree/outputs/1-[0-9a-f]{{6}}-{name}\.txt"
        assert re.search(rf"{re.escape(note)} it \(as {kept}\) \.\.\.\]", said)
    assert out.startswith("a" * 100) and out.endswith("c" * 99 + "\n")
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["stdout_path"] is None and printed["stderr_path"] is None
    assert "the whole stdout was not kept: run with --workspace DIR to keep it" in printed["stdout"]
    assert "/workspace/" not in printed["stdout"] + printed["stderr"]
    # The advice holds: with --workspace DIR the whole output is in that file, which the note and the path name in
    # the folder (before: the sandbox's path, /workspace/.tooltree/outputs/…).
    assert main([*argv, "--workspace", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    path = printed["stdout_path"]
    assert re.fullmatch(rf"{re.escape(str(tmp_path))}/\.tooltree/outputs/1-[0-9a-f]{{6}}-stdout\.txt", path)
    assert f"the whole stdout is in {path} ...]" in printed["stdout"]
    assert "/workspace/" not in printed["stdout"] + printed["stderr"]
    assert Path(path).read_text(encoding="utf-8") == "a" * 150 + "b" * 700 + "c" * 150 + "\n"
    assert main([*argv, "--workspace", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "/workspace/" not in out + err
    assert re.search(
        rf"the whole stderr is in {re.escape(str(tmp_path))}/\.tooltree/outputs/\d+-[0-9a-f]{{6}}-stderr", err
    )


def test_a_cut_outputs_file_is_named_in_the_folder_when_it_was_saved_and_said_lost_when_not() -> None:
    # The three ways `exec` ends with a cut output: a saved workspace names the folder's file; a workspace whose save
    # failed, or none, names no file (the sandbox's went with its container).
    from sandbox.results import ExecutionResult
    from tooltree_cli.exec_cmd import _outputs_where

    path = "/workspace/.tooltree/outputs/1-0a1b2c-stdout.txt"
    marker = f"[... stdout cut: 9 bytes in all; the whole stdout is in {path} ...]"
    result = ExecutionResult(stdout=f"a\n{marker}\n{marker}", stderr="", exit_status=0, duration=0.1, stdout_path=path)
    saved = _outputs_where(result, "my ws", saved=True)
    assert saved.stdout_path == "my ws/.tooltree/outputs/1-0a1b2c-stdout.txt"
    assert (
        saved.stdout.count(f"the whole stdout is in {saved.stdout_path} ...]") == 2
        and "/workspace/" not in saved.stdout
    )
    unsaved = _outputs_where(result, "my ws", saved=False)
    assert unsaved.stdout_path is None and "/workspace/" not in unsaved.stdout
    assert unsaved.stdout.count("; the whole stdout was not kept: the workspace was not saved ...]") == 2
    nowhere = _outputs_where(result, None, saved=True)
    assert nowhere.stdout_path is None
    assert "run with --workspace DIR to keep it (as DIR/.tooltree/outputs/1-0a1b2c-stdout.txt) ...]" in nowhere.stdout


def test_the_marker_of_an_output_longer_than_a_saved_output_holds_is_rewritten_too() -> None:
    # Before: "its first 262,144 bytes are in /workspace/.tooltree/outputs/…" was left as the sandbox wrote it: without
    # a workspace it named a file gone with its container (and no word of --workspace DIR), with one the sandbox's
    # path, not the folder's; `stdout_path` in --json named the sandbox's path too.
    from sandbox.results import ExecutionResult, preview
    from tooltree_cli.exec_cmd import _outputs_where

    path = "/workspace/.tooltree/outputs/1-0a1b2c-stdout.txt"
    stream = {"head": "a", "tail": "z", "truncated": True, "path": path, "bytes": 70_000_000, "saved": 262_144}
    text, _, _ = preview(stream, 10, "stdout", {"budget": 262_144})
    assert "; saved outputs keep the newest 256 KiB; its first 262,144 bytes are in /workspace/" in text
    result = ExecutionResult(stdout=text, stderr="", exit_status=0, duration=0.1, stdout_path=path)
    saved = _outputs_where(result, "my ws", saved=True)
    assert saved.stdout_path == "my ws/.tooltree/outputs/1-0a1b2c-stdout.txt" and "/workspace/" not in saved.stdout
    assert (
        f"; saved outputs keep the newest 256 KiB; its first 262,144 bytes are in {saved.stdout_path} (a saved output "
        "holds at most that) ...]"
    ) in saved.stdout
    nowhere = _outputs_where(result, None, saved=True)
    assert nowhere.stdout_path is None and "/workspace/" not in nowhere.stdout
    assert (
        "[... stdout cut: 70,000,000 bytes in all; it was not kept: run with --workspace DIR to keep its first "
        "262,144 bytes (as DIR/.tooltree/outputs/1-0a1b2c-stdout.txt) ...]"
    ) in nowhere.stdout
    unsaved = _outputs_where(result, "my ws", saved=False)
    assert unsaved.stdout_path is None and "/workspace/" not in unsaved.stdout
    assert (
        "[... stdout cut: 70,000,000 bytes in all; it was not kept: the workspace was not saved ...]" in unsaved.stdout
    )


@pytest.mark.docker
def test_exec_prints_the_notes_the_session_kept_after_a_count_of_the_others(
    docker_engine: object, project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from sandbox import session_files

    monkeypatch.setattr(session_files, "NOTES_KEPT", 5)
    config, tree = project
    ws = tmp_path / "ws"
    (ws / "ro").mkdir(parents=True)
    for n in range(8):
        (ws / "ro" / f"{n}.txt").write_text("kept", encoding="utf-8")
        (ws / "ro" / f"{n}.txt").chmod(0o444)
    code = "import shutil\nshutil.rmtree('ro')"
    assert main(["exec", "-c", code, "--config", str(config), "--tree", str(tree), "--workspace", str(ws)]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tooltree: workspace:")]
    assert said == [
        "tooltree: workspace: 3 earlier notes of the save are not shown (the last 5 follow)",
        *(f"tooltree: workspace: ro/{n}.txt: read-only on the host, so it is kept (the sandbox deleted it)"
          for n in range(3, 8)),
    ]  # fmt: skip


def test_a_saved_tracebacks_file_is_named_in_the_folder_when_it_was_saved_and_said_lost_when_not() -> None:
    # Before: the traceback's line named the sandbox's file, /workspace/.tooltree/outputs/…, which the user had to
    # translate, or which went with the container.
    from sandbox.results import ExecutionResult
    from tooltree_cli.exec_cmd import _outputs_where

    kept = ".tooltree/outputs/1-0a1b2c-traceback.txt"
    tb = f"Traceback\n[… 80,202 characters of the traceback cut; the whole traceback is in /workspace/{kept} …]\nEnd\n"
    result = ExecutionResult(stdout="", stderr="", exit_status=1, duration=0.1, error="ValueError", traceback=tb)
    cut = "[… 80,202 characters of the traceback cut; "
    assert _outputs_where(result, "my ws", saved=True).traceback == tb.replace(f"/workspace/{kept}", f"my ws/{kept}")
    assert f"{cut}the whole traceback was not kept: the workspace was not saved …]\nEnd" in str(
        _outputs_where(result, "my ws", saved=False).traceback
    )
    nowhere = str(_outputs_where(result, None, saved=True).traceback)
    assert f"{cut}the whole traceback was not kept: run with --workspace DIR to keep it (as DIR/{kept}) …]" in nowhere
    part = tb.replace("the whole traceback is", "its first 8,388,608 bytes are").replace(
        " …]", " (a saved output holds at most that) …]"
    )
    assert _outputs_where(ExecutionResult(stdout="", stderr="", exit_status=1, duration=0.1, traceback=part),
                          "ws", saved=True).traceback == part.replace(f"/workspace/{kept}", f"ws/{kept}")  # fmt: skip
