"""`sigterm_stops_like_ctrl_c`: SIGTERM stops a command's run as Ctrl-C does, for commands that clean up.

``timeout``, ``docker stop`` and a cancelled CI job send SIGTERM, whose default action ends the process at
once: a container whose create request was with the engine is made all the same and left behind, a workspace's
new files are never saved back, a transcript gets no ``run_end``. Inside `sigterm_stops_like_ctrl_c` SIGTERM
raises `Terminated`, a `KeyboardInterrupt`, so the cleanup Ctrl-C runs runs; the command then says
``tooltree: terminated`` and exits `EXIT_TERMINATED`, as a shell reports a command ended by SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

EXIT_TERMINATED = 128 + signal.SIGTERM
"""The exit code of a command SIGTERM stopped (Ctrl-C: 130)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the run is, so that it stops as Ctrl-C stops it."""


@contextlib.contextmanager
def sigterm_stops_like_ctrl_c() -> Iterator[None]:
    """Within it, SIGTERM raises `Terminated`; the previous handler is back after it. Only on the main thread
    (elsewhere, where no handler can be set, it does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def handling(signals: Sequence[int], handler: Callable[[int, Any], None]) -> Iterator[None]:
    """Within it, ``handler`` handles ``signals``; the previous handlers are back after it. Only on the main thread
    (elsewhere, where no handler can be set, it does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
