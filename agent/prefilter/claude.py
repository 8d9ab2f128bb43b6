"""The ``claude`` classifier: one request to a small Claude model, a typed yes/no per tool.

The model is made to answer through one tool with a fixed schema (``tool_choice`` forces it),
so the answer is structured data, never prose to parse. The request puts the fixed parts first
and marks the catalog block with ``cache_control``: tools (the verdict tool) → system
(instructions, then the catalog) → the request's text. Repeated calls over one catalog read the
catalog from the prompt cache and pay only for the text and the verdicts.

Every tool is judged on its own ("could answering this need it?"), with a probability; the
model lists the tools it gives at least `REPORT_FLOOR`, and a tool it leaves out counts as
not needed. Its tokens and time are counted in the run's cost report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent.defaults import DEFAULT_RETRIES, default_client
from agent.errors import AgentSetupError
from agent.prefilter.base import Attempt, CatalogTool, FilterError, Verdicts, current_attempt
from agent.request import EPHEMERAL, MAX_RETRY_AFTER, retry_after, retry_wait, status_text
from agent.summary import TokenUsage
from tool_tree.text import counted

if TYPE_CHECKING:
    import anthropic

DEFAULT_FILTER_MODEL = "claude-haiku-5-5"
VERDICT_TOOL = "record_tool_verdicts"
REPORT_FLOOR = 0.05
DESCRIPTION_CHARS = 300
"""Characters of each tool's description in the catalog block."""
VERDICT_TOKENS = 32
"""Output tokens allowed per tool of the catalog (one verdict entry takes about 25), so that an answer listing
every tool is never cut off at ``max_tokens`` (which fails open: the whole catalog is sent)."""
MIN_MAX_TOKENS, MAX_MAX_TOKENS = 4096, 32_000
COMPLETE = frozenset({"tool_use", "end_turn", "stop_sequence"})
"""The stop reasons of an answer that ended on its own. Any other (``refusal``, ``model_context_window_exceeded``,
``pause_turn``, ``max_tokens``, one this version does not know) may have cut the verdict list short, and a tool left
out of it would count as not needed: the pre-filter fails open instead."""

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "description": f"One entry per tool whose probability of being needed is at least {REPORT_FLOOR}.",
            "items": {
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "description": "the tool's name exactly as in the catalog"},
                    "needed": {"type": "boolean", "description": "whether answering the request needs this tool"},
                    "probability": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["tool", "needed", "probability"],
            },
        }
    },
    "required": ["verdicts"],
}

INSTRUCTIONS = f"""\
You decide which tools an assistant may need to answer a request. You never answer the request.
Judge every tool of the catalog below on its own: could doing what the request asks (any step of it) need this tool?
Several tools can be needed at once; do not pick one. Give each a probability from 0 to 1.
Report through {VERDICT_TOOL}: one entry for each tool whose probability is at least {REPORT_FLOOR}, with needed true
when it is at least 0.5. Tools you leave out count as not needed."""


def catalog_text(catalog: Sequence[CatalogTool]) -> str:
    """One line per tool: ``name: description`` (first `DESCRIPTION_CHARS` characters, one line)."""
    lines = [f"Catalog ({len(catalog)} tools):"]
    for t in catalog:
        description = " ".join(t.description.split())
        if len(description) > DESCRIPTION_CHARS:
            description = description[: DESCRIPTION_CHARS - 1].rstrip() + "…"
        lines.append(f"{t.name}: {description}" if description else t.name)
    return "\n".join(lines)


def verdict_budget(tools: int) -> int:
    """The default ``max_tokens`` for a catalog of ``tools`` tools."""
    return min(MAX_MAX_TOKENS, max(MIN_MAX_TOKENS, VERDICT_TOKENS * tools))


class ClaudeFilter:
    """The ``claude`` classifier (not ``offline``: a dry run does not ask it).

    Args:
        client: an ``anthropic.Anthropic`` client (default: one from the environment, made on first use).
        model: the model asked (default ``claude-haiku-5-5``).
        max_tokens: ``max_tokens`` of its request (default: `VERDICT_TOKENS` per tool of the catalog, 4,096 to
            32,000).
        timeout: seconds the answer may take, retries included (under the pre-filter, its timeout bounds it too:
            no request is sent after the pre-filter gave up).
        max_retries: the retries of the default client (`agent.defaults.default_client`), as an `Agent`'s own (before:
            the SDK's 2, while the agent's requests had 4).
    """

    name = "claude"
    default_threshold = 0.5
    offline = False

    def __init__(
        self,
        client: anthropic.Anthropic | None = None,
        *,
        model: str = DEFAULT_FILTER_MODEL,
        max_tokens: int | None = None,
        timeout: float = 30.0,
        max_retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.client = client
        self.max_retries = max_retries
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self._catalog_key: tuple[str, ...] = ()
        self._catalog_block = ""

    def request(self, text: str, catalog: Sequence[CatalogTool]) -> dict[str, Any]:
        """The parameters of the one request (the catalog block is built once per catalog)."""
        key = tuple(t.name for t in catalog)
        if key != self._catalog_key:
            self._catalog_key, self._catalog_block = key, catalog_text(catalog)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens or verdict_budget(len(catalog)),
            "tools": [{"name": VERDICT_TOOL, "description": "Record the verdicts.", "input_schema": VERDICT_SCHEMA}],
            "tool_choice": {"type": "tool", "name": VERDICT_TOOL},
            "system": [
                {"type": "text", "text": INSTRUCTIONS},
                {"type": "text", "text": self._catalog_block, "cache_control": dict(EPHEMERAL)},
            ],
            "messages": [{"role": "user", "content": [{"type": "text", "text": f"<request>\n{text}\n</request>"}]}],
        }

    def classify(self, text: str, catalog: Sequence[CatalogTool]) -> Verdicts:
        """Raises: FilterError: the model does not exist (``missing_model``), no answer came within the timeout
        (``timeout``) or the request failed, or the answer is not a verdict list (``error``); each with the
        requests it sent.

        Under the pre-filter, the deadline is the pre-filter's (`current_attempt`); else ``timeout`` from now. A
        failure the SDK would retry is retried as the agent's requests are (`agent.request.retry_wait`), as often as
        the client's ``max_retries``, only while the wait ends before the deadline, and no request is sent past the
        deadline: each waits at most until then. A ``retry-after`` that ends past the deadline or asks for more
        than `agent.request.MAX_RETRY_AFTER` fails open at once, saying how long it asked (before: a copy of the SDK's
        rules of its own waited any ``retry-after`` that ended before the deadline, however long, and one past it
        failed open without saying why).
        """
        import anthropic

        if self.client is None:
            try:
                self.client = default_client(self.max_retries)
            except (AgentSetupError, anthropic.AnthropicError) as e:  # no API key, an empty ANTHROPIC_BASE_URL
                raise FilterError(f"the claude pre-filter has no client: {e}") from None
        attempt = current_attempt() or Attempt(self.timeout)
        retries, client = self.client.max_retries, self.client.with_options(max_retries=0)
        params = self.request(text, catalog)
        tried = 0
        while True:
            if not attempt.send():
                raise self._failure(None, attempt)  # the deadline passed, or the pre-filter gave up
            try:
                message = client.messages.create(**params, timeout=max(min(self.timeout, attempt.left()), 0.001))
                break
            except (anthropic.APIStatusError, anthropic.APIConnectionError) as e:
                if isinstance(e, anthropic.APIStatusError):  # answered with an error, which is not billed
                    attempt.spent(TokenUsage())
                wait, left = retry_wait(e, tried) if tried < retries else None, attempt.left()
                if wait is None or wait >= left:
                    why = unwaited(e, wait, left) if tried < retries else ""
                    raise self._failure(e, attempt, why) from None
            attempt.abandoned.wait(wait)  # woken when the pre-filter gives up (then nothing more is sent)
            tried += 1
        usage = TokenUsage.from_api(message.usage)
        attempt.spent(usage)
        requests = attempt.requests
        answer = next((b for b in message.content if b.type == "tool_use" and b.name == VERDICT_TOOL), None)
        if message.stop_reason == "max_tokens":  # the verdict list may be cut short: tools left out would count 0
            raise FilterError(self._cut_off(len(catalog)), usage=usage, requests=requests)
        if message.stop_reason not in COMPLETE:  # before: a refusal's or a full context's verdicts were taken whole
            raise FilterError(
                f"the pre-filter model's answer is not a complete verdict list (stop_reason {message.stop_reason!r})",
                usage=usage,
                requests=requests,
            )
        if answer is None:
            raise FilterError(
                f"the pre-filter model answered without calling {VERDICT_TOOL}", usage=usage, requests=requests
            )
        try:
            probabilities = parse_verdicts(answer.input, catalog)
        except FilterError as e:
            raise FilterError(str(e), usage=usage, requests=requests) from None
        return Verdicts(probabilities, usage=usage, requests=requests, note=self.model)

    def _cut_off(self, tools: int) -> str:
        """Why an answer cut at ``max_tokens`` failed open, and what the user can do. Before, it advised to "raise it",
        which no command-line option or ``agent:`` setting can."""
        what = f"the pre-filter model's answer was cut off at max_tokens ({self.max_tokens or verdict_budget(tools):,})"
        if self.max_tokens:
            return f"{what}; give ClaudeFilter(max_tokens=...) more for a catalog of {counted(tools, 'tool')}"
        return (f"{what}, the most it is given for a catalog of {counted(tools, 'tool')} ({VERDICT_TOKENS} per tool, "
                f"{MIN_MAX_TOKENS:,} to {MAX_MAX_TOKENS:,}); use --prefilter local (agent.prefilter: local) for this "
                "tree, or from Python a ClaudeFilter(max_tokens=...) with more")  # fmt: skip

    def _failure(self, error: Exception | None, attempt: Attempt, why: str = "") -> FilterError:
        """The `FilterError` for a request that failed (a timeout, a refusal, no connection), or (None) for the
        deadline that passed before a request could be sent; ``why`` its retry was not made, when its ``retry-after``
        was the reason (`unwaited`)."""
        import anthropic

        sent = attempt.requests
        if isinstance(error, anthropic.NotFoundError):
            return FilterError(f"the pre-filter model {self.model!r} was not found: {error}", kind="missing_model",
                               requests=sent)  # fmt: skip
        if error is None or isinstance(error, anthropic.APITimeoutError):
            seconds = min(self.timeout, attempt.seconds)
            unanswered = attempt.unanswered()  # given up on: billed or not, their tokens are unknown (not 0)
            unknown = (
                f" ({unanswered} request(s) unanswered: their tokens are unknown, not counted)" if unanswered else ""
            )
            return FilterError(f"the pre-filter model did not answer within {seconds:g} s{unknown}", kind="timeout",
                               requests=sent, unanswered=unanswered)  # fmt: skip
        if isinstance(error, anthropic.APIStatusError):
            return FilterError(
                f"the pre-filter request failed ({error.status_code}): {status_text(error)}{why}", requests=sent
            )
        # The connection may have failed after the request arrived (an answer cut short, a reset): the API may have
        # billed it. Before, such requests were reported as answered with 0 tokens.
        unanswered = attempt.unanswered()
        unknown = f" ({unanswered} request(s) unanswered: their tokens are unknown, not counted)" if unanswered else ""
        return FilterError(f"cannot reach the Messages API for the pre-filter: {error}{unknown}", requests=sent,
                           unanswered=unanswered)  # fmt: skip


def parse_verdicts(data: Any, catalog: Sequence[CatalogTool]) -> dict[str, float]:
    """``key → probability`` from the verdict tool's input; entries naming no catalog tool are skipped.

    Raises:
        FilterError: the input does not follow the schema (a probability that is not a number from 0 to 1, a bool
            included, is not replaced by a guess).
    """
    verdicts = data.get("verdicts") if isinstance(data, Mapping) else None
    if not isinstance(verdicts, list):
        raise FilterError(f"the pre-filter verdicts are not a list: {str(data)[:200]}")
    by_name = {t.name: t.key for t in catalog}
    out: dict[str, float] = {}
    for v in verdicts:
        if not isinstance(v, Mapping) or not isinstance(v.get("needed"), bool):
            raise FilterError(f"a pre-filter verdict is malformed: {str(v)[:200]}")
        p = v.get("probability")
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:  # NaN too
            raise FilterError(f"a pre-filter verdict's probability is not a number from 0 to 1: {str(v)[:200]}")
        key = by_name.get(str(v.get("tool")))
        if key is None:
            continue
        # "needed" is the typed answer; the probability only ranks within it
        p = max(float(p), 0.5) if v["needed"] else min(float(p), 0.4999)
        out[key] = max(out.get(key, 0.0), p)
    return out


def unwaited(error: Exception, wait: float | None, left: float) -> str:
    """Why the retry of the request that failed with ``error`` is not waited for, when its ``retry-after`` is the
    reason (it asks for more than `MAX_RETRY_AFTER`, or ends past the deadline, ``left`` seconds away), or ""."""
    asked = retry_after(error)
    if asked is None or (wait is not None and wait < left) or (wait is None and asked <= MAX_RETRY_AFTER):
        return ""
    if wait is None:
        because = f"longer than {MAX_RETRY_AFTER:g} s"
    else:
        because = f"it would end after the pre-filter's deadline, {_seconds(max(left, 0.0))} s away"
    return f"; the API asks to wait {_seconds(asked)} s before trying again (not retried: {because})"


def _seconds(value: float) -> str:
    """Seconds as said in a reason: ``3,600``, ``5``, ``0.25``."""
    return f"{value:,.2f}".rstrip("0").rstrip(".") or "0"
