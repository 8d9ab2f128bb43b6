"""The folders a save leaves out of its staging folder: those the host already holds.

A folder the sandbox started from (restored, or saved by the session's last save) that the host held as a folder
then is not made in staging when it arrives: only when the save writes something in it (a file, or a folder the host
lacks) is it made, with the folders on its way (`UnstagedFolders.unfold`). Before the merge, those the host no longer
holds as a folder (deleted, or replaced by a file or a link during the session) are made too (`stage_missing`), so
the merge decides on them as on any saved folder; the rest it merges as folders the sandbox holds, in place
(`sandbox.workspace_inplace.merge`'s ``present``).

Before, every folder the sandbox sent was made in staging and removed again by the merge, the host holding it already:
20,000 empty folders and one changed file cost every later save 64-70 s and 4.4-5.8 CPU-s of the host process.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sandbox._supervisor.transfer import TreeWriter
from sandbox.host_folders import FolderTree
from sandbox.workspace_merge import RestoreRecord, walk_order


class UnstagedFolders:
    """The folders of a save not made in its staging folder (yet)."""

    def __init__(self, record: RestoreRecord | None) -> None:
        self.record = record
        self.folders: set[bytes] = set()

    def leave_out(self, rel: bytes) -> bool:
        """Whether the folder ``rel``, just received, is left out of staging (then it is one of `folders`): the sandbox
        started from it and the host held it as a folder then."""
        if self.record is None or rel not in self.record.folders:
            return False
        entry = self.record.entries.get(rel)
        if entry is None or entry.kind != "dir":
            return False
        self.folders.add(rel)
        return True

    def unfold(self, parts: list[bytes], writer: TreeWriter) -> None:
        """Make with ``writer`` the folders left out on the way to ``parts``, and ``parts`` when it is one.

        Raises:
            OSError: as `TreeWriter.write`.
        """
        if not self.folders:
            return
        for end in range(1, len(parts) + 1):
            rel = b"/".join(parts[:end])
            if rel in self.folders:
                writer.write(parts[:end], None, append=False)
                self.folders.discard(rel)

    def stage_missing(self, dest: Path, staging: Path) -> None:
        """Make in ``staging`` the folders left out that ``dest`` no longer holds as folders, with those on their way.

        Raises:
            OSError: a folder could not be made.
        """
        if not self.folders:
            return
        tree, writer = FolderTree(os.fsencode(dest)), TreeWriter(staging, exclusive=True)
        try:
            for rel in walk_order(self.folders):
                try:
                    host = tree.lstat(rel)
                except OSError:  # a folder on the way cannot be searched: staged, as every folder was
                    host = None
                if host is None or not stat.S_ISDIR(host.st_mode):
                    self.unfold(rel.split(b"/"), writer)
        finally:
            tree.close()
            writer.close()
