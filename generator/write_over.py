"""What a run does with the files it writes over: each stub written as it is rendered (`_EarlyWriter`), recorded in
`generator.kept.PENDING_FILE` first; the bytes of each file replaced or deleted given to the `Keeper` to copy aside,
with those an older release wrote unrecorded (`_unrecorded_kept`); and a previous stub's bytes remembered to compare
the stubs' API (`_noting`, `_before`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from generator.files import OnReplace, read_remembered, write_file
from generator.kept import PENDING_FILE, Keeper
from tool_tree.tree import INDEX_FILE, SERVERS_DIR, Manifest, content_hash


def _unrecorded_kept(out: Path, previous: Manifest | None, keeper: Keeper) -> tuple[OnReplace, Keeper]:
    """What to do with a file before it is replaced or deleted: ``keeper.before_replace``, and for a tree whose
    manifest (an older release's) records no ``files``, a copy of each file that release wrote besides its stubs and
    snapshots (``INDEX.md``, the ``__init__.py`` files, a server's ``README.md``), kept by the `Keeper` returned.

    Such a manifest holds no hash of them, so a user's edit cannot be told from the older release's own text. Before,
    they were taken for tooltree's and replaced without a copy or a word: notes a user added to a server's README
    were lost on the first run after an upgrade, or when ``tooltree serve`` refreshed the tree."""
    unrecorded = Keeper(out.resolve(), None)  # no file is known: each one given to it is copied aside
    if previous is None or previous.files:
        return keeper.before_replace, unrecorded
    paths = {INDEX_FILE, f"{SERVERS_DIR}/__init__.py"}
    paths.update(f"{SERVERS_DIR}/{s.package}/{name}" for s in previous.servers for name in ("__init__.py", "README.md"))

    def on_replace(rel: str, current: bytes, deleting: bool) -> None:
        (unrecorded if rel in paths else keeper).before_replace(rel, current, deleting)

    return on_replace, unrecorded


def _noting(on_replace: OnReplace, previous: Manifest | None, replaced: dict[str, bytes]) -> OnReplace:
    """``on_replace``, keeping in ``replaced`` the bytes of each stub of the ``previous`` tree it is given (to compare
    the stubs' API after the early writer wrote over them: `generator.api_changes`)."""
    stubs = {t.path for t in previous.tools} if previous is not None else set()

    def before_replace(rel: str, current: bytes, deleting: bool) -> None:
        if rel in stubs:
            replaced.setdefault(rel, current)
        on_replace(rel, current, deleting)

    return before_replace


def _before(out: Path, rel: str, replaced: Mapping[str, bytes], seen: dict[str, bytes | None]) -> bytes | None:
    """The bytes of ``rel`` in the tree before this run wrote it (remembered in ``seen``, as `read_remembered`)."""
    if rel in replaced:
        return replaced[rel]
    return seen[rel] if rel in seen else read_remembered(out, rel, seen)


class _EarlyWriter:
    """Writes each stub as it is rendered, so writing overlaps rendering; ``early`` collects them. Each is recorded
    in `PENDING_FILE` before it is written (`finish` removes that record once the run's manifest is written)."""

    def __init__(
        self,
        out: Path,
        seen: dict[str, bytes | None],
        early: set[str],
        on_replace: OnReplace,
        created: set[str],
        relinked: list[str],
    ) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.root = out.resolve()
        self.seen, self.early, self.on_replace, self.created, self.relinked = seen, early, on_replace, created, relinked
        self._journal: IO[str] | None = None

    def __call__(self, rel: str, data: bytes) -> None:
        if self._journal is None:  # opened at the first stub: a run that renders none leaves none
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            try:  # made here: a first generation that fails removes it with the rest of what it made
                fd = os.open(self.root / PENDING_FILE, flags | os.O_EXCL, 0o644)
                self.created.add(PENDING_FILE)
            except FileExistsError:  # left by a run stopped before: this one adds to it
                fd = os.open(self.root / PENDING_FILE, flags, 0o644)
            self._journal = os.fdopen(fd, "a", encoding="utf-8")
        self._journal.write(f"{rel}\t{content_hash(data)}\n")  # before the stub: a stop between leaves it recorded
        self._journal.flush()
        if write_file(self.root, rel, data, known=self.seen, on_replace=self.on_replace, created=self.created,
                      relinked=self.relinked):  # fmt: skip
            self.early.add(rel)

    def close(self, *, written: bool) -> None:
        """Close the record; remove it when the run's manifest was ``written`` (it records every stub then)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if written:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.root / PENDING_FILE)
