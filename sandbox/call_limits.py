"""What a script's tool calls may hold on the host: one call's arguments, and a session's calls in flight.

A frame from the container is capped in bytes and in values before it is parsed
(`sandbox._supervisor.wire`: 16 MiB, 150,000 values, so 16 MiB of ``[{}, {}, …]`` never become 5.6
million objects), but the frame's budget is not what one call may carry: its arguments are then
measured as parsed — what the bridge would hash, validate and serialise into the MCP request, and
the server would parse again — before validation and before anything reaches a server:

- ``nodes``: every value counts (objects, arrays, strings, numbers, booleans, nulls);
- ``depth``: nesting of the arguments object;
- ``bytes``: the size of the arguments as UTF-8 JSON.

`measure` refuses a call over any of them, walking at most ``nodes`` values (it stops at the first
limit crossed, without building anything in proportion to the input). `InFlight` then bounds the
sum over all calls of one session that are not finished yet, so many calls at once cannot add up
to what one may not carry. Unknown properties are not refused here: the tool's schema decides that
(``additionalProperties: false``), when the bridge validates.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sandbox._supervisor.limits import MAX_CALL_DEPTH, MAX_CALL_VALUES, refused_argument, too_deep, too_many_values
from tool_tree.sendable import unsendable

MIB = 1024 * 1024


@dataclass(frozen=True)
class CallLimits:
    """Per call and per session (in flight) bounds on tool-call arguments."""

    bytes: int = 8 * MIB
    nodes: int = MAX_CALL_VALUES
    depth: int = MAX_CALL_DEPTH
    in_flight_bytes: int = 16 * MIB
    in_flight_nodes: int = 200_000


DEFAULT_LIMITS = CallLimits()
SMALL = CallLimits(bytes=256 * 1024, nodes=2_000)
"""What is cheap enough to handle on an event loop that many sessions share (JSON work of well under a ms)."""


class ArgumentsRefused(Exception):
    """The arguments exceed a limit; ``code`` and ``message`` go back to the script."""

    def __init__(self, message: str, code: str = "arguments_too_large") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class CallSize:
    """What one call's arguments hold: values, and bytes as UTF-8 JSON."""

    nodes: int
    bytes: int


def measure(arguments: dict[str, Any], limits: CallLimits = DEFAULT_LIMITS) -> CallSize:
    """The size of ``arguments`` (a parsed JSON object), refused past the per-call limits.

    Raises:
        ArgumentsRefused: too many values, too deep, too many bytes, or not encodable as UTF-8 JSON
            (a lone surrogate, a value that is not JSON).
    """
    nodes = 1
    chars = 0  # characters of strings and keys: a lower bound of the bytes, known before encoding
    containers: list[tuple[dict[str, Any] | list[Any] | tuple[Any, ...], int]] = [(arguments, 1)]
    while containers and chars <= limits.bytes:
        container, depth = containers.pop()
        if depth > limits.depth:
            raise ArgumentsRefused(refused_argument(arguments, limits.depth) or too_deep(limits.depth))
        nodes += len(container)  # counted before looking at them: nothing is built per item of a huge array
        if nodes > limits.nodes:
            raise ArgumentsRefused(too_many_values(limits.nodes))
        if isinstance(container, dict):
            chars += sum(len(str(k)) for k in container)
            items: Iterable[Any] = container.values()
        else:
            items = container
        for item in items:
            if isinstance(item, str):
                chars += len(item)
            elif isinstance(item, dict | list | tuple):
                containers.append((item, depth + 1))
    if chars <= limits.bytes:
        try:
            size = len(json.dumps(arguments, ensure_ascii=False).encode("utf-8"))
        except (ValueError, RecursionError):
            # A whole number of too many digits is named (before: said to be a lone surrogate)
            reason = unsendable(arguments) or "the arguments cannot be encoded as UTF-8 JSON (a lone surrogate?)"
            raise ArgumentsRefused(reason, "invalid_arguments") from None
        except TypeError as e:
            raise ArgumentsRefused(f"the arguments are not JSON: {e}", "invalid_arguments") from None
    else:
        size = chars
    if size > limits.bytes:
        raise ArgumentsRefused(f"the arguments are over {limits.bytes:,} bytes as JSON; send less per call")
    return CallSize(nodes=nodes, bytes=size)


class InFlight:
    """The arguments held by one session's unfinished calls, bounded in sum. Thread-safe."""

    def __init__(self, limits: CallLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self.bytes = 0
        self.nodes = 0
        self._lock = threading.Lock()

    def reserve(self, size: CallSize) -> None:
        """Count a call as in flight until `release`.

        Raises:
            ArgumentsRefused: the session's calls in flight would then hold more than allowed.
        """
        with self._lock:
            if self.bytes + size.bytes > self.limits.in_flight_bytes or (
                self.nodes + size.nodes > self.limits.in_flight_nodes
            ):
                raise ArgumentsRefused(
                    f"this session's unfinished tool calls already hold {self.bytes:,} bytes and "
                    f"{self.nodes:,} values of arguments (at most {self.limits.in_flight_bytes:,} bytes and "
                    f"{self.limits.in_flight_nodes:,} values together); wait for some to finish",
                    "too_much_in_flight",
                )
            self.bytes += size.bytes
            self.nodes += size.nodes

    def release(self, size: CallSize) -> None:
        with self._lock:
            self.bytes -= size.bytes
            self.nodes -= size.nodes


def is_small(value: dict[str, Any]) -> bool:
    """Whether ``value`` is within `SMALL` (and encodable), found out in at most `SMALL`.nodes steps."""
    try:
        measure(value, SMALL)
    except ArgumentsRefused:
        return False
    return True
