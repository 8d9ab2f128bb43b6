"""Moving a session's workspace between a host directory and the container.

Both directions use the transfer format and caps of `sandbox._supervisor.transfer`, the same code
the container runs: only folders and regular files cross, links and special files never do and
are never followed; names cross byte for byte (a name that is not UTF-8 travels in base64); a
workspace holds at most `MAX_ENTRIES` entries and ``max_bytes`` counting `ENTRY_BYTES` per file or
folder plus the data, so folders cost quota too. Whatever a save accepts, a restore accepts, and
every message stays under `BATCH_BYTES` however many or long the paths are.

Restore (host → container) is `sandbox.workspace_restore`'s; the folders a save works in beside its
destination, and those it leaves there, are `sandbox.workspace_staging`'s.

Save (container → host) receives ``workspace.entries`` notifications — hostile input — into a
fresh staging directory next to the destination (inside it, in `WORK_FOLDER`, when it is a mount
point), then merges it into the destination in place: the folder and every folder in it that stays a
folder keep their inode and mount (`WorkspaceReceiver.commit`).
Each path is checked, every directory on the way is opened with ``O_NOFOLLOW``, files are created
new without following links, and the caps are counted as items arrive. A folder is sent before what it
holds: an item whose folder was not sent is refused, never made on the way uncounted. An item that
breaks the rules is a `ProtocolError` (the channel then ends that sandbox); a failure on the host's
side (a full disk) is kept and reported by `WorkspaceReceiver.check`; at the end the receiver's counts
must equal what the sandbox says it sent. A save that continues one this session put in place
(``workspace.save {since}``) sends a file that still holds what that save sent as ``same``, without its
data: the merge then treats it as a file the sandbox did not change, whose content the record already
holds (a ``same`` for a path that save did not send is a `ProtocolError`). A file sent with its data whose
content is the one the record holds for it (in a first save, a restored file a script only touched) is taken
the same way, never written to staging: its first piece waits in memory until the next item shows it was the
whole file. A folder the sandbox started from that the host held as a folder then is not made in staging unless
something is written in it (`sandbox.workspace_unstaged`). On any failure the staging directory is dropped and the
previous copy stays. A complete save is merged with the host folder rather than put in its place, so what the
sandbox never held or never changed is kept (`sandbox.workspace_merge`, `sandbox.workspace_inplace`).

The top-level names in `RESERVED` are tooltree's own, not workspace content: the read-only tree's
``servers`` and the work folder `WORK_FOLDER`. They are never restored, and never merged into the host
folder either way: what a sandbox sends under them is counted against the caps but never written,
and a note says it was not saved; a host entry of that name stays as it is. The names in `HOST_ONLY` are the
host's at any depth (``.git``), handled alike: the sandbox never sees them and a save never changes them.

(Over 400 lines: one class, the save's receiver, whose checks — caps, order, duplicates, ``same`` items, files
held until known unchanged — share its bookkeeping, and its commit reads that bookkeeping.)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from sandbox._supervisor.fswalk import PathError, show, split_path
from sandbox._supervisor.transfer import BATCH_BYTES, ENTRY_BYTES, MAX_ENTRIES, TreeWriter, over_bytes, read_item
from sandbox.errors import ProtocolError, WorkspaceError
from sandbox.host_folders import is_mount_point, lock_saves_into, open_folder, past_restore, remove_tree, shown
from sandbox.workspace_inplace import AsideArea, Merge, merge
from sandbox.workspace_merge import HOST_ONLY, HOST_ONLY_NAMES, HostEntry, RestoreRecord, entries_below
from sandbox.workspace_restore import _RESERVED, LOCK_TIMEOUT, RESERVED, TMPFS_INODES, iter_restore_batches, restoring
from sandbox.workspace_staging import (
    _MADE_HERE,
    WORK_FOLDER,
    _remove_stale_staging,
    flush_to_disk,
    leftovers,
    leftovers_note,
    work_name,
)
from sandbox.workspace_unstaged import UnstagedFolders

__all__ = [
    "BATCH_BYTES",
    "ENTRY_BYTES",
    "MAX_ENTRIES",
    "TMPFS_INODES",
    "WorkspaceReceiver",
    "check_relative_path",
    "iter_restore_batches",
    "leftovers",
    "leftovers_note",
    "restoring",
]


def check_relative_path(path: Any) -> list[bytes]:
    """The parts of a workspace-relative wire path from the container.

    Raises:
        WorkspaceError: anything but a plain relative path.
    """
    try:
        return split_path(path)
    except PathError as e:
        raise WorkspaceError(str(e)) from None


class WorkspaceReceiver:
    """Receives a saved workspace into a staging directory, then merges it into place (`commit`).

    Call it with each notification (a `NotificationSink`); then `check` the sandbox's summary
    and `commit`, or `discard`. A commit holds a lock on the destination's parent folder, so the
    merges of saves into one folder (from any process) happen one at a time. Staging folders left
    by a process that was killed while saving are removed by the next save into that folder.

    Args:
        record: what the restore sent from ``dest`` (None: nothing was restored from it); see
            `sandbox.workspace_merge` for what the merge keeps.
        continues: the save continues the one that left ``record`` (its id went as ``since``): files the
            sandbox left as they were sent may come as ``same`` items.
        max_data: most bytes of file data the folder may hold after the save, each file counted in whole
            `ENTRY_BYTES` pages (a ``same`` file at its host copy's size): what the sandbox's workspace (a tmpfs
            of that size) can take back at the next restore; None: no such cap. The sandbox holds a sparse file or
            a file's hard links in less than that, but they cross whole and are restored whole: before, a 370 MiB
            sparse file (32 KiB in the sandbox) or three links to a 120 MiB file were saved, and every later
            session of the folder failed to start ("cannot restore 'big.bin': No space left on device"). A save
            over it is refused (`check`), writing nothing more, and the previous copy stays.
    """

    def __init__(
        self,
        dest: Path,
        *,
        max_bytes: int,
        max_entries: int = MAX_ENTRIES,
        record: RestoreRecord | None = None,
        continues: bool = False,
        max_data: int | None = None,
    ) -> None:
        # Its real path: ``.`` or ``..`` has no name to stage beside, and cannot be moved aside.
        self.dest = dest = Path(os.path.realpath(dest))
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.max_data = max_data
        self._data = 0  # file data charged against ``max_data``, in whole pages
        self.record = record
        self._known = record.digests if record is not None and continues else {}
        self._started = record.digests if record is not None else {}
        self._unfinished = 0  # saves into ``dest`` killed while they received: their staging folders removed here
        self.beside = dest / WORK_FOLDER if is_mount_point(dest) else dest.parent
        """The folder of the staging folder (and of the previous copy while merging): on ``dest``'s mount."""
        try:
            self.staging = self._make_staging()
        except OSError as e:
            if self.beside != dest.parent or not dest.is_dir():
                raise WorkspaceError(
                    f"cannot save the workspace into {dest}: a save is received beside it, in {self.beside}, "
                    f"and that failed: {e.strerror}"
                ) from None
            # A folder whose parent this user may not write (`--workspace ~`, whose /home is root's; a project in a
            # shared folder): received inside it, as into a mount point. Before: every save failed, after the script
            # had run, and the script's files were lost.
            self.beside = dest / WORK_FOLDER
            try:
                self.staging = self._make_staging()
            except OSError as inside:
                raise WorkspaceError(
                    f"cannot save the workspace into {dest}: a save is received beside it, in {dest.parent}, or "
                    f"else inside it, in {self.beside}, and both failed: {e.strerror}; {inside.strerror}"
                ) from None
        self._writer = TreeWriter(self.staging, exclusive=True)
        # The channel's reader calls it while the caller may `discard` it (an interrupt on the host): one at a time,
        # and nothing after the discard (before: the reader wrote on with a closed writer, died on an IndexError
        # whose traceback reached the terminal, and could make the staging folder again, left behind).
        self._guard = threading.RLock()
        self._discarded = False
        self.counts = {"files": 0, "same": 0, "dirs": 0, "bytes": 0}
        self._charged = 0
        self.failed: str | None = None  # a failure on the host's side, reported by `check`
        self._open_file: list[bytes] | None = None
        self._held: tuple[list[bytes], bytes, bytes] | None = None
        """The first piece (parts, path, data) of a file the record holds, not yet written (`_settle`)."""
        self.unchanged = 0
        """Files sent with their data that hold what the record says the sandbox had: not written, kept as ``same``."""
        self._hashes: dict[bytes, Any] = {}
        self._same: dict[bytes, bytes] = {}  # files sent as ``same``: their digest in the record
        self._dirs: set[bytes] = set()
        self._unstaged = UnstagedFolders(record)  # folders the host holds, nothing written in them: not staged
        self._left_out: dict[bytes, int] = {}  # entries sent under each reserved name: counted, never written
        self.merging = False
        """Host entries may have moved into the staging folder: it is no longer dropped."""
        self.notes: list[str] = []
        """What the user should know about the merge (`commit`)."""
        self._foreign: set[bytes] = set()
        self._beside: dict[bytes, tuple[bytes, HostEntry]] = {}  # copies the merge saved beside read-only files
        self.next_record: RestoreRecord | None = None
        """After `commit`: the record a later save of the same session merges against."""

    def _make_staging(self) -> Path:
        for _ in range(2):  # an empty work folder that a save ending meanwhile removed is made again
            with contextlib.suppress(FileNotFoundError):
                return self._try_staging()
        return self._try_staging()

    def _try_staging(self) -> Path:
        self.beside.mkdir(0o700, parents=True, exist_ok=True)
        self._unfinished += _remove_stale_staging(self.dest, self.beside)
        staging = Path(tempfile.mkdtemp(prefix=f".{work_name(self.dest)}.incoming-{os.getpid()}-", dir=self.beside))
        staging.chmod(0o755)
        return staging

    def _charge(self, size: int, *, entry: bool) -> None:
        if entry and self.counts["files"] + self.counts["same"] + self.counts["dirs"] >= self.max_entries:
            raise ProtocolError(f"the saved workspace has more than {self.max_entries} files and folders")
        self._charged += size + (ENTRY_BYTES if entry else 0)
        if self._charged > self.max_bytes:
            raise ProtocolError(f"the saved workspace holds {over_bytes(self.max_bytes)}")

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        """Handle one notification (none once `discard` was called: the rest of the stream is dropped).

        Raises:
            ProtocolError: an unexpected message, a refused path, bad data, or a cap exceeded.
        """
        with self._guard:
            if not self._discarded:
                self._receive(method, params)

    def _receive(self, method: str, params: dict[str, Any]) -> None:
        entries = params.get("entries")
        if method != "workspace.entries" or not isinstance(entries, list):
            raise ProtocolError(f"unexpected message {method[:40]!r} while saving the workspace")
        for item in entries:
            try:
                same = isinstance(item, dict) and item.get("same") is True
                parts, data, append = (split_path(item.get("path")), None, False) if same else read_item(item)
            except PathError as e:
                raise ProtocolError(f"while saving the workspace: {e}") from None
            if append and self._open_file != parts:
                raise ProtocolError(f"data appended to {show(parts)}, which is not the file being saved")
            self._settle(whole=not append)
            reserved = parts[0] in _RESERVED or not HOST_ONLY_NAMES.isdisjoint(parts)
            if not append and not reserved and len(parts) > 1 and b"/".join(parts[:-1]) not in self._dirs:
                raise ProtocolError(f"{show(parts)} arrived before its folder was sent, while saving the workspace")
            rel = b"/".join(parts)
            if not append and (rel in self._same or (data is not None and rel in self._dirs)):
                raise ProtocolError(f"{show(parts)} was sent twice while saving the workspace")
            if same:
                self._same_file(parts, rel, reserved=reserved)
                continue
            self._charge(len(data or b""), entry=not append)
            if data and not reserved:
                self._charge_data(len(data))
            if data is None:
                self.counts["dirs"] += 1
            elif not append:
                self.counts["files"] += 1
            self._open_file = parts if data is not None else None
            self.counts["bytes"] += len(data or b"")
            if reserved:  # tooltree's or the host's name: never workspace content, never written (noted by `commit`)
                top = _left_out_top(parts)
                self._left_out[top] = self._left_out.get(top, 0) + (0 if append else 1)
                continue
            if data is None:
                self._dirs.add(rel)
                if self._unstaged.leave_out(rel):
                    continue
            else:
                if not append:
                    self._hashes[rel] = hashlib.sha256()
                self._hashes[rel].update(data)
            if self.failed is None and data is not None and not append and rel in self._started:
                self._held = (parts, rel, data)  # maybe unchanged: known once the next item (or the end) comes
            elif self.failed is None:
                self._write(parts, data, append=append)

    def _settle(self, *, whole: bool = True) -> None:
        """Decide on the held first piece: the ``whole`` file and the record's content (a script touched it, or
        rewrote the same bytes), it is taken as ``same`` and never written; otherwise it is written.

        Before: every file sent with its data was written to staging, and the merge then found it unchanged and
        deleted it: a script that touched 32,000 files cost the host 5-19 s of CPU and 134 MiB of writes a save.
        """
        if self._held is None:
            return
        (parts, rel, data), self._held = self._held, None
        digest = self._hashes[rel].digest()
        if whole and digest == self._started[rel]:
            del self._hashes[rel]
            self._same[rel] = digest
            self.unchanged += 1
        elif self.failed is None:
            self._write(parts, data, append=False)

    def _same_file(self, parts: list[bytes], rel: bytes, *, reserved: bool) -> None:
        """A file the sandbox left as the save this one continues sent it: nothing is written.

        Under a ``reserved`` name it is counted and left out, as with its data. Before: a protocol violation (no
        save had written it), so a script that made ``.tooltree-save/a`` had its sandbox ended at the next save.
        """
        digest = self._known.get(rel)
        if not reserved and (digest is None or rel in self._hashes or rel in self._dirs):
            raise ProtocolError(f"{show(parts)} was sent as unchanged, but no save of this session sent it")
        self._charge(0, entry=True)
        host = self.record.entries.get(rel) if self.record is not None and not reserved else None
        if host is not None and host.kind == "file":  # the host keeps its file: the next restore sends it
            self._charge_data(host.identity[1])
        self.counts["same"] += 1
        self._open_file = None
        if digest is None or reserved:
            top = _left_out_top(parts)
            self._left_out[top] = self._left_out.get(top, 0) + 1
        else:
            self._same[rel] = digest

    def _charge_data(self, size: int) -> None:
        """Count ``size`` bytes of file data in whole pages (a piece of a file is `CHUNK_BYTES`, whole pages, but for
        its last); past ``max_data`` the save fails (`check`) and nothing more is written."""
        self._data += -(-size // ENTRY_BYTES) * ENTRY_BYTES
        if self.max_data is not None and self._data > self.max_data and self.failed is None:
            self.failed = (
                f"its files hold more than the sandbox's workspace can: over {self.max_data} bytes of data (each "
                "file in whole 4 KiB pages; a sparse file or a file's hard links count whole, as a restore writes "
                "them), so no later session could restore it; make the files fit (sandbox setting workspace_size)"
            )
            self._held = None

    def _write(self, parts: list[bytes], data: bytes | None, *, append: bool) -> None:
        try:
            if not append:
                self._unstaged.unfold(parts[:-1], self._writer)
            self._writer.write(parts, data, append=append)
        except FileExistsError:
            raise ProtocolError(f"{show(parts)} already exists (sent twice?) while saving the workspace") from None
        except (NotADirectoryError, IsADirectoryError) as e:
            raise ProtocolError(f"{show(parts)}: {e.strerror} while saving the workspace") from None
        except OSError as e:  # the host's disk, not the sandbox: reported when the save ends
            self.failed = f"cannot write {show(parts)} into {self.staging}: {e.strerror}"

    def check(self, summary: dict[str, Any]) -> None:
        """Make sure everything the sandbox says it sent arrived and was written.

        Raises:
            WorkspaceError: a host-side write failed, or the counts differ from ``summary``.
        """
        self._settle()
        if self.failed is not None:
            raise WorkspaceError(self.failed)
        sent = {k: summary.get(k) for k in self.counts}
        if sent != self.counts:
            raise WorkspaceError(f"the sandbox reported sending {sent} but {self.counts} arrived")

    def commit(self) -> None:
        """Merge what was received into the destination in place (`sandbox.workspace_inplace`).

        The destination folder itself stays, and so does every folder in it that is a folder in the result
        (its inode, its mode, its mount: a shell or an editor inside it stays inside it): only the entries that
        change move, never over an entry another process made meanwhile (the saved one is kept, with a note).
        A work folder in a mount point (`WORK_FOLDER`) is removed when it is left empty.

        Raises:
            WorkspaceError: the merge failed; the message says where every entry that is not in the
                destination is (nothing is deleted).
        """
        self._settle()
        self._writer.close()
        if self._hashes:
            # The saved files' data on disk before any of them takes a host file's name, and so before the host's
            # version, moved aside, is removed. Before: a power loss soon after a save could leave the folder with
            # a script's files empty (their data never written) and the user's versions of them removed.
            flush_to_disk(self.staging)
        digests = {**self._same, **{rel: h.digest() for rel, h in self._hashes.items()}}
        lock = lock_saves_into(self.dest, LOCK_TIMEOUT)
        try:
            self._merge_in(digests)
            # Each save fits the caps, but what other sessions saved into the folder meanwhile is kept beside it.
            past = past_restore(self.dest, skip=_RESERVED, skip_any=HOST_ONLY_NAMES, max_entries=self.max_entries,
                                max_data=self.max_data)  # fmt: skip
        finally:
            self._drop_work_folder()
            os.close(lock)
        self.notes[:0] = [
            f"the sandbox's {shown(name)} ({_entries_count(count)}) was not saved: "
            + (
                f"that name at the top of a workspace is tooltree's own ({RESERVED[name.decode()]}); give it another "
                "name to keep it"
                if name.decode() in RESERVED
                else f"a workspace's {name.rsplit(b'/', 1)[-1].decode()} is never restored nor saved "
                f"({HOST_ONLY[name.rsplit(b'/', 1)[-1].decode()]})"
            )
            for name, count in sorted(self._left_out.items())
        ]
        if past is not None:
            self.notes.append(
                f"the folder now holds more than a session can restore ({past}), with what other sessions' saves or "
                "the host added since this session began: every later session of it will fail to start until some of "
                "it is removed (sandbox setting workspace_size)"
            )
        if self._unfinished:
            # Before: removed without a word, so a user whose tooltree was killed during a save (SIGKILL after an
            # interrupt, an out-of-memory kill) never learned that the script's files of that session were not saved.
            self.notes.append(
                f"{self._unfinished} earlier save(s) into the folder did not finish (their tooltree was killed while "
                "the sandbox's files arrived): nothing of them was put in the folder, which they left as it was, and "
                "the files they had received are removed"
            )
        self.next_record = self._record_of_save(digests, self._foreign)

    def _merge_in(self, digests: dict[bytes, bytes]) -> None:
        try:
            self._unstaged.stage_missing(self.dest, self.staging)
        except OSError as e:
            raise WorkspaceError(f"cannot write a folder into {self.staging}: {e.strerror}") from None
        if not self.dest.exists() and not self.dest.is_symlink():
            try:
                os.rename(self.staging, self.dest)
                return
            except OSError:
                pass  # made meanwhile: merged below
        try:
            dest_fd = open_folder(self.dest)
        except OSError as e:
            raise WorkspaceError(f"could not put the saved workspace in place at {self.dest}: {e.strerror}") from None
        aside, merged = AsideArea(self.beside, f".{work_name(self.dest)}.old-{os.getpid()}-"), Merge()
        merged.room = None if self.max_data is None else max(0, self.max_data - self._data)
        self.merging = True  # from here on, the host folder may change: the saved copy is no longer dropped
        # Under a name no later save removes, before anything moves: a merge its process never finished (killed, its
        # terminal closed, Ctrl-C) keeps the rest of the saved copy, as one that failed does. Before, the next save
        # removed it as a killed save's staging folder, and the script's files not merged yet were gone.
        self._keep_staging()
        try:
            merge(dest_fd, self.staging, self.record, digests, aside, merged, skip_top=_RESERVED, same=set(self._same),
                  present=frozenset(self._unstaged.folders))  # fmt: skip
        except OSError as e:
            kept = f"; host entries it took out are in {aside.kept}" if aside.kept is not None else ""
            raise WorkspaceError(f"could not merge the saved workspace into {self.dest} ({e}): it was merged in "
                                 f"part{kept}; the rest of the saved copy is in {self.staging}") from None  # fmt: skip
        finally:
            if aside.path is not None:
                _MADE_HERE.add(str(aside.path))
            aside.close()
            os.close(dest_fd)
        self.notes = merged.notes
        self._beside = merged.beside
        self._foreign = merged.foreign | set(merged.taken) | set(merged.blocked)
        if not merged.taken and not merged.blocked:
            remove_tree(self.staging)
            _MADE_HERE.discard(str(self.staging))
        if merged.taken:
            self.notes.append(f"{_entries(merged.taken)} took a name another process gave an entry of {self.dest} "
                              f"during the save, which stays; the saved one is kept in {self.staging}: "
                              f"{_names(merged.taken)}")  # fmt: skip
        if merged.blocked:
            self.notes.append(f"{_entries(merged.blocked)} could not take the place of a host entry that cannot "
                              f"move (a mount point), which stays; the saved one is kept in {self.staging}: "
                              f"{_names(merged.blocked)}")  # fmt: skip
        left = aside.left(merged.dropped)
        if left:
            self.notes.append(f"{len(left)} host file(s) could not be merged into {self.dest} and are kept in "
                              f"{aside.kept}: {_names(left)}")  # fmt: skip
        else:
            aside.remove()
            if aside.path is not None:
                _MADE_HERE.discard(str(aside.path))

    def _drop_work_folder(self) -> None:
        """Remove the work folder inside a mount point when nothing is left in it (a save still receiving, or
        a kept copy, is)."""
        if self.beside.name == WORK_FOLDER and self.beside.parent == self.dest:
            with contextlib.suppress(OSError):
                os.rmdir(self.beside)

    def _keep_staging(self) -> None:
        """Give the saved copy, before a merge moves anything out of it, a name no later save removes as stale."""
        try:
            kept = tempfile.mkdtemp(prefix=f".{work_name(self.dest)}.unmerged-{os.getpid()}-", dir=self.beside)
        except OSError:
            return
        try:
            os.rename(self.staging, kept)  # over the empty folder just made
        except OSError:
            os.rmdir(kept)
            return
        self.staging = Path(kept)
        _MADE_HERE.add(kept)

    def _record_of_save(self, digests: dict[bytes, bytes], foreign: set[bytes]) -> RestoreRecord:
        """What the sandbox holds now, as a restore record: a later save merges against it. Its files and folders
        the host has not (deleted there, and left deleted by this save) are in it too, so the next save leaves
        them deleted unless the sandbox changes them. A host file that is not the sandbox's (``foreign``: the
        merge kept the host's own) is left out of its entries, so the next save sees it as the host's change."""
        before = self.record.beside if self.record is not None else {}
        record = RestoreRecord(root_mode=None, digests=digests, folders=set(self._dirs), beside=before | self._beside)
        for rel, entry in entries_below(self.dest, (*self._dirs, *digests)).items():
            if (entry.kind == "dir") == (rel in self._dirs) and entry.kind != "other" and rel not in foreign:
                record.entries[rel] = entry
        return record

    def discard(self) -> None:
        """Drop what was received (unless `commit` began merging it: then it is kept, named in its error), and what
        the channel still hands it."""
        with self._guard:
            self._discarded = True
            self._drop()

    def _drop(self) -> None:
        self._held = None
        self._writer.close()
        if not self.merging:
            shutil.rmtree(self.staging, ignore_errors=True)
        self._drop_work_folder()


def _left_out_top(parts: list[bytes]) -> bytes:
    """The entry a left-out item is counted under: its top-level name, or its path to the first host-only name."""
    if parts[0] in _RESERVED:
        return parts[0]
    return b"/".join(parts[: next(i for i, part in enumerate(parts) if part in HOST_ONLY_NAMES) + 1])


def _names(rels: list[bytes]) -> str:
    return ", ".join(shown(rel) for rel in rels[:5]) + (", …" if len(rels) > 5 else "")


def _entries(rels: list[bytes]) -> str:
    return f"{len(rels)} saved entr{'y' if len(rels) == 1 else 'ies'}"


def _entries_count(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"
