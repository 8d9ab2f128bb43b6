"""A `generate-tree` process paused halfway through writing a tree, for tests of what runs beside it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import REPO

# Pauses the run after its 50th stub write (its write phase has begun) until the parent says go.
_PAUSED_RUN = """
import os, sys
import generator.write_over
from tooltree_cli.main import main

paused, go = int(sys.argv[1]), int(sys.argv[2])
write, count = generator.write_over.write_file, [0]

def hooked(*args, **kwargs):
    count[0] += 1
    if count[0] == 50:
        os.write(paused, b"p")
        os.read(go, 1)
    return write(*args, **kwargs)

generator.write_over.write_file = hooked
raise SystemExit(main(["generate-tree", "--from-snapshot", sys.argv[3], "--out", sys.argv[4], "--json"]))
"""


def write_snapshots(folder: Path, prefix: str, count: int = 200) -> Path:
    """A snapshots folder with one server, ``alpha``, of ``count`` tools named ``<prefix>_<i>``."""
    folder.mkdir()
    tools = [
        {"name": f"{prefix}_{i}", "description": f"Does {prefix} {i}.", "inputSchema": {"type": "object"}}
        for i in range(count)
    ]
    (folder / "alpha.json").write_text(json.dumps({"server": "alpha", "info": {}, "tools": tools}), encoding="utf-8")
    return folder


def wait_readable(fd: int, timeout: float = 60) -> bytes:
    """The next byte on ``fd`` (b"" at its end); fails after ``timeout`` seconds."""
    ready, _, _ = select.select([fd], [], [], timeout)
    assert ready, f"no report from the other process in {timeout:g} s"
    return os.read(fd, 1)


class PausedGenerate:
    def __init__(self, process: subprocess.Popen[bytes], go: int) -> None:
        self.process = process
        self._go = go

    def resume(self) -> tuple[int, str]:
        """Let it finish; its exit status and stderr."""
        if self._go >= 0:
            os.write(self._go, b"g")
            os.close(self._go)
            self._go = -1
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err.decode("utf-8", errors="replace")


@contextmanager
def paused_generate(snapshots: Path, out: Path) -> Iterator[PausedGenerate]:
    """Start ``generate-tree --from-snapshot snapshots --out out``; yields once it has written 50 stubs."""
    paused_r, paused_w = os.pipe()
    go_r, go_w = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_RUN, str(paused_w), str(go_r), str(snapshots), str(out)],
        cwd=REPO, pass_fds=(paused_w, go_r), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(paused_w)
    os.close(go_r)
    run = PausedGenerate(process, go_w)
    try:
        assert wait_readable(paused_r) == b"p"
        yield run
    finally:
        os.close(paused_r)
        if run._go >= 0:
            os.close(run._go)
        if process.poll() is None:
            process.kill()
            process.communicate()
