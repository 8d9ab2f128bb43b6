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
(permission bits only), so a save never widens ``0600`` to ``0644`` nor drops an execute bit. Modes
are set last, so a folder the host made read-only still takes what is kept in it. An entry that
cannot be placed is left in the previous copy, which is then kept and named in a note.

Every entry is reached from its root folder's descriptor one component at a time (`FolderTree`), never
by a full path: a saved path may be up to 4,096 bytes, and with the host folder's path in front of it
longer than ``PATH_MAX``. Names in notes are shown escaped (`shown`): they come from the sandbox.
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

from sandbox._supervisor.fswalk import MAX_NAME_BYTES, split_path
from sandbox.host_folders import FolderTree, lexists, lstat_walk, move_out, shown

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
        for rel, st in lstat_walk(os.fsencode(root), MAX_RECORDED, skip_top=SKIP_TOP_LEVEL, strict=False):
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


def entries_below(root: Path, rels: Iterable[bytes]) -> dict[bytes, HostEntry]:
    """The `HostEntry` of each of ``rels`` (relative to ``root``) that is there, reached without a link."""
    tree = FolderTree(os.fsencode(root))
    try:
        return {rel: host_entry(st) for rel in rels if (st := tree.lstat(rel)) is not None}
    finally:
        tree.close()


def _digest(tree: FolderTree, rel: bytes) -> bytes | None:
    h = hashlib.sha256()
    try:
        dir_fd, name = tree.at(rel)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
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
    modes: dict[bytes, int] = field(default_factory=dict)
    """Permission bits to give entries of the saved copy once everything is in it (``b""``: its root)."""
    placed: set[bytes] = field(default_factory=set)
    """Paths of the saved copy that now hold a host entry (which keeps its own mode)."""

    def left(self, previous: Path) -> list[bytes]:
        """Files still in ``previous`` that the merge did not mean to drop (none, unless a move failed)."""
        return [
            rel
            for rel, st in lstat_walk(os.fsencode(previous), None)
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
    prev, stage = FolderTree(os.fsencode(previous)), FolderTree(os.fsencode(staging))
    try:
        _merge(prev, stage, record, sandbox_digests, out)
        if record is None:
            out.modes[b""] = stat.S_IMODE(os.stat(previous).st_mode)
        else:
            _sandbox_modes(stage, record, out)
        # Deepest first, the root last: a folder that becomes read-only has everything in it already.
        for rel in sorted(out.modes, key=lambda r: (r.count(b"/"), bool(r)), reverse=True):
            mode = out.modes[rel] & 0o777  # never setuid, setgid or sticky
            if rel:
                fd, name = stage.at(rel)
                os.chmod(name, mode, dir_fd=fd)
            else:
                os.chmod(stage.folder(b""), mode)
    finally:
        prev.close()
        stage.close()
    return out


def _merge(
    prev: FolderTree, stage: FolderTree, record: RestoreRecord | None, sandbox_digests: dict[bytes, bytes], out: Merge
) -> None:
    if prev.lstat(SKIP_TOP_LEVEL) is not None:
        _carry(prev, SKIP_TOP_LEVEL, stage, out)
    for rel, st in list(lstat_walk(prev.root, None, skip_top=SKIP_TOP_LEVEL)):
        if prev.lstat(rel) is None:
            continue  # moved with its folder
        dst = stage.lstat(rel)
        sandbox_file = dst is not None and stat.S_ISREG(dst.st_mode)
        sent = record.entries.get(rel) if record is not None else None
        sent_digest = record.digests.get(rel) if record is not None else None
        left_as_sent = sent_digest is not None and sandbox_digests.get(rel) == sent_digest and sandbox_file
        if stat.S_ISDIR(st.st_mode):
            if record is not None and sent is None and dst is None:
                _carry(prev, rel, stage, out)  # a folder made on the host meanwhile: kept whole
            continue
        if sent is not None and sent.kind == "file" and host_entry(st).identity == sent.identity:
            if left_as_sent:
                _replace(prev, rel, stage, out)  # unchanged on both sides: the host's file stays as it was
            else:
                out.dropped.add(rel)  # unchanged on the host since it was sent: the sandbox decides
            continue
        if not stat.S_ISREG(st.st_mode) or dst is None:
            _carry(prev, rel, stage, out)
        elif left_as_sent:
            _replace(prev, rel, stage, out)  # the sandbox left its copy as sent; the host changed it
        elif sandbox_file and _digest(prev, rel) == sandbox_digests.get(rel):
            out.dropped.add(rel)  # the same content on both sides
        else:
            _carry(prev, rel, stage, out, beside=True)


def _sandbox_modes(stage: FolderTree, record: RestoreRecord, out: Merge) -> None:
    """The host modes of the sandbox's own entries, into ``out.modes`` (host entries keep theirs)."""
    if record.root_mode is not None:
        out.modes.setdefault(b"", record.root_mode)
    for rel, entry in record.entries.items():
        if rel in out.placed or rel in out.modes:
            continue
        st = stage.lstat(rel)
        if st is not None and host_entry(st).kind == entry.kind != "other":
            out.modes[rel] = entry.mode


def _replace(prev: FolderTree, rel: bytes, stage: FolderTree, out: Merge) -> None:
    """Put the host's ``rel`` in place of the sandbox's copy of it (its inode, times and mode).

    Raises:
        OSError: the move failed.
    """
    fd, name = stage.at(rel)
    os.unlink(name, dir_fd=fd)
    _carry(prev, rel, stage, out)


def _carry(prev: FolderTree, rel: bytes, stage: FolderTree, out: Merge, *, beside: bool = False) -> None:
    """Move ``rel`` from ``prev`` to the same place in ``stage``, or beside the sandbox's copy when
    ``beside`` or when the sandbox has an entry there. Folders on the way are made; where the sandbox
    has a file instead of one of them, the entry stays in ``prev`` (`Merge.left` finds it).

    Raises:
        OSError: the move failed.
    """
    parts = rel.split(b"/")
    for i in range(1, len(parts)):
        folder = b"/".join(parts[:i])
        st = stage.lstat(folder)
        if st is None:
            fd, name = stage.at(folder)
            os.mkdir(name, 0o700, dir_fd=fd)  # the sandbox deleted the folder: it comes back with its host mode
            host = prev.lstat(folder)
            out.modes[folder] = stat.S_IMODE(host.st_mode) if host is not None else 0o755
            out.placed.add(folder)
        elif not stat.S_ISDIR(st.st_mode):
            return
    dst_fd, name = stage.at(rel)
    src_fd, src_name = prev.at(rel)  # two cursors: both stay open
    if beside or lexists(name, dst_fd):
        name = _free_name(name, dst_fd, src_fd)
        kept = b"/".join([*parts[:-1], name])
        out.notes.append(f"{shown(rel)}: both the host and the sandbox changed it; the sandbox's copy is saved as "
                         f"{shown(rel)} and the host's is kept as {shown(kept)}")  # fmt: skip
    else:
        out.placed.add(rel)
    move_out(src_fd, src_name, dst_fd, name)
    out.carried.add(rel)


def _free_name(name: bytes, *dir_fds: int) -> bytes:
    """``name.host`` (``.host-2``, …) taken in none of ``dir_fds`` (the saved copy's folder, and the host's,
    whose entries are still to be merged); a long name is cut to make room for the suffix."""
    n = 1
    while True:
        suffix = b".host" if n == 1 else b".host-%d" % n
        candidate = name[: MAX_NAME_BYTES - len(suffix)] + suffix
        if not any(lexists(candidate, fd) for fd in dir_fds):
            return candidate
        n += 1
