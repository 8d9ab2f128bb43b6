"""The JSON values of servers' listings one run holds at once, bounded in all as well as by server.

Each server's listing is bounded on its own: its tools (`tool_tree.connect.MAX_LIST_VALUES`), each of its other
lists (`tool_tree.snapshot_lists.MAX_LIST_VALUES`), a snapshot read back (`tool_tree.tree.MAX_SNAPSHOT_VALUES`). But
generate-tree holds every server's listing until all are listed, a pool holds each server's for its life, and
`tooltree serve` each server's recorded prompts and resources: so N servers at their bounds cost N times one (four
listings of 2.4 million values each: 1.4 GB). `HeldValues` bounds what the servers of one run hold together; a
server whose listing would take them past it fails alone, saying so, or is cut as its own bound cuts it.

`MAX_HELD_VALUES`, 5,000,000, is two servers at the bound of one (about 700 MB parsed). Honest catalogs are far
under it: the 527 tools of 70 real servers hold about 15,000 values, the biggest shapes the generator is measured on
(one server of 50,000 tools; 3,000 servers of 5 tools) 1.4 million and 0.4 million.

Pools may also share a count (``within``): `tooltree serve` starts each client session's servers in a pool of its
own, so its sessions' listings are bounded together as well (``serve.max_listing_values``,
`MAX_SERVE_HELD_VALUES` by default), or ``serve.max_sessions`` sessions would hold that many times one run's bound.
A pool gives its count back as it closes.

A count of one run is kept on one thread (its event loop, or one reader); a shared one is taken and given from each
session's pool thread, under its lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

MAX_HELD_VALUES = 5_000_000
"""JSON values of listings (tools, prompts, resources, templates) the servers of one run may hold together."""
MAX_SERVE_HELD_VALUES = 2 * MAX_HELD_VALUES
"""JSON values of listings the servers of all client sessions of one `tooltree serve` may hold together (about 1.4 GB
parsed): seven sessions of one server of 50,000 tools, hundreds of sessions of the 527 real tools."""
MAX_READ_VALUES = MAX_HELD_VALUES + 1_000_000
"""JSON values of the snapshots one run reads back: what one run of generate-tree keeps of its servers' listings,
and room for each server's ``info`` beside them."""


class HeldValues:
    """A run's count of the JSON values its servers' listings hold, against ``limit``; with ``within``, a count shared
    with other runs (each session of `tooltree serve`), which must allow the same values too. ``whose`` and ``what``
    name the holders and the bound in an error (`over`)."""

    def __init__(
        self,
        limit: int | None = None,
        *,
        within: HeldValues | None = None,
        whose: str = "all servers",
        what: str = "the limit for one run",
    ) -> None:
        self.limit = MAX_HELD_VALUES if limit is None else limit
        self.held = 0
        self.within = within
        self.whose, self.what = whose, what
        self._refused_by: HeldValues = self
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, limit: int | None = None) -> HeldValues:
        """The count the client sessions of one `tooltree serve` share (``serve.max_listing_values``,
        `MAX_SERVE_HELD_VALUES` by default)."""
        return cls(
            MAX_SERVE_HELD_VALUES if limit is None else limit,
            whose="the servers of all client sessions",
            what="the limit for one `tooltree serve` (serve.max_listing_values)",
        )

    @classmethod
    def reading(cls) -> HeldValues:
        """The count of a reader of every snapshot of a tree (`MAX_READ_VALUES`)."""
        return cls(MAX_READ_VALUES)

    @property
    def room(self) -> int:
        """Values that may still be taken."""
        return max(0, self.limit - self.held)

    def take(self, values: int) -> bool:
        """Count ``values`` more as held, if this limit and the shared one (``within``) allow them all; whether it
        did (nothing is counted when not)."""
        with self._lock:
            if values > self.room:
                self._refused_by = self
                return False
            if self.within is not None and not self.within.take(values):
                self._refused_by = self.within
                return False
            self.held += values
            return True

    def give(self, values: int) -> None:
        """Count ``values`` taken before as no longer held (here and in the shared count)."""
        with self._lock:
            given = min(values, self.held)
            self.held -= given
            if self.within is not None:
                self.within.give(given)

    def over(self, what: str) -> str:
        """Why ``what`` was refused (by the last `take` that failed): the limit, in the words of an error."""
        refused = self._refused_by
        return (
            f"{what} would take the listings held of {refused.whose} past {refused.limit:,} JSON values, "
            f"{refused.what} (each server is bounded on its own too; this bounds the servers together)"
        )


def checked_within(value: object) -> HeldValues | None:
    """``value``, a pool's ``held_within``, checked.

    Raises:
        TypeError: not a `HeldValues` or None.
    """
    if value is not None and not isinstance(value, HeldValues):
        raise TypeError(f"held_within: expected a HeldValues or None, got {type(value).__name__}")
    return value


@dataclass
class Share:
    """One holder's part of a `HeldValues` (a server's tools, or its other lists): the values of the listing it keeps
    and of the one it is reading, which replaces the kept one once whole (`keep`) or is dropped (`drop`). Without a
    `HeldValues` (``held`` None) it only counts."""

    held: HeldValues | None = None
    kept: int = 0
    reading: int = 0

    def add(self, values: int) -> bool:
        """Count ``values`` more of the listing being read; False (and nothing counted) past the run's limit."""
        if self.held is not None and not self.held.take(values):
            return False
        self.reading += values
        return True

    def keep(self) -> None:
        """The listing being read is whole: it replaces the one kept."""
        if self.held is not None:
            self.held.give(self.kept)
        self.kept, self.reading = self.reading, 0

    def drop(self) -> None:
        """The listing being read is not kept."""
        if self.held is not None:
            self.held.give(self.reading)
        self.reading = 0

    def release(self) -> None:
        """Nothing is held any more: neither the listing kept nor one being read."""
        self.drop()
        if self.held is not None:
            self.held.give(self.kept)
        self.kept = 0
