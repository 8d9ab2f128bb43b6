"""The folder of saved outputs, in-process: held to its budget, the oldest deleted, the running execution's kept."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox._supervisor.capture import OutputCapture
from sandbox._supervisor.outputs import MAX_BUDGET, OutputFolder, output_budget


def saved(folder: Path, *names: str, size: int = 10) -> None:
    """Outputs saved by earlier executions, oldest first."""
    folder.mkdir(parents=True, exist_ok=True)
    for age, name in enumerate(reversed(names), start=1):
        (folder / name).write_bytes(b"o" * size)
        os.utime(folder / name, ns=(0, 10**12 - age * 10**9))


def test_the_oldest_outputs_go_first_while_the_folder_is_over_its_budget(tmp_path: Path) -> None:
    # Before: nothing was ever deleted; four 64 MiB outputs filled a 256 MiB workspace and the user's folder.
    out = tmp_path / "outputs"
    saved(out, "1-aaaaaa-stdout.txt", "2-aaaaaa-stderr.txt", "1-bbbbbb-stdout.txt", "9-bbbbbb-stdout.txt")
    (out / "notes.txt").write_bytes(b"n" * 100)  # not an output: never counted, never deleted
    folder = OutputFolder(str(out), budget=35)
    folder.start(("3-cccccc-stdout.txt", "3-cccccc-stderr.txt"))
    capture = OutputCapture(str(out / "3-cccccc-stdout.txt"), memory_bytes=4, folder=folder)
    capture.feed(b"x" * 12)
    assert capture.finish(2)["path"] == str(out / "3-cccccc-stdout.txt")
    assert sorted(p.name for p in out.iterdir()) == [
        "1-bbbbbb-stdout.txt",
        "3-cccccc-stdout.txt",
        "9-bbbbbb-stdout.txt",
        "notes.txt",
    ]
    assert folder.dropped == 2 and (out / "3-cccccc-stdout.txt").read_bytes() == b"x" * 12


def test_the_running_executions_own_files_are_never_deleted_and_hold_the_budget_together(tmp_path: Path) -> None:
    # Before: each of them stopped at the budget, so stdout, stderr and a traceback held three times it (192 MiB of a
    # 256 MiB workspace, saved into the user's folder, for one script printing 70 MB to each and raising as long).
    out = tmp_path / "outputs"
    saved(out, "1-aaaaaa-stdout.txt")
    folder = OutputFolder(str(out), budget=20)
    folder.start(("2-aaaaaa-stdout.txt", "2-aaaaaa-stderr.txt", "2-aaaaaa-traceback.txt"))
    stdout = OutputCapture(str(out / "2-aaaaaa-stdout.txt"), memory_bytes=4, file_bytes=20, folder=folder)
    stderr = OutputCapture(str(out / "2-aaaaaa-stderr.txt"), memory_bytes=4, file_bytes=20, folder=folder)
    for _ in range(10):
        stdout.feed(b"o" * 5)
        stderr.feed(b"e" * 5)
    traceback = OutputCapture(str(out / "2-aaaaaa-traceback.txt"), memory_bytes=4, file_bytes=20, folder=folder)
    traceback.feed(b"t" * 50)
    said = [stream.finish(2) for stream in (stdout, stderr, traceback)]
    assert [s["bytes"] for s in said] == [50, 50, 50]
    assert [s["saved"] for s in said] == [10, 10, 0] and said[2]["path"] is None  # none of it fits: no empty file
    assert sorted(p.name for p in out.iterdir()) == ["2-aaaaaa-stderr.txt", "2-aaaaaa-stdout.txt"]
    assert (out / "2-aaaaaa-stdout.txt").read_bytes() == b"o" * 10 and folder.dropped == 1
    assert (out / "2-aaaaaa-stderr.txt").read_bytes() == b"e" * 10


def test_a_sessions_first_execution_prunes_a_folder_saved_over_its_budget_before_it_runs(tmp_path: Path) -> None:
    # A folder an older version saved with 256 MiB of outputs filled the next session's workspace on restore.
    out = tmp_path / "outputs"
    saved(out, "1-aaaaaa-stdout.txt", "2-aaaaaa-stdout.txt", "3-aaaaaa-stdout.txt")
    folder = OutputFolder(str(out), budget=25)
    folder.start(("1-bbbbbb-stdout.txt", "1-bbbbbb-stderr.txt"), prune=True)
    assert sorted(p.name for p in out.iterdir()) == ["2-aaaaaa-stdout.txt", "3-aaaaaa-stdout.txt"]
    assert folder.dropped == 1
    folder.start(("2-bbbbbb-stdout.txt", "2-bbbbbb-stderr.txt"))
    assert folder.dropped == 0 and len(list(out.iterdir())) == 2


def test_outputs_an_older_release_named_without_their_mark_are_counted_and_deleted_first(tmp_path: Path) -> None:
    # Releases before 2026-12-03 saved `1-stdout.txt`; before, those were never counted nor deleted, so a workspace
    # upgraded with 47 MB of them held 94 MB of outputs against a 64 MiB budget after two new runs.
    out = tmp_path / "outputs"
    saved(out, "1-stdout.txt", "1-stderr.txt", "2-aaaaaa-stdout.txt", "notes.txt")
    folder = OutputFolder(str(out), budget=15)
    folder.start(("3-bbbbbb-stdout.txt", "3-bbbbbb-stderr.txt"), prune=True)
    assert sorted(p.name for p in out.iterdir()) == ["2-aaaaaa-stdout.txt", "notes.txt"]
    assert folder.dropped == 2


def test_a_link_or_a_folder_named_as_an_output_is_never_deleted(tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    saved(out, "1-aaaaaa-stdout.txt")
    (out / "2-aaaaaa-stdout.txt").mkdir()
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"keep")
    (out / "3-aaaaaa-stdout.txt").symlink_to(target)
    folder = OutputFolder(str(out), budget=0)
    folder.start(("4-aaaaaa-stdout.txt",), prune=True)
    assert sorted(p.name for p in out.iterdir()) == ["2-aaaaaa-stdout.txt", "3-aaaaaa-stdout.txt"]
    assert target.read_bytes() == b"keep"


def test_the_budget_is_a_quarter_of_the_workspace_at_most_64_mib(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    assert output_budget(str(tmp_path)) == min(st.f_blocks * st.f_frsize // 4, MAX_BUDGET)
    assert output_budget(str(tmp_path / "missing")) == MAX_BUDGET


def test_a_saved_traceback_is_counted_and_deleted_as_the_other_outputs_are(tmp_path: Path) -> None:
    out = tmp_path / "outputs"
    saved(out, "1-aaaaaa-traceback.txt", "2-aaaaaa-stdout.txt")
    folder = OutputFolder(str(out), budget=25)
    folder.start(("3-aaaaaa-stdout.txt", "3-aaaaaa-stderr.txt", "3-aaaaaa-traceback.txt"))
    whole = OutputCapture(str(out / "3-aaaaaa-traceback.txt"), memory_bytes=4, folder=folder)
    whole.feed(b"t" * 12)
    assert whole.finish(2)["path"] == str(out / "3-aaaaaa-traceback.txt")
    assert sorted(p.name for p in out.iterdir()) == ["2-aaaaaa-stdout.txt", "3-aaaaaa-traceback.txt"]
