"""The admitted set: the tools a conversation has been shown so far. It only grows.

Kept in admission order, because the tools array appends each newly admitted tool at the end
(the prompt-cache prefix before it stays the same). Optionally persisted per agent profile
(``--prefilter-state FILE``) so the set carries over between conversations::

    {"format": "tooltree-prefilter-state", "version": 1, "admitted": ["crm.get_record", ...]}

Keys that are not in the current catalog (a server was removed) are kept in the file and not
offered; so are top-level entries this version does not know (a later version's, a user's note). A
file that cannot be read (not JSON, nested too deep to parse, not a regular file, larger than
`MAX_STATE_BYTES`) is never overwritten: the run fails open and says so. Saving merges with what
the file holds then, under a lock on its folder, so two runs sharing a profile never drop each
other's tools; a symlinked file is written through to its target. A save never writes what a load
would refuse (a set over `MAX_STATE_BYTES` as compact JSON is not saved), and waits at most
`LOCK_WAIT` for the lock; either way the file is kept as it was and the caller is told why.

A save also leaves alone (and says so):

- a file without write permission for the run (``chmod 444``, or one the user cannot write): before, it was
  replaced through a temporary file and a rename, which only needs the folder to be writable;
- a link whose target's folder does not exist: no folder is made through a link (before, the target's
  folders were made, wherever the link pointed). A path that is not a link gets its own missing folders, so a first
  run on a new profile (``~/.config/tooltree/profiles/work.json``) works.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from agent.prefilter.base import FilterError

STATE_FORMAT = "tooltree-prefilter-state"
STATE_VERSION = 1
MAX_STATE_BYTES = 4 * 1024 * 1024
"""The largest state file read (a set of tool names: a few kilobytes for hundreds of tools), and written."""
LOCK_WAIT = 1.0
"""Seconds a save waits for another run's lock on the state file's folder (a run holds it while it reads
and writes a few kilobytes: milliseconds); past it, the save is skipped and the run says so."""
_LOCK_POLL = 0.01
_OWN_KEYS = frozenset({"format", "version", "admitted"})
_FIX = "fix or delete the file; until then every tool is offered"
"""What a load that failed advises (at the start of a run: the run offers every tool)."""


class AdmittedSet:
    """Tool keys in the order they were admitted; ``grow`` is the only way to change it."""

    def __init__(self, keys: Iterable[str] = (), *, extra: dict[str, object] | None = None) -> None:
        self._order: list[str] = []
        self._seen: set[str] = set()
        self.extra: dict[str, object] = dict(extra or {})
        """The state file's other top-level entries, written back as they were read."""
        self.grow(keys)

    def grow(self, keys: Iterable[str]) -> list[str]:
        """Add ``keys`` not yet admitted (in the order given); returns the ones added."""
        added: list[str] = []
        for key in keys:
            if key not in self._seen:
                self._seen.add(key)
                self._order.append(key)
                added.append(key)
        return added

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def keys(self) -> list[str]:
        """A copy, in admission order."""
        return list(self._order)

    def copy(self) -> AdmittedSet:
        return AdmittedSet(self._order, extra=self.extra)


def load_state(path: Path) -> AdmittedSet:
    """The set persisted at ``path``; an empty set when the file does not exist.

    Raises:
        FilterError: (``corrupt_state``) the file cannot be read or is not a state file.
    """
    fix = _FIX
    try:
        # Non-blocking, so that a FIFO or a device does not hang the run; checked before reading.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return AdmittedSet()
    except OSError as e:
        raise FilterError(f"{path}: cannot read the pre-filter state ({e})", kind="corrupt_state") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise FilterError(f"{path}: the pre-filter state is {what}; {fix}", kind="corrupt_state")
        with os.fdopen(fd, "rb") as f:
            data_bytes = f.read(MAX_STATE_BYTES + 1)
        if len(data_bytes) > MAX_STATE_BYTES:
            raise FilterError(
                f"{path}: larger than {MAX_STATE_BYTES:,} bytes, not a pre-filter state; {fix}", kind="corrupt_state"
            )
        text = data_bytes.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FilterError(f"{path}: cannot read the pre-filter state ({e})", kind="corrupt_state") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise FilterError(f"{path}: corrupt pre-filter state ({e}); {fix}", kind="corrupt_state") from None
    except RecursionError:  # brackets nested deeper than the parser recurses: not a state file
        raise FilterError(f"{path}: corrupt pre-filter state (nested too deep to parse); {fix}",
                          kind="corrupt_state") from None  # fmt: skip
    admitted = data.get("admitted") if isinstance(data, dict) else None
    wrong = _not_a_state(data)
    if wrong is not None:
        raise FilterError(f"{path}: not a version-{STATE_VERSION} pre-filter state file ({wrong}); {fix}",
                          kind="corrupt_state")  # fmt: skip
    if not isinstance(admitted, list) or not all(isinstance(k, str) for k in admitted):
        raise FilterError(f"{path}: 'admitted' must be a list of server.tool names; {fix}", kind="corrupt_state")
    return AdmittedSet(admitted, extra={k: v for k, v in data.items() if k not in _OWN_KEYS})


def _not_a_state(data: object) -> str | None:
    """Why the JSON value ``data`` is not a version-`STATE_VERSION` state file (None when it is one)."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("format") != STATE_FORMAT:
        return f"format {json.dumps(data.get('format'))[:80]}" if "format" in data else "no format"
    version = data.get("version")
    if type(version) is not int or version != STATE_VERSION:  # `true` and `1.0` are not 1 here
        return f"version {json.dumps(version)[:80]}" if "version" in data else "no version"
    return None


def save_state(path: Path, admitted: AdmittedSet) -> None:
    """Write the set to ``path`` atomically (a temporary file of its own, then a rename), through a
    symlink to its target, as compact JSON. The file keeps its permission bits; a new one gets those of any
    new file (0666 less the umask).

    Raises:
        FilterError: (``error``) the file cannot be written (read-only included), or the set is larger than a load
            reads (`MAX_STATE_BYTES`); the file is kept as it was.
    """
    data = {**admitted.extra, "format": STATE_FORMAT, "version": STATE_VERSION, "admitted": admitted.keys()}
    encoded = (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    if len(encoded) > MAX_STATE_BYTES:
        raise FilterError(
            f"{path}: not saved: the admitted set ({len(admitted):,} tools) is {len(encoded):,} bytes, over the "
            f"{MAX_STATE_BYTES:,} a state file may hold; the file was kept as it was (use a new state file to "
            "keep saving)"
        )
    target = _target(path)
    tmp: str | None = None
    try:
        mode = _mode(target)
        if mode is not None and (why := _unwritable(target, mode)) is not None:
            raise FilterError(
                f"{path}: not saved: {why} and was kept as it is; this run goes on with the tools it offers (make "
                "the file writable to keep saving)"
            )
        fd, tmp = _temporary(target)
        with os.fdopen(fd, "wb") as f:
            if mode is not None:  # mkstemp's 0600 would lock a group out of a profile it shares
                os.fchmod(f.fileno(), mode)
            f.write(encoded)
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise FilterError(f"{path}: cannot write the pre-filter state ({e})") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _target(path: Path) -> Path:
    """The file a save writes: ``path``, or the target of the link ``path`` is. The folders of a path that is not a
    link are made when missing; none are made through a link.

    Raises:
        FilterError: (``error``) ``path`` is a link whose target's folder does not exist, or its folder cannot be made.
    """
    if path.is_symlink():
        target = path.resolve()
        if not target.parent.is_dir():
            raise FilterError(
                f"{path}: not saved: it is a link to {target}, whose folder does not exist (no folder is made through "
                "a link); create that folder or point the link at an existing one"
            )
        return target
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FilterError(f"{path}: cannot write the pre-filter state ({e})") from None
    return path.resolve()


def _mode(target: Path) -> int | None:
    """The permission bits of ``target``, or None when it does not exist yet."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return None


def _unwritable(target: Path, mode: int) -> str | None:
    """Why this process may not change the existing file ``target`` of permission bits ``mode``, or None: it may.
    Before, any reason was said as "read-only (mode 0644)", of a file whose mode lets it be written (an immutable one,
    one of another user, one on a read-only file system)."""
    if not mode & 0o222:
        return f"the file is read-only (mode {mode:04o})"
    try:  # opened for writing, not truncated: nothing changes (non-blocking: a FIFO does not wait for a reader)
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as e:
        if e.errno == errno.EPERM:
            return "the file may not be changed (an attribute forbids it: immutable or append-only, see lsattr)"
        if e.errno == errno.EROFS:
            return "the file is on a read-only file system"
        if e.errno == errno.EACCES:
            return f"this user may not write the file (mode {mode:04o}, owner uid {os.stat(target).st_uid})"
        return f"the file cannot be written ({e.strerror})"
    return None


def _temporary(target: Path) -> tuple[int, str]:
    """A new file next to ``target``, open for writing, and its path; made as any new file is (0666 less the
    umask), which a save then sets to the mode ``target`` has."""
    while True:
        tmp = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue


def update_state(path: Path, keys: Iterable[str], *, lock_wait: float = LOCK_WAIT) -> AdmittedSet:
    """Add ``keys`` to the set persisted at ``path`` and return the result: what the file holds now
    (another run may have saved since this one loaded it) grown by ``keys``. An exclusive lock on the
    file's folder keeps two runs from writing at once; it is waited for at most ``lock_wait`` seconds.

    Raises:
        FilterError: the file has become unreadable (``corrupt_state``; it is left as it is), cannot be
            written (read-only, a link into a missing folder), or its lock was not free within ``lock_wait``
            (``error``; nothing was written).
    """
    target = _target(path)
    try:
        folder = os.open(target.parent, os.O_RDONLY)
    except OSError as e:
        raise FilterError(f"{path}: cannot write the pre-filter state ({e})") from None
    try:
        _lock(folder, path, lock_wait)
        try:
            current = load_state(path)
        except FilterError as e:  # before: the load's advice, "until then every tool is offered", untrue mid-run
            raise FilterError(
                f"{str(e).removesuffix('; ' + _FIX)}; not saved over: this run goes on with the tools it offers, and "
                "the next run offers every tool until the file is fixed or deleted",
                kind="corrupt_state",
            ) from None
        if not current.grow(keys):
            return current
        save_state(path, current)
        return current
    finally:
        os.close(folder)  # releases the lock


def _lock(folder: int, path: Path, wait: float) -> None:
    """Take the exclusive lock on ``folder`` (an open descriptor), trying until ``wait`` seconds have passed.

    Raises:
        FilterError: (``error``) another process held it all that time, or it cannot be taken.
    """
    deadline = time.monotonic() + wait
    pause = _LOCK_POLL / 10
    while True:
        try:
            fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FilterError(
                    f"{path}: not saved this time: another process held the lock on its folder for more than "
                    f"{wait:g} s; the next save tries again"
                ) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, _LOCK_POLL)
        except OSError as e:
            raise FilterError(f"{path}: cannot lock the pre-filter state's folder ({e})") from None
