"""Stopping a `generator.generate.generate` run from another thread (`tooltree serve` cancels its
background refresh this way when serving ends)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class GenerateCancelled(Exception):
    """`Cancel` was set: discovery stopped (every server it started is closed) and nothing was written."""


class Cancel:
    """Stops a `generate` run from another thread: `set` cancels its discovery at once.

    It is checked when discovery ends: after that the run writes the whole tree (each changed
    file replaced atomically) and is not stopped halfway.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._hooks: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._lock:
            self._set = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    def is_set(self) -> bool:
        return self._set

    def listening(self) -> bool:
        """Whether a run is in the part that `set` stops (its discovery has a hook on this)."""
        with self._lock:
            return bool(self._hooks)

    def on_set(self, hook: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``hook`` (from the thread that sets it) on `set`; returns the function that unhooks it,
        or None, hooking nothing, when it is set already."""
        with self._lock:
            if self._set:
                return None
            self._hooks.append(hook)

        def unhook() -> None:
            with self._lock:
                self._hooks.remove(hook)

        return unhook

    def check(self) -> None:
        if self._set:
            raise GenerateCancelled("tree generation was cancelled")
