"""Merging a saved copy into the host folder in place, by the rules of `sandbox.workspace_merge`.

The merge happens in place (`merge`): every host folder that is a folder in the result stays (its inode,
its mode, its mount: a shell or an editor inside it keeps it), and only the entries that change move.
Each folder is listed once (`_snapshot`); then a saved entry is moved in never over an entry another
process made meanwhile (it stays in the saved copy, named in a note), and a host file the sandbox
replaced or deleted is first moved out (`AsideArea`), looked at again and only then dropped, so a write
that came after the listing is kept. Where a rename cannot reach (a mount inside the folder), saved
entries are copied in and host files are set aside under a temporary name in their own folder.

Where the host deleted what the sandbox left as it was sent, nothing is moved in (`_sift` takes such files
out of a saved folder the host deleted, and the folder when nothing else is in it).

A host folder the sandbox replaced by a file is merged as if the sandbox had deleted it (`_evict`): what it
deleted in it goes; when something in it stays (changed, made or read-only on the host, a link, a ``.git``), the
folder stays too, as ``<name>.host`` beside the sandbox's file, with a note.

Every entry is reached from its folder's descriptor one component at a time, never by a full path: a saved path
may be up to 4,096 bytes, and with the host folder's path in front of it longer than ``PATH_MAX``. Names in notes
are shown escaped (`shown`): they come from the sandbox.

(Over 400 lines: one walk, the merge, whose cases — move in, set beside, set aside, drop, bring back, sift —
each need the others' bookkeeping of what was moved where.)
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandbox._supervisor.fswalk import DIR_FLAGS, MAX_DEPTH, DirCursor
from sandbox._supervisor.transfer import ENTRY_BYTES
from sandbox.host_folders import (
    FolderTree,
    copy_new,
    fd_path,
    free_name,
    lexists,
    lstat_walk,
    move_out,
    open_folder,
    open_up,
    remove_entry,
    remove_tree,
    shown,
)
from sandbox.workspace_merge import (
    HOST_ONLY_NAMES,
    HostEntry,
    RestoreRecord,
    decide,
    digest_at,
    host_entry,
    unchanged,
    walk_order,
)


class AsideArea:
    """Where host entries a merge takes out of the folder go: ``<beside>/<prefix>*/w/<their path>``, made
    when first needed, on the folder's own mount."""

    def __init__(self, beside: Path, prefix: str) -> None:
        self.beside, self.prefix = beside, prefix
        self.path: Path | None = None
        self._cursor: DirCursor | None = None

    @property
    def kept(self) -> Path | None:
        """The folder holding what was set aside (None: nothing was)."""
        return None if self.path is None else self.path / "w"

    def _folder(self, rel: bytes) -> int:
        if self._cursor is None:
            path = Path(tempfile.mkdtemp(prefix=self.prefix, dir=self.beside))
            self.path = path
            os.mkdir(path / "w", 0o700)
            self._cursor = DirCursor(path / "w")
        return self._cursor.open(rel.split(b"/") if rel else [], create=True)

    def put(self, host_fd: int, name: bytes, rel: bytes, *, temporary: bool) -> tuple[int, bytes, bool] | None:
        """Move the host entry ``name`` (at ``rel``) aside: ``(folder, name, temporary)`` where it is now
        (the folder valid until the next call), or None when it is gone. Where the area cannot be reached
        by a rename (another mount), ``temporary`` allows a free temporary name in the entry's own folder.

        Raises:
            OSError: the move failed (``EXDEV`` when the area is on another mount and no ``temporary``).
        """
        try:
            fd = self._folder(rel.rpartition(b"/")[0])
            move_out(host_fd, name, fd, name)
            return fd, name, False
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno != errno.EXDEV or not temporary:
                raise
        now = free_name(b"." + name, b".tooltree-drop", host_fd)
        try:
            move_out(host_fd, name, host_fd, now)
        except FileNotFoundError:
            return None
        return host_fd, now, True

    def left(self, dropped: set[bytes]) -> list[bytes]:
        """Files set aside that the merge did not mean to drop."""
        if self.kept is None:
            return []
        return [
            rel
            for rel, st in lstat_walk(os.fsencode(self.kept), None)
            if not stat.S_ISDIR(st.st_mode) and rel not in dropped
        ]

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None

    def remove(self) -> None:
        self.close()
        if self.path is not None:
            remove_tree(self.path)


@dataclass
class Merge:
    """The outcome of `merge`, filled as it goes (so a merge that failed midway still says what it did)."""

    notes: list[str] = field(default_factory=list)
    """Conflicts, in the order met."""
    dropped: set[bytes] = field(default_factory=set)
    """Host files set aside that the merge drops (unchanged since they were sent)."""
    taken: list[bytes] = field(default_factory=list)
    """Saved entries left in the saved copy: another process made an entry of that name meanwhile."""
    blocked: list[bytes] = field(default_factory=list)
    """Saved entries left in the saved copy: the host entry in their place cannot move (a mount point)."""
    foreign: set[bytes] = field(default_factory=set)
    """Files the sandbox holds whose host file, kept, is not the sandbox's: changed on the host (or by another
    session's save) or read-only there. The next save takes the host's as changed (a change of the sandbox's is
    then a conflict, never a replacement)."""
    beside: dict[bytes, tuple[bytes, HostEntry]] = field(default_factory=dict)
    """The sandbox's copies saved beside read-only host files (`RestoreRecord.beside`), by the host file's path."""
    room: int | None = None
    """Bytes of file data (in whole `ENTRY_BYTES` pages) the folder may still take beside the sandbox's files before a
    restore could no longer hold it (None: no bound): a read-only host file kept beside the sandbox's copy of it
    takes its size from it, and a copy that does not fit is not saved (`_Merger._protected`)."""


def merge(
    dest_fd: int,
    staging: Path,
    record: RestoreRecord | None,
    sandbox_digests: dict[bytes, bytes],
    aside: AsideArea,
    out: Merge,
    *,
    skip_top: frozenset[bytes],
    same: set[bytes] | frozenset[bytes] = frozenset(),
    present: frozenset[bytes] = frozenset(),
) -> None:
    """Merge ``staging`` (the saved copy) into the open host folder ``dest_fd`` in place (see the module's
    rules); host entries that go are moved into ``aside``. Top-level names in ``skip_top``, and `HOST_ONLY_NAMES` at
    any depth, are never touched on the host, nor moved in (the receiver never writes one into ``staging``).

    ``record`` is None when the save goes to a folder nothing was restored from: then every host entry is
    kept (the sandbox's copy takes the name where both hold a different file). ``sandbox_digests`` are the
    SHA-256 of the files the save wrote, by path. ``same`` are the files the sandbox sent as left as the save
    before sent them (not in ``staging``): the host's entry stays, or its deletion does. ``present`` are folders the
    sandbox holds, not in ``staging`` (nothing in them was written): where the host has a folder of that name it is
    merged in place as one the sandbox holds with nothing of it staged (what the sandbox deleted in it goes, the rest
    stays); the receiver stages those the host no longer holds as a folder, so another entry there is only a change
    made during the merge, which stays.

    Raises:
        OSError: a move failed; ``out`` says what was done (nothing is deleted: set aside, or in ``staging``).
    """
    stage_fd = open_folder(staging)
    try:
        if record is not None:
            _sandbox_modes(dest_fd, stage_fd, record)
        _Merger(record, sandbox_digests, aside, out, skip_top, same, present).folder(dest_fd, stage_fd, b"", 0)
    finally:
        os.close(stage_fd)


def _sandbox_modes(dest_fd: int, stage_fd: int, record: RestoreRecord) -> None:
    """Give the saved copy's entries the modes their host copies have, deepest first: a file the mode of the host's
    file now (a ``chmod`` on the host during the session stands), else the mode it had when it was sent; a folder
    the host has now is left alone (it stays, with its own mode).

    Before, always the mode at the restore: a file the user made ``0600`` during the session was put back ``0644``
    by the save of the sandbox's changes to it, and one made executable lost the bit."""
    stage, host = FolderTree(fd_path(stage_fd)), FolderTree(fd_path(dest_fd))
    try:
        for rel in walk_order(record.entries, deepest_first=True):  # what a folder holds before the folder
            entry, st = record.entries[rel], stage.lstat(rel)
            if st is None or host_entry(st).kind != entry.kind or entry.kind == "other":
                continue
            now = _host_lstat(host, rel)
            if entry.kind == "dir":
                if now is not None and stat.S_ISDIR(now.st_mode):
                    continue
                mode = entry.mode
            else:
                mode = stat.S_IMODE(now.st_mode) if now is not None and stat.S_ISREG(now.st_mode) else entry.mode
            fd, name = stage.at(rel)
            os.chmod(name, mode & 0o777, dir_fd=fd)  # never setuid, setgid or sticky
    finally:
        stage.close()
        host.close()


def _read_only_file(host: os.stat_result | None) -> bool:
    """Whether ``host`` is a regular file its owner may not write: the user's protection, which a save keeps."""
    return host is not None and stat.S_ISREG(host.st_mode) and not host.st_mode & stat.S_IWUSR


def _host_lstat(tree: FolderTree, rel: bytes) -> os.stat_result | None:
    """The host's entry at ``rel`` now; None where there is none, or in a folder this process cannot search."""
    try:
        return tree.lstat(rel)
    except OSError:
        return None


def _lstat(name: bytes, dir_fd: int | None) -> os.stat_result | None:
    if dir_fd is None:
        return None
    try:
        return os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None


def _snapshot(host_fd: int, stage_fd: int | None) -> list[tuple[bytes, os.stat_result | None, os.stat_result | None]]:
    """``(name, host lstat, saved lstat)`` of every name in either folder, sorted: what the merge decides on."""
    names = {os.fsencode(n) for n in os.listdir(host_fd)}
    if stage_fd is not None:
        names.update(os.fsencode(n) for n in os.listdir(stage_fd))
    return [(name, _lstat(name, host_fd), _lstat(name, stage_fd)) for name in sorted(names)]


class _Merger:
    def __init__(
        self,
        record: RestoreRecord | None,
        digests: dict[bytes, bytes],
        aside: AsideArea,
        out: Merge,
        skip_top: frozenset[bytes],
        same: set[bytes] | frozenset[bytes],
        present: frozenset[bytes],
    ) -> None:
        self.record, self.digests, self.aside, self.out, self.skip_top = record, digests, aside, out, skip_top
        self.same, self.present = same, present
        # The folders that held anything when the record was taken: an unstaged folder outside them holds only what the
        # host made since, which stays, so the merge has nothing to do in it and does not open it.
        known = (*record.entries, *record.digests, *record.folders) if record is not None and present else ()
        self.holding = {rel.rpartition(b"/")[0] for rel in known}

    def folder(self, host_fd: int, stage_fd: int | None, rel: bytes, depth: int) -> None:
        """Merge the open saved folder ``stage_fd`` (None: the sandbox deleted it) into the open host folder."""
        mode = stat.S_IMODE(os.fstat(host_fd).st_mode)
        open_up(host_fd, mode)  # the host may have made it read-only: entries move out and in
        try:
            for name, host, saved in _snapshot(host_fd, stage_fd):
                path = rel + b"/" + name if rel else name
                if (not rel and name in self.skip_top) or name in HOST_ONLY_NAMES:
                    continue  # tooltree's own, or the host's: the host's stays, and a save never stages one
                self._entry(host_fd, stage_fd, name, path, host, saved, depth)
        finally:
            if mode & stat.S_IRWXU != stat.S_IRWXU:
                os.fchmod(host_fd, mode)

    def _entry(
        self,
        host_fd: int,
        stage_fd: int | None,
        name: bytes,
        rel: bytes,
        host: os.stat_result | None,
        saved: os.stat_result | None,
        depth: int,
    ) -> None:
        if saved is None and rel in self.present:
            if host is not None and stat.S_ISDIR(host.st_mode) and rel in self.holding:
                self._descend(host_fd, None, name, rel, depth, present=True)
            return  # not a folder since the receiver looked: another process's entry, which stays
        # A file the sandbox left as it was sent: the host's entry stays, whatever it is now (as `decide` keeps it).
        action = "keep" if rel in self.same else decide(rel, host, saved, self.record, self.digests, host_fd)
        if action == "keep" and rel in self.digests and not self._holds_ours(host_fd, name, rel, host):
            self.out.foreign.add(rel)
        if action in ("keep", "gone"):
            if saved is not None and stat.S_ISREG(saved.st_mode) and stage_fd is not None:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=stage_fd)  # the sandbox's copy is not needed
            return
        if action in ("revive", "sift"):
            self._bring_back(stage_fd, name, host_fd, rel, depth, folder=action == "sift")
            return
        if action in ("into", "descend"):
            self._descend(host_fd, stage_fd if action == "into" else None, name, rel, depth)
            return
        if action in ("drop", "replace", "beside") and _read_only_file(host):
            self._protected(stage_fd, name, host_fd, rel, deleted=action == "drop")
            self.out.foreign.add(rel)
            return
        if action in ("drop", "replace"):
            self._drop(host_fd, stage_fd, name, rel, replaced=action == "replace")
        if action == "beside":
            room = self._beside(host_fd, stage_fd, name, rel)
        elif action == "evict":
            room = self._evict(host_fd, stage_fd, name, rel, depth)
        else:
            room = action in ("move", "replace")
        if room:
            self._move_in(stage_fd, name, host_fd, rel)

    def _holds_ours(self, host_fd: int, name: bytes, rel: bytes, host: os.stat_result | None) -> bool:
        """Whether the host file ``rel`` the merge keeps holds what the sandbox holds: the very file sent (or saved)
        and unchanged since, or one of the same content (read only for a host file changed since)."""
        if host is None or not stat.S_ISREG(host.st_mode):
            return False
        return unchanged(rel, host, self.record) or digest_at(host_fd, name) == self.digests.get(rel)

    def _descend(
        self, host_fd: int, stage_fd: int | None, name: bytes, rel: bytes, depth: int, *, present: bool = False
    ) -> None:
        """Merge a folder in place; one the sandbox deleted (``stage_fd`` None, not ``present``: the sandbox holds it,
        with nothing staged) goes when nothing in it stays."""
        if stage_fd is None and depth >= MAX_DEPTH and not present:
            return  # deeper than any restore sends: kept as it is
        try:
            sub_host = os.open(name, DIR_FLAGS, dir_fd=host_fd)
        except OSError:  # replaced meanwhile by another process: it stays; so does the saved folder
            if stage_fd is not None:
                self.out.taken.append(rel)
            return
        try:
            sub_stage = os.open(name, DIR_FLAGS, dir_fd=stage_fd) if stage_fd is not None else None
            try:
                self.folder(sub_host, sub_stage, rel, depth + 1)
            finally:
                if sub_stage is not None:
                    os.close(sub_stage)
        finally:
            os.close(sub_host)
        if present:
            return  # the sandbox holds it: it stays, empty or not
        with contextlib.suppress(OSError):  # not empty (something stays, or a saved entry waits), or a mount
            os.rmdir(name, dir_fd=host_fd if stage_fd is None else stage_fd)

    def _bring_back(
        self, stage_fd: int | None, name: bytes, host_fd: int, rel: bytes, depth: int, *, folder: bool
    ) -> None:
        """Move in, with a note, a saved entry the sandbox changed and the host deleted (of a ``folder``: only
        what the sandbox made or changed in it)."""
        if stage_fd is None or (folder and not self._sift(stage_fd, name, rel, depth)):
            return  # nothing in the folder is the sandbox's own: the host's deletion stands
        if self._move_in(stage_fd, name, host_fd, rel):
            what = (
                "made or changed entries in it: it is made again with only those"
                if folder
                else "changed it: the sandbox's copy is saved"
            )
            self.out.notes.append(f"{shown(rel)}: the host deleted it during the session, but the sandbox {what}")

    def _sift(self, stage_fd: int, name: bytes, rel: bytes, depth: int) -> bool:
        """Remove from the saved folder ``name`` (one the host deleted) what the sandbox left as it was sent, and
        the folder itself when that leaves it empty; whether it is still there (the sandbox made or changed
        something in it)."""
        if depth >= MAX_DEPTH:
            return True  # deeper than any save sends
        sub = os.open(name, DIR_FLAGS, dir_fd=stage_fd)
        try:
            for child, saved, _ in _snapshot(sub, None):  # the saved folder's entries
                path = rel + b"/" + child
                action = decide(path, None, saved, self.record, self.digests, sub)
                if action == "gone":
                    os.unlink(child, dir_fd=sub)
                elif action == "sift":
                    self._sift(sub, child, path, depth + 1)
            left = bool(os.listdir(sub))
        finally:
            os.close(sub)
        if not left:
            os.rmdir(name, dir_fd=stage_fd)
        return left

    def _drop(self, host_fd: int, stage_fd: int | None, name: bytes, rel: bytes, *, replaced: bool) -> None:
        """Set aside a host file unchanged since it was sent; one written since the merge looked is kept."""
        where = self.aside.put(host_fd, name, rel, temporary=True)
        if where is None:
            return  # removed meanwhile
        fd, now, temporary = where
        st = os.lstat(now, dir_fd=fd)
        if unchanged(rel, st, self.record):
            if temporary:
                os.unlink(now, dir_fd=fd)
            else:
                self.out.dropped.add(rel)
            return
        if not replaced:
            try:
                move_out(fd, now, host_fd, name)  # the host's edit beats the sandbox's deletion
                return
            except FileExistsError:
                pass
        kept = free_name(name, b".host", host_fd, *([stage_fd] if stage_fd is not None else []))
        move_out(fd, now, host_fd, kept)
        self._conflict(rel, kept)

    def _beside(self, host_fd: int, stage_fd: int | None, name: bytes, rel: bytes) -> bool:
        """Keep the host's entry as ``<name>.host``; False when it cannot move (a mount point)."""
        kept = free_name(name, b".host", host_fd, *([stage_fd] if stage_fd is not None else []))
        host = _lstat(name, host_fd)
        if host is None or stat.S_ISREG(host.st_mode):
            why = "changed"
        else:
            why = "folder" if stat.S_ISDIR(host.st_mode) else "never crossed"
        try:
            move_out(host_fd, name, host_fd, kept)
        except FileNotFoundError:
            return True  # removed meanwhile
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            self.out.blocked.append(rel)
            return False
        self._conflict(rel, kept, why)
        return True

    def _evict(self, host_fd: int, stage_fd: int | None, name: bytes, rel: bytes, depth: int) -> bool:
        """A host folder the saved copy has a file in place of: merged as a folder the sandbox deleted (what it
        deleted in it goes, the rest stays); when anything stays, the folder is kept as ``<name>.host`` beside the
        sandbox's file. False when it has to stay where it is (a mount point).

        Before: the folder was set aside whole, out of the workspace, and the files in it unchanged since they were
        sent dropped, read-only ones too; what else it held stayed out there, folders holding no file (made on the
        host during the session) were dropped too, and a ``.git`` in it left the workspace."""
        self._descend(host_fd, None, name, rel, depth)
        return not lexists(name, host_fd) or self._beside(host_fd, stage_fd, name, rel)

    def _protected(self, stage_fd: int | None, name: bytes, host_fd: int, rel: bytes, *, deleted: bool) -> None:
        """A host file without write permission the sandbox changed or deleted: it stays as it is; the sandbox's
        copy, if any, is saved beside it as ``<name>.sandbox``."""
        if deleted or stage_fd is None:
            self.out.notes.append(f"{shown(rel)}: read-only on the host, so it is kept (the sandbox deleted it)")
            return
        if not self._fits(host_fd, name):
            # Before: saved whatever its size: each session that changed a read-only file added a copy as large
            # (copies of earlier sessions are restored with the folder), until no session of the folder could start.
            self.out.notes.append(f"{shown(rel)}: read-only on the host, so it is kept; the sandbox's copy is not "
                                  "saved: with it and the file the folder would hold more data than the sandbox's "
                                  "workspace can restore (sandbox setting workspace_size); make the file writable, "
                                  "or remove earlier copies of it")  # fmt: skip
            return
        # Before: each save of the session added one more copy (`.sandbox-2`, `-3`, …), each as large as the file: a
        # script rewriting a read-only file before every save grew the host folder without bound.
        previous = self._previous_copy(host_fd, stage_fd, rel)
        beside = previous or free_name(name, b".sandbox", host_fd, stage_fd)
        if self._move_in(stage_fd, name, host_fd, rel, as_name=beside):
            with contextlib.suppress(OSError):
                self.out.beside[rel] = (beside, host_entry(os.lstat(beside, dir_fd=host_fd)))
            shown_beside = shown(rel.rpartition(b"/")[0] + b"/" + beside if b"/" in rel else beside)
            again = " (in place of the copy an earlier save of this session put there)" if previous else ""
            self.out.notes.append(f"{shown(rel)}: read-only on the host, so it is kept; the sandbox's copy is saved "
                                  f"as {shown_beside}{again}")  # fmt: skip

    def _fits(self, host_fd: int, name: bytes) -> bool:
        """Whether the host file ``name``, kept beside the sandbox's copy of it, fits the room left (`Merge.room`),
        which it then takes."""
        if self.out.room is None:
            return True
        host = _lstat(name, host_fd)
        size = -(-host.st_size // ENTRY_BYTES) * ENTRY_BYTES if host is not None else 0
        if size > self.out.room:
            return False
        self.out.room -= size
        return True

    def _previous_copy(self, host_fd: int, stage_fd: int, rel: bytes) -> bytes | None:
        """The name of the copy of ``rel`` an earlier save of the session put beside it, set aside to be replaced,
        when the host has left it as that save did; None: there is none, or the host changed, replaced or removed
        it (it stays, and the new copy takes a new name)."""
        kept = self.record.beside.get(rel) if self.record is not None else None
        if kept is None:
            return None
        name, entry = kept
        host = _lstat(name, host_fd)
        if lexists(name, stage_fd) or host is None or host_entry(host) != entry:
            return None  # the sandbox has an entry of that name, or the copy is the host's now
        at = rel.rpartition(b"/")[0] + b"/" + name if b"/" in rel else name
        where = self.aside.put(host_fd, name, at, temporary=True)
        if where is None:
            return None  # removed meanwhile: the host's deletion stands, and the copy takes a new name
        fd, now, temporary = where
        if host_entry(os.lstat(now, dir_fd=fd)) != entry:  # written since it was looked at: it goes back
            move_out(fd, now, host_fd, name)
            return None
        if temporary:
            os.unlink(now, dir_fd=fd)
        else:
            self.out.dropped.add(at)
        return name

    def _move_in(
        self, stage_fd: int | None, name: bytes, host_fd: int, rel: bytes, *, as_name: bytes | None = None
    ) -> bool:
        """Move a saved entry into the host folder (as ``as_name``, default its own), never over an entry there
        (copied across a mount); whether it went in."""
        if stage_fd is None:
            return False
        to = as_name or name
        try:
            move_out(stage_fd, name, host_fd, to)
        except FileExistsError:
            self.out.taken.append(rel)
            return False
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            try:
                copy_new(stage_fd, name, host_fd, to)
            except FileExistsError:
                self.out.taken.append(rel)
                return False
            remove_entry(stage_fd, name)
        return True

    def _conflict(self, rel: bytes, kept: bytes, why: str = "changed") -> None:
        """Note that the host's entry ``rel`` was kept as ``kept``: ``why`` both sides ``changed`` it, the host's is a
        link or special file (``never crossed``: the sandbox never saw it), or a ``folder`` the sandbox put a file in
        place of, which holds entries that stay."""
        shown_kept = shown(rel.rpartition(b"/")[0] + b"/" + kept if b"/" in rel else kept)
        what = {
            "changed": "both the host and the sandbox changed it",
            "never crossed": "the host has a link or special file of that name (never sent to the sandbox), and the "
            "sandbox made an entry there",
            "folder": "the sandbox made a file in place of this folder, which holds entries that stay (changed, made "
            "or read-only on the host, or never sent to the sandbox)",
        }[why]
        hosts = "the host's folder" if why == "folder" else "the host's"
        self.out.notes.append(f"{shown(rel)}: {what}; the sandbox's copy is saved as {shown(rel)} and {hosts} is "
                              f"kept as {shown_kept}")  # fmt: skip
