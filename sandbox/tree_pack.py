"""A tree as the sandbox gets it: packed into a tar for its volume, and fingerprinted without reading it.

Only directories and regular files cross; links, caches (``__pycache__``, ``.git``), the copies a rerun of
`generate-tree` kept of a user's files (``.tooltree-kept``: the user's, not the tree's) and files under
their temporary names (written by `generate-tree` or the search index just then) are left out, and a
file gone since it was listed is passed over.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from pathlib import Path

from sandbox.errors import SandboxError

MAX_TREE_BYTES = 256 << 20
_SKIP_DIRS = frozenset({"__pycache__", ".git", ".tooltree-kept"})  # the last: `generator.kept.KEPT_DIR`


def pack_tree(tree: Path, *, max_bytes: int = MAX_TREE_BYTES) -> bytes:
    """A deterministic tar of the tree's directories and regular files (no links, no caches).

    Raises:
        SandboxError: the tree is missing or larger than ``max_bytes``.
    """
    if not tree.is_dir():
        raise SandboxError(f"{tree}: no tree here; run `tooltree generate-tree` first")
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(tree, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not Path(dirpath, d).is_symlink())
            rel_dir = os.path.relpath(dirpath, tree)
            if rel_dir != ".":
                info = tarfile.TarInfo(rel_dir)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            for name in sorted(filenames):
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
                    total += st.st_size
                    if total > max_bytes:
                        raise SandboxError(f"{tree}: the tree is larger than {max_bytes} bytes")
                    info = tarfile.TarInfo(os.path.normpath(os.path.join(rel_dir, name)))
                    info.size, info.mode, info.mtime = st.st_size, 0o644, 0
                    tar.addfile(info, f)
    return buf.getvalue()


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
    for dirpath, dirnames, filenames in os.walk(tree, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not Path(dirpath, d).is_symlink())
        for name in [".", *sorted(filenames)]:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if name == "." or (stat.S_ISREG(st.st_mode) and not _transient(name)):
                rel = os.path.normpath(os.path.relpath(os.path.join(dirpath, name), tree))
                h.update(f"{rel}\0{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}\n".encode(
                    "utf-8", "surrogateescape"))  # fmt: skip
    return h.hexdigest()[:24]
