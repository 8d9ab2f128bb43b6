"""The HTTP client of a Streamable HTTP server: the SDK's, with one message bounded as over stdio.

The SDK bounds one server-sent event (``max_sse_event_size``, 1 MiB by default) but reads a JSON reply
whole, however long: one reply of 1.5 GB took the host to 9.6 GB of memory. Here both are bounded by
`tool_tree.stdio.MAX_MESSAGE_BYTES`, the cap of a stdio message, so a result a stdio server may send
(a 3 MB spreadsheet) also arrives from an HTTP one, and nothing bigger is held.

Replies are asked for uncompressed (``Accept-Encoding: identity``). A server (or a proxy before it)
that compresses anyway with gzip or deflate is read through a bounded inflater here, which unpacks a
step at a time and counts what it unpacked, so a small compressed body cannot unpack to gigabytes
before the count sees it; any other encoding is refused with a message saying so.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from tool_tree.stdio import MAX_MESSAGE_BYTES


class MessageTooLarge(httpx2.StreamError):
    """A reply past the limit, or compressed: the SDK fails the request it answers with this message."""


class _Refusals(logging.Filter):
    """Keeps the SDK from logging a traceback for a reply refused here: the call's error says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], MessageTooLarge))


logging.getLogger("mcp.client.streamable_http").addFilter(_Refusals())


class _Bounded(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, problem: str | None) -> None:
        self._stream, self._limit, self._problem = stream, limit, problem

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._problem is not None:
            raise MessageTooLarge(self._problem)
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise MessageTooLarge(_too_large(self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


_STEP = 1 << 20
"""Bytes one step of the inflater may unpack: what is held before the count sees it."""
_INFLATED = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _Inflated(httpx2.AsyncByteStream):
    """A compressed body unpacked a step at a time, at most ``limit`` bytes in all (None: each step only)."""

    def __init__(self, stream: httpx2.AsyncByteStream, encoding: str, limit: int | None) -> None:
        self._stream, self._encoding, self._limit = stream, encoding, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        wbits = _INFLATED[self._encoding]
        inflater = zlib.decompressobj(wbits)
        seen = raw = 0
        first = True
        async for chunk in self._stream:
            raw += len(chunk)
            if self._limit is not None and raw > self._limit:
                raise MessageTooLarge(_too_large(self._limit))
            data = chunk
            while data and not inflater.eof:  # what follows the compressed stream's end is not kept
                try:
                    out = inflater.decompress(data, _STEP)
                except zlib.error as e:
                    if not (first and wbits == zlib.MAX_WBITS):
                        raise MessageTooLarge(f"the server's {self._encoding} reply is corrupt ({e})") from e
                    # "deflate" is sometimes sent raw, without the zlib header (as httpx also accepts).
                    wbits = -zlib.MAX_WBITS
                    inflater = zlib.decompressobj(wbits)
                    continue
                first = False
                data = inflater.unconsumed_tail
                seen += len(out)
                if self._limit is not None and seen > self._limit:
                    raise MessageTooLarge(_too_large(self._limit))
                if out:
                    yield out
        rest = inflater.flush()
        if self._limit is not None and seen + len(rest) > self._limit:
            raise MessageTooLarge(_too_large(self._limit))
        if rest:
            yield rest

    async def aclose(self) -> None:
        await self._stream.aclose()


def _too_large(limit: int) -> str:
    return f"the server's reply is larger than {limit // 2**20} MiB, the limit for one message"


def bounding(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook bounding each reply that is not an event stream to ``limit`` bytes, unpacked.

    A hook, not a transport: a client given a transport of its own no longer honours the proxy the
    environment names (``HTTPS_PROXY``), and the SDK's client does. It runs once the headers are in,
    before the body is read.
    """

    async def bound(response: httpx2.Response) -> None:
        events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        if encoding in _INFLATED:
            # Unpacked here, a step at a time; httpx must not unpack it again.
            del response.headers["content-encoding"]
            # An event stream's events are bounded by the SDK (`max_sse_event_size`) once unpacked.
            response.stream = _Inflated(response.stream, encoding, None if events else limit)
            return
        problem = None
        if encoding not in ("", "identity"):
            problem = f"the server compressed its reply ({encoding}) though asked not to; it is not read"
        elif events:
            return  # the SDK bounds each event (`max_sse_event_size`)
        elif (length := response.headers.get("content-length", "")).isdigit() and int(length) > limit:
            problem = _too_large(limit)
        response.stream = _Bounded(response.stream, limit, problem)

    return bound


def http_client(headers: Mapping[str, str] | None = None, *, limit: int = MAX_MESSAGE_BYTES) -> httpx2.AsyncClient:
    """An HTTP client for one server: the SDK's timeouts, the configured ``headers``, replies bounded."""
    sent = httpx2.Headers(dict(headers or {}))
    sent["accept-encoding"] = "identity"
    return httpx2.AsyncClient(
        headers=sent,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        event_hooks={"response": [bounding(limit)]},
    )
