"""Fill a tree volume from a tar stream on stdin: ``python3 -m tooltree_supervisor.populate DEST``.

Run once per tree, as root (without capabilities) in a throwaway container with the volume
mounted read-write; sandboxes then mount it read-only. Only directories and regular files are
written; files become 0444 and directories 0555, owned by root, so the sandbox user can
neither change nor add anything. Modules are precompiled. A marker file written last makes a
second run a no-op and an interrupted one redo the work. A stream that ends before the archive's end (its
sender died midway: a host tooltree killed while copying the tree closes the container's stdin) is not marked
complete: ``tarfile`` takes a stream cut between two members for the archive's end, and before, a tooltree
killed mid-copy left a volume marked complete with 3,604 of 20,029 files, which every later session of that tree
mounted. Runs on one volume take turns (an
exclusive ``flock`` on its folder): sessions started together on a new tree each run this, and
without turns a run that finds no marker deletes what another is writing, and that other run
then marks complete a tree with half its files gone.
"""

from __future__ import annotations

import compileall
import fcntl
import os
import shutil
import sys
import tarfile
from typing import TYPE_CHECKING

from .tree_state import MARKER

if TYPE_CHECKING:
    from typing import Self  # Python 3.11; an image's python3 may be 3.10


class _Member(tarfile.TarInfo):
    """A member's header, noting when the block read in its place is the archive's end: a block of zeros (a stream
    cut short ends with no block, or part of one)."""

    archive_ended = False

    @classmethod
    def fromtarfile(cls, archive: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(archive)
        except tarfile.HeaderError as e:  # its EOFHeaderError (the block is zeros) is not in every stub of the module
            _Member.archive_ended = type(e).__name__ == "EOFHeaderError"
            raise


def _safe_parts(name: str) -> list[str] | None:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts or name.startswith("/"):
        return None
    return parts


def populate(dest: str) -> int:
    """Extract stdin into ``dest`` unless it is already complete; returns the exit status.

    Waits while another run fills ``dest`` (the lock is the folder's; the kernel releases it when that
    run's container ends, however it ends). The volume lives on the engine's host, so every container
    mounting it shares one kernel and the lock holds for a remote engine too.
    """
    fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _populate(dest)
    finally:
        os.close(fd)


def _populate(dest: str) -> int:
    if os.path.exists(os.path.join(dest, MARKER)):
        while sys.stdin.buffer.read(1 << 20):
            pass
        return 0
    os.chmod(dest, 0o755)
    for root, subdirs, _ in os.walk(dest):  # a previous, interrupted run: make it removable
        for name in subdirs:
            os.chmod(os.path.join(root, name), 0o755)
    for entry in os.listdir(dest):
        path = os.path.join(dest, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    dirs = [dest]
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|", tarinfo=_Member) as tar:
        for member in tar:
            parts = _safe_parts(member.name)
            if parts is None:
                continue
            target = os.path.join(dest, *parts)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                dirs.append(target)
            elif member.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                with open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                os.utime(target, (member.mtime, member.mtime))
    if not _Member.archive_ended:
        print("the tree's stream ended before its archive did (its sender stopped): not complete", file=sys.stderr)
        return 1
    compileall.compile_dir(dest, quiet=1, workers=1)
    for root, subdirs, files in os.walk(dest):
        for name in files:
            os.chmod(os.path.join(root, name), 0o444)
        for name in subdirs:
            dirs.append(os.path.join(root, name))
    for d in dirs:
        os.chmod(d, 0o555)
    os.chmod(dest, 0o755)
    with open(os.path.join(dest, MARKER), "w", encoding="ascii") as f:
        f.write("ok\n")
    os.chmod(os.path.join(dest, MARKER), 0o444)
    os.chmod(dest, 0o555)
    return 0


if __name__ == "__main__":
    raise SystemExit(populate(sys.argv[1]))
