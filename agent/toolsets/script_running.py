"""What the script `CodeToolset` runs now is doing, for its user while it runs (`tooltree agent` says it on a
terminal, `tooltree_cli.agent_live`): how long it has run, the tool calls it waits on and the last line it printed,
as `tooltree serve`'s progress says them (`sandbox.Sandbox.calls_waiting`, ``last_printed``; `sandbox.calls.WAIT_SAID`).
Before, a run showed nothing while a script ran, as if it hung. Both say it in the words of `running_said`, one sentence
built in one place (before, serve's progress joined its own copy of it)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sandbox.calls import WAIT_SAID

if TYPE_CHECKING:
    from sandbox import Sandbox


def running_said(seconds: float, waiting: str | None, printed: str | None) -> str:
    """``running for 12 s; waiting on crm.search_leads for 10 s; last printed: fetching 500 leads``: a script that has
    run ``seconds``, the tool calls it waits on (`sandbox.calls.Waiting.said`; None: none said) and the last line it
    printed (None or "": none yet), as `tooltree serve`'s progress and `tooltree agent`'s lines say it."""
    parts = [f"running for {seconds:.0f} s", waiting, f"last printed: {printed}" if printed else None]
    return "; ".join(part for part in parts if part)


class RunningScript:
    """The script running now (`running`), and what it does (`said`), from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now: tuple[float, Sandbox] | None = None

    @contextlib.contextmanager
    def running(self, sandbox: Sandbox) -> Iterator[None]:
        """While a script runs in ``sandbox``."""
        with self._lock:
            self._now = (time.monotonic(), sandbox)
        try:
            yield
        finally:
            with self._lock:
                self._now = None

    def said(self, at_least: float = 0.0) -> str | None:
        """``running for 12 s; waiting on crm.search_leads for 10 s; last printed: fetching 500 leads``; None when no
        script runs or it has run less than ``at_least`` seconds. The names and the line are cleaned and cut by the
        sandbox (`sandbox.results.ledger_name`, `sandbox.streamed.StreamedOutput.last_line`)."""
        with self._lock:
            now = self._now
        if now is None or (seconds := time.monotonic() - now[0]) < at_least:
            return None
        sandbox = now[1]
        waiting, printed = sandbox.calls_waiting(at_least=WAIT_SAID), sandbox.last_printed()
        return running_said(seconds, waiting.said() if waiting is not None else None, printed)
