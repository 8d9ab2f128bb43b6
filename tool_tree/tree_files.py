"""How a tree's files are reached on disk: read safely, and the tree's folder locked.

A tree may come from elsewhere (committed by a teammate, downloaded, edited by hand), so each of its files is read
here for every reader: reached without following a link and within a size (`read_in_tree`), never waiting on a FIFO
or a device (`read_regular`), and at a path that stays in the tree (`tree_relpath`). `tree_lock` orders the runs that
write a tree and the readers that take all of it. The format of what is read, and the checks of every field of a
manifest, are `tool_tree.tree`'s.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from typing import BinaryIO

MAX_TREE_FILE_BYTES = 256 << 20
"""The largest manifest, snapshot or search index a reader takes (no tree the sandbox takes is larger in all,
`sandbox.tree_pack.MAX_TREE_BYTES`): a bigger one, from a tree written elsewhere, is refused before it is read
(before: read and parsed whole, whatever its size)."""


def read_regular(path: str | os.PathLike[str], limit: int = -1) -> bytes:
    """The bytes of the regular file ``path`` (its first ``limit`` bytes, when given).

    Never waits: a FIFO (or a device) put where a tree file belongs would otherwise block the reader
    for as long as no one writes to it (`tooltree search` and `generate-tree` hung there).

    Raises:
        OSError: the file is missing or unreadable; IsADirectoryError: a folder; another OSError (EINVAL):
            not a regular file.
    """
    with _opened(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, os.fspath(path)) as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return f.read(limit)


def _opened(path: str | os.PathLike[str], flags: int, shown: str) -> BinaryIO:
    """The file at ``path`` opened with ``flags``, as a binary file.

    Raises:
        OSError: it cannot be opened; IsADirectoryError: it is a folder, naming ``shown`` (before: `os.fdopen` raised
            naming the descriptor, "Is a directory: 3", and left it open, one more at each read).
    """
    fd = os.open(path, flags)
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown)
    return os.fdopen(fd, "rb")


def tree_relpath(rel: object) -> str:
    """``rel``, a path a tree's files name (a manifest's stub or snapshot, a search hit's stub): relative, in ``/``
    parts, none of them empty, ``.`` or ``..``, no NUL or backslash.

    Raises:
        ValueError: it is anything else (a manifest written elsewhere may name ``../../etc/passwd``).
    """
    if (
        not isinstance(rel, str)
        or not rel
        or rel[0] == "/"
        or "\\" in rel
        or "\x00" in rel
        or any(p in ("", ".", "..") for p in rel.split("/"))
    ):
        raise ValueError(f"{rel!r} is not a path inside the tree")
    return rel


def read_in_tree(tree: str | os.PathLike[str], rel: str, limit: int = MAX_TREE_FILE_BYTES) -> bytes:
    """The bytes of the regular file ``rel`` (`tree_relpath`) of the tree folder ``tree``, reached without following
    a link: every folder on the way, and the file, must be one. A tree may come from elsewhere (a repository, an
    archive), and a link there (``servers -> /``, ``snapshots/crm.json -> ~/.docker/config.json``) would hand a host
    file to whatever reads the tree (before: followed). ``tree`` itself is the user's choice: a link to it is
    followed. Never waits on a FIFO or a device, and reads no file over ``limit`` bytes.

    Raises:
        ValueError: ``rel`` is not a path inside the tree.
        OSError: the file is missing or unreadable; IsADirectoryError: a folder; ELOOP: a link on the way;
            EINVAL: not a regular file; EMLINK: a file of more than one name (`hard_linked`); EFBIG: larger than
            ``limit``.
    """
    parts = tree_relpath(rel).split("/")
    shown = os.path.join(os.fspath(tree), rel)
    # Each folder on the way looked at, then the file opened by its path: a folder swapped for a link in between
    # needs a writer of the tree at that moment, who could as well write the file itself.
    for i in range(len(parts)):
        where = os.path.join(os.fspath(tree), *parts[: i + 1])
        try:
            mode = os.lstat(where).st_mode
        except OSError as e:
            raise type(e)(e.errno, e.strerror, shown) from None
        if stat.S_ISLNK(mode):
            raise OSError(errno.ELOOP, f"{where} is a symbolic link, which is not followed in a tree", shown)
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            raise NotADirectoryError(errno.ENOTDIR, f"{where} is not a folder", shown)
    try:
        opened = _opened(shown, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, shown)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, shown) from None
    with opened as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", shown)
        if st.st_nlink > 1:
            raise OSError(errno.EMLINK, hard_linked(st.st_nlink), shown)
        data = b""
        if st.st_size <= limit:  # a buffer of its size, not the limit's (256 MiB for every manifest read)
            data = f.read(st.st_size + 1)
            if len(data) > st.st_size:  # it grew since: read on, as far as the limit
                data += f.read(limit + 1 - len(data))
        if st.st_size > limit or len(data) > limit:
            raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", shown)
        return data


def hard_linked(names: int) -> str:
    """Why a file of a tree with ``names`` names (hard links) is not read: another of its names may be a host file
    outside the tree (an archive extracted carelessly can make one; git cannot store one), and what reads the tree would
    hand that file on. `generate-tree` writes every file of a tree under one name."""
    return (
        f"it has {names} names (hard links), and another may be a file outside the tree, so it is not read; a tree's "
        "files each have one name: copy the tree without hard links, or regenerate it with `tooltree generate-tree`"
    )


@contextlib.contextmanager
def tree_lock(
    root: str | os.PathLike[str], *, shared: bool = False, on_wait: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold a ``flock`` on the tree folder ``root``: exclusive to write the tree, shared to read all of it.

    `generate` holds it exclusively from reading the previous tree to writing the new one, so two
    runs on one tree take turns (each file of a run is written exclusively or replaced, and its
    stale files deleted, which would otherwise fail on, or delete, the other run's files); a reader
    holding it shared (the Docker backend packing the tree) sees one whole generation. Waits for
    the holder; the kernel releases the lock when the holder's process ends. A ``root`` that is
    missing or not a folder holds no tree: nothing to lock (`generator.files.check_out` says what is wrong with it).
    ``on_wait`` is called once, before waiting, when another process holds the lock.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        yield
        return
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)
