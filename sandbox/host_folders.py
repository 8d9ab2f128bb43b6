"""Host folders reached through descriptors: what a workspace save needs to touch a folder the user owns.

Every entry is reached from its root folder's descriptor one component at a time (`FolderTree`),
never by a full path and never through a link: a saved path may be up to 4,096 bytes, and with the
host folder's path in front of it longer than ``PATH_MAX``. A move never replaces an entry another
process made meanwhile (`move_out`, ``renameat2(RENAME_NOREPLACE)``) and works in folders the host
made read-only; where a rename cannot reach (another mount: ``EXDEV``) a saved entry is copied
(`copy_new`), again never over an entry. Names from the sandbox are shown escaped (`shown`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import re
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandbox._supervisor.fswalk import DIR_FLAGS, MAX_NAME_BYTES, READ_FLAGS, DirCursor, PathError, walk
from sandbox._supervisor.transfer import ENTRY_BYTES
from sandbox.errors import WorkspaceError


def shown(rel: bytes) -> str:
    """A path for a note: undecodable bytes as ``\\xNN``, and control, bidi and zero-width characters and
    backslashes escaped as in a Python literal, so a name from the sandbox cannot move the terminal's
    cursor, start an escape sequence or forge a line, and names still tell apart."""
    text = rel.decode("utf-8", errors="surrogateescape")
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_shown_char(c) for c in text)


def _shown_char(c: str) -> str:
    if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte that is not UTF-8
        return f"\\x{ord(c) - 0xDC00:02x}"
    return c if c.isprintable() and c != "\\" else repr(c)[1:-1]


class FolderTree:
    """Entries below a root folder, reached from its descriptor one component at a time, never
    following a link on the way (so a path longer than ``PATH_MAX`` with the root in front works).
    Folders of the last path stay open (`DirCursor`): paths in walk order cost one ``open`` each."""

    def __init__(self, root: bytes) -> None:
        self.root = root
        self._cursor = DirCursor(root)

    def folder(self, rel: bytes) -> int:
        """The open folder ``rel`` (``b""``: the root), valid until the next call.

        Raises:
            OSError: it is missing, a link, or not a folder, or one on the way is.
        """
        return self._cursor.open(rel.split(b"/") if rel else [], create=False)

    def at(self, rel: bytes) -> tuple[int, bytes]:
        """The open parent folder of ``rel`` (valid until the next call) and ``rel``'s last name.

        Raises:
            OSError: as `folder`, for the parent.
        """
        parent, _, name = rel.rpartition(b"/")
        return self.folder(parent), name

    def lstat(self, rel: bytes) -> os.stat_result | None:
        """``rel``'s own ``lstat``; None when there is nothing there, or a link or a file is on the way.

        Raises:
            OSError: any other failure (a folder that cannot be searched).
        """
        try:
            fd, name = self.at(rel)
            return os.lstat(name, dir_fd=fd)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                return None
            raise

    def close(self) -> None:
        self._cursor.close()


def lstat_walk(
    root: bytes,
    limit: int | None,
    *,
    skip_top: bytes | None = None,
    skip_any: frozenset[bytes] = frozenset(),
    strict: bool = True,
) -> Iterator[tuple[bytes, os.stat_result]]:
    """``(relative path, lstat)`` of every entry below ``root`` without following links, a folder
    before its content; a top-level entry named ``skip_top``, and entries named in ``skip_any`` at any depth,
    left out (with what they hold); at most ``limit`` entries.

    Raises:
        OSError: an entry could not be listed or read (``strict``; else it is passed over).
    """
    try:
        tree = FolderTree(root)
    except OSError:
        if strict:
            raise
        return
    try:
        stack = [b""]
        count = 0
        while stack:
            rel = stack.pop()
            try:
                fd = tree.folder(rel)
                names = sorted(os.fsencode(n) for n in os.listdir(fd))
            except OSError:
                if strict:
                    raise
                continue
            for name in names:
                if (not rel and name == skip_top) or name in skip_any:
                    continue
                try:
                    st = os.lstat(name, dir_fd=fd)
                except OSError:
                    if strict:
                        raise
                    continue
                count += 1
                if limit is not None and count > limit:
                    return
                child = rel + b"/" + name if rel else name
                yield child, st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(child)
    finally:
        tree.close()


def move_out(src_fd: int, src_name: bytes, dst_fd: int, dst_name: bytes) -> None:
    """Rename an entry of a host folder into another folder, never over an entry there, also when the host
    made its folder (or the folder moved itself) read-only: write permission is added for the move, then
    taken away again.

    Raises:
        FileExistsError: ``dst_name`` is taken (made meanwhile by another process): nothing moved.
        OSError: the move failed (or permission could not be added: a folder of another user).
    """
    try:
        _rename_new(src_fd, src_name, dst_fd, dst_name)
        return
    except PermissionError:
        pass
    folder_mode = stat.S_IMODE(os.fstat(src_fd).st_mode)
    st = os.lstat(src_name, dir_fd=src_fd)
    own_mode = stat.S_IMODE(st.st_mode) if stat.S_ISDIR(st.st_mode) else None  # a folder's ``..`` changes too
    os.chmod(src_fd, folder_mode | stat.S_IRWXU)
    try:
        if own_mode is not None:
            os.chmod(src_name, own_mode | stat.S_IRWXU, dir_fd=src_fd)
        moved = False
        try:
            _rename_new(src_fd, src_name, dst_fd, dst_name)
            moved = True
        finally:
            if own_mode is not None:
                fd, name = (dst_fd, dst_name) if moved else (src_fd, src_name)
                os.chmod(name, own_mode, dir_fd=fd)
    finally:
        os.chmod(src_fd, folder_mode)


_RENAME_NOREPLACE = 1
_renameat2: Any = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
if _renameat2 is not None:
    _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    _renameat2.restype = ctypes.c_int


def _rename_new(src_fd: int, src_name: bytes, dst_fd: int, dst_name: bytes) -> None:
    """``renameat2(RENAME_NOREPLACE)``: an entry another process made at ``dst_name`` is never replaced. Where
    the filesystem cannot (EINVAL), a check just before the rename leaves a window of microseconds.

    Raises:
        FileExistsError: ``dst_name`` is taken.
        OSError: the rename failed.
    """
    if _renameat2 is not None:
        if _renameat2(src_fd, src_name, dst_fd, dst_name, _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS):
            raise OSError(err, os.strerror(err), dst_name)  # the subclass of ``err`` (PermissionError, …)
    if lexists(dst_name, dst_fd):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst_name)
    os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)


def remove_tree(root: Path) -> None:
    """Remove a folder and everything in it, read-only folders too (best effort: what cannot go stays)."""
    try:
        folders = [b""] + [rel for rel, st in lstat_walk(os.fsencode(root), None, strict=False)
                           if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IRWXU != stat.S_IRWXU]  # fmt: skip
        tree = FolderTree(os.fsencode(root))
    except OSError:
        folders = []
    else:
        try:
            for rel in folders:
                with contextlib.suppress(OSError):
                    os.chmod(tree.folder(rel), 0o700)
        finally:
            tree.close()
    shutil.rmtree(root, ignore_errors=True)


def fd_path(fd: int) -> bytes:
    """A path naming the open folder ``fd`` (for APIs that take a path; what is below it is still reached
    one component at a time)."""
    return b"/proc/self/fd/%d" % fd


def free_name(name: bytes, suffix: bytes, *dir_fds: int) -> bytes:
    """``name`` + ``suffix`` (then ``suffix-2``, …) taken in none of ``dir_fds``; a long name is cut to make room."""
    n = 1
    while True:
        end = suffix if n == 1 else b"%s-%d" % (suffix, n)
        candidate = name[: MAX_NAME_BYTES - len(end)] + end
        if not any(lexists(candidate, fd) for fd in dir_fds):
            return candidate
        n += 1


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def copy_new(src_fd: int, name: bytes, dst_fd: int, dst_name: bytes) -> None:
    """Copy a folder or regular file of a folder we made (a staging folder: nothing else is in it) into another
    folder, where a rename cannot reach it (another mount), never over an entry there; modes and file times
    are copied. A file is written under a temporary name in ``dst_fd``'s folder, flushed to disk and then renamed,
    so ``dst_name`` never holds part of it; a partial copy is removed (one left by a killed process keeps its
    temporary name, ``.<name>.tooltree-copy``).

    Raises:
        FileExistsError: ``dst_name`` is taken (made meanwhile by another process): nothing copied.
        OSError: the copy failed.
    """
    st = os.lstat(name, dir_fd=src_fd)
    if stat.S_ISDIR(st.st_mode):
        os.mkdir(dst_name, 0o700, dir_fd=dst_fd)
        try:
            src, dst = os.open(name, DIR_FLAGS, dir_fd=src_fd), os.open(dst_name, DIR_FLAGS, dir_fd=dst_fd)
            try:
                for child in sorted(os.fsencode(n) for n in os.listdir(src)):
                    copy_new(src, child, dst, child)
                os.fchmod(dst, stat.S_IMODE(st.st_mode))
            finally:
                os.close(src)
                os.close(dst)
        except BaseException:
            shutil.rmtree(fd_path(dst_fd) + b"/" + dst_name, ignore_errors=True)
            raise
        return
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a folder or a regular file", name)
    if lexists(dst_name, dst_fd):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst_name)
    # Written under a temporary name, on disk, then renamed: the name never holds part of the file. Before: the copy
    # was written under its own name, so tooltree killed mid-copy left a truncated file the next session took as
    # the user's.
    partial = free_name(b"." + dst_name, b".tooltree-copy", dst_fd)
    src = os.open(name, READ_FLAGS, dir_fd=src_fd)
    try:
        dst = os.open(partial, _NEW_FILE, 0o600, dir_fd=dst_fd)
        try:
            while chunk := os.read(src, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
            os.fchmod(dst, stat.S_IMODE(st.st_mode))
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(dst)
            _rename_new(dst_fd, partial, dst_fd, dst_name)
        except BaseException:
            os.unlink(partial, dir_fd=dst_fd)
            raise
        finally:
            os.close(dst)
    finally:
        os.close(src)


def remove_entry(dir_fd: int, name: bytes) -> None:
    """Remove a file, or a folder and everything in it (`remove_tree`), from an open folder (best effort)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except IsADirectoryError:
        remove_tree(Path(os.fsdecode(fd_path(dir_fd) + b"/" + name)))
    except OSError:
        pass


def lexists(name: bytes, dir_fd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def open_folder(path: Path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def open_up(fd: int, mode: int) -> None:
    """Give the owner of the open folder ``fd`` full access, if its ``mode`` lacks it."""
    if mode & stat.S_IRWXU != stat.S_IRWXU:
        os.fchmod(fd, mode | stat.S_IRWXU)


def is_mount_point(path: Path) -> bool:
    """Whether ``path`` (a real path) is a mount point, a bind mount of a folder of the same filesystem too
    (which `os.path.ismount` cannot tell: a rename across it fails all the same)."""
    if os.path.ismount(path):
        return True
    want = os.fsencode(path)
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            points = [line.split(b" ")[4] for line in f if line.count(b" ") >= 4]
    except OSError:
        return False
    return any(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), p) == want for p in points)


def alive(pid: int) -> bool:
    """Whether a process of that id runs (one of another user counts). A zombie does not: it ended, and only its
    parent has not reaped it yet (before: it counted, so a killed save's folders were taken for a live one's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != b"Z"


def past_restore(
    folder: Path, *, skip: frozenset[bytes], skip_any: frozenset[bytes], max_entries: int, max_data: int | None
) -> str | None:
    """Why a restore of ``folder`` would fail for its size (more than ``max_entries`` files and folders, or, unless
    None, ``max_data`` bytes of file data in whole pages, as a restore writes them), or None: it fits. Walked as a
    restore walks it (``skip`` at the top, ``skip_any`` at any depth), without opening a file; a folder that cannot
    be read is None (the restore says why)."""
    data = 0
    try:
        for entry in walk(folder, skip=skip, max_entries=max_entries, skip_any=skip_any):
            if entry.kind == "file" and entry.info is not None:
                data += -(-entry.info.st_size // ENTRY_BYTES) * ENTRY_BYTES
    except PathError as e:
        return str(e)
    except OSError:
        return None
    if max_data is not None and data > max_data:
        return f"more than {max_data} bytes of file data, each file in whole {ENTRY_BYTES // 1024} KiB pages"
    return None


def lock_folder(folder: Path, timeout: float, *, shared: bool = False) -> int:
    """An exclusive ``flock`` on ``folder`` (its open descriptor; closing it releases the lock), or a ``shared`` one.

    Raises: WorkspaceError: another save into that folder held it for ``timeout`` seconds.
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise WorkspaceError(f"another workspace save into {folder} did not end within {timeout:g} s") from None
            time.sleep(0.05)  # polling a lock another process holds: flock has no timed wait


def lock_saves_into(dest: Path, timeout: float, *, shared: bool = False) -> int:
    """`lock_folder` on what saves into the folder ``dest`` take turns on (its parent; itself, for a parent this user
    may not read): a merge holds it exclusively, a restore ``shared``. Raises: WorkspaceError: as `lock_folder`."""
    try:
        return lock_folder(dest.parent, timeout, shared=shared)
    except OSError:
        return lock_folder(dest, timeout, shared=shared)
