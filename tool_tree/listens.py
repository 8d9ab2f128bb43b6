"""A server's ``subscriptions/listen`` stream: where a server of the session-less 2026-07-28 protocol says its lists
changed.

Over that protocol a server sends ``notifications/tools/list_changed`` (of prompts and resources too, and
``notifications/resources/updated`` of the URIs subscribed to) only on the stream that answers a
``subscriptions/listen`` request; the SDK's server drops them otherwise. `listening` keeps one such stream open on a
session for its life, through the SDK's ``Client.listen``, subscribed to the three lists and to the URIs
``resources`` gives as it opens. Its notices are read as every other message of the session is
(`tool_tree.changes.Watching` counts them and tells the pool, in the order they are read), so the events the SDK
queues for the stream are only drained here. They are bounded as the session's other messages are: one message by
its transport's caps, notifications by the session's budget (`tool_tree.budget.NotificationBudget`), the SDK's queue
by its 1,024 distinct events (drained as they come); the acknowledgment is awaited for the server's ``timeout`` (the
session's read timeout).

A stream that ends (the server closed it, an HTTP stream was cut or stayed quiet past its read timeout) is opened
again after `FIRST_WAIT`, doubled for each stream in a row that ended within `STEADY_SECONDS`, up to `LONGEST_WAIT`.
One that could not be opened again at once (an attempt failed, a later one opened) may have missed a notice:
``missed`` is told then, as for an HTTP server's stream of unasked messages (`tool_tree.get_streams`). A server that
refuses the first request (an error answer: no such method, a limit reached) or leaves it unanswered for its
``timeout`` is left unlistened for the session, said at debug: it is no error, only its changes are not followed; one
that took a stream before and refuses a later one (a limit, a 503 while it is redeployed) is asked again, paced, as
after a failed attempt. It ends once the session reads no more (the SDK settles the stream lost as the session's
reading ends) or when cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import anyio
import mcp
from mcp.client.subscriptions import SubscriptionLost
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tool_tree.changes import Changes
from tool_tree.text import one_line

logger = logging.getLogger(__name__)

FIRST_WAIT = 1.0
"""Seconds before a stream that ended is opened again, when the one before it lasted `STEADY_SECONDS`."""
LONGEST_WAIT = 60.0
"""The longest wait before a stream is opened again: one that ends at once is opened at most once a minute."""
STEADY_SECONDS = 60.0
"""A stream open this long before it ended sets the wait back to `FIRST_WAIT`."""


def speaks_listen(client: mcp.Client) -> bool:
    """Whether ``client``'s session was negotiated at a protocol of ``subscriptions/listen`` (2026-07-28)."""
    return client.session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def listening(
    client: mcp.Client,
    changes: Changes,
    *,
    server: str,
    resources: Callable[[], Iterable[str]],
    missed: Callable[[], None],
) -> None:
    """Keep a ``subscriptions/listen`` stream open on ``client``'s session of ``server`` until the session reads no
    more (``changes.closed``); nothing on a session of another protocol. ``resources`` gives the URIs to subscribe to
    as each stream opens; ``missed`` is told when one opened after an attempt failed."""
    if not speaks_listen(client):
        return
    wait = FIRST_WAIT
    failed = ever = False
    while True:
        opened: float | None = None
        try:
            async with client.listen(
                tools_list_changed=True,
                prompts_list_changed=True,
                resources_list_changed=True,
                resource_subscriptions=sorted(resources()),
            ) as subscription:
                opened = anyio.current_time()
                ever = True
                logger.debug("server %r: subscriptions/listen stream open", server)
                if failed:
                    failed = False
                    missed()
                async for _event in subscription:  # told as read (`Watching`): only the SDK's queue is drained
                    pass
            logger.debug("server %r ended its subscriptions/listen stream; it is opened again", server)
        except TimeoutError:
            if not ever:
                logger.debug("server %r did not acknowledge subscriptions/listen: its changes are not followed", server)
                return
            failed = True
        except SubscriptionLost as e:
            logger.debug("server %r: subscriptions/listen stream lost: %s", server, one_line(str(e)))
            failed = failed or opened is None
        except mcp.MCPError as e:
            if e.error.code != CONNECTION_CLOSED and not ever:
                logger.debug(
                    "server %r refused subscriptions/listen: its changes are not followed: %s",
                    server,
                    one_line(e.error.message),
                )
                return
            failed = True  # one that took a stream before may refuse a moment (a limit, a 503): asked again, paced
        if changes.closed:
            return
        if opened is not None and anyio.current_time() - opened >= STEADY_SECONDS:
            wait = FIRST_WAIT
        await anyio.sleep(wait)
        wait = min(wait * 2, LONGEST_WAIT)
