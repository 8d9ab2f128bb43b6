"""A save whose process is killed while it merges into the host folder loses none of the script's files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.sandbox.test_sandbox_workspace import restored, save, tree_of

ROOT = Path(__file__).resolve().parents[2]

KILLED_MIDWAY = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    import sandbox.workspace_inplace as inplace
    from tests.sandbox.test_sandbox_workspace import restored, save

    move_out, moved = inplace.move_out, []

    def killed_after_the_first(*args):
        if moved:  # SIGKILL: as `kill -9`, or a terminal closed under `tooltree exec`; SIGSTOP: a merge under way
            os.kill(os.getpid(), getattr(signal, sys.argv[2] if len(sys.argv) > 2 else "SIGKILL"))
        move_out(*args)
        moved.append(args)

    inplace.move_out = killed_after_the_first
    dest = Path(sys.argv[1])
    files = {name: b"from the sandbox" for name in ("a.txt", "b.txt", "c.txt")}
    host = {p.name: p.read_bytes() for p in dest.iterdir() if p.is_file()}  # kept as they are
    save(dest, restored(dest), {**host, **files})
    """
)


def test_a_save_killed_while_it_merges_keeps_the_rest_of_the_saved_copy_which_the_next_save_leaves(
    tmp_path: Path,
) -> None:
    # Before: the killed save's copy kept its receiving name, and the next save into the folder removed it as a
    # staging folder of a process that was gone: the script's files the merge had not moved in yet were lost.
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    killed = subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(dest)], cwd=ROOT, capture_output=True, timeout=60)
    assert killed.returncode == -9, killed.stderr.decode()
    after_the_kill = {name: data for name, data in tree_of(dest).items() if isinstance(data, bytes)}
    save(dest, restored(dest), after_the_kill)  # the next session of the folder, which changes nothing
    merged = {name for name, data in tree_of(dest).items() if data == b"from the sandbox"}
    (kept,) = tmp_path.glob(".ws.unmerged-*")
    assert merged and merged | {p.name for p in kept.iterdir()} == {"a.txt", "b.txt", "c.txt"}
    assert tree_of(dest)["mine.txt"] == b"mine"
