"""The errors of a `tool_tree.pool.ServerPool`, the failure a call returns instead of raising, and their words.

Errors::

    PoolError               base
    ├── UnknownServerError  no server of that name in the pool
    └── ServerUnavailable   the server could not be started or died; ``stderr_tail`` says why

A call that got no usable answer from the tool (it timed out, the server answered a protocol error or ended the
session, its reply was cut, the SDK refused the result) is no exception: it returns an ``isError: true`` result, as
a tool's own error does, but of its own type, `CallFailure`, whose ``code`` says what failed and whose ``message``
says whether the tool may have run.

Their texts leave the host process (to the script in the sandbox, serve's clients, logs), so the
secrets of the server's configuration are redacted from the reason and the stderr tail
(`tool_tree.redact`). A server that could not start, or ended under the pool, is said in the `upstream` log too.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import mcp
from pydantic import ValidationError

from tool_tree.ledgers import closed_here
from tool_tree.other_python import other_python
from tool_tree.redact import redact
from tool_tree.stderr_log import StderrLog
from tool_tree.text import one_line

if TYPE_CHECKING:
    from tool_tree.pool_slot import _Slot

upstream = logging.getLogger("tool_tree.upstream")
"""Why a server could not start, or ended under the pool: one ``WARNING`` each time (its back-off bounds how often),
redacted, with its stderr's tail. `tooltree serve` leaves it on: its stderr is the log an MCP client keeps, and
before, nothing there said that a server failed during a session (only the model saw it). `tooltree exec` and
`tooltree agent` turn it off: the script's error and the agent's view say the same."""


class PoolError(Exception):
    """Base of the errors a `ServerPool` raises."""

    __module__ = "tool_tree.pool"  # the public name, as tracebacks and pickles show it


class UnknownServerError(PoolError):
    __module__ = "tool_tree.pool"


class ServerUnavailable(PoolError):
    """The server could not be reached: the call did not happen, or (``the server died before answering the call``)
    it was sent and its outcome is unknown."""

    __module__ = "tool_tree.pool"

    def __init__(self, server: str, reason: str, stderr_tail: str = "") -> None:
        super().__init__(f"server {server!r} is unavailable: {reason}")
        self.server = server
        self.reason = reason
        self.stderr_tail = stderr_tail

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again from its own arguments (pickle and `copy` call the class with ``args``, the message alone:
        before, TypeError, so a `multiprocessing` pool waited for ever for the result of a task that raised it, and a
        `ProcessPoolExecutor` said its process had been "terminated abruptly")."""
        return type(self), (self.server, self.reason, self.stderr_tail), self.__dict__


class CallFailure(dict[str, Any]):
    """The result `ServerPool.call` returns for a call that got no usable answer from the tool: an ``isError: true``
    result whose text says what failed (so a caller that reads it as a tool's error still sees why), of its own
    type so that a caller can tell it from the tool's own error (`sandbox.mcp_bridge.McpBridge` fails the call
    with ``code`` and ``message``, which the script sees as ``ToolCallError``).

    A type, not a key of the result: a result's ``_meta`` is the server's to write, so a server could make its own
    errors pass for the pool's.

    Attributes:
        code: ``timeout`` (no answer within the call's timeout), ``server_unavailable`` (the server ended the
            session, or its reply ended before the answer), ``server_error`` (the server answered with a JSON-RPC
            error, not a result), ``invalid_result`` (the result does not match the tool's output schema, or is not
            a result the protocol allows: no content, an unknown content type, …).
        message: the text, and whether the tool may have run.
    """

    __module__ = "tool_tree.pool"

    def __init__(self, text: str, code: str, ran: str = "") -> None:
        super().__init__(content=[{"type": "text", "text": text}], isError=True)
        self.code = code
        self.message = f"{text}; {ran}" if ran else text
        self._parts = (text, ran)

    def of_request(self) -> CallFailure:
        """The same failure of a request that runs no tool (`ServerPool.request`): said without the tool."""
        text, ran = self._parts
        return CallFailure(text, self.code, _REQUEST_RAN.get(ran, ran))


_NOT_SENT = "it was not sent: the tool did not run"
_SENT = "it was sent: the tool may have run, or be running still"
_PROTOCOL_ERROR = "the server answered the call with an error of the protocol, not a result of the tool"
_REQUEST_RAN = {
    _NOT_SENT: "it was not sent",
    _SENT: "it was sent, and no answer came",
    _PROTOCOL_ERROR: "the server answered the request with an error",
    "the tool may have run": "",
    "the tool ran": "",
    "the tool ran until it asked": "",
    "the server did not say whether the tool ran": "",
}
"""What a failed call says of its tool, said of a request that runs none (a prompt's get, a resource's read)."""


def _refused(e: ValidationError) -> str:
    """What a validation of a server's result found, in one line of at most a few hundred characters."""
    errors = e.errors()
    if not errors:
        return "malformed"
    loc = [str(part) for part in errors[0]["loc"]]
    member = next((i for i, part in enumerate(loc) if part[:1].isupper()), None)  # a model of a union: none fit
    if member is not None:
        value = errors[0]["input"]
        kind = f" (type {value.get('type')!r})" if isinstance(value, dict) and "type" in value else ""
        found = f"{'.'.join(loc[:member]) or 'the result'}: none of the shapes the protocol allows there{kind}"
    else:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        found = f"{'.'.join(loc) or 'the result'}: {errors[0]['msg']}{more}"
    return one_line(found, 300)


SAID_CHARS = 2_000
"""The most of a server's JSON-RPC error message a call's failure quotes (before: all of it, 8 MB for an error of
2,000,000 emoji, into the script's exception at each call)."""


def _said(e: mcp.MCPError, slot: _Slot) -> str:
    """The server's error message, redacted of its configuration's secrets (a server refusing a key quotes it), at
    most `SAID_CHARS` characters (how many more were left out said)."""
    text = redact(str(e), slot.config)
    return text if len(text) <= SAID_CHARS else f"{text[:SAID_CHARS]}… ({len(text) - SAID_CHARS:,} characters more)"


def _told(said: str, tail: str) -> str:
    """``said``, with a server's stderr ``tail`` under it when there is one."""
    return f"{said}\n{tail}" if tail else said


def _unavailable(slot: _Slot, reason: str, log: StderrLog | None = None) -> ServerUnavailable:
    """The error for a server that cannot be reached, without the secrets of its configuration; with the tail of
    ``log`` (default: the log of the server's latest start)."""
    log = log if log is not None else slot.stderr
    tail = log.tail() if log else ""  # redacted by the log, which knows the server
    return ServerUnavailable(slot.config.name, redact(reason, slot.config), tail)


def _is_connection_loss(e: mcp.MCPError) -> bool:
    text = str(e).lower()
    return "connection closed" in text or ("closed" in text and "connection" in text)


def _first(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


async def _reason(e: BaseException, *, http: bool = False, stderr: StderrLog | None = None) -> str:
    e = _first(e)
    if isinstance(e, TimeoutError):
        return "timed out while starting (its own start-up, not the wait for its turn)"
    if http and isinstance(e, ConnectionError):  # `connect` says "cannot connect to host:port: why"
        return f"could not reach the server at its URL ({str(e).removeprefix('cannot connect to ')})"
    if isinstance(e, OSError):
        return f"cannot start: {e}"
    if isinstance(e, mcp.MCPError) and _is_connection_loss(e) and not closed_here(e.data):
        said = "the server exited during start-up"
        if stderr is None:
            return said
        return stderr.exited_said(said) + (await other_python(stderr.server, stderr.tail()) if stderr.server else "")
    return str(e) or type(e).__name__


def _closed_during_call() -> PoolError:
    return PoolError(
        "the pool closed during the call (its `with` block ended meanwhile); the call may have reached the server"
    )
