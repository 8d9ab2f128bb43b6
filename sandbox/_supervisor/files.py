"""Workspace file operations, done without ever following a symlink.

Paths are relative to the workspace and arrive as wire paths (`fswalk.split_path`). Every
directory on the way is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent, so a
symlink planted by user code cannot redirect a read or a write outside the workspace.

Restore and save use the transfer format of `transfer`. A save (`Workspace.export`) is complete or
fails: every folder and regular file is sent, and an entry that cannot be read, or a tree over the
caps, ends it with an error naming the path. Links, FIFOs, sockets and devices are never sent; the
summary counts them as ``skipped``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import heapq
import os
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .fswalk import DIR_FLAGS, READ_FLAGS, DirCursor, PathError, show, split_path, walk
from .transfer import Sent, TreeReader, TreeWriter, read_item, stamp_line


def mapped_for_writing(pids: Sequence[str] | None = None) -> frozenset[int] | None:
    """The inodes of the files that a process maps shared and writable, from ``/proc/*/maps`` (by inode, not by
    path: a file mapped under one name may be linked under another, or renamed since).

    A write through such a mapping changes the file's mtime and ctime only at its first fault: the workspace is
    a tmpfs, which never writes pages back, so later writes (a ``numpy.memmap`` kept in a variable from one
    execution to the next) leave the file looking unchanged. None when that cannot be told (``/proc``
    unreadable, a process that may not be looked into): every file then counts as changed. A process whose
    first thread ended shows its mappings under its other threads only (``/proc/PID/task/TID/maps``).
    ``pids``: the processes to look at (default: all). An inode of another file system that a workspace file
    happens to share only costs that file a save of its data.
    """
    found: set[int] = set()
    try:
        pids = pids if pids is not None else [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            lines = _maps(f"/proc/{pid}/maps")
            if not lines:  # no mapping, or a first thread that ended while others run on: ask those
                for task in os.listdir(f"/proc/{pid}/task"):
                    lines += _maps(f"/proc/{pid}/task/{task}/maps")
        except PermissionError:  # a process this one may not look into: what it maps is unknown
            return None
        except OSError:  # ended meanwhile
            continue
        for line in lines:
            fields = line.split(maxsplit=5)
            if len(fields) >= 5 and fields[1][1:2] == b"w" and fields[1][3:4] == b"s" and fields[4] != b"0":
                found.add(int(fields[4]))
    return frozenset(found)


def _maps(path: str) -> list[bytes]:
    try:
        with open(path, "rb") as maps:
            return maps.read().splitlines()
    except FileNotFoundError:
        return []


class FileOpError(Exception):
    """A workspace operation was refused or failed."""


class Workspace:
    """The workspace directory of one container."""

    def __init__(self, root: str, mapped: Callable[[], frozenset[int] | None] = mapped_for_writing) -> None:
        self.root = root
        self._mapped = mapped
        self._saves: dict[str, dict[bytes, Sent]] = {}
        """The files as the last two saves sent them (identity and digest), by the id each save reported: a save
        ``since`` one of them sends only what changed (the host may not have put the last one in place: then it
        names the one before)."""

    def _parts(self, path: object) -> list[bytes]:
        try:
            return split_path(path)
        except PathError as e:
            raise FileOpError(str(e)) from None

    # ---- restore (host → container) ----------------------------------------------------------

    def put_entries(self, entries: object) -> None:
        """Create the folders and write the file pieces of one batch of transfer items.

        Raises:
            FileOpError: a bad item or path, a link on the way, or no room.
        """
        parts: list[bytes] = []
        try:
            with TreeWriter(self.root, exclusive=False) as writer:
                for item in entries if isinstance(entries, list) else []:
                    parts, data, append = read_item(item)
                    writer.write(parts, data, append=append)
        except PathError as e:
            raise FileOpError(str(e)) from None
        except OSError as e:
            raise FileOpError(f"cannot restore {show(parts)}: {e.strerror}") from None

    # ---- reading ------------------------------------------------------------------------------

    def _open_dir(self, parts: list[bytes]) -> int:
        cursor = DirCursor(self.root)
        try:
            fd = os.dup(cursor.open(parts, create=False))
        except OSError as e:
            raise FileOpError(f"{show(parts)}: {e.strerror}") from None
        finally:
            cursor.close()
        return fd

    def read(self, path: str, max_bytes: int) -> tuple[bytes, int]:
        """Up to ``max_bytes`` of a regular file, and its size.

        Raises:
            FileOpError: missing, a symlink, or not a regular file.
        """
        parts = self._parts(path)
        dir_fd = self._open_dir(parts[:-1])
        try:
            fd = os.open(parts[-1], READ_FLAGS, dir_fd=dir_fd)
        except OSError as e:
            raise FileOpError(f"{path}: {e.strerror}") from None
        finally:
            os.close(dir_fd)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise FileOpError(f"{path}: not a regular file")
            chunks: list[bytes] = []
            remaining = max_bytes
            while remaining > 0 and (chunk := os.read(fd, min(remaining, 1 << 20))):
                chunks.append(chunk)
                remaining -= len(chunk)
            return b"".join(chunks), info.st_size
        finally:
            os.close(fd)

    def listdir(self, path: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The first ``limit`` entries of a directory (``path`` empty for the root) in the order the model's
        ``list_files`` shows them, folders first, then by name, each with its name, type and size; and how many
        entries the directory holds in all.

        Before: the first ``limit`` in directory order were sorted, so a folder of 3,000 files and a subfolder
        listed an arbitrary 500 of them, often without the subfolder. Only the ``limit`` first are kept while
        the directory is read (a heap), and only they are stat'ed: a folder of any size costs ``limit`` entries
        of memory.

        Raises:
            FileOpError: a bad path or not a directory.
        """
        fd = self._open_dir(self._parts(path) if path else [])
        try:
            total = 0

            def scan() -> Iterator[tuple[bool, str, os.DirEntry[str]]]:
                nonlocal total
                with os.scandir(fd) as it:
                    for entry in it:
                        total += 1
                        name = os.fsencode(entry.name).decode("utf-8", errors="replace")
                        yield not entry.is_dir(follow_symlinks=False), name, entry

            kept = heapq.nsmallest(limit, scan(), key=lambda e: (e[0], e[1]))
            entries: list[dict[str, Any]] = []
            for _, name, entry in kept:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # removed since it was listed
                    total -= 1
                    continue
                entries.append({"name": name, "type": _kind(info.st_mode), "size": info.st_size})
            return entries, total
        finally:
            os.close(fd)

    # ---- save (container → host) -------------------------------------------------------------

    def export(
        self,
        send: Callable[[dict[str, Any]], None],
        *,
        skip: frozenset[str],
        max_bytes: int,
        max_entries: int,
        since: object = None,
        keep: bool = False,
    ) -> dict[str, Any]:
        """Send every folder and regular file in ``workspace.entries`` notifications (see `transfer`): a file left
        as the save ``since`` (an id an earlier export returned, if still known) sent it goes as ``same``.

        Returns the reader's counts, ``save`` (this save's id: None unless ``keep``, a save a later one may
        continue; the saves kept are then this one and ``since``) and ``stamp`` (`stamp` of the workspace as walked).

        Raises:
            FileOpError: the workspace is over a cap, or an entry could not be read; nothing is skipped.
        """
        names = frozenset(os.fsencode(name) for name in skip)
        mapped = self._mapped()
        known = self._saves.get(since) if isinstance(since, str) and mapped is not None else None
        if known is not None and mapped:  # a file mapped for writing may have changed unseen: its data goes
            known = {rel: last for rel, last in known.items() if last[0][0] not in mapped}
        reader = TreeReader(self.root, skip=names, max_bytes=max_bytes, max_entries=max_entries, known=known)
        try:
            reader.check_size()  # over a cap by the sizes: refused before any data goes
            for batch in reader.batches():
                send({"method": "workspace.entries", "params": {"entries": batch}})
        except PathError as e:
            raise FileOpError(f"the workspace cannot be saved: {e}") from None
        except OSError as e:
            # What to do, when it is a permission a script took away (before: the error alone, every save failing).
            fix = (
                " (a script made it unreadable: make it readable again, os.chmod(path, 0o644), or delete it)"
                if e.errno in (errno.EACCES, errno.EPERM)
                else ""
            )
            raise FileOpError(f"the workspace cannot be saved: {show(reader.where)}: {e.strerror}{fix}") from None
        # A file mapped for writing, before the walk or since, may change unseen: never taken as unchanged later.
        after = self._mapped()
        unseen = None if mapped is None or after is None else mapped | after
        save = uuid.uuid4().hex if keep else None
        if save is not None:  # a save elsewhere (a copy into another folder) leaves the ones kept as they are
            kept = {since: known} if known is not None and isinstance(since, str) else {}
            seen = {r: s for r, s in reader.sent.items() if s[0][0] not in unseen} if unseen is not None else {}
            self._saves = {**kept, save: seen}
        mapped_here = unseen is None or any(s[0][0] in unseen for s in reader.sent.values())
        stamp = None if mapped_here else reader.stamp.hexdigest()  # mapped files: saved again each time
        return {**reader.counts, "save": save, "stamp": stamp}

    def stamp(self, *, skip: frozenset[str], max_entries: int) -> str | None:
        """A digest of every entry's path, kind, mode, size, mtime, ctime and inode (never a file's content): it
        changes when anything in the workspace is made, written, moved or deleted, even by a script that sets a
        file's mtime back (nothing sets the ctime back). None when the workspace cannot be
        walked (over ``max_entries``, an entry that cannot be read): then it is to be saved, which says why; and
        None while a file in it is mapped for writing (`mapped_for_writing`: a write through the mapping shows in
        no time), so that it is saved again each time.
        """
        mapped = self._mapped()
        if mapped is None:
            return None
        names = frozenset(os.fsencode(name) for name in skip)
        digest = hashlib.sha256()
        try:
            for entry in walk(self.root, skip=names, max_entries=max_entries):
                info = entry.info or os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
                if entry.kind == "file" and info.st_ino in mapped:
                    return None
                digest.update(stamp_line(entry.parts, info))  # the ctime too: a script cannot set it back
        except (PathError, OSError):
            return None
        return digest.hexdigest()

    # ---- reset --------------------------------------------------------------------------------

    def wipe(self, keep: frozenset[str] = frozenset()) -> None:
        """Delete everything in the workspace except the top-level names in ``keep``, as far as it can.

        Folders are emptied one at a time, their subfolders first moved up to the root, so neither
        the depth nor the width of a tree can exhaust descriptors or the stack. What cannot be
        deleted (a race with a process still running) stays: nothing is lost by leaving it.
        """
        self._saves.clear()
        root = os.open(self.root, DIR_FLAGS)
        try:
            queue = [n for n in os.listdir(root) if n not in keep]
            while queue:
                name = queue.pop()
                with contextlib.suppress(OSError):
                    self._empty_or_unlink(root, name, queue)
        finally:
            os.close(root)

    @staticmethod
    def _empty_or_unlink(root: int, name: str, queue: list[str]) -> None:
        if not stat.S_ISDIR(os.stat(name, dir_fd=root, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=root)
            return
        fd = os.open(name, DIR_FLAGS, dir_fd=root)
        try:
            os.fchmod(fd, 0o700)  # the script may have made it read-only
            for child in os.listdir(fd):
                if stat.S_ISDIR(os.stat(child, dir_fd=fd, follow_symlinks=False).st_mode):
                    moved = f".wipe-{uuid.uuid4().hex}"
                    os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=root)
                    queue.append(moved)
                else:
                    os.unlink(child, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=root)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "symlink" if stat.S_ISLNK(mode) else "other"
