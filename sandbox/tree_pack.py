"""A tree as the sandbox gets it: packed into a tar for its volume, and fingerprinted without reading it.

Only directories and regular files cross (a file of more than one name, a hard link, is refused); links, caches
(``__pycache__``, ``.git``), the copies a rerun of `generate-tree` kept of a user's files (``.tooltree-kept``: the
user's, not the tree's) and files under their temporary names (written by `generate-tree` or the search index just
then) are left out, and a file gone since it was listed is passed over.

A tree may come from elsewhere (a repository, an archive), so what it costs to pack is bounded by the archive, not
the data: `MAX_TREE_BYTES` caps the tar itself, each entry's header counted (before: only the files' data, so 600,000
empty files made a 307 MB archive, 580 MB of host memory, and went on into the sandbox's volume), and the walk goes
no deeper than `MAX_TREE_DEPTH` folders and keeps no stack frame per folder (before: `os.walk` raised RecursionError
on a tree 1,200 folders deep).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

from sandbox.errors import SandboxError
from tool_tree.regenerate import regenerate_command
from tool_tree.tree import MANIFEST_FILE, hard_linked

MAX_TREE_BYTES = 256 << 20
MAX_TREE_DEPTH = 64
"""The deepest folder of a tree, below its root (`generate-tree` writes three levels: ``servers/<package>/<stub>``)."""
MAX_MODULE_BYTES = 8 << 20
"""The largest ``.py`` file of a tree. The sandbox's copy compiles every one (`tooltree_supervisor.populate`), and
compiling takes about 400 times a file's size in memory at worst (a 4 MB list literal: 1.4 GB); the generator writes
none over about 5 MB (a server's ``__init__.py`` re-exporting 20,000 tools of long names). Before: a 256 MiB stub
was copied and compiled, in a container without a memory limit."""
MAX_TREE_ENTRIES = MAX_TREE_BYTES // tarfile.BLOCKSIZE
"""The most folders and files a tree is walked for: no more fit in a `MAX_TREE_BYTES` archive (a header each)."""
_SKIP_DIRS = frozenset({"__pycache__", ".git", ".tooltree-kept"})  # the last: `generator.kept.KEPT_DIR`


def pack_tree(tree: Path, *, max_bytes: int = MAX_TREE_BYTES) -> bytes:
    """A deterministic tar of the tree's directories and regular files (no links, no caches).

    Raises:
        SandboxError: the tree is missing, is a folder `generate-tree` did not write (no ``manifest.json``), or is
            larger than ``max_bytes``.
    """
    if not tree.is_dir():
        raise SandboxError(f"{tree}: no tree here; run `tooltree generate-tree` first")
    if not (tree / MANIFEST_FILE).is_file():  # before: any folder was copied in (`Sandbox(tree=Path.home())`: ~/.ssh)
        raise SandboxError(
            f"{tree}: not a tree `tooltree generate-tree` wrote (it has no {MANIFEST_FILE}), so it is not copied into "
            "the sandbox, where every script could read it; pass the folder generate-tree wrote (its --out)"
        )
    buf = io.BytesIO()
    too_big = f"{tree}: the tree is larger than {max_bytes} bytes"
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, filenames in _walk(tree):
            rel_dir = os.path.relpath(dirpath, tree)
            if rel_dir != ".":
                info = tarfile.TarInfo(rel_dir)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            for name in filenames:
                if buf.tell() > max_bytes:  # the archive so far: headers count, not only data
                    raise SandboxError(too_big)
                if _transient(name):
                    continue
                try:  # opened first, then measured: a file replaced meanwhile is read whole, old or new
                    fd = os.open(Path(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError:
                    continue  # gone since it was listed, or a link
                with os.fdopen(fd, "rb") as f:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    if st.st_nlink > 1:  # another of its names may be a host file: refused, not copied in
                        raise SandboxError(f"{Path(dirpath, name)}: {hard_linked(st.st_nlink)}")
                    if buf.tell() + st.st_size > max_bytes:
                        raise SandboxError(too_big)
                    if name.endswith(".py") and st.st_size > MAX_MODULE_BYTES:
                        raise SandboxError(
                            f"{Path(dirpath, name)}: larger than {MAX_MODULE_BYTES:,} bytes, which no module "
                            f"`tooltree generate-tree` writes is; regenerate the tree with {regenerate_command(tree)}"
                        )
                    info = tarfile.TarInfo(os.path.normpath(os.path.join(rel_dir, name)))
                    info.size, info.mode, info.mtime = st.st_size, 0o644, 0
                    tar.addfile(info, f)
        if buf.tell() > max_bytes:
            raise SandboxError(too_big)
    return buf.getvalue()


def _walk(tree: Path) -> Iterator[tuple[str, list[str]]]:
    """Each folder of ``tree`` (its path) and the names in it that are not folders, sorted, folders first, parent
    before child, in `os.walk`'s order, without going through a link or into `_SKIP_DIRS`; a folder that cannot be
    listed is passed over, as `os.walk` does.

    Raises:
        SandboxError: a folder deeper than `MAX_TREE_DEPTH`, or more than `MAX_TREE_ENTRIES` entries.
    """
    todo = [(os.fspath(tree), 0)]
    seen = 0
    while todo:
        dirpath, depth = todo.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = list(it)
        except OSError:
            continue
        seen += len(entries)
        if seen > MAX_TREE_ENTRIES:
            raise SandboxError(f"{tree}: the tree holds more than {MAX_TREE_ENTRIES:,} files and folders")
        folders = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False) and e.name not in _SKIP_DIRS)
        if folders and depth >= MAX_TREE_DEPTH:
            raise SandboxError(f"{tree}: the tree has folders nested deeper than {MAX_TREE_DEPTH}")
        yield dirpath, sorted(e.name for e in entries if not e.is_dir(follow_symlinks=False))
        todo.extend((os.path.join(dirpath, name), depth + 1) for name in reversed(folders))


def _transient(name: str) -> bool:
    """A file being written by `generate-tree` or the search index (its hidden temporary name before the
    atomic replace): not part of any generation of the tree."""
    return name.startswith(".") and name.endswith((".part", ".tmp"))


def tree_fingerprint(tree: Path) -> str:
    """A hash of what `pack_tree` would read, without reading it: each directory's and regular file's path,
    inode, size and modification and change times (the change time cannot be set back by a user, so a
    rewritten file always changes it).

    Raises:
        SandboxError: the tree is missing.
    """
    if not tree.is_dir():
        raise SandboxError(f"{tree}: no tree here; run `tooltree generate-tree` first")
    h = hashlib.sha256()
    for dirpath, filenames in _walk(tree):
        for name in [".", *filenames]:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if name == "." or (stat.S_ISREG(st.st_mode) and not _transient(name)):
                rel = os.path.normpath(os.path.relpath(os.path.join(dirpath, name), tree))
                h.update(f"{rel}\0{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\n".encode(
                    "utf-8", "surrogateescape"))  # fmt: skip
    return h.hexdigest()[:24]
