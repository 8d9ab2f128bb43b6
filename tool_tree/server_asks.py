"""What tooltree answers a server that asks it for something during a call: sampling, elicitation, roots.

A server may ask two ways: a request on the wire (``sampling/createMessage``, ``elicitation/create``,
``roots/list``), or, from protocol 2026-07-28, an ``input required`` result to ``tools/call`` whose questions the SDK's
client puts to its own callbacks and then sends the call again with the answers (SEP-2322). Both meet in the
session's ``dispatch_input_request``, which `answering` replaces.

By default tooltree declares no client capability and refuses every question in its own terms (before: the SDK's
"Sampling not supported", and for the second way the pool blamed the server's protocol though it had only asked). A
server configured with ``client_capabilities: [elicitation, sampling]`` has those declared (the SDK declares one for
each callback it is given), and a question of that kind goes to the `Asker` of the call that is waiting for it: the
pool's calls carry one when their caller can ask someone (`tooltree serve` asks its client, for a passthrough tool, and
with ``asks_from_scripts`` for a script's calls: `agent.serve.upstream_asks`). A question tooltree cannot pass on (no
asker: a script's call, a question between calls; or a capability not configured; roots, never) is refused. A refusal of
a question of an ``input required`` result is raised in the client itself: `asked` tells it from the server's errors, so
the pool says what the server asked (`unanswered`). One on the wire is sent to the server, which reads the same words
and may pass them on.

A server may also refuse a call until the user has opened a URL (`URL_ELICITATION_REQUIRED`): the call's error says
which (`url_required`), so that the model can tell its user.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Collection

import anyio
import mcp
import mcp.types as mt
from mcp.client.session import ClientRequestContext, ClientSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tool_tree.text import one_line

_ASKS: dict[type[object], tuple[str, str, str]] = {
    mt.CreateMessageRequest: ("sampling/createMessage", "sampling", "an LLM completion"),
    mt.ElicitRequest: ("elicitation/create", "elicitation", "an answer from the user"),
    mt.ListRootsRequest: ("roots/list", "roots", "the client's root folders"),
}
"""Each question a server may put to a client: its method, the capability it needs and what it asks for."""

Asker = Callable[[mt.InputRequest], Awaitable["mt.InputResponse | mt.ErrorData"]]
"""Who answers a question a server asks during one call (`tool_tree.pool.ServerPool.call`'s ``asker``): awaited on
the pool's event loop, with the server's request as the SDK read it; returns the answer, or the error to send the
server (a `refusal` for one it will not pass on). Cancelled when the call ends."""


class _Refused(dict[str, str]):
    """The ``data`` of a `refusal`: of its own type, which the SDK keeps when it raises the refusal of a question of
    an ``input required`` result as an ``MCPError``, and which no JSON a server sends can have (on the wire it is
    a plain ``{"method": …, "why": …}``), so a server's own errors cannot pass for tooltree's refusals."""


NOT_DECLARED = "it declares no client capability"
"""Why a question is refused whose capability the server's configuration does not declare."""


def no_one_to_ask(capability: str) -> str:
    """Why a question of ``capability`` (declared) is refused whose call has no one to ask."""
    scripts = "; a script's call, its elicitations only with `serve: asks_from_scripts`"
    scripts = scripts if capability == "elicitation" else ""
    return (
        f"no one to ask: tooltree passes {capability} on only during a call of a passthrough tool of `tooltree serve` "
        f"whose client offers it{scripts}"
    )


def refusal(
    method: str, capability: str, wanted: str, why: str = NOT_DECLARED, *, offered: bool = False
) -> mt.ErrorData:
    """The error answering a server's question tooltree cannot answer: ``method``, which needs ``capability``;
    ``offered``: tooltree declared that capability to the server, but did not pass the question on."""
    said = "did not pass the question on" if offered else f"does not offer {capability}"
    return mt.ErrorData(
        code=mt.INVALID_REQUEST,
        message=f"{capability.capitalize()} not {'available' if offered else 'supported'}: tooltree {said} "
        f"({method}: {wanted}); {why}",
        data=_Refused(method=method, why=why, offered="yes" if offered else ""),
    )


def refusal_of(request: mt.InputRequest, why: str = NOT_DECLARED, *, offered: bool = False) -> mt.ErrorData:
    """The `refusal` of ``request``, saying ``why``."""
    method, capability, wanted = question(request)
    return refusal(method, capability, wanted, why, offered=offered)


def question(request: mt.InputRequest) -> tuple[str, str, str]:
    """``request``'s method, the capability it needs and what it asks for."""
    return _ASKS.get(type(request), (request.method, request.method, "an answer"))


def capabilities_of(declared: Collection[str]) -> dict[str, object]:
    """The SDK client's keyword arguments that declare ``declared`` (`tool_tree.config_servers.ASKABLE` names): a
    callback for each (the SDK declares a capability for each callback it is given; `answering` replaces where they
    lead)."""

    async def unused(ctx: ClientRequestContext, params: object) -> mt.ErrorData:  # never called: see `answering`
        raise AssertionError("answered by tooltree.server_asks.answering")

    kw: dict[str, object] = {}
    if "sampling" in declared:
        kw["sampling_callback"] = unused
    if "elicitation" in declared:
        kw["elicitation_callback"] = unused
    return kw


def answering(
    session: ClientSession, declared: Collection[str] = (), find: Callable[[str], Asker | str] | None = None
) -> None:
    """Make ``session`` answer each question of its server, on the wire and inside an ``input required`` result
    alike: one whose capability is ``declared`` by the asker ``find(capability)`` gives, others (and one ``find``
    gives a reason for) with a `refusal`.

    The questions of one ``input required`` result (protocol 2026-07-28) are asked together, and the SDK dispatches
    them at once: in a session of that protocol an asker is given them one after another, as its client would answer
    them (before: an asker that takes one question at a time refused the second, and the call failed)."""
    turns: dict[int, anyio.Lock] = {}  # by asker, while one is asked

    async def in_turn(asker: Asker, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await asker(request)
        turn = turns.setdefault(id(asker), anyio.Lock())
        try:
            async with turn:
                return await asker(request)
        finally:
            if not turn.locked() and not turn.statistics().tasks_waiting:
                turns.pop(id(asker), None)

    async def dispatch_input_request(
        ctx: ClientRequestContext, request: mt.InputRequest
    ) -> mt.InputResponse | mt.ErrorData:
        capability = question(request)[1]
        if capability == "roots":
            return refusal_of(request, "tooltree never passes roots on" if declared else NOT_DECLARED)
        if capability not in declared:
            only = f"its configuration declares only {', '.join(declared)} (client_capabilities)"
            return refusal_of(request, only if declared else NOT_DECLARED)
        asker = no_one_to_ask(capability) if find is None else find(capability)
        if isinstance(asker, str):
            return refusal_of(request, asker, offered=True)
        return await in_turn(asker, request)

    session.dispatch_input_request = dispatch_input_request  # type: ignore[method-assign]


def asked(e: mcp.MCPError) -> tuple[str, str, bool] | None:
    """The method of a question tooltree refused (`refusal`) that ended a call with ``e``, why, and whether tooltree
    offered its capability; None when ``e`` is not such a refusal."""
    if not isinstance(e.data, _Refused):
        return None
    return e.data["method"], e.data.get("why", NOT_DECLARED), bool(e.data.get("offered"))


def unanswered(server: str, method: str, why: str = NOT_DECLARED, offered: bool = False) -> str:
    """Why a call ended without a result: its server asked tooltree ``method`` to finish it, which it did not answer
    (``why``; ``offered``: its capability was declared, the question not passed on)."""
    for asked_method, capability, wanted in _ASKS.values():
        if asked_method == method:
            said = "did not pass it on" if offered else f"does not offer {capability}"
            return (
                f"server {server!r} asked tooltree for {wanted} ({method}) to finish the call; tooltree {said} "
                f"({why}), so the call ended without the tool's result"
            )
    return f"server {server!r} asked tooltree a question ({method}) it does not answer; the call ended without a result"


ROUNDS_PROBLEM = (
    "server {server!r} answered the call with 'input required' more than {rounds} times in a row, each without a "
    "question tooltree could answer; tooltree gave up on it"
)
"""Why a call ended whose server kept answering ``input required`` (the SDK's limit of rounds), ``str.format``-ed
with ``server`` and ``rounds``."""


URL_ELICITATION_REQUIRED = mt.URL_ELICITATION_REQUIRED
"""The error (-32042) a server of the handshake era answers a call with when the user must first open a URL (a
sign-in, a payment: ``UrlElicitationRequiredError``), its ``data.elicitations`` saying which."""
_URL = re.compile(r"https?://[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
"""A URL a user may be asked to open: http or https, written as URLs are (RFC 3986: no space, quote or escape)."""
SHOWN_URLS = 3
"""The most URLs of one such error that are said."""


def url_required(data: object) -> str:
    """What a ``URL_ELICITATION_REQUIRED`` error's ``data`` asks of the user, for the call's error: each URL (at most
    `SHOWN_URLS`, each an http or https URL of at most 2,000 characters; another is not said) with the server's
    message, cleaned, on one line. Before, only the error's message was said (``This request requires browser-based
    authorization.``), and neither the model nor its user could tell what to open."""
    elicitations = data.get("elicitations") if isinstance(data, dict) else None
    said: list[str] = []
    for elicitation in elicitations[:SHOWN_URLS] if isinstance(elicitations, list) else []:
        url = elicitation.get("url") if isinstance(elicitation, dict) else None
        if not isinstance(url, str) or len(url) > 2_000 or _URL.fullmatch(url) is None:
            continue
        message = elicitation.get("message")
        said.append(f"{url} ({one_line(message[:1_000], 300)!r})" if isinstance(message, str) else url)
    if not said:
        return "it names no URL to open (its data.elicitations holds none that is an http or https URL)"
    return f"the user must first open {' and '.join(said)}, then the call may be made again"
