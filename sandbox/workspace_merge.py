"""Putting a saved workspace in place without losing anything the sandbox did not decide about.

A save brings back the container's ``/workspace`` as it is at the end. The host folder it goes to
may hold what the sandbox never saw or never changed: links and special files (they never cross), a
top-level ``servers`` entry (the tree's place in the container), and files written on the host
while the session ran (by the user, or by another session of the same folder that saved first).
Replacing the folder wholesale would delete them. So a save is a three-way merge of

- what the restore sent (`RestoreRecord`: each entry's ``lstat`` taken before it was read, each
  file's SHA-256 and each folder as sent; after a save, the sandbox's files and folders at that save),
- what the sandbox holds now (the staging folder the save was received into), and
- what the host folder holds now,

with these rules, path by path (`decide`):

- a host entry that never crossed (a link, a special file, top-level ``servers``, a ``.git`` at any depth) is kept;
- a host file the restore did not send, or changed since it was sent, is kept: it stays instead of the
  sandbox's copy when the sandbox left its copy as sent, and when both changed it the sandbox's copy
  takes the name and the host's is kept beside it as ``<name>.host`` (``.host-2``, …), with a note;
- likewise a host deletion stands when the sandbox left the entry as it was sent: a file the host deleted
  (or renamed) is not brought back when the sandbox's copy is the one sent; when the sandbox changed it,
  the sandbox's copy is saved, with a note that the host had deleted it; of a folder the host deleted,
  only what the sandbox made or changed in it comes back (the folder is made again only for that, with a
  note). The record a save leaves for the next one (`WorkspaceReceiver.next_record`) still holds what
  the sandbox had, so the next save does not bring the deleted entries back either;
- a host file its owner may not write (read-only: the user's protection) is never replaced nor deleted: the
  sandbox's copy, when it changed it, is saved beside it as ``<name>.sandbox``, with a note (a later save of the
  session replaces the copy an earlier one put there, unless the host changed or removed it since);
- everything else follows the sandbox: what it changed is saved, what it deleted is deleted, and
  a file neither side changed stays the host's very file (its inode and times too).

The merge happens in place, folder by folder (`sandbox.workspace_inplace`).

Modes are kept too: a file or folder the sandbox brings back gets the mode its host copy had
(permission bits only), so a save never widens ``0600`` to ``0644`` nor drops an execute bit.
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

from sandbox._supervisor.fswalk import READ_FLAGS, split_path
from sandbox.host_folders import FolderTree, lstat_walk

SKIP_TOP_LEVEL = b"servers"
"""The tree's place in the container: never workspace content, so a host entry of that name is kept."""
HOST_ONLY = {".git": "a git repository, whose config and hooks git runs as commands on the host"}
"""Names, at any depth, whose content the host acts on: never restored, never saved, never merged, never
recorded. Before: a script appended ``[core] fsmonitor = "…"`` to a restored ``.git/config``, the save put it in
the user's folder, and the next ``git status`` there (a shell prompt showing the branch runs one) ran the command
on the host. A ``.git`` file (a worktree's or a submodule's pointer to its repository) is one of them too."""
HOST_ONLY_NAMES = frozenset(name.encode() for name in HOST_ONLY)
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
    """What a restore sent from a host folder: ``entries`` (``lstat`` before reading), ``digests`` (SHA-256 of
    each file as sent) and ``folders`` (each folder sent), keyed by the path relative to the folder (``b"a/b"``).

    ``digests`` and ``folders`` are what the sandbox started from, ``entries`` what the host had then: after a
    save (`WorkspaceReceiver.next_record`) the first two hold what the sandbox saved, the host holding it or not.
    """

    root_mode: int | None = None
    entries: dict[bytes, HostEntry] = field(default_factory=dict)
    digests: dict[bytes, bytes] = field(default_factory=dict)
    folders: set[bytes] = field(default_factory=set)
    beside: dict[bytes, tuple[bytes, HostEntry]] = field(default_factory=dict)
    """The sandbox's copies of read-only host files that the session's saves put beside them: by the read-only
    file's path, the copy's name in its folder and the copy as that save left it. A later save of the session
    replaces such a copy while the host has left it as it was, rather than add one more (``<name>.sandbox-2``, …)."""

    @classmethod
    def before_restore(cls, root: Path) -> RestoreRecord:
        """The host folder's entries, taken before the restore reads them (so an edit made while the
        restore runs shows as a change at the save)."""
        record = cls()
        try:
            record.root_mode = stat.S_IMODE(os.stat(root).st_mode)
        except OSError:
            return record
        for rel, st in lstat_walk(
            os.fsencode(root), MAX_RECORDED, skip_top=SKIP_TOP_LEVEL, skip_any=HOST_ONLY_NAMES, strict=False
        ):
            record.entries[rel] = host_entry(st)
        return record

    def sent(self, batches: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
        """``batches`` passed through, each file's digest and each folder recorded on the way."""
        hashes: dict[bytes, Any] = {}
        for method, params in batches:
            for item in params.get("entries", ()):
                if "data" in item:
                    rel = b"/".join(split_path(item["path"]))
                    if not item.get("append"):
                        hashes[rel] = hashlib.sha256()
                    hashes[rel].update(base64.b64decode(item["data"]))
                elif item.get("dir") is True:
                    self.folders.add(b"/".join(split_path(item["path"])))
            yield method, params
        self.digests.update({rel: h.digest() for rel, h in hashes.items()})


def walk_order(rels: Iterable[bytes], *, deepest_first: bool = False) -> list[bytes]:
    """``rels`` in the order of a walk (a folder before what it holds; ``deepest_first``: after it), so that a
    `FolderTree` looking them up one after another opens each folder once: in another order, a tree of deep
    chains costs up to a whole path of opens per lookup (32,760 folders 63 deep: 9 s of host CPU instead of 0.3)."""
    return sorted(rels, key=lambda rel: rel.split(b"/"), reverse=deepest_first)


def entries_below(root: Path, rels: Iterable[bytes]) -> dict[bytes, HostEntry]:
    """The `HostEntry` of each of ``rels`` (relative to ``root``) that is there, reached without a link."""
    tree = FolderTree(os.fsencode(root))
    try:
        return {rel: host_entry(st) for rel in walk_order(rels) if (st := tree.lstat(rel)) is not None}
    finally:
        tree.close()


def digest_at(dir_fd: int, name: bytes) -> bytes | None:
    h = hashlib.sha256()
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
    finally:
        os.close(fd)
    return h.digest()


def unchanged(rel: bytes, host: os.stat_result, record: RestoreRecord | None) -> bool:
    """Whether ``host`` is the very file the restore sent as ``rel``, unchanged since."""
    sent = record.entries.get(rel) if record is not None else None
    now = host_entry(host)
    return sent is not None and sent.kind == "file" == now.kind and now.identity == sent.identity


def decide(
    rel: bytes,
    host: os.stat_result | None,
    saved: os.stat_result | None,
    record: RestoreRecord | None,
    sandbox_digests: dict[bytes, bytes],
    host_fd: int,
) -> str:
    """What becomes of ``rel`` (in the open host folder ``host_fd``), given the host's entry and the saved
    copy's (each an ``lstat``, or None): ``keep`` (the host's stays), ``move`` (the saved entry is moved in),
    ``into`` (a folder on both sides: merged in place), ``descend`` (a host folder the sandbox deleted: what
    in it is kept stays), ``drop`` / ``replace`` (a host file unchanged since it was sent goes; the saved
    entry, if any, takes its place), ``beside`` (both changed: the host's is kept as ``<name>.host``),
    ``evict`` (a host folder where the saved copy has a file: it is set aside); where the host has nothing
    but the sandbox started from an entry (a host deletion): ``gone`` (a file the sandbox left as sent: it
    stays deleted), ``revive`` (the sandbox changed it: moved in, with a note), ``sift`` (a folder the sandbox
    started from and still holds: only what it made or changed inside is moved in)."""
    if host is None:
        return _after_host_deletion(rel, saved, record, sandbox_digests)
    if stat.S_ISDIR(host.st_mode):
        sent = record.entries.get(rel) if record is not None else None
        if saved is None:
            return "descend" if sent is not None and sent.kind == "dir" else "keep"
        return "into" if stat.S_ISDIR(saved.st_mode) else "evict"
    saved_file = saved is not None and stat.S_ISREG(saved.st_mode)
    sent_digest = record.digests.get(rel) if record is not None else None
    left_as_sent = saved_file and sent_digest is not None and sandbox_digests.get(rel) == sent_digest
    if unchanged(rel, host, record):
        if left_as_sent:
            return "keep"  # unchanged on both sides: the host's file stays as it was
        return "drop" if saved is None else "replace"  # unchanged on the host since it was sent
    if saved is None:
        return "keep"
    if not stat.S_ISREG(host.st_mode):
        return "beside"
    if left_as_sent:
        return "keep"  # the sandbox left its copy as sent; the host changed it
    if saved_file and digest_at(host_fd, rel.rpartition(b"/")[2]) == sandbox_digests.get(rel):
        return "keep"  # the same content on both sides
    return "beside"


def _after_host_deletion(
    rel: bytes, saved: os.stat_result | None, record: RestoreRecord | None, sandbox_digests: dict[bytes, bytes]
) -> str:
    """`decide` where the host has no entry: ``move`` unless the sandbox started from one (the host deleted it)."""
    if record is None or saved is None:
        return "move"
    sent_digest, sent_folder = record.digests.get(rel), rel in record.folders
    if stat.S_ISDIR(saved.st_mode):
        return "sift" if sent_folder else "revive" if sent_digest is not None else "move"
    if sent_digest is not None and sandbox_digests.get(rel) == sent_digest:
        return "gone"  # the sandbox left it as sent: the host's deletion stands
    return "revive" if sent_digest is not None or sent_folder else "move"
