"""Writing a planned tree to disk without following links or leaving the tree.

A plan is a mapping of relative POSIX paths to bytes. Writing it changes only files whose bytes
differ (an unchanged file keeps its mtime), replaces files atomically, refuses any path that
would pass through a symbolic link or out of the root, and deletes stale files only inside the
folders the plan owns, and only those the caller says it may (`generator.kept` says which: the
files tooltree wrote).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tool_tree.tree import MANIFEST_FILE, SEARCH_INDEX_FILE, Manifest, TreeError

logger = logging.getLogger(__name__)

OnReplace = Callable[[str, bytes, bool], None]
"""Called with a file's path, its current bytes and whether it is to be deleted (else replaced), before
the writer replaces or deletes it (to keep a copy)."""
TEMP_PREFIX, TEMP_SUFFIX = ".tmp-", ".part"
"""The name of a file `write_file` is writing (left behind only by a run killed midway)."""


class UnsafePathError(Exception):
    """A path in the plan, or on disk, would lead outside the tree (``..``, absolute, a symlink)."""


@dataclass
class WriteReport:
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unchanged: int = 0


def check_relpath(rel: str) -> PurePosixPath:
    """Raises: UnsafePathError: ``rel`` is absolute, empty, or has ``..``/``.``/NUL/backslash parts."""
    _check(rel)
    return PurePosixPath(rel)


def _check(rel: str) -> str:
    if not rel or rel[0] == "/" or "\\" in rel or "\x00" in rel or any(p in ("", ".", "..") for p in rel.split("/")):
        raise UnsafePathError(f"refusing unsafe path in tree: {rel!r}")
    return rel


def ensure_dir(root: Path, rel_dir: PurePosixPath) -> Path:
    """Create ``rel_dir`` under ``root`` one component at a time, refusing symlinks on the way."""
    current = root
    for part in rel_dir.parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current, 0o755)
            continue
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError(f"refusing to write through {current}: not a plain directory")
    return current


def read_existing(root: Path, rel: str) -> bytes | None:
    """The bytes of a regular file in the tree, or None; never follows a symlink. A file of more than one name (a hard
    link, which every reader of a tree refuses: `tool_tree.tree.hard_linked`) is None too, as if missing: a run writes
    it afresh (another name, which may be a file outside the tree, keeps its bytes), so regenerating mends the tree."""
    path = os.path.join(root, _check(rel))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO: refused below, never waited on
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:  # ELOOP: the last component is a symlink
        raise UnsafePathError(f"refusing to read {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePathError(f"refusing to read {path}: not a regular file")
        return f.read() if st.st_nlink == 1 else None


def read_remembered(root: Path, rel: str, seen: dict[str, bytes | None]) -> bytes | None:
    """`read_existing`, remembered in ``seen`` (so a later step does not read it again); None for a path that
    passes through a symlink (rendered afresh: writing it then refuses the unsafe path with a clear error)."""
    try:
        seen[rel] = read_existing(root, rel)
    except UnsafePathError:
        return None
    return seen[rel]


def diff_plan(
    root: Path,
    files: Mapping[str, bytes],
    owned_dirs: Iterable[str],
    *,
    known: Mapping[str, bytes | None] = {},
    deletable: Callable[[str], bool] = lambda _: True,
) -> list[str]:
    """Paths that writing the plan would create, change or delete (sorted), without writing.

    ``known`` holds files already read from ``root`` in this run (they are not read again);
    ``deletable`` as `write_plan` takes it.
    """
    drift = [rel for rel, data in files.items() if _current(root, rel, known) != data]
    drift += _stale(root, files, owned_dirs, deletable)
    return sorted(drift)


def files_under(root: Path, rel_dir: str) -> list[str]:
    """Relative paths of the files below ``rel_dir`` (not following links, skipping ``__pycache__``)."""
    base = root / check_relpath(rel_dir)
    if not base.is_dir() or base.is_symlink():
        return []
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = [n for n in dirnames if n != "__pycache__"]
        out += [(Path(dirpath) / name).relative_to(root).as_posix() for name in filenames]
    return out


def modules_in(root: Path, rel_dir: str) -> set[str]:
    """Names of the Python modules (``name.py``, not ``__init__.py``) directly in ``rel_dir`` under ``root``."""
    base = root / check_relpath(rel_dir)
    if not base.is_dir() or base.is_symlink():
        return set()
    return {e.name[:-3] for e in os.scandir(base) if e.name.endswith(".py") and e.name != "__init__.py"}


def _stale(
    root: Path, files: Mapping[str, bytes], owned_dirs: Iterable[str], deletable: Callable[[str], bool]
) -> list[str]:
    return [rel for d in owned_dirs for rel in files_under(root, d) if rel not in files and deletable(rel)]


def is_temporary(rel: str) -> bool:
    """Whether ``rel`` names a file `write_file` was writing when its run was killed."""
    name = rel.rsplit("/", 1)[-1]
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def _current(root: Path, rel: str, known: Mapping[str, bytes | None]) -> bytes | None:
    return known[rel] if rel in known else read_existing(root, rel)


def write_file(
    root: Path,
    rel: str,
    data: bytes,
    *,
    known: Mapping[str, bytes | None] = {},
    on_replace: OnReplace | None = None,
    created: set[str] | None = None,
    relinked: list[str] | None = None,
) -> bool:
    """Make the file ``rel`` under ``root`` (an existing, resolved folder) hold ``data``.

    Only a file whose bytes differ is written; a new file is created exclusively (and added to
    ``created``; a write that fails removes it), an existing one replaced atomically (``on_replace``
    is given its bytes first). Returns whether it wrote. ``known`` holds files already read from
    ``root`` in this run (they are not read again). A file of more than one name is written afresh (`read_existing`)
    and added to ``relinked`` (without it: said in a warning).

    Raises:
        UnsafePathError: the path is unsafe or passes through a symlink.
        OSError: the file system refused the write.
    """
    p = check_relpath(rel)
    current = _current(root, rel, known)
    if current == data:
        return False
    if current is not None and on_replace is not None:
        on_replace(rel, current, False)
    parent = ensure_dir(root, p.parent)
    if not os.path.lexists(parent / p.name):
        # A new file: create it exclusively (never through a link planted meanwhile).
        fd = os.open(parent / p.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except BaseException:  # a disk that filled up midway: no half-written file stays under its real name
            (parent / p.name).unlink(missing_ok=True)
            raise
        if created is not None:
            created.add(rel)
        return True
    if current is None and os.lstat(parent / p.name).st_nlink > 1:  # `read_existing` read it as missing
        if relinked is not None:
            relinked.append(rel)
        else:
            logger.warning("%s", relinked_warning([rel]))
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, parent / p.name)  # replaces a symlink itself, never its target
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


RELINKED_SHOWN = 5
"""The files of more than one name written afresh that a run's warning names (the rest counted)."""


def relinked_warning(rels: list[str]) -> str:
    """The one warning of a run that wrote the files ``rels`` afresh because each had more than one name."""
    more = len(rels) - RELINKED_SHOWN
    shown = ", ".join(rels[:RELINKED_SHOWN]) + (f" and {more:,} more" if more > 0 else "")
    return (
        f"{len(rels):,} file(s) of the tree had more than one name (hard links), which no reader of a tree reads "
        f"({shown}): each was written afresh, and its other names keep the bytes it had"
    )


def write_plan(
    root: Path,
    files: Mapping[str, bytes],
    owned_dirs: Iterable[str],
    *,
    known: Mapping[str, bytes | None] = {},
    written: Collection[str] = (),
    deletable: Callable[[str], bool] = lambda _: True,
    on_replace: OnReplace | None = None,
    created: set[str] | None = None,
    relinked: list[str] | None = None,
) -> WriteReport:
    """Make the tree under ``root`` match ``files``; stale files in ``owned_dirs`` are deleted when
    ``deletable`` says so (the others stay as they are).

    ``manifest.json`` is written after every other file and before the deletions, so a run stopped
    halfway never leaves a manifest naming a stub or snapshot that is not written yet.

    ``known`` holds files already read from ``root`` in this run (they are not read again);
    ``written`` are files of the plan this run already wrote with `write_file` (reported as
    written, not touched again). ``on_replace`` is given the bytes of every file before it is replaced
    or deleted; ``created`` collects the files it made, ``relinked`` those of more than one name it wrote afresh (as
    `write_file`'s do).

    Raises:
        UnsafePathError: a path is unsafe or passes through a symlink.
        OSError: the file system refused a write.
    """
    report = WriteReport()
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    for rel in sorted(files, key=lambda rel: (rel == MANIFEST_FILE, rel)):
        if rel in written or write_file(
            root, rel, files[rel], known=known, on_replace=on_replace, created=created, relinked=relinked
        ):
            report.written.append(rel)
        else:
            report.unchanged += 1
    for rel in _stale(root, files, owned_dirs, deletable):
        if on_replace is not None and not (root / rel).is_symlink():  # a link is deleted, never followed
            current = _current(root, rel, known)
            if current is not None:
                on_replace(rel, current, True)
        (root / rel).unlink()
        report.deleted.append(rel)
    for d in owned_dirs:
        _remove_empty_dirs(root / d)
    return report


def remove_created(root: Path, created: Iterable[str], owned_dirs: Iterable[str]) -> None:
    """Undo a run that failed midway on a folder that held no tree: remove the files it made (``created``)
    and the folders left empty, so the folder is as it was (and not a half tree no later run would take)."""
    for rel in created:
        (root / check_relpath(rel)).unlink(missing_ok=True)
    for d in owned_dirs:
        _remove_empty_dirs(root / d)
        with contextlib.suppress(OSError):  # not empty: it holds files this run did not make
            (root / d).rmdir()


def _remove_empty_dirs(base: Path) -> None:
    """Remove folders under ``base`` that hold nothing (or only a ``__pycache__``)."""
    if not base.is_dir() or base.is_symlink():
        return
    for dirpath, _dirs, _files in os.walk(base, topdown=False, followlinks=False):
        p = Path(dirpath)
        if p == base or p.name == "__pycache__":
            continue
        entries = list(p.iterdir())
        if [e.name for e in entries] == ["__pycache__"] and not entries[0].is_symlink():
            shutil.rmtree(entries[0], ignore_errors=True)
        try:
            p.rmdir()
        except OSError:
            continue


def check_out(out: Path, previous: Manifest | None, *, owned: Collection[str]) -> None:
    """Refuse a tree folder that is not a folder, or one holding files tooltree did not write (under ``--check``
    too: it refuses the folder the run it checks for would refuse, where it listed drift, exit 1, before).

    A tree's writer replaces ``manifest.json`` and ``search_index.json`` and writes and deletes files
    under the ``owned`` folders, so ``out`` must be a new or empty folder, or one holding a tooltree
    tree (a manifest of any version, so a tree from another tooltree release is regenerated in place;
    a file of that tree that is not tooltree's is copied aside before it is replaced or deleted,
    `generator.kept`). Other files beside them are never touched.

    Raises:
        TreeError: ``out`` is not a folder, or a folder whose ``manifest.json`` is not
            tooltree's while it holds one of the paths the writer replaces or prunes, or one inside an ``owned``
            folder of another tree.
    """
    if previous is not None:
        return
    _refuse_inside_a_tree(out, owned)
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise TreeError(f"{out}: not a folder; --out names the folder of the tree (created when missing)")
    held = [name for name in (MANIFEST_FILE, SEARCH_INDEX_FILE, *owned) if os.path.lexists(out / name)]
    if not held or tooltree_manifest(out / MANIFEST_FILE) is not None:
        return
    damaged = (
        f" ({MANIFEST_FILE} is there but is not one tooltree wrote, or is damaged: if this is a tree tooltree wrote, "
        "rename the folder and generate a new one, then copy back what you changed by hand)"
        if os.path.lexists(out / MANIFEST_FILE)
        else ""
    )
    raise TreeError(
        f"{out}: holds {', '.join(held)} but no tooltree manifest, so writing the tree there would replace or "
        f"delete files tooltree did not write; choose a new or empty folder for --out, or move them away{damaged}"
    )


def _refuse_inside_a_tree(out: Path, owned: Collection[str]) -> None:
    """Raises: TreeError: ``out`` lies in a folder a tree above it owns (``--out tree/servers``): each run of either
    tree would write into the other (before, a tree was made there, a ``servers.servers`` package in the other)."""
    where = out.resolve()
    for parent in where.parents:
        inside = where.relative_to(parent).parts[0]
        if inside in owned and tooltree_manifest(parent / MANIFEST_FILE) is not None:
            raise TreeError(
                f"{out}: is inside {inside}/ of the tree {parent}, which tooltree writes; give this tree a folder of "
                f"its own (--out {parent} regenerates that tree)"
            )


def tooltree_manifest(path: Path) -> dict[str, str] | None:
    """When ``path`` is a manifest written by some tooltree release (whatever its version), the hash it records of
    each file it names, as far as it records them in this release's form (``tools`` with ``path`` and ``stub_hash``,
    ``files``); else None (a manifest of another program, though it names a ``generator`` and a ``version``)."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    # Every release's manifest names its generator, version, servers and tools: a manifest.json of another program
    # that names a generator and a version is not taken for one (before: replaced without a copy or a word).
    if not (
        isinstance(data, dict)
        and isinstance(data.get("generator"), str)
        and {"version", "servers", "tools"} <= data.keys()
    ):
        return None
    recorded: dict[str, str] = {}
    files = data.get("files")
    if isinstance(files, dict):
        recorded.update((k, v) for k, v in files.items() if isinstance(k, str) and isinstance(v, str))
    tools = data.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("path"), str) and isinstance(tool.get("stub_hash"), str):
            recorded[tool["path"]] = tool["stub_hash"]
    return recorded
