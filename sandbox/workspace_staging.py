"""The host folders a save into a workspace works in beside it, and what it leaves there.

A save is received into a staging folder beside its destination, or inside it, in `WORK_FOLDER`, when the destination
is a mount point or its parent cannot take it (`sandbox.workspace.WorkspaceReceiver`). The staging folders of saves
whose process was killed while they received are removed by the next save into the folder
(`_remove_stale_staging`); the folders a merge kept because it never finished (``.<name>.unmerged-*``: the rest of
a saved copy; ``.<name>.old-*``: host entries it took out) are never removed, but found (`leftovers`) and named to
the user (`leftovers_note`). Before a merge moves anything, the staged files' data is flushed to disk
(`flush_to_disk`).
"""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from sandbox.host_folders import alive, shown

WORK_FOLDER = ".tooltree-save"
"""Where saves into a folder that is a mount point are received: inside it (a rename cannot cross a mount), at
its top level; removed when a save leaves it empty. Never restored, never saved, never touched by a merge. Saves
into a folder whose parent cannot take the staging folder (not writable by this user) are received there too."""

LEFTOVERS_NAMED = 3
"""How many leftover folders of earlier saves a note names (`leftovers_note`); it counts the rest."""
_LEFTOVER = re.compile(r"(unmerged|old)-(?:([0-9]+)-)?[a-z0-9_]{8}")
"""After ``.<name>.``: a folder a save kept (its saved copy, or host files it took out), the saving process's id
(none in an older tooltree's names), then ``mkdtemp``'s suffix."""
NAME_BYTES_KEPT = 180
"""How much of a long folder's name the names of the folders a save works in beside it keep (`work_name`)."""
_MADE_HERE: set[str] = set()
"""Such folders this process kept, still there: its own (another process of the same id, killed, left the others)."""


def work_name(dest: Path) -> str:
    """``dest``'s name as the folders a save works in beside it are named (``.<name>.incoming-<pid>-*``,
    ``.<name>.unmerged-*``, ``.<name>.old-*``): a name over `NAME_BYTES_KEPT` bytes is cut there and followed by
    ``~`` and 8 hex digits of its hash, so that theirs fit a file name's 255 bytes and still tell folders apart.

    Before: the name was used whole, so a folder named with over about 230 bytes could never be saved into ("File
    name too long", beside it and in its `WORK_FOLDER` alike): every script's work in it was lost."""
    name = os.fsencode(dest.name)
    if len(name) <= NAME_BYTES_KEPT:
        return dest.name
    return os.fsdecode(name[:NAME_BYTES_KEPT] + b"~" + hashlib.sha256(name).hexdigest()[:8].encode("ascii"))


def _remove_stale_staging(dest: Path, beside: Path) -> int:
    """Remove the staging folders (in ``beside``) of saves into ``dest`` whose process is gone (killed mid-save):
    how many."""
    prefix, removed = f".{work_name(dest)}.incoming-", 0
    for stale in beside.glob(f"{glob.escape(prefix)}*"):
        pid = stale.name[len(prefix) :].partition("-")[0]
        if pid.isascii() and pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
            removed += 1
    return removed


def leftovers(dest: Path) -> list[tuple[Path, str]]:
    """The folders saves into ``dest`` kept beside it (in its parent, or in its `WORK_FOLDER`) whose process is gone:
    ``(path, kind)``, ``kind`` ``"unmerged"`` (the rest of a saved copy its merge never placed: killed, or failed) or
    ``"old"`` (host entries its merge took out of the folder), sorted by path. A live process's (a save merging now,
    or one whose failure it reported) are left out, and so are this process's own; a folder whose name carries no
    process id (an older tooltree's) counts as gone. Nothing is moved or removed."""
    dest = Path(os.path.realpath(dest))
    prefix = f".{work_name(dest)}."
    found: list[tuple[Path, str]] = []
    for beside in (dest.parent, dest / WORK_FOLDER):
        try:
            names = sorted(os.listdir(beside))
        except OSError:  # no work folder, or a parent this user may not read
            continue
        for name in names:
            match = _LEFTOVER.fullmatch(name[len(prefix) :]) if name.startswith(prefix) else None
            path = beside / name
            if match is None or str(path) in _MADE_HERE:
                continue
            pid = int(match[2]) if match[2] is not None else None
            if pid is not None and pid != os.getpid() and alive(pid):
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    found.append((path, match[1]))
    return found


def leftovers_note(dest: Path) -> str | None:
    """A note naming the `leftovers` of saves into ``dest`` (at most `LEFTOVERS_NAMED`, then how many more) and what
    to do with them; None when there are none.

    Before: no save named them, so a user whose tooltree was killed while it merged never learned that files of the
    script (or of theirs) were in hidden folders beside the workspace."""
    found = leftovers(dest)
    if not found:
        return None
    what = {"unmerged": "files of the script not merged in", "old": "files of the folder a save took out"}
    named = "; ".join(f"{shown(os.fsencode(path))} ({what[kind]})" for path, kind in found[:LEFTOVERS_NAMED])
    more = f"; and {len(found) - LEFTOVERS_NAMED} more" if len(found) > LEFTOVERS_NAMED else ""
    return (
        f"{len(found)} folder(s) kept by earlier saves into {shown(os.fsencode(dest))} that did not finish (their "
        f"tooltree was killed while merging, or the merge failed) hold files no save puts back or removes: {named}"
        f"{more}. Look inside each, move back into the folder what you want to keep, then delete it"
    )


def flush_to_disk(folder: Path) -> None:
    """Have the data written under ``folder`` reach the disk: Linux's ``syncfs`` of the file system holding it alone
    (``os.sync`` flushes every file system of the host, and so waits for whatever else the host is writing), else
    ``os.sync``."""
    syncfs = _syncfs()
    if syncfs is not None:
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                if syncfs(fd) == 0:
                    return
            finally:
                os.close(fd)
    os.sync()


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """The C library's ``syncfs`` (among the symbols the process has loaded), or None: not Linux, or not there."""
    import ctypes

    try:
        found: Callable[[int], int] = ctypes.CDLL(None).syncfs
    except (OSError, AttributeError):
        return None
    return found
