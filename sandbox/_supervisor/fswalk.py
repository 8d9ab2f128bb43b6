"""Workspace paths and tree walks, never following a link: shared by the container and the host.

Both ends of a workspace transfer (`transfer`) use this module — the supervisor for ``/workspace``,
the host (`sandbox.workspace`) for the workspace folder — so both check paths the same way.
Standard library only.

A path travels as a *wire path*: a ``str`` when its bytes are valid UTF-8, otherwise
``{"b64": <base64 of the bytes>}``, so every name Linux allows crosses unchanged. `split_path`
checks one on arrival: relative, no empty, ``.`` or ``..`` part, no NUL, each part at most 255
bytes, at most `MAX_DEPTH` parts and `MAX_PATH_BYTES` bytes.

`walk` visits a tree depth first holding one descriptor per level (never one per directory, so
no open-file limit is reached however wide the tree), and raises on any failure rather than
skipping what it cannot read. `DirCursor` opens a path's directories one component at a time with
``O_NOFOLLOW``, keeping open the ones the previous path shared.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

MAX_DEPTH = 64
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
ROOT_FLAGS = DIR_FLAGS & ~os.O_NOFOLLOW  # the root itself is the caller's choice, and may be a link

WirePath = str | dict[str, str]


class PathError(ValueError):
    """A path that may not cross the boundary, or a tree that cannot."""


def show(parts: Sequence[bytes]) -> str:
    """A path for a message: its text, with undecodable bytes as escapes, quoted and cut short."""
    return repr(b"/".join(parts).decode("utf-8", errors="backslashreplace"))[:200]


def encode_path(parts: Sequence[bytes]) -> WirePath:
    """The wire form of a relative path: text when it is UTF-8, its bytes in base64 otherwise."""
    raw = b"/".join(parts)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(raw).decode("ascii")}


def split_path(value: object) -> list[bytes]:
    """The parts of a wire path, checked.

    Raises:
        PathError: not a wire path, or a path that is absolute, too long, too deep, or has an
            empty, ``.``, ``..`` or over-long part or a NUL.
    """
    raw: bytes | None = None
    if isinstance(value, str):
        with contextlib.suppress(UnicodeEncodeError):  # a lone surrogate: refused below
            raw = value.encode("utf-8")
    elif isinstance(value, dict) and list(value) == ["b64"] and isinstance(value["b64"], str):
        with contextlib.suppress(binascii.Error, ValueError):
            raw = base64.b64decode(value["b64"], validate=True)
    if raw is None or not raw or len(raw) > MAX_PATH_BYTES or b"\x00" in raw or raw.startswith(b"/"):
        raise PathError(f"refused path {value!r:.100}")
    parts = raw.split(b"/")
    if len(parts) > MAX_DEPTH or any(p in (b"", b".", b"..") or len(p) > MAX_NAME_BYTES for p in parts):
        raise PathError(f"refused path {value!r:.100}")
    return parts


def check_parts(parts: Sequence[bytes]) -> None:
    """Whether a path found on disk may cross the boundary.

    Raises:
        PathError: it is nested deeper than `MAX_DEPTH` levels or longer than `MAX_PATH_BYTES`.
    """
    if len(parts) > MAX_DEPTH:
        raise PathError(f"{show(parts)} is nested deeper than {MAX_DEPTH} folders")
    if sum(len(p) for p in parts) + len(parts) - 1 > MAX_PATH_BYTES:
        raise PathError(f"{show(parts)} is a path longer than {MAX_PATH_BYTES} bytes")


class DirCursor:
    """Opens directories below a root by their parts, never following a link.

    The directories of the last path stay open, so paths in walk order cost one ``open`` per new
    directory. At most one descriptor per level is held.
    """

    def __init__(self, root: str | bytes | os.PathLike[str]) -> None:
        self._fds = [os.open(root, ROOT_FLAGS)]
        self._parts: list[bytes] = []

    def open(self, parts: Sequence[bytes], *, create: bool) -> int:
        """The descriptor of the directory ``parts`` (the cursor's own: valid until the next call).

        Raises:
            OSError: a part is missing (and ``create`` is false), a link, or not a directory.
        """
        keep = 0
        while keep < min(len(parts), len(self._parts)) and parts[keep] == self._parts[keep]:
            keep += 1
        while len(self._parts) > keep:
            self._parts.pop()
            os.close(self._fds.pop())
        for part in parts[keep:]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=self._fds[-1])
            self._fds.append(os.open(part, DIR_FLAGS, dir_fd=self._fds[-1]))
            self._parts.append(part)
        return self._fds[-1]

    def close(self) -> None:
        while self._fds:
            os.close(self._fds.pop())
        self._parts.clear()

    def __enter__(self) -> DirCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Entry:
    """One entry of a walk. ``dir_fd`` is its open parent, valid until the walk moves on."""

    parts: tuple[bytes, ...]
    kind: str  # "dir", "file" or "other" (a link, a FIFO, a socket, a device)
    dir_fd: int
    info: os.stat_result | None = None
    """Its ``lstat``, taken as the walk reached it."""

    @property
    def name(self) -> bytes:
        return self.parts[-1]


def walk(
    root: str | bytes | os.PathLike[str],
    *,
    skip: frozenset[bytes],
    max_entries: int,
    skip_any: frozenset[bytes] = frozenset(),
) -> Iterator[Entry]:
    """Every entry below ``root``, a folder before what it holds; top-level names in ``skip``, and names in
    ``skip_any`` at any depth, are left out (with what they hold).

    Raises:
        PathError: more than ``max_entries`` entries, or a path `check_parts` refuses.
        OSError: anything could not be read (nothing is skipped).
    """
    stack: list[tuple[int, tuple[bytes, ...], Iterator[bytes]]] = []
    listed = 0

    def descend(fd: int, parts: tuple[bytes, ...]) -> None:
        nonlocal listed
        try:
            names = sorted(os.fsencode(n) for n in os.listdir(fd))
            if not parts or skip_any:
                names = [n for n in names if n not in skip_any and (parts or n not in skip)]
            listed += len(names)
            if listed > max_entries:
                raise PathError(f"more than {max_entries} files and folders")
        except BaseException:
            os.close(fd)
            raise
        stack.append((fd, parts, iter(names)))

    try:
        descend(os.open(root, ROOT_FLAGS), ())
        while stack:
            fd, prefix, pending = stack[-1]
            name = next(pending, None)
            if name is None:
                stack.pop()
                os.close(fd)
                continue
            parts = (*prefix, name)
            check_parts(parts)
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            mode = info.st_mode
            if not stat.S_ISDIR(mode):
                yield Entry(parts, "file" if stat.S_ISREG(mode) else "other", fd, info)
                continue
            yield Entry(parts, "dir", fd, info)
            descend(os.open(name, DIR_FLAGS, dir_fd=fd), parts)
    finally:
        for fd, _, _ in stack:
            os.close(fd)
