"""A saved file copied into a folder a rename cannot reach (a mount inside the workspace) never takes its name
before it is whole.

Before: the copy was written under the file's own name, so tooltree killed mid-copy (SIGKILL, an out-of-memory kill,
a power loss) left a truncated file there, taken by the next session as the user's own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from sandbox.host_folders import copy_new, open_folder

ROOT = Path(__file__).resolve().parents[2]

KILLED_MID_COPY = textwrap.dedent(
    """
    import os, signal, sys
    from sandbox.host_folders import copy_new, open_folder

    src, dst = open_folder(sys.argv[1]), open_folder(sys.argv[2])
    write, written = os.write, []

    def killed_after_the_first_chunk(fd, data):
        if written:
            os.kill(os.getpid(), signal.SIGKILL)
        written.append(len(data))
        return write(fd, data)

    os.write = killed_after_the_first_chunk
    copy_new(src, b"big.bin", dst, b"big.bin")
    """
)


def test_a_copy_killed_midway_leaves_no_partial_file_under_the_files_name(tmp_path: Path) -> None:
    staging, host = tmp_path / "staging", tmp_path / "host"
    staging.mkdir()
    host.mkdir()
    (staging / "big.bin").write_bytes(b"s" * (3 << 20))  # three chunks of the copy
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_MID_COPY, str(staging), str(host)], cwd=ROOT, capture_output=True, timeout=60
    )
    assert killed.returncode == -9, killed.stderr.decode()
    assert not (host / "big.bin").exists()


def test_a_copy_that_finishes_takes_the_name_whole_and_leaves_nothing_else(tmp_path: Path) -> None:
    staging, host = tmp_path / "staging", tmp_path / "host"
    staging.mkdir()
    host.mkdir()
    (staging / "big.bin").write_bytes(b"s" * (3 << 20))
    (staging / "big.bin").chmod(0o640)
    src, dst = open_folder(staging), open_folder(host)
    try:
        copy_new(src, b"big.bin", dst, b"big.bin")
    finally:
        os.close(src)
        os.close(dst)
    assert [p.name for p in host.iterdir()] == ["big.bin"]
    assert (host / "big.bin").read_bytes() == b"s" * (3 << 20)
    assert (host / "big.bin").stat().st_mode & 0o777 == 0o640
