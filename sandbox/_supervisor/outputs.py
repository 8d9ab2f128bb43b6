"""The folder of saved outputs (``/workspace/.tooltree/outputs``), held to a total.

Each execution whose output is cut saves it whole there (`OutputCapture`), and the folder is saved into the
user's workspace folder with the rest. Before, nothing ever removed them: four scripts printing 70 MB each
filled a 256 MiB workspace (the fifth script's own write failed "No space left on device"), the outputs were
saved into the host folder, and every later session of that folder failed to restore it with the same error.

Now, before one of the running execution's files grows, the oldest other outputs (by modification time,
whichever session wrote them) are deleted while the folder would hold more than its budget: a quarter of the
workspace's size, at most 64 MiB. The running execution's own files (stdout, stderr, a traceback) are never deleted;
together they stop growing at the budget (before, each stopped there: one execution printing 70 MB to each stream
and raising with a traceback as long saved 192 MiB of a 256 MiB workspace into the user's folder). A session's
first execution holds the folder to its budget before it runs (a folder saved over it by an older version). Only
files named as outputs are counted or deleted: whatever else a script puts there stays.
The result of an execution that deleted any says how many (``outputs.dropped``).
"""

from __future__ import annotations

import os
import re
import threading

MAX_BUDGET = 64 << 20
OUTPUT_NAME = re.compile(r"^\d{1,9}(?:-[0-9a-f]{6})?-(?:stdout|stderr|traceback)\.txt$")
"""A saved output's name: ``3-1a2b3c-stdout.txt``, or ``3-stdout.txt`` as releases before 2026-12-03 named them
(before: those were never counted nor deleted, so an upgraded workspace kept them over its budget); a traceback
longer than a result holds is saved beside them as ``3-1a2b3c-traceback.txt``."""


def output_budget(workspace: str) -> int:
    """The most the saved outputs may hold in ``workspace``: a quarter of its filesystem, at most `MAX_BUDGET`."""
    try:
        st = os.statvfs(workspace)
    except OSError:
        return MAX_BUDGET
    size = st.f_blocks * st.f_frsize
    return min(size // 4, MAX_BUDGET) if size > 0 else MAX_BUDGET


class OutputFolder:
    """The saved outputs of one workspace: the running execution's files grow only after older ones made room."""

    def __init__(self, path: str, budget: int) -> None:
        self.path = path
        self.budget = budget
        self.dropped = 0
        """How many older outputs the running execution's files made room by deleting."""
        self._lock = threading.Lock()
        self._current: frozenset[str] = frozenset()
        self._others: list[tuple[int, str, int]] | None = None
        """The other outputs, oldest first: (mtime in ns, name, size); listed at the execution's first growth."""
        self._used = 0
        self._mine = 0
        """Bytes the running execution's files were let grow by, together at most the budget."""

    def start(self, names: tuple[str, ...], *, prune: bool = False) -> None:
        """A new execution begins; ``names``: its output files' names, never deleted while it runs. ``prune``: hold
        the folder to the budget now (the session's first execution: a folder restored over its budget, as older
        versions saved them, leaves the script that room)."""
        with self._lock:
            self._current = frozenset(names)
            self._others = None
            self._used = 0
            self._mine = 0
            self.dropped = 0
            if prune:
                self._make_room(0)

    def grow(self, n: int) -> int:
        """One of the running execution's files is about to grow by ``n`` bytes: how many of them it may write (the
        execution's files together hold at most the budget), the oldest other outputs deleted while the folder
        would hold more than the budget."""
        with self._lock:
            n = max(min(n, self.budget - self._mine), 0)
            self._mine += n
            self._make_room(n)
            return n

    def _make_room(self, n: int) -> None:
        """Under the lock: count ``n`` more bytes, then delete the oldest other outputs while over the budget."""
        if self._others is None:
            self._others = self._list()
            self._used += sum(size for _, _, size in self._others)
        self._used += n
        while self._used > self.budget and self._others:
            _, name, size = self._others.pop(0)
            try:
                os.unlink(os.path.join(self.path, name))
            except FileNotFoundError:  # the script removed it: its room is free all the same
                pass
            except OSError:  # still there, still counted; the next older one may go instead
                continue
            self._used -= size
            self.dropped += 1

    def _list(self) -> list[tuple[int, str, int]]:
        found: list[tuple[int, str, int]] = []
        try:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    if entry.name in self._current or not OUTPUT_NAME.match(entry.name):
                        continue
                    try:
                        if not entry.is_file(follow_symlinks=False):
                            continue
                        st = entry.stat(follow_symlinks=False)
                    except OSError:  # gone since the listing: nothing to count
                        continue
                    found.append((st.st_mtime_ns, entry.name, st.st_size))
        except OSError:  # no folder yet (or not one): nothing older to count
            return []
        found.sort()
        return found
