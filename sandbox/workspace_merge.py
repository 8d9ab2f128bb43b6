"""Putting a saved workspace in place without losing anything the sandbox did not decide about.

A save brings back the container's ``/workspace`` as it is at the end. The host folder it replaces
may hold what the sandbox never saw or never changed: links and special files (they never cross), a
top-level ``servers`` entry (the tree's place in the container), and files written on the host
while the session ran (by the user, or by another session of the same folder that saved first).
Replacing the folder wholesale would delete them. So a save is a three-way merge of

- what the restore sent (`RestoreRecord`: each entry's ``lstat`` taken before it was read, each
  file's SHA-256 as sent),
- what the sandbox holds now (the staging folder the save was received into), and
- what the host folder holds now,

with these rules, path by path:

- a host entry that never crossed (a link, a special file, top-level ``servers``) is kept;
- a host file the restore did not send, or changed since it was sent, is kept: it replaces the
  sandbox's copy when the sandbox left its copy as sent, and when both changed it the sandbox's copy
  keeps the name and the host's is kept beside it as ``<name>.host`` (``.host-2``, …), with a note;
- everything else follows the sandbox: what it changed is saved, what it deleted is deleted, and
  a file neither side changed stays the host's very file (its inode and times too).

Modes are kept too: a file or folder the sandbox brings back gets the mode its host copy had
(permission bits only), so a save never widens ``0600`` to ``0644`` nor drops an execute bit. An
entry that cannot be placed is left in the previous copy, which is then kept and named in a note.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox._supervisor.fswalk import split_path

SKIP_TOP_LEVEL = b"servers"
"""The tree's place in the container: never workspace content, so a host entry of that name is kept."""
MAX_RECORDED = 1 << 16
"""Entries a `RestoreRecord` walks at most: a restore refuses folders far smaller (`MAX_ENTRIES`)."""


@dataclass(frozen=True)
class HostEntry:
    """An entry of the host folder as the restore found it."""

    kind: str  # "dir", "file" or "other"
    mode: int
    identity: tuple[int, int, int]
    """(inode, size, mtime_ns): a write to the file or its replacement changes it. Not the ctime,
    which moving the folder aside and back changes too."""


def host_entry(st: os.stat_result) -> HostEntry:
    """A `HostEntry` from an ``lstat`` result."""
    kind = "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"
    return HostEntry(kind, stat.S_IMODE(st.st_mode), (st.st_ino, st.st_size, st.st_mtime_ns))


@dataclass
class RestoreRecord:
    """What a restore sent from a host folder: ``entries`` (``lstat`` before reading) and ``digests``
    (SHA-256 of each file as sent), keyed by the path relative to the folder (``b"a/b"``)."""

    root_mode: int | None = None
    entries: dict[bytes, HostEntry] = field(default_factory=dict)
    digests: dict[bytes, bytes] = field(default_factory=dict)

    @classmethod
    def before_restore(cls, root: Path) -> RestoreRecord:
        """The host folder's entries, taken before the restore reads them (so an edit made while the
        restore runs shows as a change at the save)."""
        record = cls()
        try:
            record.root_mode = stat.S_IMODE(os.stat(root).st_mode)
        except OSError:
            return record
        for rel, st in _lstat_walk(os.fsencode(root), MAX_RECORDED, strict=False):
            record.entries[rel] = host_entry(st)
        return record

    def sent(self, batches: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
        """``batches`` passed through, each file's digest recorded on the way."""
        hashes: dict[bytes, Any] = {}
        for method, params in batches:
            for item in params.get("entries", ()):
                if "data" in item:
                    rel = b"/".join(split_path(item["path"]))
                    if not item.get("append"):
                        hashes[rel] = hashlib.sha256()
                    hashes[rel].update(base64.b64decode(item["data"]))
            yield method, params
        self.digests.update({rel: h.digest() for rel, h in hashes.items()})


def _lstat_walk(
    root: bytes, limit: int | None, *, skip_top: bool = True, strict: bool = True
) -> Iterator[tuple[bytes, os.stat_result]]:
    """``(relative path, lstat)`` of every entry below ``root`` without following links, a folder
    before its content; top-level ``servers`` left out (``skip_top``); at most ``limit`` entries.

    Raises:
        OSError: an entry could not be listed or read (``strict``; else it is passed over).
    """
    stack = [b""]
    count = 0
    while stack:
        rel = stack.pop()
        try:
            names = sorted(os.listdir(os.path.join(root, rel) if rel else root))
        except OSError:
            if strict:
                raise
            continue
        for name in names:
            if skip_top and not rel and name == SKIP_TOP_LEVEL:
                continue
            child = rel + b"/" + name if rel else name
            try:
                st = os.lstat(os.path.join(root, child))
            except OSError:
                if strict:
                    raise
                continue
            count += 1
            if limit is not None and count > limit:
                return
            yield child, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(child)


def _digest(path: bytes) -> bytes | None:
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.digest()


@dataclass
class Merge:
    """The outcome of `merge`."""

    notes: list[str] = field(default_factory=list)
    """What the user should know: conflicts, and anything left in the previous copy."""
    carried: set[bytes] = field(default_factory=set)
    """Host entries moved into the saved copy."""
    dropped: set[bytes] = field(default_factory=set)
    """Host files the sandbox's copy (or its deletion) replaces: unchanged since they were sent."""

    def left(self, previous: Path) -> list[bytes]:
        """Files still in ``previous`` that the merge did not mean to drop (none, unless a move failed)."""
        return [
            rel
            for rel, st in _lstat_walk(os.fsencode(previous), None, skip_top=False)
            if not stat.S_ISDIR(st.st_mode) and rel not in self.dropped
        ]


def merge(previous: Path, staging: Path, record: RestoreRecord | None, sandbox_digests: dict[bytes, bytes]) -> Merge:
    """Move into ``staging`` (the sandbox's saved copy) what of ``previous`` (the host folder, already
    moved aside) must be kept, and give the sandbox's entries their host modes (see the module's rules).

    ``record`` is None when the save goes to a folder nothing was restored from: then every host
    entry is kept (the sandbox's copy wins where both hold a file). ``sandbox_digests`` are the
    SHA-256 of the files the save wrote, by path.

    Raises:
        OSError: a move or a mode change failed (both folders are then left as they are).
    """
    out = Merge()
    prev, stage = os.fsencode(previous), os.fsencode(staging)
    if record is not None:
        _restore_modes(stage, record)
    else:
        os.chmod(stage, stat.S_IMODE(os.stat(prev).st_mode))
    if os.path.lexists(os.path.join(prev, SKIP_TOP_LEVEL)):
        _carry(prev, SKIP_TOP_LEVEL, stage, out)
    for rel, st in list(_lstat_walk(prev, None)):
        src = os.path.join(prev, rel)
        if not os.path.lexists(src):
            continue  # moved with its folder
        dst = os.path.join(stage, rel)
        sent = record.entries.get(rel) if record is not None else None
        if stat.S_ISDIR(st.st_mode):
            if record is not None and sent is None and not os.path.lexists(dst):
                _carry(prev, rel, stage, out)  # a folder made on the host meanwhile: kept whole
            continue
        if sent is not None and sent.kind == "file" and host_entry(st).identity == sent.identity:
            sent_digest = record.digests.get(rel) if record is not None else None
            if sent_digest is not None and sandbox_digests.get(rel) == sent_digest and os.path.isfile(dst):
                os.unlink(dst)  # unchanged on both sides: the host's file stays as it was (inode, times)
                os.rename(src, dst)
            else:
                out.dropped.add(rel)  # unchanged on the host since it was sent: the sandbox decides
            continue
        if not stat.S_ISREG(st.st_mode) or not os.path.lexists(dst):
            _carry(prev, rel, stage, out)
            continue
        sent_digest = record.digests.get(rel) if record is not None else None
        if sent_digest is not None and sandbox_digests.get(rel) == sent_digest and os.path.isfile(dst):
            os.unlink(dst)  # the sandbox left its copy as sent; the host changed it
            _carry(prev, rel, stage, out)
        elif os.path.isfile(dst) and _digest(src) == sandbox_digests.get(rel):
            out.dropped.add(rel)  # the same content on both sides
        else:
            _carry(prev, rel, stage, out, beside=True)
    return out


def _restore_modes(stage: bytes, record: RestoreRecord) -> None:
    if record.root_mode is not None:
        os.chmod(stage, record.root_mode & 0o777)
    for rel, entry in record.entries.items():
        path = os.path.join(stage, rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if host_entry(st).kind == entry.kind != "other":
            os.chmod(path, entry.mode & 0o777)  # never setuid, setgid or sticky on what the sandbox wrote


def _carry(prev: bytes, rel: bytes, stage: bytes, out: Merge, *, beside: bool = False) -> None:
    """Move ``rel`` from ``prev`` to the same place in ``stage``, or beside the sandbox's copy when
    ``beside`` or when the sandbox has an entry there. Folders on the way are made; where the sandbox
    has a file instead of one of them, the entry stays in ``prev`` (`Merge.left` finds it).

    Raises:
        OSError: the move failed.
    """
    parts = rel.split(b"/")
    parent = stage
    for i, name in enumerate(parts[:-1]):
        parent = os.path.join(parent, name)
        if not os.path.lexists(parent):
            os.mkdir(parent, 0o700)  # the sandbox deleted the folder: it comes back with its host mode
            os.chmod(parent, stat.S_IMODE(os.lstat(os.path.join(prev, *parts[: i + 1])).st_mode) & 0o777)
        elif os.path.islink(parent) or not os.path.isdir(parent):
            return
    dst = os.path.join(parent, parts[-1])
    if beside or os.path.lexists(dst):
        dst = _free_name(parent, parts[-1])
        shown, kept = os.fsdecode(rel), os.fsdecode(os.path.relpath(dst, stage))
        out.notes.append(f"{shown}: both the host and the sandbox changed it; the sandbox's copy is saved as "
                         f"{shown} and the host's is kept as {kept}")  # fmt: skip
    os.rename(os.path.join(prev, rel), dst)
    out.carried.add(rel)


def _free_name(parent: bytes, name: bytes) -> bytes:
    n = 1
    while True:
        candidate = os.path.join(parent, name + (b".host" if n == 1 else b".host-%d" % n))
        if not os.path.lexists(candidate):
            return candidate
        n += 1
