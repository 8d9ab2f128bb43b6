"""A server's listing read again once it said its tools changed (`relisted`), so that the check of a tool against
the server's live definition (`tool_tree.pool.ServerPool.live_tool`, which `sandbox.mcp_bridge.McpBridge` runs before
a tool's first call, and again once the server's tools changed) sees what the server lists now.

A server says so with ``notifications/tools/list_changed`` (counted as it is read: `tool_tree.changes.Changes.heard`),
or may have said so unheard (its stream of unasked messages opened again after it was lost). Before, the pool kept the
listing of the session's start for the session's life: a tool the server renamed or removed was checked as listed, its
call sent and answered by the server's own "Unknown tool", and a tool whose parameters changed was called as it was.

Bounded however often the server says so: the notices only count; the listing is read at the next check, once for
all the notices before it (checks meanwhile wait for that one), and no sooner after the last one than `IDLE_PER_BUSY`
times as long as it took (the check waits for it, at most the server's ``timeout``), so that a server saying so in a
loop has the host read its listing at most a tenth of the time (one whose listing takes over a ninth of its
``timeout``, half of it at most), and never without a call.

A server of the session-less 2026-07-28 protocol says so only on a ``subscriptions/listen`` stream, which the pool
keeps open on each of its sessions, listener or not (`tool_tree.pool_follow._listen`); one that refuses it has its
listing read again when a new session replaces one that ended.
"""

from __future__ import annotations

import anyio
import mcp
from anyio import sleep_until

from tool_tree.connect import list_tools_raw
from tool_tree.held_values import Share
from tool_tree.output_check import OutputCheck
from tool_tree.pool_errors import upstream
from tool_tree.pool_slot import _closed, _Slot
from tool_tree.redact import redact

IDLE_PER_BUSY = 9.0
"""After a listing read again, the next waits at least this many times as long as it took."""


def heard(slot: _Slot, kind: str) -> None:
    """``slot``'s server said one of its lists changed (`tool_tree.changes.Changes.heard`): of its tools, its listing
    is behind."""
    if kind == "tools":
        slot.changed += 1


async def relisted(slot: _Slot, client: mcp.Client) -> None:
    """Read ``slot``'s listing again on ``client``'s session when the server said its tools changed since it was
    read (`_Slot.changed`); nothing otherwise. A listing that fails (an error, a timeout, past a limit, a session
    that ended) is said in a warning naming the server, once a session, and leaves the listing as it was, behind
    (`tool_tree.pool.ServerPool.listed`): the check goes on with it, as before, its call goes out as any does (one
    to a server that ended starts it again, listed anew), and the next check reads it again. Never raises."""
    if slot.changed == slot.listed_at:
        return
    async with slot.relisting:
        if slot.changed == slot.listed_at or slot.client is not client or (conn := slot.connection) is None:
            return  # read meanwhile, or another session (listed as it started) serves the server now
        if slot.relisted is not None:
            last, took = slot.relisted
            await sleep_until(last + min(took * IDLE_PER_BUSY, slot.config.timeout))
        if slot.client is not client or _closed(client):  # a call restarts it, and its new session is listed
            return
        at, started = slot.changed, anyio.current_time()
        share = Share(held=slot.share.held)  # its own: a new session's listing, after this one's end, has the slot's
        try:
            with anyio.fail_after(slot.config.timeout):
                tools = await list_tools_raw(client, share)
        except TimeoutError:
            return _failed(slot, f"no answer in {slot.config.timeout:g} s")
        except mcp.MCPError as e:
            return _failed(slot, e.message)
        except (ValueError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as e:
            return _failed(slot, str(e) or type(e).__name__)
        finally:
            slot.relisted = (anyio.current_time(), anyio.current_time() - started)
        if slot.client is not client:  # it ended meanwhile: the listing of the session after it is its own
            share.release()
            return
        kept, slot.share = slot.share, share
        kept.release()
        slot.tools, slot.listed_at = tools, at
        slot.left_out = {left.name: left.reason for left in conn.left_out if left.name}
        OutputCheck(slot.config.name, tools).install(client)


def _failed(slot: _Slot, why: str) -> None:
    if slot.relist_failed != slot.restarts:  # once a session
        slot.relist_failed = slot.restarts
        upstream.warning(
            "server %r said its tools changed, and listing them again failed (%s); its calls are checked against the "
            "tools it listed before until a listing again succeeds",
            slot.config.name,
            redact(why, slot.config),
        )
