"""A `sandbox.session.Sandbox`'s workspace operations: reading a file of the workspace (`Sandbox.read_file`),
listing a folder of it (`Sandbox.list_files`, `Sandbox.list_folder`, which gives a `Listing`) and saving it into a
host folder (`Sandbox.save_workspace`, `Sandbox.save_workspace_if_changed`, which `close` saves with), with the notes
a save gives (`Sandbox.workspace_notes`) (`_WorkspaceFiles`, which `Sandbox` takes them from). They log as
``sandbox.session``, as the rest of the session does.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from sandbox._supervisor.limits import MAX_LIST_ENTRIES
from sandbox.backend import SandboxBackend
from sandbox.calls import NAME_CHARS
from sandbox.channel import SupervisorChannel
from sandbox.config import TREE_MOUNT, SandboxConfig
from sandbox.errors import SandboxError, SessionError, WorkspaceError
from sandbox.results import reported_count
from sandbox.session_args import count, workspace_folder, workspace_path
from sandbox.session_executions import _OP_TIMEOUT
from sandbox.workspace import MAX_ENTRIES, WorkspaceReceiver, leftovers_note
from sandbox.workspace_merge import RestoreRecord

logger = logging.getLogger("sandbox.session")

NOTES_KEPT = 1_000
"""Notes of workspace saves a session keeps (`Sandbox.workspace_notes`, the latest) and one save logs (its first)."""


@contextlib.contextmanager
def _tree_link(relative: str, method: str, backend: SandboxBackend) -> Iterator[None]:
    """A workspace operation's `SessionError` for a path through ``servers``, the workspace's link to the tree (the
    operations never follow a link), said as what to do: read the tree on the host, or from a script.

    Before: ``list_folder("servers")`` failed with the sandbox's words alone ("workspace.list failed in the sandbox:
    'servers': Not a directory"), though the sandbox lists ``servers`` as an entry of the workspace.
    """
    try:
        yield
    except SessionError as e:
        text = str(e)
        if relative.split("/", 1)[0] != "servers" or not ("Not a directory" in text or "symbolic links" in text):
            raise
        tree = getattr(backend, "tree", None)  # a DockerBackend's: the host folder the tree was copied from
        host = f"{Path(tree) / relative}" if isinstance(tree, Path) else f"{relative} in the tree's folder"
        if method == "list_folder":
            script = f"import os; print(sorted(os.listdir({relative!r})))"
        else:
            script = f"print(open({relative!r}).read())"
        raise SessionError(
            f"{method}({relative!r}): /workspace/servers is the sandbox's read-only link to the tree ({TREE_MOUNT}/"
            f"servers), and {method} reads the workspace alone, never through a link: {method.split('_')[0]} "
            f"{host} on the host, or from a script: execute({script!r}) (the sandbox said: "
            f"{text.split(' failed in the sandbox: ', 1)[-1]})"
        ) from e


class Listing(NamedTuple):
    """What `Sandbox.list_folder` gives: ``entries, total = sandbox.list_folder(path, limit=500)``."""

    entries: list[dict[str, Any]]
    """The first entries, folders first, then by name: ``{"name", "type", "size"}`` each."""
    total: int
    """How many entries the folder holds in all (at least ``len(entries)``)."""


class _WorkspaceFiles:
    """`Sandbox`'s workspace operations; the session's state they use is `Sandbox`'s (set in its ``__init__``)."""

    backend: SandboxBackend
    config: SandboxConfig
    workspace: Path | None
    workspace_notes: list[str]
    workspace_notes_total: int
    last_save: dict[str, int]
    _lock: threading.Lock
    _restored: RestoreRecord | None
    _saved_stamp: str | None
    _saved_as: str | None
    _links_said: int | None
    _leftovers_looked: set[Path]

    if TYPE_CHECKING:  # `Sandbox`'s

        def _require_channel(self) -> SupervisorChannel: ...
        def _refuse_in_fork(self) -> None: ...

    def read_file(self, path: str | os.PathLike[str], *, max_bytes: int = 1 << 20) -> bytes:
        """Up to ``max_bytes`` of a regular file in the workspace.

        ``path`` (a str or a ``Path``) is relative to the workspace, or absolute under ``/workspace`` (as results name
        files). Symlinks are never followed: ``servers``, the link to the tree, neither (its error says where to read
        the tree instead).

        Raises:
            TypeError, ValueError: ``path`` is not a str or ``Path``, or ``max_bytes`` not a whole number of at least
                1.
            SessionError: no such regular file, a path under ``servers``, or the session is unusable.
        """
        relative, max_bytes = workspace_path(path), count(max_bytes, "max_bytes")
        self._refuse_in_fork()
        with self._lock, _tree_link(relative, "read_file", self.backend):
            raw = self._require_channel().request(
                "workspace.read", {"path": relative, "max_bytes": max_bytes}, timeout=_OP_TIMEOUT
            )
        try:
            data = base64.b64decode(str(raw.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            raise SessionError("the sandbox sent file data that is not base64") from None
        return data[:max_bytes]

    def list_files(self, path: str | os.PathLike[str] = "", *, limit: int = 1000) -> list[dict[str, Any]]:
        """Entries of a workspace directory: ``{"name", "type", "size"}``, at most ``limit`` (and at most
        `MAX_LIST_ENTRIES`, 32,768, so the answer fits a frame's value budget): the first ones, folders first, then
        by name. `list_folder` says how many the directory holds in all.

        Raises:
            TypeError, ValueError: ``path`` is not a str or ``Path``, or ``limit`` not a whole number of at least 1.
            SessionError: not a directory, or the session is unusable.
        """
        return self.list_folder(path, limit=limit).entries

    def list_folder(self, path: str | os.PathLike[str] = "", *, limit: int = 1000) -> Listing:
        """The first ``limit`` entries of a workspace directory, as `list_files` gives them, and how many it holds in
        all: a folder of any size is counted in one answer of at most ``limit`` entries.

        Before: only `list_files`, without the count, so a caller that showed 500 entries and the count asked for
        32,768 entries (about 2 MB from a big folder) to count them.

        The workspace alone: ``servers``, its link to the tree, is not followed (its error says where to list the
        tree instead).

        Raises:
            TypeError, ValueError: ``path`` is not a str or ``Path``, or ``limit`` not a whole number of at least 1.
            SessionError: not a directory, a path under ``servers``, or the session is unusable.
        """
        relative, limit = workspace_path(path), min(count(limit, "limit"), MAX_LIST_ENTRIES)
        self._refuse_in_fork()
        with self._lock, _tree_link(relative, "list_folder", self.backend):
            raw = self._require_channel().request(
                "workspace.list", {"path": relative, "limit": limit}, timeout=_OP_TIMEOUT
            )
        entries = raw.get("entries")
        out: list[dict[str, Any]] = []
        for e in entries[:limit] if isinstance(entries, list) else []:
            if isinstance(e, dict) and isinstance(e.get("name"), str) and reported_count(e.get("size")) is not None:
                out.append({"name": e["name"][:NAME_CHARS], "type": str(e.get("type"))[:10], "size": e["size"]})
        total = raw.get("total")  # the sandbox's word, like the entries: never fewer than those it sent
        if isinstance(total, bool) or not isinstance(total, int) or total < len(out):
            total = len(out)
        return Listing(out, total)

    def save_workspace_if_changed(self) -> bool:
        """`save_workspace` into the session's workspace folder, when anything in the workspace was made, written,
        moved or deleted since it was last saved there (the first call always saves); whether it saved.

        What changed is told by each entry's path, mode, size, mtime, ctime and inode (`workspace.stamp`, a walk
        without reading any file; a script cannot set a ctime back). `close` saves with it too.

        Raises:
            WorkspaceError: the session has no workspace folder, or the save failed (as `save_workspace`).
            SessionError: the session is unusable.
        """
        if self.workspace is None:
            raise WorkspaceError("no workspace directory to save into")
        self._refuse_in_fork()
        with self._lock:
            stamp = self._stamp(self._require_channel())
        if stamp is not None and stamp == self._saved_stamp:
            return False
        self.save_workspace()
        return True

    def _stamp(self, channel: SupervisorChannel) -> str | None:
        """The workspace's stamp, or None when the sandbox could not take it (hold ``_lock``)."""
        try:
            raw = channel.request("workspace.stamp", {"max_entries": MAX_ENTRIES}, timeout=_OP_TIMEOUT)
        except SessionError:
            return None
        stamp = raw.get("stamp")
        return stamp if isinstance(stamp, str) else None

    def save_workspace(self, dest: str | Path | None = None) -> Path:
        """Copy the workspace out to ``dest`` (default: the session's workspace directory).

        Only directories and regular files come out, within the caps, with their names byte for
        byte. The copy is complete or not made: on any failure the previous copy stays as it was.
        Into the session's own folder, a save after the first sends only the files changed since the last one
        (a file is unchanged while its inode, size, mtime and ctime are).

        Raises:
            TypeError, ValueError: ``dest`` is not a path, or is an empty string.
            WorkspaceError: no destination, or the copy was refused or failed.
        """
        target = workspace_folder(dest, "dest") if dest is not None else self.workspace
        if target is None:
            raise WorkspaceError("no workspace directory to save into")
        own = target == self.workspace
        params: dict[str, Any] = {"max_bytes": self.config.workspace_bytes, "max_entries": MAX_ENTRIES}
        record = self._restored if own else None
        since = self._saved_as if own else None
        if own:
            params["keep"] = True  # the next save into the folder continues this one
        if since is not None:
            params["since"] = since  # files left as that save sent them come without their data
        receiver = WorkspaceReceiver(
            target,
            max_bytes=params["max_bytes"],
            max_entries=MAX_ENTRIES,
            record=record,
            continues=since is not None,
            max_data=self.config.workspace_data_bytes,
        )
        try:
            self._refuse_in_fork()
            with self._lock:
                summary = self._require_channel().request("workspace.save", params, timeout=_OP_TIMEOUT, sink=receiver)
            receiver.check(summary)
            receiver.commit()
        except SandboxError as e:
            receiver.discard()
            if receiver.merging:
                raise WorkspaceError(f"could not save the workspace: {e}") from None  # says where both copies are
            raise WorkspaceError(f"could not save the workspace ({target} is left as it was): {e}") from None
        except BaseException:  # an interrupt: nothing of the half-received copy is left behind
            receiver.discard()
            raise
        self.last_save = dict(receiver.counts)
        if own:  # the stamp of what was walked and saved, and the save's id for the next one to continue
            saved_as, stamp = summary.get("save"), summary.get("stamp")
            self._restored = receiver.next_record
            self._saved_as = saved_as if isinstance(saved_as, str) and len(saved_as) <= 64 else None
            self._saved_stamp = stamp if isinstance(stamp, str) else None
        notes = list(receiver.notes)
        skipped = summary["skipped"] if isinstance(summary.get("skipped"), int) else 0
        if skipped > 0 and (not own or skipped != self._links_said):  # said once, not every save
            notes.append(f"{skipped} link(s) or special file(s) made in the sandbox's workspace were not saved "
                         "(they never leave the sandbox)")  # fmt: skip
        if own:
            self._links_said = skipped
        notes += self._leftovers(target)
        self._keep_notes(target, notes)
        return target

    def _keep_notes(self, target: Path, notes: list[str]) -> None:
        """Log a save's ``notes`` and keep them (the latest `NOTES_KEPT`) in `workspace_notes`."""
        for note in notes[:NOTES_KEPT]:
            logger.warning("workspace %s: %s", target, note)
        if len(notes) > NOTES_KEPT:
            logger.warning("workspace %s: %s", target, f"… and {len(notes) - NOTES_KEPT:,} more notes of this save")
        self.workspace_notes_total += len(notes)
        self.workspace_notes = [*self.workspace_notes, *notes[-NOTES_KEPT:]][-NOTES_KEPT:]

    def _leftovers(self, target: Path) -> list[str]:
        """The note naming folders that unfinished saves into ``target`` kept beside it (a killed merge's, or a failed
        one's whose process is gone: no save removes them), looked for once a session."""
        if target in self._leftovers_looked:
            return []
        self._leftovers_looked.add(target)
        note = leftovers_note(target)
        return [] if note is None else [note]
