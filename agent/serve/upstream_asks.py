"""`ClientAsks`: what a server asks during a passthrough call of `tooltree serve`, put to serve's client.

A server configured with ``client_capabilities: [elicitation, sampling]`` is declared those capabilities by tooltree
(`tool_tree.server_asks`). When it asks during a passthrough call (``elicitation/create``: a question for the user;
``sampling/createMessage``: a completion of the client's model), the question goes to serve's client as a request of
serve's own, tied to the client's ``tools/call`` (over HTTP it goes out on that request's stream), and the client's
answer goes back to the server. By default only a passthrough call's questions are passed on: the model chose that
tool and waits for it, while a script's calls run unseen (a loop of them could open a dialog per call, or spend the
client's model), so those are refused, and so is every question whose capability the client did not declare. With
``serve: asks_from_scripts: true`` a script's calls may ask too: elicitations only (the user sees each; the client's
model is never spent unseen), `SCRIPT_ASKS` per script, tied to its ``execute_python`` request.

Each question is bounded before it reaches the client, as the server is not trusted: one at a time per call (per script)
and `MAX_ASKS` per call; an elicitation's message said as the server's (``[server] …``), cleaned of escape sequences and
control characters, at most `MESSAGE_CHARS`; a URL elicitation only to a client that declared them, and only with a URL
a client may show and open (`url_problem`); a form only as the spec's forms are (`form_shown`: flat, its titles
cleaned, its names and values plain); a sampling request without tools, the client's context (``includeContext`` none:
serve's other sessions are not the server's business) or provider settings (``metadata``), its texts cleaned, at most
`MAX_TOKENS` tokens; none with the server's ``task`` or ``_meta`` (its own, not the client's); at most
`MAX_QUESTION_BYTES` as JSON. The call's timeout runs while the client answers;
the call's end (its timeout, the client's cancel) withdraws the question (the client is sent
``notifications/cancelled``). What a client cannot answer (the 2026-07-28 protocol over stdio has no channel for a
request of the server's during a call) is refused to the server in words that say so. The server's notice that a URL
elicitation the client accepted was completed (``notifications/elicitation/complete``) is passed on to that client
(`tool_tree.in_flight.InFlight.completed`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError

from agent.serve.loopback import is_loopback
from sandbox.results import clean_text
from tool_tree.config_servers import ASKABLE
from tool_tree.server_asks import Asker, question, refusal_of
from tool_tree.text import counted, one_line

logger = logging.getLogger("agent.serve")

MAX_ASKS = 10
"""Questions one call may put to the client; later ones are refused (the SDK's own limit of ``input required``
rounds is the same)."""
MESSAGE_CHARS = 2_000
"""The most characters of an elicitation's message the client is shown."""
MAX_TOKENS = 4_096
"""The most tokens a sampling request may ask of the client's model (a larger ``maxTokens`` is lowered to it)."""
MAX_QUESTION_BYTES = 256 * 1024
"""The largest question passed on, as JSON."""
MAX_URL_CHARS = 4_096
"""The longest URL of a URL elicitation passed on (the client is to show it whole before opening it)."""
FIELD_CHARS = 500
"""The most characters of a form's title or description the client is shown, and of a name or value passed on."""
FORM_DEPTH = 6
"""The deepest a form's schema may nest: the spec's forms are flat (a field of text, a number, yes or no, a choice:
``properties`` → field → ``items`` → ``anyOf`` → choice)."""
_URL = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
"""What a URL is written with (RFC 3986): printable ASCII, no space, quote, angle bracket, backslash or brace."""
_SHOWN = ("title", "description", "enumNames")
"""A form's strings only shown to the user (cleaned); the others (names, values) come back in the answer as they are."""
MAX_HINTS = 8
"""The most model hints of a sampling request passed on."""
HINT_CHARS = 100
"""The most characters of a model hint's name passed on."""
SCRIPT_ASKS = 3
"""Elicitations one script's calls may put to the client, with ``asks_from_scripts`` (one at a time)."""


class ClientAsks:
    """The questions of servers during one client request, put to serve's client: a passthrough call's (its server's,
    `of` that server), or with ``asks_from_scripts`` a script's (its calls' servers', elicitations only).

    Args:
        session: the client's session, as the request's handler has it (``ctx.session``).
        request_id: the client's ``tools/call`` request the questions are tied to.
        loop: serve's event loop, which the session belongs to (the questions arrive on the server pool's).
        kinds: the capabilities passed on; a question of another is refused.
        limit: questions passed on at most (later ones are refused), one at a time.
        per: what the limit is of, in a refusal (``call``, ``script``).
    """

    def __init__(
        self,
        session: ServerSession,
        request_id: types.RequestId,
        loop: asyncio.AbstractEventLoop,
        *,
        kinds: Collection[str] = ASKABLE,
        limit: int = MAX_ASKS,
        per: str = "call",
    ) -> None:
        self._session, self._request_id, self._loop = session, request_id, loop
        self._kinds, self._limit, self._per = frozenset(kinds), limit, per
        self._asked = 0
        self._busy = False

    def of(self, server: str) -> Asker:
        """The `tool_tree.server_asks.Asker` of ``server``'s questions (it is named in what the client is shown); its
        ``kinds`` are those it passes on, so a question of another is never put to it for another call
        (`tool_tree.in_flight.InFlight.asker`)."""
        asker = functools.partial(self._asked_by, server)
        asker.kinds = self._kinds  # type: ignore[attr-defined]
        asker.completed = self._completed  # type: ignore[attr-defined]
        return asker

    def _completed(self, elicitation_id: str) -> None:
        """Tell the client that the URL elicitation ``elicitation_id`` it accepted was completed (the server said so;
        `tool_tree.in_flight.InFlight.completed`): from the pool's loop, sent on serve's, not waited for."""

        async def tell() -> None:
            try:
                await self._session.send_elicit_complete(elicitation_id)
            except Exception as e:  # the client left meanwhile: nothing to tell
                logger.info("the completion of URL elicitation %r was not told: %s", elicitation_id[:80], e)

        telling = tell()
        try:
            asyncio.run_coroutine_threadsafe(telling, self._loop)
        except RuntimeError:  # serve's loop has ended: its client is gone
            telling.close()

    async def _asked_by(self, server: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """Put ``request`` to the client and give its answer (on the pool's loop; waits on serve's)."""
        capability = question(request)[1]
        if capability not in self._kinds:
            passed = ", ".join(sorted(self._kinds))
            return _refused(server, request, f"tooltree passes only {passed} on from a {self._per}")
        if self._busy:
            return _refused(server, request, "the server asked again before the client answered its last question")
        if self._asked >= self._limit:
            return _refused(server, request, f"the server asked more than {self._limit} questions in one {self._per}")
        self._busy, self._asked = True, self._asked + 1
        question_asked = self._ask(server, request)
        try:
            asking = asyncio.run_coroutine_threadsafe(question_asked, self._loop)
        except RuntimeError:  # serve's loop has ended: its client is gone
            question_asked.close()
            self._busy = False
            return _refused(server, request, "tooltree's client session ended before it was asked")
        try:
            return await asyncio.wrap_future(asking)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the call ended: the question is withdrawn with it
                raise
            return _refused(server, request, "tooltree's client session ended before it answered")
        finally:
            self._busy = False

    async def _ask(self, server: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """On serve's loop: the question, bounded, sent to the client; its answer or the refusal."""
        session = self._session
        bounded = self._bounded(server, request)
        if isinstance(bounded, str):
            return _refused(server, request, bounded)
        if not session.can_send_request:
            return _refused(
                server,
                request,
                "tooltree's client cannot be asked during a call on this connection (the 2026-07-28 protocol over "
                "stdio has no channel for it; a client of the initialize handshake can)",
            )
        result_type: type[Any] = (
            types.ElicitResult if isinstance(request, types.ElicitRequest) else types.CreateMessageResult
        )
        logger.info("server %r asks tooltree's client %s during a %s", server, question(request)[0], self._per)
        try:
            return await session.send_request(
                bounded, result_type, metadata=ServerMessageMetadata(related_request_id=self._request_id)
            )
        except MCPError as e:
            return _refused(server, request, f"tooltree's client answered with an error: {one_line(e.message, 200)}")
        except ValidationError as e:
            return _refused(
                server,
                request,
                f"tooltree's client sent an answer that is not one ({counted(e.error_count(), 'error')})",
            )

    def _bounded(self, server: str, request: types.InputRequest) -> types.ServerRequest | str:
        """``request`` as the client is sent it, or why it is not sent."""
        have = self._session.client_capabilities
        capability = question(request)[1]
        # The server's own (its task, its ``_meta``: a progress token, a related task) stay with it.
        own: dict[str, Any] = {"meta": None, "task": None}
        if isinstance(request, types.ElicitRequest):
            declared = None if have is None else have.elicitation
            if declared is None:
                return f"tooltree's client does not offer {capability}"
            asked = request.params
            if isinstance(asked, types.ElicitRequestURLParams):
                if declared.url is None:
                    return "tooltree's client does not offer elicitation by URL"
                if (why := url_problem(asked.url)) is not None:
                    return why
            else:
                if declared.form is None and declared.url is not None:  # none declared: forms (the older spec's)
                    return "tooltree's client offers elicitation by URL only"
                form = form_shown(asked.requested_schema)
                if isinstance(form, str):
                    return form
                own["requested_schema"] = form
            message = one_line(clean_text(asked.message[: 2 * MESSAGE_CHARS]), MESSAGE_CHARS)
            bounded: types.ServerRequest = types.ElicitRequest(
                params=asked.model_copy(update={**own, "message": f"[{server}] {message}"})
            )
        elif isinstance(request, types.CreateMessageRequest):
            if have is None or have.sampling is None:
                return f"tooltree's client does not offer {capability}"
            if (size := _size(request)) > MAX_QUESTION_BYTES:  # refused before its texts are copied and cleaned
                return _too_big(size)
            params = request.params
            if any(
                isinstance(b, types.ToolUseContent | types.ToolResultContent)
                for m in params.messages
                for b in (m.content if isinstance(m.content, list) else [m.content])
            ):
                return "its messages hold tool calls or results, and tooltree passes no tools on"
            bounded = types.CreateMessageRequest(
                params=params.model_copy(
                    update={
                        **own,
                        "messages": [_cleaned(m) for m in params.messages],
                        "system_prompt": None if params.system_prompt is None else clean_text(params.system_prompt),
                        "model_preferences": _preferences(params.model_preferences),
                        "max_tokens": min(params.max_tokens, MAX_TOKENS),
                        "include_context": None,
                        "metadata": None,  # a provider's settings (a thinking budget) would pass the cap on tokens
                        "tools": None,
                        "tool_choice": None,
                    }
                )
            )
        else:
            return f"tooltree never passes {capability} on"
        if (size := _size(bounded)) > MAX_QUESTION_BYTES:
            return _too_big(size)
        return bounded


def _refused(server: str, request: types.InputRequest, why: str) -> types.ErrorData:
    method = question(request)[0]
    logger.info("server %r asked tooltree's client %s: refused (%s)", server, method, why)
    return refusal_of(request, why, offered=True)


def url_problem(url: str) -> str | None:
    """Why a URL elicitation's ``url`` is not passed on, or None. The client is to show it and may open it: an
    ``https`` URL (``http`` only to this machine, a server in development), written as URLs are (RFC 3986: a host in
    another script comes as punycode, so no look-alike letter, bidi control or escape), naming no user before its
    host (``https://bank.example@evil.example``) or percent-encoded, at most `MAX_URL_CHARS` characters."""
    if len(url) > MAX_URL_CHARS:
        return f"the URL is {len(url):,} characters long; tooltree passes on at most {MAX_URL_CHARS:,}"
    if _URL.fullmatch(url) is None:
        return (
            "the URL holds a character a URL cannot (a space, a control character, or one outside ASCII: a host in "
            "another script is written in punycode)"
        )
    try:
        parts = urlsplit(url)
        host, user = parts.hostname, parts.username
    except ValueError:  # a port that is not one, a bracket not closed
        host = user = None
    if host is None or not (parts.scheme == "https" or (parts.scheme == "http" and is_loopback(host))):
        return "the URL is neither https:// nor http:// to this machine, which a client may open in a browser"
    if user is not None:
        return "the URL names a user before its host, which hides the host it opens"
    if "%" in parts.netloc:  # a browser decodes it: ``https://%65vil.example`` opens evil.example
        return "the URL's host is percent-encoded, which hides the host it opens"
    return None


def form_shown(schema: dict[str, Any]) -> dict[str, Any] | str:
    """A form's ``requestedSchema`` as the client is shown it: its titles and descriptions (and the older spec's
    ``enumNames``) cleaned, on one line, at most `FIELD_CHARS` each; or why it is not passed on: nested deeper than
    `FORM_DEPTH`, or a name or value (a field's name, a choice, a default) that is not one printable line of at most
    `FIELD_CHARS` (those come back in the answer, so they are not changed)."""

    def shown(value: Any, depth: int, key: str | None = None) -> Any:
        if isinstance(value, dict | list) and depth > FORM_DEPTH:
            raise _NotShown(f"its form is nested more than {FORM_DEPTH} levels deep (a form's fields are one level)")
        if isinstance(value, dict):
            return {_plain(k): shown(v, depth + 1, k) for k, v in value.items()}
        if isinstance(value, list):
            return [shown(v, depth + 1, key) for v in value]
        if isinstance(value, str):
            return one_line(clean_text(value[: 2 * FIELD_CHARS]), FIELD_CHARS) if key in _SHOWN else _plain(value)
        return value

    try:
        return dict(shown(schema, 1))
    except _NotShown as e:
        return str(e)


class _NotShown(Exception):
    """Why a form is not passed on."""


def _plain(name: str) -> str:
    if len(name) <= FIELD_CHARS and name.isprintable():  # no new line, escape, bidi control
        return name
    raise _NotShown(
        f"its form holds a name or value that is not one printable line of at most {FIELD_CHARS} characters "
        "(names and values come back in the answer as they are, so tooltree does not clean them)"
    )


def _cleaned(message: types.SamplingMessage) -> types.SamplingMessage:
    """A sampling request's message, its texts cleaned of escapes and control characters (lines kept)."""
    blocks = message.content if isinstance(message.content, list) else [message.content]
    cleaned = [
        b.model_copy(update={"text": clean_text(b.text)}) if isinstance(b, types.TextContent) else b for b in blocks
    ]
    return message.model_copy(update={"content": cleaned if isinstance(message.content, list) else cleaned[0]})


def _preferences(given: types.ModelPreferences | None) -> types.ModelPreferences | None:
    """A sampling request's model preferences with at most `MAX_HINTS` hints, each name cleaned, on one line, at most
    `HINT_CHARS` characters (a client may show them, or match them against its models' names)."""
    if given is None or not given.hints:
        return given
    names = (one_line(clean_text(h.name[: 2 * HINT_CHARS]), HINT_CHARS) for h in given.hints if h.name)
    return given.model_copy(update={"hints": [types.ModelHint(name=n) for n in names if n][:MAX_HINTS]})


def _size(request: types.ServerRequest) -> int:
    """``request``'s size as JSON."""
    return len(json.dumps(request.model_dump(by_alias=True, mode="json", exclude_none=True)))


def _too_big(size: int) -> str:
    return f"the question is {size:,} bytes as JSON; tooltree passes on at most {MAX_QUESTION_BYTES:,}"
