"""The log records every `tooltree` command writes to stderr: cleaned, bounded, and a server's flood thinned.

Warnings name what servers sent: a tool's name, a schema's ``$ref``, an error. Before, the CLI configured no
handler and Python's handler of last resort wrote them raw, so a server's escape sequences reached the terminal
(an OSC 52 clipboard write, a window title, a cleared line: ``not checking pattern '(a)\\1' of
hostile.evil<ESC>]52;c;…``), or the log of the MCP client running `tooltree serve`. And the SDK logs a full
traceback for every notification it cannot read: a server sending a malformed ``notifications/progress``
without end got 4,000 tracebacks into stderr in 20 s (6 MB), without end.

`install` puts `CleanHandler` in that handler's place (`logging.lastResort`): it is used exactly when Python's
was (a record no other handler took, at ``WARNING`` and above), so what appeared before still appears, and a
library that silences itself with a ``NullHandler`` stays silent. Each record's final text, traceback
included, is cleaned (`tool_tree.text.clean`: no escape sequence, control, bidi or tag character), each line
after the first is indented (no server's line break starts a line that passes for one of tooltree's), and a
record is at most `RECORD_CHARS` characters. `Repeats` lets the first of the SDK's per-message records
(`THINNED`) through as one line, without its traceback, then at most one a minute saying how many it dropped.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

from tool_tree.text import clean

RECORD_CHARS = 8_000
"""The most of one record written (its start and end kept): a warning may quote a server's 8 MB ``$ref``."""
INDENT = "    "
THINNED = frozenset(
    {
        "Failed to validate notification: %s",  # mcp.client.session, with a traceback, for each one
        "notification queue for %r is full; dropped the oldest event",
    }
)
"""The SDK's records that a server repeats at will, one per message it sends: thinned by `Repeats`."""
REPEAT_SECONDS = 60.0
"""How often a thinned kind of record is written again, with how many of it were dropped since."""
MAX_KINDS = 64
"""Kinds of thinned records told apart (by logger, message and arguments); past them, the rest share one."""


class CleanFormatter(logging.Formatter):
    """Python's plain format (``%(message)s`` and the traceback), cleaned, indented after the first line and cut; a
    warning starts ``warning:``, as the commands' own warnings do (before: only they did, so a warning read from
    another client's config file, ``.mcp.json:1: mcpServers.docs.arsg: not a key tooltree reads; ignored``, stood
    bare among ``warning: …`` lines)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return shown(f"warning: {text}" if record.levelno == logging.WARNING else text)


def shown(text: str) -> str:
    """``text`` as a log record may show it: at most `RECORD_CHARS` characters (its middle left out), cleaned,
    each line after the first indented by at least `INDENT` (the indented lines of a traceback stay as they
    are)."""
    if len(text) > RECORD_CHARS:
        half = RECORD_CHARS // 2
        text = f"{text[:half]}\n[… {len(text) - 2 * half:,} characters left out …]\n{text[-half:]}"
    first, *rest = clean(text).rstrip().split("\n")
    return "\n".join([first, *(line if line.startswith(INDENT) else INDENT + line for line in rest)])


class Repeats(logging.Filter):
    """Thins the records of `THINNED`: the first of each kind goes through as one line (its traceback's last
    line kept in brackets), then at most one per `REPEAT_SECONDS`, saying how many were dropped since; every
    other record goes through as it is."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, str, str], tuple[float, int]] = {}  # kind: when last written, dropped since

    def filter(self, record: logging.LogRecord) -> bool:
        if not isinstance(record.msg, str) or record.msg not in THINNED:
            return True
        kind = (record.name, record.msg, repr(record.args)[:200])
        now = self._clock()
        with self._lock:
            if kind not in self._kinds and len(self._kinds) >= MAX_KINDS:
                kind = ("", "", "")
            last = self._kinds.get(kind)
            if last is not None and now - last[0] < REPEAT_SECONDS:
                self._kinds[kind] = (last[0], last[1] + 1)
                return False
            self._kinds[kind] = (now, 0)
        why = _last_line(record)
        if last is None:
            more = f"more like it are counted, and shown at most once in {REPEAT_SECONDS:.0f} s"
        else:
            more = f"{last[1]:,} more like it dropped in the last {now - last[0]:.0f} s"
        record.msg = f"{record.getMessage()}{f' [{why}]' if why else ''} ({more})"
        record.args = ()
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _last_line(record: logging.LogRecord) -> str:
    """The exception of a record's traceback, as its traceback's last line would name it (first line only)."""
    if not record.exc_info or record.exc_info[1] is None:
        return ""
    error = record.exc_info[1]
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__


class CleanHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record comes (as Python's handler of last resort does), at
    ``WARNING`` and above, with `CleanFormatter` and `Repeats`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(CleanFormatter())
        self.addFilter(Repeats(clock))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # as logging's own handlers do: say so on stderr, never raise into the caller
            self.handleError(record)


def install() -> None:
    """Make `CleanHandler` the handler of last resort (once: later calls keep the one installed)."""
    if not isinstance(logging.lastResort, CleanHandler):
        logging.lastResort = CleanHandler()


def upstream_failures(shown: bool) -> None:
    """Whether the warnings of `tool_tree.pool.upstream` (a server that could not start or ended, with its stderr's
    tail) are written: by `tooltree serve`, whose stderr is the log its MCP client keeps and the only place a user
    sees them; not by `exec` and `agent`, whose script errors and live view already say the same."""
    logging.getLogger("tool_tree.upstream").setLevel(logging.NOTSET if shown else logging.ERROR)
