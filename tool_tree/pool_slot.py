"""What a `tool_tree.pool.ServerPool` holds of one server (`_Slot`): its session, the events of its start, its restart
back-off, its calls in flight, its ``subscriptions/listen`` stream and the URIs subscribed to; and whether a session
already knows that its connection closed (`_closed`).

Every part of the pool reads and changes it (`tool_tree.pool_start`, `tool_tree.pool_forward`,
`tool_tree.pool_follow`); a server's start and the end of its session do so under the slot's lock
(`ServerPool._ensure`, `ServerPool._discard`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp

from tool_tree.config import ServerConfig
from tool_tree.connect import Connection
from tool_tree.held_values import Share
from tool_tree.in_flight import InFlight
from tool_tree.listens import Listening
from tool_tree.restarts import RestartBackoff
from tool_tree.stderr_log import StderrLog


@dataclass
class _Slot:
    config: ServerConfig
    limiter: anyio.CapacityLimiter
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    client: mcp.Client | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    share: Share = field(default_factory=Share)
    """The values of ``tools``, counted against the pool's (`tool_tree.held_values`)."""
    left_out: dict[str, str] = field(default_factory=dict)
    """The tools its listing held malformed, by name: why each was left out (`tool_tree.listing_check`)."""
    stop: anyio.Event | None = None
    closed: anyio.Event | None = None
    stderr: StderrLog | None = None
    restarts: int = 0
    backoff: RestartBackoff = field(default_factory=RestartBackoff)
    queued: bool = False
    """Waiting for a start slot (other servers are starting)."""
    starting: anyio.CancelScope | None = None
    """The start-up of its owner task while it runs (opening and listing): the pool's close cancels it."""
    in_flight: InFlight = field(default_factory=InFlight)
    changed: int = 0
    """The server's notices that its tools changed, on any of its sessions, and the times one may have been missed
    (`tool_tree.pool_relist`): its listing is read again before a check of a tool against it when it is past
    ``listed_at``."""
    listed_at: int = 0
    """``changed`` when the listing in ``tools`` was asked for."""
    relisting: anyio.Lock = field(default_factory=anyio.Lock)
    """Held while its listing is read again: the checks that find it behind meanwhile wait for that one listing."""
    relisted: tuple[float, float] | None = None
    """When its listing was last read again (`anyio.current_time`) and how long that took: the next waits for 9 times
    as long, at most the server's ``timeout`` (`tool_tree.pool_relist.IDLE_PER_BUSY`)."""
    relist_failed: int | None = None
    """``restarts`` when reading its listing again last failed: said once a session (`tool_tree.pool_relist`)."""
    connection: Connection | None = None
    """The session in ``client``, with the tools its latest listing left out as malformed."""
    listed: bool = False
    """Whether a session of it was listed: a later one replaces it, and the server may list other tools then."""
    subscribed: set[str] = field(default_factory=set)
    """The URIs subscribed to through `ServerPool.request`, not unsubscribed since: its new sessions subscribe again."""
    listening: tuple[Listening, Callable[[], None]] | None = None
    """The ``subscriptions/listen`` stream of its session of the 2026-07-28 protocol, and what starts it."""
    following: anyio.CancelScope | None = None
    """While a task opens a new session of it in the background (`tool_tree.pool_follow._follow`): the pool's close
    cancels it."""
    suspect: mcp.Client | None = None
    """A session on which a call was cut off by its caller (the end of its execution) after
    `tool_tree.pool_forward.PING_TIMEOUT` seconds unanswered: the next call to the server asks it a request first, and
    restarts a server that answers none."""


def _client_of(slot: _Slot) -> mcp.Client | None:
    return slot.client


def _closed(client: mcp.Client) -> bool:
    """Whether the session already knows its connection closed (the server's stdout ended, the HTTP stream
    broke), so the SDK would fail a request unsent. Read from the SDK's dispatcher, which has no public
    flag for it; an SDK release that renames it reads as open: the call then fails as "died before answering the call"
    and the next one restarts the server, as before."""
    dispatcher = getattr(client.session, "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True
