"""What a script's tool calls may hold on the host: one call's arguments, and a session's calls in flight.

A frame from the container is capped in bytes and in values before it is parsed
(`sandbox._supervisor.wire`: 16 MiB, 150,000 values, so 16 MiB of ``[{}, {}, …]`` never become 5.6
million objects), but the frame's budget is not what one call may carry: its arguments are then
measured as parsed — what the bridge would hash, validate and serialise into the MCP request, and
the server would parse again — before validation and before anything reaches a server:

- ``nodes``: every value counts (objects, arrays, strings, numbers, booleans, nulls);
- ``depth``: nesting of the arguments object;
- ``bytes``: the size of the arguments as UTF-8 JSON.

The encoding that counts the bytes refuses NaN and the infinities, so it also finds out whether the arguments hold
anything `tool_tree.sendable.unsendable` refuses (`CallSize.sendable`): the bridge then has the pool send them
without a second pass over them (before, a 20,000-row argument was encoded and walked again on its way to the server).
NaN and the infinities are not refused here: the pool refuses them after validation, naming the argument. It sorts
the keys, so the same bytes give the digest of the audit line (`CallSize.digest`).

A script's call is measured once, by its session on the channel's reader (`sandbox.calls`), which hands the size to
the bridge with the call (`MEASURED`): before, the bridge measured the arguments again and encoded them a third time
for their digest.

`measure` refuses a call over any of them, walking at most ``nodes`` values (it stops at the first
limit crossed, without building anything in proportion to the input). `InFlight` then bounds the
sum over all calls of one session that are not finished yet, so many calls at once cannot add up
to what one may not carry. Unknown properties are not refused here: the tool's schema decides that
(``additionalProperties: false``), when the bridge validates.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sandbox._supervisor.limits import MAX_CALL_DEPTH, MAX_CALL_VALUES, refused_argument, too_deep, too_many_values
from tool_tree.sendable import MAX_ARGUMENT_DEPTH, encoder_refuses_long_numbers, unsendable

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
    sendable: bool = field(default=False, compare=False)
    """Whether the arguments surely hold nothing `tool_tree.sendable.unsendable` refuses, found out by the encoding
    that counted their bytes (no NaN nor infinity, no whole number past the limit, nested within it); False: not known
    (NaN, or a process reading longer numbers), to be checked as any caller's are."""
    digest: str = field(default="", compare=False)
    """The first 16 hex digits of the SHA-256 of the arguments as UTF-8 JSON with sorted keys (an audit line's
    ``args_sha256``); "" when they were not encoded (over the bytes already by their strings)."""
    limits: CallLimits | None = field(default=None, compare=False)
    """The limits they were measured within."""

    def within(self, limits: CallLimits) -> bool:
        """Whether these arguments are within ``limits``' values and bytes (their depth was measured within their own
        `limits`)."""
        return self.nodes <= limits.nodes and self.bytes <= limits.bytes


class Measured(NamedTuple):
    """A call's arguments (the very object) and their size, as its session measured them."""

    arguments: dict[str, Any]
    size: CallSize


MEASURED: ContextVar[Measured | None] = ContextVar("sandbox_measured_arguments", default=None)
"""The arguments of the script's call being served and their size (`sandbox.calls.CallServer` sets it for each call,
carried with it into the bridge's tasks and threads): the bridge takes the size of those arguments from it instead of
measuring them again (`carried_size`)."""


def carried_size(arguments: dict[str, Any], limits: CallLimits = DEFAULT_LIMITS) -> CallSize | None:
    """The size of ``arguments`` as `MEASURED` carries it, when it holds these very arguments measured within
    ``limits``; else None."""
    carried = MEASURED.get()
    if carried is not None and carried.arguments is arguments and carried.size.limits == limits:
        return carried.size
    return None


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
    sendable = False
    digest = ""
    if chars <= limits.bytes:
        try:
            size, sendable, digest = _encoded(arguments)
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
    sendable = sendable and limits.depth <= MAX_ARGUMENT_DEPTH and encoder_refuses_long_numbers()
    return CallSize(nodes=nodes, bytes=size, sendable=sendable, digest=digest, limits=limits)


def _encoded(arguments: dict[str, Any]) -> tuple[int, bool, str]:
    """The bytes of ``arguments`` as UTF-8 JSON (keys sorted), whether they were encoded without NaN or infinity (one
    pass when they hold neither; a value that fails both ways is refused by the caller as before), and their digest.

    Raises:
        ValueError, RecursionError, TypeError: as `json.dumps` (and `str.encode`) raise them, NaN allowed."""
    sendable = True
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False, sort_keys=True)
    except ValueError:  # NaN or infinity, refused later naming the argument; or what fails again just below
        text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        sendable = False
    data = text.encode("utf-8")
    return len(data), sendable, hashlib.sha256(data).hexdigest()[:16]


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
