"""Moving a session's workspace between a host directory and the container.

Restore (host → container) sends every directory and regular file of the host directory in
batches of ``workspace.put`` requests; symlinks and special files are skipped, never followed.

Save (container → host) receives ``workspace.dir`` / ``workspace.file`` notifications — hostile
input — into a fresh staging directory next to the destination, then swaps it in. Each path is
checked (relative, no empty, ``.`` or ``..`` parts, no NUL, bounded length and depth), every
directory on the way is opened with ``O_NOFOLLOW``, files are created without following links,
and total bytes and file counts are capped. Nothing is ever executed or unpacked by a library
that could be tricked into writing elsewhere.

The top-level ``servers`` entry is the read-only tree, not workspace content: it is never
saved or restored.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandbox.errors import WorkspaceError

BATCH_BYTES = 4 << 20
MAX_FILES = 100_000
MAX_DEPTH = 64
MAX_PART_BYTES = 255
MAX_PATH_CHARS = 4096
SKIP_TOP_LEVEL = frozenset({"servers"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def check_relative_path(path: Any) -> list[str]:
    """The components of a workspace-relative path from the container.

    Raises:
        WorkspaceError: anything but a plain relative path.
    """
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise WorkspaceError(f"refused path {path!r:.80}")
    parts = path.split("/")
    if path.startswith("/") or len(parts) > MAX_DEPTH:
        raise WorkspaceError(f"refused path {path!r:.80}")
    for part in parts:
        if part in ("", ".", "..") or len(part.encode("utf-8", errors="surrogateescape")) > MAX_PART_BYTES:
            raise WorkspaceError(f"refused path {path!r:.80}")
    return parts


def iter_restore_batches(root: Path, *, max_bytes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(method, params)`` requests that recreate ``root``'s directories and regular files.

    Raises:
        WorkspaceError: the directory holds more than ``max_bytes``.
    """
    dirs: list[str] = []
    files: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        prefix = "" if rel_dir == "." else rel_dir + "/"
        if not prefix:
            dirnames[:] = [d for d in dirnames if d not in SKIP_TOP_LEVEL]
        kept = []
        for d in sorted(dirnames):
            if not os.path.islink(os.path.join(dirpath, d)):
                kept.append(d)
                dirs.append(prefix + d)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not prefix and name in SKIP_TOP_LEVEL:
                continue
            path = Path(dirpath, name)
            if stat.S_ISREG(path.lstat().st_mode):
                files.append((prefix + name, path))
    if dirs:
        yield "workspace.mkdir", {"paths": dirs}
    batch: list[dict[str, Any]] = []
    batch_bytes = total = 0
    for rel, path in files:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                continue
            first = True
            while True:
                chunk = f.read(BATCH_BYTES)
                if not chunk and not first:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise WorkspaceError(f"the workspace {root} holds more than {max_bytes} bytes")
                batch.append({"path": rel, "data": base64.b64encode(chunk).decode("ascii"), "append": not first})
                batch_bytes += len(chunk)
                first = False
                if batch_bytes >= BATCH_BYTES:
                    yield "workspace.put", {"files": batch}
                    batch, batch_bytes = [], 0
                if not chunk:
                    break
    if batch:
        yield "workspace.put", {"files": batch}


class WorkspaceReceiver:
    """Receives a saved workspace into a staging directory, then swaps it into place."""

    def __init__(self, dest: Path, *, max_bytes: int, max_files: int = MAX_FILES) -> None:
        self.dest = dest
        self.max_bytes = max_bytes
        self.max_files = max_files
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.incoming-", dir=dest.parent))
        self.staging.chmod(0o755)
        self.total = 0
        self.files: set[str] = set()

    def _open_dir(self, parts: list[str]) -> int:
        fd = os.open(self.staging, _DIR_FLAGS)
        try:
            for part in parts:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as e:
            os.close(fd)
            raise WorkspaceError(f"cannot create {'/'.join(parts)!r:.80}: {e.strerror}") from None
        return fd

    def __call__(self, method: str, params: dict[str, Any]) -> None:
        """Handle one notification.

        Raises:
            WorkspaceError: a refused path, bad data, or a cap exceeded.
        """
        parts = check_relative_path(params.get("path"))
        if parts[0] in SKIP_TOP_LEVEL:
            return  # the tree's place: never workspace content
        if method == "workspace.dir":
            os.close(self._open_dir(parts))
            return
        if method != "workspace.file":
            raise WorkspaceError(f"unexpected message {method[:40]!r} while saving the workspace")
        data_text = params.get("data")
        if not isinstance(data_text, str):
            raise WorkspaceError("file data is not a string")
        try:
            data = base64.b64decode(data_text, validate=True)
        except (binascii.Error, ValueError):
            raise WorkspaceError("file data is not base64") from None
        self.total += len(data)
        if self.total > self.max_bytes:
            raise WorkspaceError(f"the saved workspace is larger than {self.max_bytes} bytes")
        rel = "/".join(parts)
        if rel not in self.files:
            self.files.add(rel)
            if len(self.files) > self.max_files:
                raise WorkspaceError(f"the saved workspace has more than {self.max_files} files")
        dir_fd = self._open_dir(parts[:-1])
        append = params.get("append") is True
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if append else os.O_TRUNC)
            fd = os.open(parts[-1], flags, 0o644, dir_fd=dir_fd)
        except OSError as e:
            raise WorkspaceError(f"cannot write {rel!r:.80}: {e.strerror}") from None
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "wb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise WorkspaceError(f"{rel!r:.80} is not a regular file")
            f.write(data)

    def commit(self) -> None:
        """Replace the destination with what was received."""
        old = None
        if self.dest.exists() or self.dest.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f".{self.dest.name}.old-", dir=self.dest.parent))
            os.rename(self.dest, old / "w")
        os.rename(self.staging, self.dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        """Drop what was received; the destination is untouched."""
        shutil.rmtree(self.staging, ignore_errors=True)
