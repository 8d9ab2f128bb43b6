"""What a server says changed on a session: its notices that a list changed, counted as they are read (`Changes`,
`Watching`), and what tells that such a notice may have been missed.

A server says its tools, prompts or resources changed with a notification (`LISTS_CHANGED`); over Streamable HTTP it
sends it on its stream of unasked messages, and one sent while that stream was lost (a redeploy answering 503 or
refusing connections) reaches no one. So `Changes.reopened` is told when that stream opens again after it was lost
(`tool_tree.get_streams.GetStreams.lost`), and `Changes.not_found` when the server answered it 404 (it may no longer
know the session); `tool_tree.pool.ServerPool` has its ``on_tools_changed`` listener told as if the server had said
its lists changed, and checks the session, replacing it when the server no longer knows it.

A server also says that one resource changed (``notifications/resources/updated``, `RESOURCE_UPDATED`, sent for the
resources a client subscribed to): `Changes.updated` is told its URI, as it is read. And `Changes.ended` is told
once the session reads no more (its server's process exited, between calls too): the pool opens a new session of a
server whose resources are subscribed to, as no call may come to find this one dead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio
from mcp.client._transport import ReadStream
from mcp.shared.message import SessionMessage

from tool_tree.guard import ReadWrapper

LISTS_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}
"""The notifications by which a server says one of its lists changed, each with the `Changes` field that counts it."""
RESOURCE_UPDATED = "notifications/resources/updated"
"""The notification by which a server says a resource subscribed to changed (its ``params.uri``)."""


@dataclass
class Changes:
    """What the server said changed on a session: `tools`, `prompts` and `resources` count its
    ``notifications/tools/list_changed``, ``.../prompts/list_changed`` and ``.../resources/list_changed``
    (`LISTS_CHANGED`), as they are read (in the stream's order: one the server sent before a reply is counted before
    the reply is handed on). ``listener``, when set, is called with the list's kind after each of the three is
    counted; ``missed`` when such a notice may have been missed (`reopened`); ``forgotten`` once the server may no
    longer know the session (`not_found`, told again to one set later); ``updated`` with the URI of each
    ``notifications/resources/updated`` (`RESOURCE_UPDATED`) whose URI is a string; ``ended`` once the session reads
    no more (`end`). All on the session's event loop: they must not block."""

    tools: int = 0
    prompts: int = 0
    resources: int = 0
    listener: Callable[[str], None] | None = None
    heard: Callable[[str], None] | None = None
    """Called with the list's kind after each of the three is counted, before ``listener`` (the pool's own: a server's
    listing read again once it said its tools changed, `tool_tree.pool_relist`)."""
    missed: Callable[[], None] | None = None
    forgotten: Callable[[], None] | None = None
    updated: Callable[[str], None] | None = None
    ended: Callable[[], None] | None = None
    unknown: bool = False
    """Whether the server answered the session's stream of unasked messages 404 (`not_found`)."""
    closed: bool = False
    """Whether the session reads no more (`end`)."""

    def count(self, kind: str) -> None:
        """Count one notice that the list ``kind`` (``tools``, ``prompts`` or ``resources``) changed, and tell."""
        if kind == "tools":
            self.tools += 1
        elif kind == "prompts":
            self.prompts += 1
        else:
            self.resources += 1
        if self.heard is not None:
            self.heard(kind)
        if self.listener is not None:
            self.listener(kind)

    def reopened(self) -> None:
        """The stream of unasked messages opened again after it was lost: what the server sent meanwhile never
        arrived, a notice that a list changed among it maybe. Tell ``missed``."""
        if self.missed is not None:
            self.missed()

    def end(self) -> None:
        """The session reads no more, however that came: its read stream ended (a stdio server's stdout closed as
        its process exited, or its transport closed the stream once a write to the server failed, or once it gave
        up on an HTTP server) or was closed (the session ended, for any reason). Tell ``ended``, once."""
        if self.closed:
            return
        self.closed = True
        if self.ended is not None:
            self.ended()

    def not_found(self) -> None:
        """The server answered the stream of unasked messages 404: it no longer knows the session (it restarted, or
        let the session expire), or has no such stream. Tell ``forgotten``."""
        self.unknown = True
        if self.forgotten is not None:
            self.forgotten()


class Watching(ReadWrapper):
    """A transport's read stream, counting the server's notices that a list changed (`Changes`) and telling those
    that a resource changed (`Changes.updated`). Counted here, not in the SDK's message handler, which runs in a task
    of its own, maybe after the reply read next. Its end, or its close (the SDK's reading task closes it as it ends,
    whatever ended it), is told too (`Changes.end`)."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], changes: Changes) -> None:
        super().__init__(inner)
        self._changes = changes

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._changes.end()
            raise
        if isinstance(item, SessionMessage):
            method = getattr(item.message, "method", None)
            if isinstance(method, str) and (kind := LISTS_CHANGED.get(method)) is not None:
                self._changes.count(kind)
            elif method == RESOURCE_UPDATED and (told := self._changes.updated) is not None:
                params = getattr(item.message, "params", None)
                uri = params.get("uri") if isinstance(params, dict) else None
                if isinstance(uri, str):
                    told(uri)
        return item

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._changes.end()
