"""The settings a `tool_tree.pool.ServerPool` (and a `tool_tree.background_pool.BackgroundPool`) is given, and the
checks of them and of a call's arguments: each refuses a wrong one at once, naming it, before anything waits.

Also the listeners a pool tells of changes (`ChangeListener`, `ResourceListener`), and how one is called
(`told_of`): with the kind of list that changed when it takes one.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tool_tree.config import Config, ServerConfig
from tool_tree.listeners import refuse_async
from tool_tree.starts import StartGate, default_start_jobs
from tool_tree.starts import start_jobs as configured_start_jobs

logger = logging.getLogger("tool_tree.pool")  # the pool's log, as before its parts had modules of their own

DEFAULT_CONCURRENCY = 16


def _pool_settings(
    servers: Sequence[ServerConfig] | Config, concurrency: int, start_jobs: int | None, source: str | None
) -> tuple[list[ServerConfig], int, str | None]:
    """The servers, the start limit and the config file a pool is given, checked; a `Config` gives its enabled
    servers, its ``pool:`` section's ``start_jobs`` and (unless ``source`` is given) its file.

    Raises:
        TypeError: ``servers`` is not a Config or a sequence of `ServerConfig`, or a number is not a whole number.
        ValueError: ``concurrency`` or ``start_jobs`` is less than 1.
        ConfigError: the Config's ``pool:`` section is invalid.
    """
    if source is not None and not isinstance(source, str):
        raise TypeError(f"source: expected the config file's path as a string (or None), got {type(source).__name__}")
    for name, value in (("concurrency", concurrency), ("start_jobs", start_jobs)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected a whole number, at least 1, got {value!r}")
        if value < 1:
            raise ValueError(f"{name}: expected at least 1, got {value}")
    if isinstance(servers, Config):
        source = servers.file if source is None else source
        return list(servers.offered_servers), configured_start_jobs(servers, start_jobs), source
    if isinstance(servers, str | bytes | Mapping) or not isinstance(servers, Iterable):
        raise TypeError(
            f"servers: expected a Config or a list of ServerConfig (config.servers), got {type(servers).__name__}"
        )
    listed = list(servers)
    for s in listed:
        if not isinstance(s, ServerConfig):
            raise TypeError(
                f"servers: expected a Config or a list of ServerConfig (config.servers), got a list holding "
                f"{type(s).__name__} {s!r:.60}"
            )
    return listed, start_jobs if start_jobs is not None else default_start_jobs(), source


def checked_gate(gate: object, start_jobs: int | None) -> None:
    """Refuse a ``start_gate`` that is not a `StartGate`, or one given with ``start_jobs``.

    Raises:
        TypeError: ``gate`` is neither None nor a `StartGate`.
        ValueError: both ``gate`` and ``start_jobs`` are given.
    """
    if gate is None:
        return
    if not isinstance(gate, StartGate):
        raise TypeError(f"start_gate: expected a StartGate or None, got {type(gate).__name__}")
    if start_jobs is not None:
        raise ValueError("give start_jobs or start_gate, not both (a shared gate has its own limit: StartGate(jobs))")


ResourceListener = Callable[[str, str], None]
"""An ``on_resource_updated`` listener: called with a server's name and the URI of a resource of it subscribed to."""
ChangeListener = Callable[..., None]
"""An ``on_tools_changed`` listener: called with a server's name, and with ``kind=`` the list that changed
(``"tools"``, ``"prompts"`` or ``"resources"``) when it has a parameter named ``kind`` (`told_of`)."""


def checked_listener(on_tools_changed: object) -> ChangeListener | None:
    """``on_tools_changed`` as given, once it is callable or None.

    Raises:
        TypeError: it is neither, or it is an ``async def`` function (`refuse_async`).
    """
    if on_tools_changed is not None and not callable(on_tools_changed):
        raise TypeError(f"on_tools_changed: expected a callable or None, got {type(on_tools_changed).__name__}")
    refuse_async(on_tools_changed, "on_tools_changed")
    return on_tools_changed


def takes_kind(listener: ChangeListener) -> bool:
    """Whether ``listener`` has a parameter named ``kind`` that a keyword can give (one whose signature cannot be
    read, such as a builtin's, has none)."""
    try:
        parameter = inspect.signature(listener).parameters.get("kind")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)


def told_of(listener: ChangeListener, server: str) -> Callable[[str], None]:
    """What a session of ``server`` calls with the kind of each list its server says changed
    (`tool_tree.changes.Changes.listener`): ``listener`` with the server's name, and the kind when it takes one.
    A listener without ``kind`` (all there were before the kind was told) is called as it always was."""
    with_kind = takes_kind(listener)

    def told(kind: str) -> None:
        try:
            listener(server, kind=kind) if with_kind else listener(server)
        except Exception:  # the listener's fault: the session goes on (raised in the session's read stream, it ended
            # the session, and the call in flight was said to have died with its server, which was backed off)
            logger.exception("the on_tools_changed listener raised when told that %r changed its %s", server, kind)

    return told


def _check_call(tool: str, arguments: dict[str, Any], timeout: float | None) -> None:
    """Check a call's arguments before anything waits, so a mistake is reported where it was made.

    Raises:
        TypeError: ``tool`` is not a string, ``arguments`` not a dict, or ``timeout`` not a number.
        ValueError: ``timeout`` is not a positive, finite number of seconds.
    """
    if not isinstance(tool, str):
        raise TypeError(f"tool: expected the tool's name as a string, got {type(tool).__name__} {tool!r:.60}")
    if not isinstance(arguments, dict):
        raise TypeError(
            f"arguments: expected a dict of the tool's arguments by name (e.g. {{'limit': 3}}; {{}} for none), "
            f"got {type(arguments).__name__} {arguments!r:.60}"
        )
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout: expected a positive number of seconds (or None), got {type(timeout).__name__}")
    if not 0 < timeout < math.inf:
        raise ValueError(f"timeout: expected a positive number of seconds (or None), got {timeout!r}")
