"""The worker processes that render stubs end with the `generate-tree` that forked them, however it ends."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

from generator.workers import PARALLEL_THRESHOLD
from tests.generator.paused import paused_generate, write_snapshots


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="utf-8").split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _lock_now(root: Path) -> bool:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_generate_tree_killed_while_it_renders_leaves_no_worker_and_no_lock_on_its_tree(tmp_path: Path) -> None:
    out = tmp_path / "tree"
    workers: list[int] = []
    try:
        with paused_generate(write_snapshots(tmp_path / "snaps", "new", count=PARALLEL_THRESHOLD + 100), out) as run:
            workers = _children(run.process.pid)
            assert workers, "the run forked no worker to render its stubs"
            run.process.send_signal(signal.SIGKILL)  # as `kill -9` or the kernel out of memory ends it
            run.process.communicate(timeout=30)
        deadline = time.monotonic() + 30  # bounded wait for the workers to see their parent gone
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if _alive(pid)], "a worker outlived its generate-tree"
        assert _lock_now(out), "the killed run's tree is still locked: every later run on it would wait for ever"
    finally:
        for pid in workers:  # before the fix, they waited for work for good
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
