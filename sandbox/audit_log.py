"""`AuditLog`: the file (or stream) `sandbox.mcp_bridge.McpBridge` writes one JSON line per tool call to.

A line is ASCII JSON, so none of a script's control or bidi characters reaches a terminal showing it. The file is
created readable by its owner alone, and a line a write cut short (a full disk, a kill) is ended before the next. A
line that cannot be written is said once in the log and kept as `AuditLog.error`, after which the bridge makes no
more calls.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import threading
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger("sandbox.mcp_bridge")  # the bridge's log, as before the audit log had a module of its own


def _ends_mid_line(path: str | Path) -> bool:
    """Whether the regular file at ``path`` ends in a line not ended (a write cut short); False for one that cannot
    be read (written to only) and for a stream (a pipe, a terminal)."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode) or f.seek(0, os.SEEK_END) == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False


class AuditLog:
    """One JSON line per tool call, appended to a file (or any text stream). Thread-safe."""

    def __init__(self, target: str | Path | IO[str]) -> None:
        """Raises: SandboxError: the file cannot be opened for appending (a folder, no permission, ...)."""
        from sandbox.errors import SandboxError

        self._lock = threading.Lock()
        self.error: str | None = None
        """Why a line could not be written (the first failure), after which the bridge makes no more calls."""
        self._name = str(target) if isinstance(target, str | Path) else "stream"
        if isinstance(target, str | Path):
            try:
                # Created readable by its owner only: it names every call's tool, session and error.
                fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                self._stream: IO[str] = os.fdopen(fd, "a", encoding="utf-8")
                if _ends_mid_line(target):  # a write cut short (a full disk, a kill) must not swallow the next line
                    self._stream.write("\n")
                    self._stream.flush()
            except IsADirectoryError:
                raise SandboxError(f"audit log {target}: a folder, not a file; give a file to append to") from None
            except OSError as e:
                raise SandboxError(f"audit log {target}: cannot append to it ({e.strerror or e})") from None
            self._owned = True
        else:
            self._stream, self._owned = target, False

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record``: ASCII JSON, so a line shown in a terminal carries none of the script's control or
        bidi characters (names and errors come from it; U+202E and 8-bit controls went out raw)."""
        line = json.dumps(record, ensure_ascii=True, sort_keys=True)
        with self._lock:
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except OSError as e:  # the call ran: its result stands, the calls after it are refused
                if self.error is None:
                    self.error = f"audit log {self._name}: cannot write to it ({e.strerror or e})"
                    logger.error("%s; no more tool calls are made, since they could not be audited", self.error)

    def close(self) -> None:
        """Close the file; lines it could not write were said when they failed (before: the failure was raised again
        here, and `tooltree exec` ended with exit 70, the script's output never printed)."""
        if self._owned:
            with contextlib.suppress(OSError):
                self._stream.close()
