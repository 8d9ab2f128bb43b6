"""Helpers of the security suite: run one probe in a sandbox and read its one-line outcome.

A probe is a Python expression evaluated in the sandbox; its outcome line is ``label: OK``
when it succeeded and ``label: <errno name>`` (``EPERM``, ``ENETUNREACH``, …) or
``label: <exception class>`` when it failed. Tests assert on that line exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sandbox import Sandbox

T = TypeVar("T")

PRELUDE = """\
import ctypes, errno, os, socket, stat, subprocess, sys
def outcome(label, thunk):
    try:
        thunk()
    except OSError as e:
        name = errno.errorcode.get(e.errno) if isinstance(e.errno, int) and e.errno > 0 else None
        print(f"{label}: {name or type(e).__name__}")
    except Exception as e:
        print(f"{label}: {type(e).__name__}")
    else:
        print(f"{label}: OK")
_libc = ctypes.CDLL(None, use_errno=True)
def syscall(number, *args):
    ctypes.set_errno(0)
    result = _libc.syscall(number, *args)
    if number == 56 and result == 0:  # the child of a clone that succeeded: leave, print nothing
        os._exit(0)
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
"""


def probe(sb: Sandbox, label: str, expression: str, *, setup: str = "") -> str:
    """Evaluate ``expression`` in the sandbox; its outcome line (``label: OK`` or ``label: EPERM`` …)."""
    code = f"{PRELUDE}{setup}\noutcome({label!r}, lambda: {expression})\n"
    result = sb.execute(code)
    assert result.error is None, result.traceback or result.error
    return result.stdout.strip()


def run_ok(sb: Sandbox, code: str, *, timeout: float | None = None) -> str:
    """Run ``code`` and return its stdout, failing the test if the script failed."""
    result = sb.execute(code, timeout=timeout)
    assert result.error is None, result.traceback or result.error
    return result.stdout


def _status_bytes(key: str) -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/self/status")


def host_rss_bytes() -> int:
    """This process's resident memory now."""
    return _status_bytes("VmRSS")


def host_peak_growth(action: Callable[[], T]) -> tuple[T, int]:
    """Run ``action``: what it returned, and how far this process's peak resident memory rose meanwhile."""
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # the peak (VmHWM) starts again from now
    before = host_rss_bytes()
    value = action()
    return value, _status_bytes("VmHWM") - before


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))
