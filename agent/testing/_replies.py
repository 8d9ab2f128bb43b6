"""What the fake Messages API answers: scripted assistant replies, content blocks and HTTP errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class ApiError:
    """An HTTP error answer, in the API's error format.

    ``retry_after`` (seconds) is sent as ``retry-after`` and ``retry-after-ms`` headers, which
    the SDK honours between its retries. With ``in_stream`` a streamed request gets a 200 whose stream
    starts a message and then carries the error as an ``error`` event, as the API does when it is
    overloaded mid-answer (the SDK does not retry those). With ``page`` the body is that text as ``text/html`` instead,
    as a proxy or gateway in front of the API answers (``ApiError(503, page="<html>...")``).
    """

    status: int
    message: str = "scripted error"
    type: str = ""
    retry_after: float | None = None
    in_stream: bool = False
    page: str | None = None

    @property
    def error_type(self) -> str:
        return self.type or _ERROR_TYPES.get(self.status, "api_error")

    def body(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.error_type, "message": self.message}}

    @classmethod
    def rate_limited(cls, retry_after: float = 0.01) -> ApiError:
        """429 with a ``retry-after``."""
        return cls(429, "Number of request tokens has exceeded your per-minute rate limit", retry_after=retry_after)

    @classmethod
    def overloaded(cls, retry_after: float | None = None, *, in_stream: bool = False) -> ApiError:
        """529 overloaded (without ``retry_after`` the SDK backs off exponentially, from 0.5 s); with
        ``in_stream``, an ``overloaded_error`` event inside a streamed answer."""
        return cls(529, "Overloaded", retry_after=retry_after, in_stream=in_stream)

    @classmethod
    def server_error(cls, retry_after: float | None = None) -> ApiError:
        """500 internal error."""
        return cls(500, "Internal server error", retry_after=retry_after)


CUT_ENDINGS = ("close", "reset", "stall")


@dataclass(frozen=True)
class CutStream:
    """A reply (see `reply`) whose answer stops after its first ``events`` server-sent events, the
    connection closed before the message is over, as a dropped connection or a proxy's timeout cuts it
    (``message_start`` is the first event; each block then takes a start, its deltas and a stop).

    ``ending`` is how it stops: ``close`` (a clean end of the body, which the SDK takes as the end of the
    stream), ``reset`` (chunked, as the API streams, then a TCP reset: the SDK's HTTP client raises a
    read error mid-stream) or ``stall`` (chunked, then nothing more until the client gives up on its read
    timeout, or the fake stops).
    """

    reply: dict[str, Any]
    events: int = 2
    ending: str = "close"

    def __post_init__(self) -> None:
        if self.ending not in CUT_ENDINGS:
            raise ValueError(f"ending: expected one of {', '.join(CUT_ENDINGS)}, got {self.ending!r}")


Reply: TypeAlias = "dict[str, Any] | ApiError | CutStream | Callable[[dict[str, Any]], Reply]"
"""One scripted answer: an assistant message (see `reply`), an `ApiError`, a `CutStream`, or a function
of the request body that returns one of those (to build a reply from what the loop sent)."""


def text(value: str) -> dict[str, Any]:
    """A ``text`` block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: Mapping[str, Any] | None = None, *, id: str | None = None) -> dict[str, Any]:
    """A ``tool_use`` block; the server assigns ``toolu_…`` ids in order when ``id`` is None."""
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": dict(input or {})}
    if id is not None:
        block["id"] = id
    return block


def server_tool_use(name: str, input: Mapping[str, Any], *, id: str | None = None) -> dict[str, Any]:
    """A ``server_tool_use`` block (a tool the API runs itself, such as the tool search tool)."""
    block: dict[str, Any] = {"type": "server_tool_use", "name": name, "input": dict(input)}
    if id is not None:
        block["id"] = id
    return block


def tool_search_result(tool_names: Sequence[str], *, tool_use_id: str | None = None) -> dict[str, Any]:
    """A ``tool_search_tool_result`` block that references ``tool_names``.

    Without ``tool_use_id`` it answers the ``server_tool_use`` block just before it.
    """
    block: dict[str, Any] = {
        "type": "tool_search_tool_result",
        "content": {
            "type": "tool_search_tool_search_result",
            "tool_references": [{"type": "tool_reference", "tool_name": n} for n in tool_names],
        },
    }
    if tool_use_id is not None:
        block["tool_use_id"] = tool_use_id
    return block


def reply(*blocks: dict[str, Any] | str, stop_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """An assistant message. Strings become text blocks.

    ``stop_reason`` defaults to ``tool_use`` when a block is a ``tool_use``, else ``end_turn``.
    ``extra`` overrides fields of the final message (e.g. ``usage={...}``).
    """
    content = [text(b) if isinstance(b, str) else dict(b) for b in blocks]
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return {"content": content, "stop_reason": stop_reason, **extra}
