"""Workspace file operations, done without ever following a symlink.

Paths are relative to the workspace, use ``/`` and contain no empty, ``.`` or ``..`` parts.
Every directory on the way is opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent,
so a symlink planted by user code cannot redirect a read or a write outside the workspace.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from typing import Any

CHUNK_BYTES = 4 << 20
MAX_PATH_CHARS = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FileOpError(Exception):
    """A workspace operation was refused or failed."""


def split_path(path: str) -> list[str]:
    """The components of a relative workspace path.

    Raises:
        FileOpError: the path is absolute, empty, too long, or has a forbidden component.
    """
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise FileOpError(f"invalid path {path!r:.100}")
    if path.startswith("/"):
        raise FileOpError(f"{path!r:.100}: paths are relative to the workspace")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise FileOpError(f"{path!r:.100}: empty, '.' and '..' components are not allowed")
    return parts


class Workspace:
    """The workspace directory of one container."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _open_dir(self, parts: list[str], *, create: bool) -> int:
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as e:
            os.close(fd)
            raise FileOpError(f"{'/'.join(parts)}: {e.strerror}") from None
        return fd

    def put(self, path: str, data: bytes, *, append: bool) -> None:
        """Write (or append to) a regular file, creating its directories.

        Raises:
            FileOpError: a bad path, a symlink on the way, or a write error.
        """
        parts = split_path(path)
        dir_fd = self._open_dir(parts[:-1], create=True)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if append else os.O_TRUNC)
            fd = os.open(parts[-1], flags, 0o644, dir_fd=dir_fd)
        except OSError as e:
            raise FileOpError(f"{path}: {e.strerror}") from None
        finally:
            os.close(dir_fd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FileOpError(f"{path}: not a regular file")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as e:
            raise FileOpError(f"{path}: {e.strerror}") from None
        finally:
            os.close(fd)

    def mkdir(self, path: str) -> None:
        """Create a directory and its parents.

        Raises:
            FileOpError: a bad path or a symlink on the way.
        """
        os.close(self._open_dir(split_path(path), create=True))

    def read(self, path: str, max_bytes: int) -> tuple[bytes, int]:
        """Up to ``max_bytes`` of a regular file, and its size.

        Raises:
            FileOpError: missing, a symlink, or not a regular file.
        """
        parts = split_path(path)
        dir_fd = self._open_dir(parts[:-1], create=False)
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
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

    def listdir(self, path: str, limit: int) -> list[dict[str, Any]]:
        """Entries of a directory (``path`` empty for the root): name, type and size.

        Raises:
            FileOpError: a bad path or not a directory.
        """
        fd = self._open_dir(split_path(path) if path else [], create=False)
        try:
            entries: list[dict[str, Any]] = []
            with os.scandir(fd) as it:
                for entry in it:
                    if len(entries) >= limit:
                        break
                    info = entry.stat(follow_symlinks=False)
                    kind = (
                        "dir"
                        if stat.S_ISDIR(info.st_mode)
                        else "file"
                        if stat.S_ISREG(info.st_mode)
                        else "symlink"
                        if stat.S_ISLNK(info.st_mode)
                        else "other"
                    )
                    entries.append({"name": entry.name, "type": kind, "size": info.st_size})
            return sorted(entries, key=lambda e: str(e["name"]))
        finally:
            os.close(fd)

    def walk(self, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, bool]]:
        """``(relative path, is_dir)`` for every directory and regular file; symlinks and others are skipped."""
        stack: list[tuple[int, str]] = [(os.open(self.root, _DIR_FLAGS), "")]
        while stack:
            fd, prefix = stack.pop()
            try:
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda e: e.name)
                for entry in entries:
                    rel = prefix + entry.name
                    if not prefix and entry.name in skip:
                        continue
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(info.st_mode):
                        yield rel, True
                        try:
                            stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), rel + "/"))
                        except OSError:
                            continue
                    elif stat.S_ISREG(info.st_mode):
                        yield rel, False
            finally:
                os.close(fd)

    def export(self, send: Callable[[dict[str, Any]], None], *, skip: frozenset[str], max_bytes: int) -> dict[str, int]:
        """Send every directory and regular file as ``workspace.dir`` / ``workspace.file`` messages.

        Stops with an error once more than ``max_bytes`` of file data were sent.

        Raises:
            FileOpError: the workspace holds more than ``max_bytes``.
        """
        files = dirs = total = 0
        for rel, is_dir in self.walk(skip):
            if is_dir:
                dirs += 1
                send({"method": "workspace.dir", "params": {"path": rel}})
                continue
            parts = rel.split("/")
            try:
                dir_fd = self._open_dir(parts[:-1], create=False)
            except FileOpError:
                continue
            try:
                fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                continue
            finally:
                os.close(dir_fd)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                files += 1
                first = True
                while True:
                    chunk = os.read(fd, CHUNK_BYTES)
                    if not chunk and not first:
                        break
                    total += len(chunk)
                    if total > max_bytes:
                        raise FileOpError(f"the workspace holds more than {max_bytes} bytes")
                    data = base64.b64encode(chunk).decode("ascii")
                    send({"method": "workspace.file", "params": {"path": rel, "data": data, "append": not first}})
                    first = False
                    if not chunk:
                        break
            finally:
                os.close(fd)
        return {"files": files, "dirs": dirs, "bytes": total}

    def wipe(self, keep: frozenset[str] = frozenset()) -> None:
        """Delete everything in the workspace except the top-level names in ``keep``."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            with os.scandir(fd) as it:
                names = [e.name for e in it if e.name not in keep]
            for name in names:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(os.path.join(self.root, name), ignore_errors=True)
                else:
                    os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
