"""Building Messages requests: fixed prefix with cache breakpoints, blocks sent back as params, user
turns (answering tool calls a cut reply left open), and reading the API's errors.

Breakpoints (``cache_control: {"type": "ephemeral"}``) go on the last tool and on the system
prompt — the part that is byte-identical in every request of a run — and on the last block of
the conversation, so each request also reads the previous turns from the cache. The stored
conversation never carries markers; they are added to a copy per request (at most 3 of the
API's 4).

Over 400 lines: one request's life, its parts, its sending (with the retries the SDK does not make) and what its
failures say, each small and used only together.
"""

from __future__ import annotations

import copy
import html
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from time import monotonic
from typing import TYPE_CHECKING, Any

from tool_tree.text import counted

if TYPE_CHECKING:
    import anthropic

    from agent.summary import RunResult, RunSummary
    from agent.transcript import Transcript

EPHEMERAL = {"type": "ephemeral"}
STREAM_RETRY_DELAY = 0.5
"""Seconds before the first retry of an error that arrived inside a stream (doubling, as the SDK backs off)."""
STREAM_RETRY_MAX_DELAY = 8.0
"""The longest wait between two such retries (the SDK's own cap): doubling unbounded, ``max_retries=12`` waited
34 minutes in all, 17 before its last try."""
RETRYABLE_STREAM_ERRORS = ("overloaded_error", "rate_limit_error", "api_error")
STARTED_USAGE = "started_usage"
"""The ``usage`` a reply's start reported, on the ``KeyboardInterrupt`` that stopped it after (`send` counts it)."""

# Fields of response blocks that may be sent back; anything else the SDK parsed is dropped.
_PARAM_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("type", "text", "citations"),
    "tool_use": ("type", "id", "name", "input", "caller"),
    "server_tool_use": ("type", "id", "name", "input", "caller"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}


def block_param(block: Any) -> dict[str, Any]:
    """A response content block (SDK model or dict) as a request param block."""
    # warnings off: a block that does not match the SDK's types (an input that is not an object) is kept as sent
    data: dict[str, Any] = (
        block.model_dump(mode="json", exclude_none=True, warnings=False)
        if hasattr(block, "model_dump")
        else dict(block)
    )
    keep = _PARAM_FIELDS.get(str(data.get("type")))
    if keep is not None:
        data = {k: data[k] for k in keep if k in data}
    return data


def cached_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools array with a breakpoint on the last tool."""
    out = [dict(t) for t in tools]
    if out:
        out[-1]["cache_control"] = dict(EPHEMERAL)
    return out


def cached_system(system: str) -> list[dict[str, Any]]:
    """The system prompt as one text block with a breakpoint."""
    return [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]


def with_last_breakpoint(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``messages`` with a breakpoint on the last block of the last message."""
    out = [dict(m) for m in messages]
    if not out:
        return out
    last = out[-1]
    content = last.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if isinstance(content, list) and content:
        content = list(content)
        tail = copy.copy(content[-1])
        if isinstance(tail, dict) and tail.get("type") not in ("thinking", "redacted_thinking"):
            tail["cache_control"] = dict(EPHEMERAL)
            content[-1] = tail
        last["content"] = content
    return out


def answer_text(content: Sequence[dict[str, Any]]) -> str:
    """The text blocks of a reply, joined."""
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text").strip()


def user_text(task: str) -> dict[str, Any]:
    """A user turn of one text block."""
    return {"role": "user", "content": [{"type": "text", "text": task}]}


def next_user_turn(task: str, history: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The user turn of ``task`` after ``history``. A run that stopped on a reply with tool calls (cut by
    ``max_tokens``, a refusal) left them unanswered, which the API refuses: they are answered as not run."""
    turn = user_text(task)
    last = history[-1] if history else None
    if last is None or last.get("role") != "assistant" or not isinstance(last.get("content"), list):
        return turn
    unanswered = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": b.get("id"),
            "content": [{"type": "text", "text": "not run: the reply ended before the call was made"}],
            "is_error": True,
        }
        for b in unanswered
    ]
    return {"role": "user", "content": [*results, *turn["content"]]}


def error_type(e: Any) -> str:
    """The API's error type (``overloaded_error``, ...) in an error's body, or ""."""
    body = getattr(e, "body", None)
    details = body.get("error") if isinstance(body, dict) else None
    return str(details.get("type", "")) if isinstance(details, dict) else ""


def api_message(e: Any) -> str:
    """The message of an API error, from its body when it has one. A body that is not the API's JSON error (a proxy's
    or gateway's page) is named by its title or first words, in at most `FOREIGN_DETAIL` characters: before, a 503
    from a proxy printed its whole HTML page as the error's line (and in ``--json``, and in each retry's record)."""
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", e))
    if isinstance(body, str) and body.strip():
        return foreign_body(body)
    from sandbox.results import note_label

    return note_label(str(getattr(e, "message", e)), 2 * FOREIGN_DETAIL)


FOREIGN_DETAIL = 200
"""The most characters of an error's body that is not the API's own (a proxy's page) that an error quotes."""
_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


def foreign_body(text: str) -> str:
    """What an error answer whose ``text`` is not the API's JSON error says, in a few words: an HTML page by its title,
    other text by its start (cleaned, on one line)."""
    from sandbox.results import note_label

    head = text[: 64 * 1024]
    if (title := _TITLE.search(head)) is not None or head.lstrip().startswith("<"):
        named = " ".join(html.unescape(title.group(1)).split()) if title is not None else ""
        what = f"an HTML page titled {note_label(named, FOREIGN_DETAIL)!r}" if named else "an HTML page"
    else:
        what = repr(note_label(head, FOREIGN_DETAIL))
    return f"{what}, not the API's own error (a proxy or gateway on the way answered?)"


def status_text(e: Any) -> str:
    """An API status error as its ``api_error`` record says it: the SDK's text, unless its body is not the API's own
    error (`foreign_body`, which can be a page of kilobytes)."""
    body = getattr(e, "body", None)
    return f"{e.status_code} {api_message(e)}" if isinstance(body, str) and body.strip() else str(e)


class NoMessage(Exception):
    """A request was answered 200 but its stream held no message (an address that is not the Messages API)."""


class UnreadableReply(Exception):
    """A reply arrived but the SDK could not read it: most often a tool call's input it cannot parse (nested
    deeper than its parser goes, an integer of thousands of digits). Its message is one short line.

    Attributes:
        usage: the reply's ``usage`` as its start reported it (the input tokens it cost), or None.
    """

    def __init__(self, message: str, usage: Any = None) -> None:
        super().__init__(message)
        self.usage = usage


class CutReply(Exception):
    """A reply's stream ended before the message did (no ``message_stop``: the connection dropped, a proxy
    timed out); what arrived is not the model's whole reply and is never taken as its answer."""


UNREADABLE_DETAIL = 200
"""The most characters of the SDK's own reason an `UnreadableReply` quotes (never the input itself)."""


def unreadable(e: ValueError, usage: Any = None) -> UnreadableReply:
    """The SDK's ``ValueError`` about a reply as an `UnreadableReply`: what could not be read and the parser's
    reason, cleaned and cut, without the JSON the SDK's message carries (it can be megabytes)."""
    from sandbox.results import note_label

    text = str(e)
    if text.startswith("Unable to parse tool parameter JSON"):
        reason = text.partition("Error: ")[2][: 4 * UNREADABLE_DETAIL].partition(". JSON: ")[0]
        what = "the input of one of its tool calls is JSON the SDK cannot parse"
    else:
        reason, what = text, "the SDK could not parse it"
    return UnreadableReply(
        f"the model's reply could not be read: {what} ({note_label(reason, UNREADABLE_DETAIL)}); the run stopped "
        "there, run the task again",
        usage,
    )


def stream_message(
    client: Any,
    params: dict[str, Any],
    *,
    on_error: Callable[[int | None, str, Any, float | None], None],
) -> Any:
    """The final message of one streamed request, retried here, at most the client's ``max_retries`` times, on what
    the SDK retries (`retry_wait`: a rate limit, an overload, a server error, a timeout, no connection) and on what it
    does not retry inside a stream (an ``error`` event after the 200 of those kinds; a stream that ends before its
    message does: the body ends early, the connection is reset, no data comes for the client's read timeout). Each
    failed attempt is given to ``on_error`` first with what it cost (its ``usage`` as far as it came, or None) and the
    seconds until its retry (None: given up). Before, the SDK made the retries of errors answered before the stream
    itself, unseen: a run slowed by rate limits had no record of them, and its summary no count.

    Raises:
        anthropic.APIStatusError, anthropic.APIConnectionError: as the SDK raises them, once retries are spent.
        NoMessage: the answer was 200 without a message in it.
        CutReply: the stream ended before the message did (no ``message_stop``), every retry too.
        UnreadableReply: the SDK could not read the reply it streamed (a tool call's input it cannot parse).
    """
    import anthropic
    import httpx2

    once = client.with_options(max_retries=0)  # each attempt is seen here: the SDK retries none itself
    retries = 0
    while True:
        try:
            with once.messages.stream(**params) as stream:
                usage, stopped, blocks, broken = None, False, 0, ""
                try:
                    for event in stream:  # the start's usage is kept: a reply that cannot be read still cost it
                        if event.type == "message_start":
                            usage = event.message.usage
                        blocks += event.type == "content_block_start"
                        stopped = event.type == "message_stop"
                    message = stream.get_final_message()
                except AssertionError:  # the SDK asserts that the stream held a message: none came
                    kind = stream.response.headers.get("content-type", "") or "no content type"
                    raise NoMessage(f"sent no message (its answer was {kind.split(';')[0]}, not an event "
                                    "stream: is ANTHROPIC_BASE_URL the Messages API?)") from None  # fmt: skip
                except ValueError as e:  # the SDK parses each tool input as it streams; it raises on what it cannot
                    raise unreadable(e, usage) from None
                except (httpx2.TransportError, anthropic.APIConnectionError) as e:
                    # Raised as the SDK reads the stream: the HTTP client's own error (anthropic < 2.17), or that
                    # error wrapped as a connection or timeout error (2.17 on), which the SDK does not retry either.
                    cause = e.__cause__ if isinstance(e.__cause__, httpx2.TransportError) else e
                    broken = broken_stream(cause, client)
                except KeyboardInterrupt as e:  # Ctrl-C once the reply began: what its start reported was billed
                    setattr(e, STARTED_USAGE, usage)
                    raise
            if stopped:
                return message
            # The SDK hands over a cut stream's partial message (its stop_reason None): half a sentence, or a
            # tool call without its input, taken as the model's last word. Nothing ran on it: ask again.
            if broken:
                text = f"{broken} (after {blocks} content block(s))"
            else:
                text = f"the stream ended before the reply did (after {len(message.content)} content block(s))"
                usage = message.usage
            wait = retry_delay(retries) if retries < client.max_retries else None
            on_error(200, text, usage, wait)  # its input was read all the same
            if wait is None:
                raise CutReply(text)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as e:
            wait = retry_wait(e, retries) if retries < client.max_retries else None
            if isinstance(e, anthropic.APIStatusError):
                on_error(e.status_code, status_text(e), None, wait)
            else:
                on_error(None, str(e), None, wait)
            if wait is None:
                raise
        time.sleep(wait)
        retries += 1


BIG_TOOLS_BYTES = 16 * 1024 * 1024
"""A tools array of at least this many bytes as JSON (half the 32 MB the Messages API takes in one request) is named as
what made a request too large (413)."""


def big_tools_advice(params: dict[str, Any]) -> str:
    """What to do about a request refused as too large (413) whose tools array is at least `BIG_TOOLS_BYTES`, or "".

    Before, only "large tool results or images: start a new conversation": direct mode over 8,020 tools of large
    schemas sent 54 MB of tool definitions with each request, its first one included, which no new conversation fixes.
    """
    import json

    tools = params.get("tools") or []
    size = len(json.dumps(tools, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    if size < BIG_TOOLS_BYTES:
        return ""
    return (
        f"the request is over the API's size limit, and its tools array alone is {size / 2**20:,.1f} MiB of JSON "
        f"({len(tools):,} tools, sent with every request): offer fewer tools (--mode code or filtered, or exclude "
        "tools in tooltree.yaml)"
    )


MAX_RETRY_AFTER = 60.0
"""The longest ``retry-after`` waited for: an answer asking for more is not retried (the SDK waited whatever it
asked, up to 49 days, saying nothing: a proxy's ``retry-after: 86400`` held a run a day per retry)."""


def retry_after(e: Any) -> float | None:
    """The seconds an API status error's ``retry-after-ms`` or ``retry-after`` header asks to wait, or None."""
    headers = getattr(getattr(e, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            after = float(headers.get(name, "")) * scale
        except ValueError:
            continue
        if after > 0 and math.isfinite(after):
            return after
    return None


def retry_wait(e: Exception, retries: int) -> float | None:
    """Seconds to wait before retrying the request that failed with ``e`` after ``retries`` retries, or None when
    it is not retried. As the SDK decides: a status error with ``x-should-retry: true``, or 408, 409, 429 or 5xx,
    unless ``x-should-retry: false``, waiting its ``retry-after-ms`` or ``retry-after`` (one past `MAX_RETRY_AFTER`
    is not retried); a timeout or no connection; an ``error`` event inside the stream of a kind in
    `RETRYABLE_STREAM_ERRORS`. Without a ``retry-after``: `retry_delay`."""
    import anthropic

    if isinstance(e, anthropic.APIStatusError):
        if e.status_code == 200:  # an `error` event after the 200
            return retry_delay(retries) if error_type(e) in RETRYABLE_STREAM_ERRORS else None
        headers = e.response.headers
        should = headers.get("x-should-retry")
        if should == "false" or (should != "true" and e.status_code not in (408, 409, 429) and e.status_code < 500):
            return None
        if (after := retry_after(e)) is not None:
            return after if after <= MAX_RETRY_AFTER else None
    elif not isinstance(e, anthropic.APIConnectionError):
        return None
    return retry_delay(retries)


def retry_delay(retries: int) -> float:
    """Seconds to wait before the retry after ``retries`` retries: doubling from `STREAM_RETRY_DELAY`, at most
    `STREAM_RETRY_MAX_DELAY`."""
    return min(STREAM_RETRY_DELAY * (1 << min(retries, 32)), STREAM_RETRY_MAX_DELAY)


def broken_stream(e: Exception, client: Any) -> str:
    """What broke a stream, from the HTTP client's error ``e`` (or the SDK's wrapping it): a reset, an early end,
    or a stall."""
    import anthropic
    import httpx2

    from sandbox.results import note_label

    if isinstance(e, httpx2.TimeoutException | anthropic.APITimeoutError):
        timeout = getattr(client, "timeout", None)
        seconds = getattr(timeout, "read", timeout)
        waited = f"{seconds:g} s" if isinstance(seconds, int | float) else "the client's read timeout"
        return f"the stream stalled: no data came for {waited} before the reply was over"
    reset = isinstance(e.__cause__ or e.__context__, ConnectionResetError) or "reset by peer" in str(e)
    what = "was reset" if reset else "broke"
    detail = note_label(str(e), UNREADABLE_DETAIL)
    return f"the connection {what} before the reply was over ({type(e).__name__}: {detail})"


def api_failure(e: Any) -> str:
    """What an API status error says, after "the Messages API": where it failed, and its message."""
    if e.status_code == 200:
        return f"failed inside its stream ({error_type(e) or 'error'}): {api_message(e)}"
    return f"answered {e.status_code}: {api_message(e)}"


def api_error_text(e: Exception, client: Any, *, model: str) -> tuple[str, int | None, str]:
    """What a `ModelAPIError` says of ``e`` (an ``APIStatusError``, an ``APIConnectionError`` or a `CutReply`),
    once retries are spent: ``(message, status code or None, advice)``."""
    import anthropic

    if isinstance(e, CutReply):
        return f"the Messages API failed: {e}", 200, api_advice(e, model=model, retries=client.max_retries)
    if isinstance(e, anthropic.APITimeoutError):  # reached, but it did not answer in time
        timeout = getattr(client.timeout, "read", client.timeout)
        within = f" within {timeout:g} s" if isinstance(timeout, int | float) else ""
        advice = "run the task again; give the client a longer timeout if its replies are long"
        return f"the Messages API did not answer{within}, every retry too", None, advice
    if isinstance(e, anthropic.APIConnectionError):
        return f"cannot reach the Messages API: {e}", None, "check the network, and ANTHROPIC_BASE_URL when it is set"
    status = getattr(e, "status_code", None)
    return f"the Messages API {api_failure(e)}", status, api_advice(e, model=model, retries=client.max_retries)


def api_advice(e: Any, *, model: str, retries: int) -> str:
    """What to do about an API error that retrying did not fix (``e``: an ``APIStatusError`` or a `CutReply`), or ""
    when there is nothing to say past "run it again"."""
    if isinstance(e, CutReply):
        return "check the connection to the API (a proxy that cuts long answers?), then run the task again"
    status, message = getattr(e, "status_code", None), api_message(e)
    if status in (401, 403):
        what = "was not accepted" if status == 401 else "may not use this model or a feature the request asks for"
        return f"check ANTHROPIC_API_KEY (or the client's api_key): the key {what}"
    if status == 404:
        return f"is the model id {model!r} right? (--model, or agent.model in the config)"
    if status == 413:
        return "the request is over the API's size limit (large tool results or images): start a new conversation"
    if status == 400 and "prompt is too long" in message:
        return (
            "the conversation outgrew the model's context window: start a new conversation (without history), or ask "
            "for less per call (a filter, a page)"
        )
    if status == 400 and message.startswith("max_tokens:"):  # the default is past what some models write
        return "lower --max-tokens (agent.max_tokens in tooltree.yaml, max_tokens= in Python) to what the model allows"
    if (after := retry_after(e)) is not None and after > MAX_RETRY_AFTER:
        return (
            f"the API asks to wait {after:,.0f} s before trying again (not retried: longer than {MAX_RETRY_AFTER:g} s)"
        )
    if status == 429:
        return (
            f"still rate-limited after {counted(retries, 'retry', 'retries')}: wait a minute, then run the task again"
        )
    if status in (500, 502, 503, 504, 529) or error_type(e) in RETRYABLE_STREAM_ERRORS:
        return (
            f"the API is failing or overloaded (after {counted(retries, 'retry', 'retries')}): run the task again later"
        )
    return ""


def send(
    client: anthropic.Anthropic,
    params: dict[str, Any],
    *,
    model: str,
    log: Transcript,
    summary: RunSummary,
    so_far: Callable[[], RunResult],
) -> tuple[Any, float]:
    """Send one request of a run (`stream_message`): its message and seconds. Each failed attempt is an ``api_error``
    record of ``log``, what it cost counted in ``summary`` and in the record (the transcript sums to the run).

    Raises:
        ModelAPIError: the request failed after retries, or its reply could not be read: ``summary.stop_reason`` is
            ``api_error`` or ``unreadable_reply``, and ``.result`` is ``so_far()``.
    """
    import anthropic

    from agent.errors import ModelAPIError
    from agent.summary import TokenUsage

    t0 = monotonic()

    def logged(status: int | None, text: str, usage: Any = None, retry_in: float | None = None) -> None:
        """Record a failed attempt, and count what it cost (in the record too: the transcript sums to the run) and
        whether it is retried (``retry_in`` seconds)."""
        spent = TokenUsage.from_api(usage) if usage is not None else None
        if spent is not None:
            summary.usage.add(spent)
        summary.api_retries += retry_in is not None
        retried = {"retry_in": round(retry_in, 3)} if retry_in is not None else {}
        log.write("api_error", turn=summary.turns, status=status, message=text,
                  **({"usage": asdict(spent)} if spent is not None else {}), **retried)  # fmt: skip

    try:
        message = stream_message(client, params, on_error=logged)
    except KeyboardInterrupt as e:  # a reply Ctrl-C stopped after its start: its input was read, and is billed
        if (started := getattr(e, STARTED_USAGE, None)) is not None:
            spent = TokenUsage.from_api(started)
            summary.usage.add(spent)
            log.write("reply_interrupted", turn=summary.turns, usage=asdict(spent))
        raise
    except (anthropic.APIStatusError, anthropic.APIConnectionError, NoMessage, CutReply, UnreadableReply) as e:
        summary.stop_reason = "unreadable_reply" if isinstance(e, UnreadableReply) else "api_error"
        partial = so_far()
        if isinstance(e, UnreadableReply):
            logged(200, str(e), e.usage)
            raise ModelAPIError(str(e), status_code=200, result=partial) from None
        if isinstance(e, NoMessage):
            logged(200, str(e))
            raise ModelAPIError(f"the Messages API {e}", status_code=200, result=partial) from None
        text, status, advice = api_error_text(e, client, model=model)
        if status == 413:
            advice = big_tools_advice(params) or advice
        raise ModelAPIError(text, status_code=status, result=partial, advice=advice) from None
    return message, monotonic() - t0
