"""What tooltree answers a server that asks it for something during a call: sampling, elicitation, roots.

tooltree declares no client capability, yet a server may still ask, two ways: a request on the wire
(``sampling/createMessage``, ``elicitation/create``, ``roots/list``), or, from protocol 2026-07-28, an
``input required`` result to ``tools/call`` whose questions the SDK's client puts to its own callbacks and then
sends the call again with the answers (SEP-2322). Either way the SDK's answer was "Sampling not supported", and
for the second the pool reported it as the server's own error of the protocol ("server error -32600: Elicitation
not supported; the server answered the call with an error of the protocol"), though the server had said nothing
of the kind: it had asked, and tooltree had refused.

`refusing` words the refusal in tooltree's terms (what was asked, that tooltree does not offer it). A question of an
``input required`` result is refused in the client itself: `asked` tells that refusal from the server's errors, so
the pool says the server asked for what tooltree does not offer (`unanswered`). A question on the wire is refused
to the server, which reads the same words and may pass them on in its own error or result.
"""

from __future__ import annotations

import mcp
import mcp.types as mt
from mcp.client.session import ClientRequestContext, ClientSession

_ASKS: dict[type[object], tuple[str, str, str]] = {
    mt.CreateMessageRequest: ("sampling/createMessage", "sampling", "an LLM completion"),
    mt.ElicitRequest: ("elicitation/create", "elicitation", "an answer from the user"),
    mt.ListRootsRequest: ("roots/list", "roots", "the client's root folders"),
}
"""Each question a server may put to a client: its method, the capability it needs and what it asks for."""


class _Refused(dict[str, str]):
    """The ``data`` of a `refusal`: of its own type, which the SDK keeps when it raises the refusal of a question of
    an ``input required`` result as an ``MCPError``, and which no JSON a server sends can have (on the wire it is
    a plain ``{"method": …}``), so a server's own errors cannot pass for tooltree's refusals."""


def refusal(method: str, capability: str, wanted: str) -> mt.ErrorData:
    """The error answering a server's question tooltree cannot answer: ``method``, which needs ``capability``."""
    return mt.ErrorData(
        code=mt.INVALID_REQUEST,
        message=(
            f"{capability.capitalize()} not supported: tooltree does not offer {capability} "
            f"({method}: {wanted}); it declares no client capability"
        ),
        data=_Refused(method=method),
    )


def refusing(session: ClientSession) -> None:
    """Make ``session`` answer every question of its server with a `refusal`, on the wire and inside an ``input
    required`` result alike. Its declared capabilities stay none: the SDK declares one for each callback it is
    given, and none is."""

    async def dispatch_input_request(ctx: ClientRequestContext, request: mt.InputRequest) -> mt.ErrorData:
        method, capability, wanted = _ASKS.get(type(request), (request.method, request.method, "an answer"))
        return refusal(method, capability, wanted)

    session.dispatch_input_request = dispatch_input_request  # type: ignore[method-assign]


def asked(e: mcp.MCPError) -> str | None:
    """The method of a question tooltree refused (`refusal`) that ended a call with ``e``; None when ``e`` is not
    such a refusal."""
    return e.data["method"] if isinstance(e.data, _Refused) else None


def unanswered(server: str, method: str) -> str:
    """Why a call ended without a result: its server asked tooltree ``method`` to finish it, which it does not offer."""
    for asked_method, capability, wanted in _ASKS.values():
        if asked_method == method:
            return (
                f"server {server!r} asked tooltree for {wanted} ({method}) to finish the call; tooltree does not "
                f"offer {capability} (it declares no client capability), so the call ended without the tool's result"
            )
    return f"server {server!r} asked tooltree a question ({method}) it does not answer; the call ended without a result"


ROUNDS_PROBLEM = (
    "server {server!r} answered the call with 'input required' more than {rounds} times in a row, each without a "
    "question tooltree could answer; tooltree gave up on it"
)
"""Why a call ended whose server kept answering ``input required`` (the SDK's limit of rounds), ``str.format``-ed
with ``server`` and ``rounds``."""
