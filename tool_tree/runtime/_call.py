"""`call_tool` and the pluggable transport behind it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from tool_tree.runtime._not_given import given
from tool_tree.runtime._result import ToolResult
from tool_tree.runtime._structured import StructuredResult

Transport = Callable[[str, str, dict[str, Any]], dict[str, Any]]
"""``(server, tool, arguments) -> tools/call result`` as a wire-format dict.

A transport raises `ToolCallError` when the call cannot be made; it returns the result (which
may carry ``isError: true``) when the tool ran."""

_lock = threading.Lock()
_transport: Transport | None = None


class _CallFailed(Exception):
    """What the two failures of a call share: where it went and what went wrong."""

    def __init__(self, server: str, tool: str, message: str) -> None:
        super().__init__(f"{server}.{tool}: {message}")
        self.server = server
        self.tool = tool
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again with its attributes, its text unchanged (pickle and `copy` call the class with ``args``, the text
        alone: before, TypeError, so a `multiprocessing` pool waited for ever for a task that raised it)."""
        return _remade, (type(self), self.args, self.__dict__)


def _remade(cls: type[_CallFailed], args: tuple[Any, ...], state: dict[str, Any]) -> _CallFailed:
    """An exception of ``cls`` with ``args`` and ``state``, its ``__init__`` not called (`_CallFailed.__reduce__`)."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class ToolError(_CallFailed):
    """The tool ran and reported an error. ``result`` holds everything the server sent."""

    __module__ = "tool_tree.runtime"  # the public name, as tracebacks show it

    def __init__(self, server: str, tool: str, message: str, result: ToolResult) -> None:
        super().__init__(server, tool, message)
        self.result = result


class ToolCallError(_CallFailed):
    """The call failed outside the tool; ``code`` says how, and the message whether the tool may have run.

    Refused before it was sent (``invalid_arguments``, a tool not in the tree, a budget spent): the tool did not
    run. No usable answer came back: ``timeout`` (no answer within the server's ``timeout``: sent, the tool may
    have run or be running still; one still waiting for its turn was not sent), ``server_unavailable`` (the server
    could not be reached or started, died before answering the call, ended its session or cut its reply),
    ``server_error`` (the server answered with an error of the protocol instead of a result), ``invalid_result`` or
    ``result_too_large`` (the tool ran; its result cannot be used).
    """

    __module__ = "tool_tree.runtime"

    def __init__(self, server: str, tool: str, message: str, code: str = "call_failed") -> None:
        super().__init__(server, tool, message)
        self.code = code


class NoTransportError(RuntimeError):
    """No transport is installed: stubs only work inside ``tooltree exec`` or after `set_transport`."""

    __module__ = "tool_tree.runtime"


def set_transport(transport: Transport | None) -> Transport | None:
    """Install the function that carries tool calls; returns the previous one."""
    global _transport
    with _lock:
        previous, _transport = _transport, transport
    return previous


def get_transport() -> Transport | None:
    """The installed transport, if any."""
    return _transport


def call_tool(
    server: str,
    tool: str,
    arguments: dict[str, Any],
    extra: Mapping[str, Any] | None = None,
    parameters: Mapping[str, str] | None = None,
) -> ToolResult:
    """Call ``tool`` on ``server`` with wire-format ``arguments``; entries that are `NOT_GIVEN` are not sent.

    ``extra`` (a stub's ``**arguments``) is sent besides them. A key of it that ``arguments`` holds (a parameter's
    wire name: ``from`` of the parameter ``from_``, which ``parameters`` names by its wire name) is refused: before,
    it silently replaced the parameter's value.

    Raises:
        TypeError: a key of ``extra`` is one of ``arguments``.
        ToolError: the tool reported an error.
        ToolCallError: the call could not be made.
        NoTransportError: no transport is installed.
    """
    if extra:
        arguments = _merged(server, tool, arguments, extra, parameters or {})
    transport = _transport
    if transport is None:
        raise NoTransportError(
            f"cannot call {server}.{tool}: no tool transport is installed "
            "(run the script with `tooltree exec`, or call tool_tree.runtime.set_transport first)"
        )
    result = ToolResult.from_wire(transport(server, tool, given(arguments)))
    if result.is_error:
        raise ToolError(server, tool, result.text or "the tool reported an error", result)
    return result


def _merged(
    server: str, tool: str, arguments: dict[str, Any], extra: Mapping[str, Any], parameters: Mapping[str, str]
) -> dict[str, Any]:
    for key in extra:
        if key in arguments:
            name = parameters.get(key, key)
            raise TypeError(
                f"{server}.{tool}: **arguments holds {key!r}, the wire name of the parameter {name}: "
                f"pass it as {name}=... (each argument once)"
            )
    return {**arguments, **extra}


def structured(result: ToolResult, server: str, tool: str) -> Any:
    """The structured content of a tool that declares an output schema, as a `StructuredResult`: a dict that also
    carries ``result`` (its images, resource links, embedded resources and text, which the structured content may not
    hold; before, the stub returned the dict alone and they were lost).

    Raises:
        ToolCallError: the server sent no structured content.
    """
    if result.structured_content is None:
        raise ToolCallError(server, tool, "the tool declares an output schema but returned no structured content")
    return StructuredResult(result.structured_content, result)
