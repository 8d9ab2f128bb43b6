"""The workspace transfer format, read and written the same way by the container and the host.

A tree crosses as *items* in batches: ``{"path": <wire path>, "dir": true}`` for a folder, and
``{"path": <wire path>, "data": <base64>, "append": <bool>}`` for a piece of a regular file (a
file of more than `CHUNK_BYTES` takes several, the first with ``append`` false), and, in a save that
continues an earlier one (``TreeReader(known=…)``), ``{"path": <wire path>, "same": true}`` for a file
holding what that save sent (the host has its content: it is not sent again). A restore sends
them in ``workspace.put {entries}`` requests, a save in ``workspace.entries {entries}``
notifications; every batch stays under `BATCH_BYTES` of JSON and `BATCH_ITEMS` items, so the number
and length of the paths never decide the size of a frame, nor its values.

What a tree may hold, counted the same way in both directions: at most `MAX_ENTRIES` entries
(files, folders and links all count), and at most ``max_bytes`` counting `ENTRY_BYTES` per file or
folder (what an empty folder costs on the host's disk) plus the files' data. Links and special
files are never sent (`TreeReader.counts` has them as ``skipped``); nothing else is ever skipped:
an entry that cannot be read stops the transfer with an error.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Sequence
from typing import Any

from .fswalk import READ_FLAGS, WRITE_FLAGS, DirCursor, PathError, encode_path, show, split_path, walk

MAX_ENTRIES = 32_768
ENTRY_BYTES = 4096
BATCH_BYTES = 4 << 20
CHUNK_BYTES = 2 << 20  # under 3 MiB in base64: one item always fits a batch
BATCH_ITEMS = 16_384
"""Items in one batch: at most five values each (a file, its path in base64), well within a frame's budget."""

Identity = tuple[int, int, int, int]
"""A file's inode, size, mtime and ctime (ns): a write, a replacement or a ``touch`` changes it, and nothing
a script does sets a ctime back."""
Sent = tuple[Identity, bytes]
"""A file as a save sent it: its `Identity` before it was read, and the SHA-256 of what was sent."""


def identity(info: os.stat_result) -> Identity:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def stamp_line(parts: Sequence[bytes], info: os.stat_result) -> bytes:
    """One entry's part of a workspace stamp: its path, mode, size, mtime, ctime and inode (no content)."""
    times = (info.st_mtime_ns, info.st_ctime_ns)
    return b"/".join(parts) + b"\0" + b"%o %d %d %d %d\0" % (info.st_mode, info.st_size, *times, info.st_ino)


def over_bytes(max_bytes: int) -> str:
    """The reason a tree is refused for its size."""
    return f"more than {max_bytes} bytes (its files' data plus {ENTRY_BYTES} bytes per file and folder)"


def read_item(item: Any) -> tuple[list[bytes], bytes | None, bool]:
    """``(parts, data, append)`` of one item; ``data`` is None for a folder.

    Raises:
        PathError: not an item, a refused path, or data that is not base64.
    """
    if not isinstance(item, dict):
        raise PathError(f"an entry must be an object, not {type(item).__name__}")
    parts = split_path(item.get("path"))
    if item.get("dir") is True:
        return parts, None, False
    if not isinstance(item.get("data"), str):
        raise PathError(f"{show(parts)}: an entry needs base64 data or dir: true")
    try:
        data = base64.b64decode(item["data"], validate=True)
    except (binascii.Error, ValueError):
        raise PathError(f"{show(parts)}: the data is not base64") from None
    return parts, data, item.get("append") is True


class TreeReader:
    """Reads a tree as batches of items, within the caps, without following a link.

    A file that ``known`` (the files an earlier save sent, by path) holds is sent as ``same``, without its data,
    when its identity is the one known (told by the walk's ``lstat``), or else when its bytes are the ones sent
    (read and hashed here: a file a script only touched, or wrote again the same; before, it crossed whole, and
    the host wrote it and then found it unchanged: 32,000 touched files cost the host 5-19 s of CPU a save).

    Attributes:
        counts: ``files`` (sent with their data), ``same``, ``dirs``, ``bytes`` (of data) and ``skipped``
            (links, special files) so far.
        where: the parts of the entry being read (for error messages).
        sent: each file as sent (or as known, for ``same``), by path (``b"a/b"``): a later save's ``known``.
        stamp: the SHA-256 of every entry's `stamp_line` (``Workspace.stamp`` of the tree as it was walked).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        skip: frozenset[bytes],
        max_bytes: int,
        max_entries: int,
        known: dict[bytes, Sent] | None = None,
        skip_any: frozenset[bytes] = frozenset(),
    ):
        self.root = root
        self.skip = skip
        self.skip_any = skip_any
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.known = known or {}
        self.counts = {"files": 0, "same": 0, "dirs": 0, "bytes": 0, "skipped": 0}
        self.where: tuple[bytes, ...] = ()
        self.sent: dict[bytes, Sent] = {}
        self.stamp = hashlib.sha256()
        self._charged = 0

    def _charge(self, size: int) -> None:
        self._charged += size
        if self._charged > self.max_bytes:
            raise PathError(over_bytes(self.max_bytes))

    def check_size(self) -> None:
        """Walk the tree without opening a file and refuse it when `items` would send more than the caps allow,
        counting each file at its size (a file ``known`` unchanged at none, as `items` charges it): a save
        over them fails before any data is sent. `items` still counts what it reads (a file may grow meanwhile).

        Before: the save streamed up to ``max_bytes`` (a 1 TiB sparse file: 380 MiB written into the host's
        staging folder, 4-5 s of its CPU) before the cap refused it.

        Raises:
            PathError: over a cap, or a path that cannot cross.
            OSError: an entry could not be read.
        """
        total = 0
        for entry in walk(self.root, skip=self.skip, max_entries=self.max_entries, skip_any=self.skip_any):
            assert entry.info is not None  # `walk` always gives it
            self.where = entry.parts
            if entry.kind == "other":
                continue
            total += ENTRY_BYTES
            last = self.known.get(b"/".join(entry.parts)) if entry.kind == "file" else None
            if entry.kind == "file" and (last is None or last[0] != identity(entry.info)):
                total += entry.info.st_size
            if total > self.max_bytes:
                raise PathError(over_bytes(self.max_bytes))

    def items(self) -> Iterator[dict[str, Any]]:
        """Every folder and regular file as items, a folder before what it holds.

        Raises:
            PathError: over a cap, or a path that cannot cross.
            OSError: an entry could not be read, or a file changed kind while being read.
        """
        for entry in walk(self.root, skip=self.skip, max_entries=self.max_entries, skip_any=self.skip_any):
            self.where = entry.parts
            assert entry.info is not None  # `walk` always gives it
            self.stamp.update(stamp_line(entry.parts, entry.info))
            if entry.kind == "other":
                self.counts["skipped"] += 1
                continue
            self._charge(ENTRY_BYTES)
            path = encode_path(entry.parts)
            if entry.kind == "dir":
                self.counts["dirs"] += 1
                yield {"path": path, "dir": True}
                continue
            rel = b"/".join(entry.parts)
            last = self.known.get(rel)
            if last is not None and last[0] == identity(entry.info):  # told by the walk's lstat: not opened
                yield self._same(path, rel, last)
                continue
            fd = os.open(entry.name, READ_FLAGS, dir_fd=entry.dir_fd)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise PathError(f"{show(entry.parts)} changed while it was being read")
                now = identity(info)  # before reading: a write meanwhile changes it for next time
                if last is not None and _digest(fd, last[0][1]) == last[1]:
                    yield self._same(path, rel, (now, last[1]))  # touched, or the same bytes written again
                    continue
                os.lseek(fd, 0, os.SEEK_SET)
                self.counts["files"] += 1
                digest = hashlib.sha256()
                first = True
                while (chunk := os.read(fd, CHUNK_BYTES)) or first:
                    self._charge(len(chunk))
                    self.counts["bytes"] += len(chunk)
                    digest.update(chunk)
                    yield {"path": path, "data": base64.b64encode(chunk).decode("ascii"), "append": not first}
                    first = False
                self.sent[rel] = (now, digest.digest())
            finally:
                os.close(fd)

    def _same(self, path: Any, rel: bytes, sent: Sent) -> dict[str, Any]:
        self.sent[rel] = sent
        self.counts["same"] += 1
        return {"path": path, "same": True}

    def batches(self) -> Iterator[list[dict[str, Any]]]:
        """`items` grouped into lists of under `BATCH_BYTES` of JSON and at most `BATCH_ITEMS` items each.

        Raises:
            PathError, OSError: as `items`.
        """
        batch: list[dict[str, Any]] = []
        size = 0
        for item in self.items():
            data = item.get("data", "")
            item_size = len(json.dumps(item["path"], ensure_ascii=False).encode("utf-8")) + len(data) + 40
            if batch and (size + item_size > BATCH_BYTES or len(batch) >= BATCH_ITEMS):
                yield batch
                batch, size = [], 0
            batch.append(item)
            size += item_size
        if batch:
            yield batch


def _digest(fd: int, size: int) -> bytes | None:
    """The SHA-256 of an open file's bytes, or None when it holds more or fewer than ``size`` (read no further)."""
    digest, left = hashlib.sha256(), size
    while left > 0 and (chunk := os.read(fd, min(left, CHUNK_BYTES))):
        digest.update(chunk)
        left -= len(chunk)
    return digest.digest() if left == 0 and not os.read(fd, 1) else None


class TreeWriter:
    """Writes items below a root, never following a link; a file's pieces are appended in order.

    A folder comes before what it holds (as `TreeReader` sends it): an item whose folder is not there is
    refused, never made on the way, so every folder a tree holds crossed as an item and was counted.
    """

    def __init__(self, root: str | os.PathLike[str], *, exclusive: bool) -> None:
        """``exclusive``: a file may not exist before its first piece (a save into a fresh folder)."""
        self._cursor = DirCursor(root)
        self._new_file = os.O_EXCL if exclusive else os.O_TRUNC

    def write(self, parts: Sequence[bytes], data: bytes | None, *, append: bool) -> None:
        """Create the folder ``parts`` (``data`` None) or write a piece of the file ``parts``.

        Raises:
            OSError: the folder it is in is missing (``ENOENT``), a link or a file on the way, an existing
                file (``exclusive``), or a write error.
        """
        try:
            dir_fd = self._cursor.open(parts[:-1], create=False)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "the folder it is in was not sent before it") from None
        if data is None:
            with contextlib.suppress(FileExistsError):
                os.mkdir(parts[-1], 0o755, dir_fd=dir_fd)
            self._cursor.open(parts, create=False)  # a link or a file of that name is refused
            return
        fd = os.open(parts[-1], WRITE_FLAGS | (os.O_APPEND if append else self._new_file), 0o644, dir_fd=dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(21, "not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def close(self) -> None:
        self._cursor.close()

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
