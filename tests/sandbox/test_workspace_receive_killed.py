"""A save killed while the sandbox's files arrive is said to have not finished by the next save into the folder.

Before: the next save removed its staging folder without a word, so a user whose tooltree was killed mid-save
(`tooltree serve` sent SIGINT then SIGKILL by its client, an out-of-memory kill) never learned that the script's
files of that session were not saved."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.sandbox.test_sandbox_workspace import restored, save, tree_of


def _gone_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    return int(done.stdout)


def test_the_next_save_says_an_earlier_one_did_not_finish_and_removes_what_it_received(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    stale = tmp_path / f".ws.incoming-{_gone_pid()}-abcd1234"
    stale.mkdir()
    (stale / "half.bin").write_bytes(b"part of the script's file")
    saved = save(dest, restored(dest), {"mine.txt": b"mine"})
    assert not stale.exists()
    assert tree_of(dest) == {"mine.txt": b"mine"}
    assert any("1 earlier save(s) into the folder did not finish" in note for note in saved.notes), saved.notes


def test_a_save_with_nothing_unfinished_before_it_says_nothing_of_it(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    saved = save(dest, restored(dest), {"mine.txt": b"mine"})
    assert not any("did not finish" in note for note in saved.notes)


def test_a_folder_beside_named_like_a_staging_folder_with_a_digit_that_is_not_ascii_is_left_alone(
    tmp_path: Path,
) -> None:
    # Before: '²' passed str.isdigit and int() raised ValueError, so every save into the folder failed.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    other = tmp_path / ".ws.incoming-\u00b2-abcd1234"
    other.mkdir()
    saved = save(dest, restored(dest), {"mine.txt": b"mine", "new.txt": b"new"})
    assert tree_of(dest) == {"mine.txt": b"mine", "new.txt": b"new"} and other.is_dir()
    assert not any("did not finish" in note for note in saved.notes)
