"""What an HTTP server answered, said in a request's error once the session is open.

The SDK reports an HTTP error answering a request as "Server returned an error response" (a 401 of a token that
expired mid-session, a 502 of a proxy), without the status; a web page, and a 204 No Content, as "Unexpected content
type"; an empty JSON reply with the parser's traceback in the log. `Answers` rewrites such a reply, before the SDK reads
it, into a JSON-RPC error that says what came back and what to do (`status_problem`, `not_mcp`), with the server's own
words when it gave some; a JSON-RPC error the server sent with its status is kept as it was.

A 404 answering a request sent with a session id means the server no longer knows the session (it restarted, or
let it expire): it did not run the request, and the MCP spec has the client open a new session. Its error is
marked (`session_ended`, `resendable`) with a mark only this process knows, so no server can have a call it ran
sent twice by writing the same error; `tool_tree.pool.ServerPool` then re-opens the session and sends the call
once more. Many servers (the TypeScript SDK's examples, ``server-everything``) answer a 400 naming the session
instead: a new session is opened for the next call, but the call is not sent again (a 400 promises nothing).
Either way no ``DELETE`` is sent for that session when it is closed: the server ended it already (it answered
the ``DELETE`` with a 400, which the SDK logged as "Session termination failed: 400").

A request that cannot reach the server once the session is open (connection refused, name not resolved, connect
timed out: nothing was sent) fails alone, with an error saying so (`unreached`): the SDK would end the session
over it, failing every request in flight as "Connection closed", as if the server had died during them.
(Why, and what to check: `tool_tree.unreachable`.)

A JSON reply, and an answer on the event stream of a request's POST, is the answer to that request: one whose id is
another is given that request's id, or fails it when it is a result (`answering`). A JSON-RPC batch (an array) is read
as its one answer of that id; one with none, or several, fails it saying what it held (`_batch_answer`).

An error status is marked with the setting it is about (`setting_of`: ``headers`` for a 401 or 403, else ``url``), so
that each surface names it with its configuration file.

(Over 400 lines: every reply to a request that the SDK would misread, from its status to the answer its JSON holds.)
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import mcp
from mcp.shared.dispatcher import coerce_request_id

from tool_tree.config_servers import ServerConfig, setting_named
from tool_tree.unparsed import peek
from tool_tree.unreachable import CHECK_URL, Handshake, host, reason, to_check

logger = logging.getLogger(__name__)

_MARK = secrets.token_hex(16)
"""Marks the error of a session the server ended; never sent anywhere, so no server can write it."""
INTERNAL_ERROR = -32603
CONNECTION_CLOSED = -32000
INVALID_REQUEST = -32600

STATUS_HINTS = {
    401: 'the server wants credentials: set them in its `headers` (e.g. Authorization: "Bearer ${TOKEN}")',
    403: "the server refused the credentials in its `headers`",
    404: "no MCP endpoint at this URL: check its path (often /mcp)",
    405: "the URL does not take MCP requests: check that it is the Streamable HTTP endpoint (SSE is not supported)",
}


def status_key(status: int) -> str:
    """The key of ``servers.NAME`` an HTTP error ``status`` is about: the credentials of a 401 or 403, else the URL."""
    return "headers" if status in (401, 403) else "url"


def marked(status: int) -> dict[str, Any]:
    """The data of an error an HTTP ``status`` answered: the key of ``servers.NAME`` it is about (`setting_of`)."""
    return {"tooltree": _MARK, "setting": status_key(status)}


def setting_of(error: BaseException) -> str | None:
    """The key of ``servers.NAME`` that ``error`` is about, if an HTTP error status answered (`marked`)."""
    data = error.data if isinstance(error, mcp.MCPError) else None
    return data["setting"] if isinstance(data, dict) and data.get("tooltree") == _MARK and "setting" in data else None


def status_named(error: BaseException, server: ServerConfig, source: str | None) -> str:
    """`` (servers.NAME.KEY in FILE)``: the setting of ``server`` in its configuration file ``source`` that
    ``error``, of an HTTP error status, is about (`setting_of`), as the file writes it; "" for another error."""
    if (key := setting_of(error)) is None:
        return ""
    return f" ({setting_named(server, key, source)})"


def status_problem(response: httpx2.Response) -> str:
    """An HTTP error status in words a user can act on: the status, and what to set or check."""
    status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    hint = STATUS_HINTS.get(response.status_code)
    if response.status_code == 401:
        oauth = "tooltree does not sign in with OAuth: get a token and set it there"
        if "authorization" in response.request.headers:
            hint = f"the server refused the credentials in its `headers` (expired or revoked?); {oauth}"
        elif "www-authenticate" in response.headers:
            hint = f"{hint}; {oauth}"
    return f"{status}: {hint}" if hint else f"the server answered {status}"


def not_mcp(kind: str, *, opened: bool = False) -> str:
    """A reply of content type ``kind`` that is not MCP, in words: to open a session (a wrong URL?), or once
    ``opened`` (a proxy's sign-in or error page?)."""
    page = "a web page" if kind in ("text/html", "application/xhtml+xml") else "something else"
    said = f"{page} ({kind or 'no content type'}), not MCP"
    if opened:
        return f"the server answered the request with {said} (a proxy's sign-in or error page?)"
    return f"the URL answered with {said}: check that it is the server's MCP endpoint"


MAX_REDIRECTS = 20
"""Redirects within its origin the SDK follows for one request (httpx's ``max_redirects``)."""
_REDIRECT = re.compile(r"Redirect to (\S+) not followed")
"""How the SDK says a request was redirected off the server's URL (the place named without its query)."""


def redirected(message: str, server: ServerConfig) -> str | None:
    """Why a session cannot open at a URL that redirects elsewhere, and the setting to change, if the SDK's error
    ``message`` says so (before: "Redirect to … not followed" as the error, and twice as a warning naming no
    server)."""
    if (moved := _REDIRECT.match(message)) is None:
        return None
    to = f"{moved[1]}, from HTTPS to plain HTTP" if "downgrade" in message else moved[1]
    return (
        f"the URL redirects to {to}, which tooltree does not follow (only a 307 or 308 to the same host and port, "
        f"{MAX_REDIRECTS} in a row at most: the server's headers go only there): if that is the server's MCP "
        f"endpoint, set {setting_named(server, 'url')} to it"
    )


def unreached_check(error: mcp.MCPError) -> str:
    """What to check of the server a request could not reach (`unreached`), without the setting."""
    check = error.data.get("check") if unreached(error) else None
    return check if isinstance(check, str) else CHECK_URL


def session_ended(error: mcp.MCPError) -> bool:
    """Whether ``error`` says the server no longer knows the session (it restarted, or let it expire): a new
    session is needed (`resendable` says whether the request may be sent again on it)."""
    data = error.data
    return isinstance(data, dict) and data.get("tooltree") == _MARK and "resend" in data


def unreached(error: mcp.MCPError) -> bool:
    """Whether ``error`` says the request could not reach the server (`ReachingClient`): it was not sent."""
    data = error.data
    return isinstance(data, dict) and data.get("tooltree") == _MARK and data.get("unreached") is True


def resendable(error: mcp.MCPError) -> bool:
    """Whether the request ``error`` answers was surely not run, so a new session may run it: an HTTP 404 to a
    request sent with a session id (the MCP spec's word for a session the server ended)."""
    return session_ended(error) and error.data.get("resend") is True


def stream_cut(error: mcp.MCPError) -> bool:
    """Whether ``error`` is the SDK's word for a reply stream that ended before the answer (the server closed it,
    or it could not be resumed): the request was sent, and may have been run."""
    return error.code == CONNECTION_CLOSED and error.message.startswith("SSE stream ended")


class ReachingClient(httpx2.AsyncClient):
    """The HTTP client of one session. Once `open` is set, a request that cannot reach the server is answered here
    with an error saying so, not sent (`unreached`). A ``DELETE`` ending a session the server said it ended
    (`ended`), or once the server could not be reached, is not sent; one that cannot reach it is not retried. Either
    is answered 204 here, so the SDK logs no "Session termination failed" (any other failure it still logs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open = False
        self.url = ""
        """The server's URL, named (host and port only) in the error of a request that cannot reach it."""
        self.ended: set[str] = set()
        """Session ids the server said it no longer knows (`Answers` adds them)."""
        self.unreached: str | None = None
        """Why the last request that could not reach the server failed."""

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        if request.url.scheme == "https":
            request.extensions.setdefault("trace", Handshake())
        session = request.headers.get("mcp-session-id")
        if request.method == "DELETE" and (session in self.ended or self.unreached is not None):
            return httpx2.Response(204, request=request)  # nothing the server would end, or could hear
        try:
            return await super().send(request, **kwargs)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as e:
            # No connection was made, so nothing was sent. Raised, the SDK would end the whole session over it.
            if request.method == "DELETE":  # a server gone at close: its session went with it, or cannot be ended
                logger.debug("session of %s not ended: %s", host(self.url), reason(e))
                return httpx2.Response(204, request=request)
            if not self.open or request.method != "POST" or (request_id := posted_id(request)) is None:
                raise
            self.unreached = reason(e)
            said = f"could not reach the server at its URL ({host(self.url)}: {self.unreached})"
            data = {"tooltree": _MARK, "unreached": True, "check": to_check(e)}
            body = _error(request_id, CONNECTION_CLOSED, said, data)
            return httpx2.Response(200, headers={"content-type": "application/json"}, content=body, request=request)


class Answers:
    """A response hook rewriting, once `open` is set, the replies to requests that the SDK would report without
    their status (or with a traceback) into JSON-RPC errors saying what the server answered."""

    def __init__(self, ended: set[str] | None = None) -> None:
        self.open = False
        self.ended = ended if ended is not None else set()
        """Where the ids of the sessions the server said it ended are added."""

    async def hook(self, response: httpx2.Response) -> None:
        if not self.open or response.request.method != "POST":
            return
        request_id = posted_id(response.request)
        if request_id is None:  # a notification or an answer: the SDK reports nothing for it
            return
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        if response.status_code >= 400:
            said = _Said(request_id, response, kind, self.ended)
            response.stream = _Rewritten(response.stream, said.error)
        elif response.status_code == 204:  # the SDK said "Unexpected content type: "
            error = _error(request_id, INTERNAL_ERROR, "the server answered the request with 204 No Content, no answer")
            response.stream = _Rewritten(response.stream, lambda body: error)
        elif response.status_code == 202 or kind == "text/event-stream":
            return
        elif kind == "application/json":
            empty = _error(request_id, INTERNAL_ERROR, "the server answered the request with an empty body")
            response.stream = _Answer(response.stream, request_id, empty)
            return
        else:
            error = _error(request_id, INTERNAL_ERROR, not_mcp(kind, opened=True))
            response.stream = _Rewritten(response.stream, lambda body: error)
        response.headers["content-type"] = "application/json"
        response.headers.pop("content-length", None)


class _Said:
    """The JSON-RPC error a request's HTTP error reply is given on as, once its body is in."""

    def __init__(self, request_id: Any, response: httpx2.Response, kind: str, ended: set[str]) -> None:
        self._id, self._kind, self._code, self._ended = request_id, kind, response.status_code, ended
        self._status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
        self._problem = status_problem(response)
        self._session = response.request.headers.get("mcp-session-id")

    def error(self, body: bytes) -> bytes:
        try:
            message = json.loads(body) if self._kind == "application/json" else None
        except ValueError:
            message = None
        words = _words(message, body, self._kind)
        ended = f"the server no longer knows this session ({self._status}"
        if self._session and self._code == 404:  # the spec's answer to a session id the server does not know
            self._ended.add(self._session)
            ended += ": it restarted or ended the session); it did not run the request"
            return _error(self._id, INVALID_REQUEST, ended, {"tooltree": _MARK, "resend": True})
        if self._session and self._code == 400 and "session" in words.lower():  # how many servers say it instead
            self._ended.add(self._session)
            ended += f": {words}); the request was not sent again: the next one opens a new session"
            return _error(self._id, INVALID_REQUEST, ended, {"tooltree": _MARK, "resend": False})
        if isinstance(message, dict) and "id" in message and _is_rpc_error(message):
            return body  # the server's own JSON-RPC error, as it wrote it
        problem = f"{self._problem} ({words})" if words else self._problem
        return _error(self._id, INTERNAL_ERROR, problem, marked(self._code))


WORDS = 300
"""Characters of what the server said with an error status kept in the request's error."""


def _words(message: Any, body: bytes, kind: str) -> str:
    """What the server said with its error status, on one line (a JSON-RPC or OAuth error's message, or a short
    plain text); "" for anything else (a web page)."""
    said: Any = None
    if isinstance(message, dict) and _is_rpc_error(message):
        said = message["error"]["message"]
    elif isinstance(message, dict) and isinstance(message.get("error"), str):  # OAuth (RFC 6750)
        said = message.get("error_description") or message["error"]
    elif kind == "text/plain":
        said = body.decode("utf-8", "replace")
    if not isinstance(said, str):
        return ""
    line = " ".join(said.split())
    return line if len(line) <= WORDS else line[: WORDS - 1] + "…"


def posted_id(request: httpx2.Request) -> Any:
    """The id of the JSON-RPC request a POST carries (None: not a request, or not read)."""
    try:
        message = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    return message.get("id")


def _error(request_id: Any, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message} | ({"data": data} if data is not None else {})
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def _is_rpc_error(message: dict[str, Any]) -> bool:
    error = message.get("error")
    return isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)


class _Rewritten(httpx2.AsyncByteStream):
    """An error reply read whole (bounded by `tool_tree.http_client.bounding`) and given on as ``rewrite`` makes it."""

    def __init__(self, stream: httpx2.AsyncByteStream, rewrite: Callable[[bytes], bytes]) -> None:
        self._stream, self._rewrite = stream, rewrite

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks: list[bytes] = []
        try:
            async for chunk in self._stream:
                chunks.append(chunk)
        except httpx2.StreamError:  # too large, or cut off: nothing the server said is kept
            chunks = []
        yield self._rewrite(b"".join(chunks))

    async def aclose(self) -> None:
        await self._stream.aclose()


def _batch_answer(batch: list[Any], request_id: Any) -> bytes:
    """The answer a JSON reply that is an array (a JSON-RPC batch) gives ``request_id``: its one answer of that id,
    alone (its other messages are not read: the SDK reads one message of a JSON reply); else an error saying what it
    held. Before, a batch of no message, of notifications alone or of two answers failed as "answered with JSON that is
    not a JSON-RPC message", and one holding its answer beside the answer to another request did too."""
    asked = coerce_request_id(request_id)
    answers = [m for m in batch if isinstance(m, dict) and "method" not in m and ("result" in m or "error" in m)]
    own = [m for m in answers if _id_number(m.get("id")) is not None and _id_number(m["id"]) == asked]
    if len(own) == 1:
        return json.dumps(own[0] | {"id": request_id}).encode()
    if not batch:
        held = "an empty JSON-RPC batch (an array of no message)"
    elif not own:
        held = f"a JSON-RPC batch of {len(batch)} messages, none of them its answer"
        held = "a JSON-RPC batch of 1 message, not its answer" if len(batch) == 1 else held
    else:
        held = f"a JSON-RPC batch holding {len(own)} answers to it"
    said = f"the server answered the request with {held}; it was not used, and the request may have run"
    return _error(request_id, INTERNAL_ERROR, said)


def _id_number(found: Any) -> Any:
    """A message's id as the SDK correlates it (``7.0`` is 7), or None for no id."""
    if isinstance(found, float) and found.is_integer():
        found = int(found)
    return coerce_request_id(found) if isinstance(found, int | str) and not isinstance(found, bool) else None


class _Answer(httpx2.AsyncByteStream):
    """A JSON reply to the request ``request_id``, held whole (as `tool_tree.http_client.bounding` holds it) and given
    on as it came when it answers that request; one with nothing in it but blanks as ``empty``; one answering another
    id as `answering` makes it."""

    def __init__(self, stream: httpx2.AsyncByteStream, request_id: Any, empty: bytes) -> None:
        self._stream, self._id, self._empty = stream, request_id, empty

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = [chunk async for chunk in self._stream]
        if not any(chunk.strip() for chunk in chunks):
            yield self._empty
        elif (answer := answering(chunks, self._id)) is not None:
            yield answer
        else:
            for chunk in chunks:
                yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


_LOOKED_AT = 512
"""Bytes of a reply `tool_tree.unparsed.peek` looks at."""


def answering(chunks: list[bytes], request_id: Any) -> bytes | None:
    """A JSON reply (or the data of an event on the stream of a request's POST: `tool_tree.http_client`) that answers
    another id than the request's it is the reply to, given on as the request's answer (None: as it came). The SDK
    correlates a JSON reply by its id, but gives an event the request's id: a JSON answer whose id was another
    (``null``, the error of a request the server could not read; ``7.0``, the number 7 in JSON) was dropped as an
    answer to no request, its request waiting out its timeout, and an event's result of another request was taken as
    its answer. An error, and an answer of the request's id written otherwise, are given the request's id; a result of
    another id fails the request.
    """
    head = bytearray()
    for chunk in chunks:
        head += chunk[: _LOOKED_AT - len(head)]
        if len(head) >= _LOOKED_AT:
            break
    asked = coerce_request_id(request_id)
    if (seen := peek(bytes(head))) is not None and (seen[0] == "request" or seen[1] == asked):
        return None  # the common case, decided unparsed
    try:
        message = json.loads(b"".join(chunks))
    except ValueError:
        return None
    if isinstance(message, list):
        return _batch_answer(message, request_id)
    if not isinstance(message, dict) or "method" in message or "id" not in message:
        return None
    found = message["id"]
    if isinstance(found, float) and found.is_integer():
        found = int(found)
    same = isinstance(found, int | str) and not isinstance(found, bool) and coerce_request_id(found) == asked
    if same and found is message["id"]:
        return None
    if same or _is_rpc_error(message):
        return json.dumps(message | {"id": request_id}).encode()
    if "result" not in message:
        return None
    other = json.dumps(message["id"])[:50]
    said = f"the server answered the request with the answer to another one (id {other}); it was not used"
    return _error(request_id, INTERNAL_ERROR, f"{said}, and the request may have run")
