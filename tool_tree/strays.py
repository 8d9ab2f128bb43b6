"""Processes a stdio server started that left its process group: found by a mark in their environment, ended.

A stdio server runs in a process group of its own, and what is left of the group is ended with the server
(`tool_tree.stdio`). A process that calls ``setsid`` (a daemon, a helper started with ``setsid``, a double fork)
leaves that group and, before, ran on after the server ended and after tooltree exited. So each stdio server
starts with ``TOOLTREE_SERVER_MARK=<random>`` in its environment, which every process it starts inherits unless
it is given an environment of its own; once the server has ended, each process whose environment (as it was
when the process started) holds that exact entry is sent SIGTERM, then SIGKILL if it is still running 2 s
later.

What this reaches: processes this user may signal, on Linux (``/proc``); each is held through a pidfd from the
moment its environment is read, so a pid reused meanwhile is never signalled. Out of reach: a process started
with an environment without the mark (``env -i``), and any process on a system without ``/proc``.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import time
from contextlib import suppress

MARK_ENV = "TOOLTREE_SERVER_MARK"
"""The environment variable whose value marks the processes of one start of one stdio server."""

GRACE_SECONDS = 2.0
"""How long a marked process has to end after SIGTERM before SIGKILL."""

MAX_ENVIRON_BYTES = 4 * 1024 * 1024
"""The most of one process's environment read (Linux holds arguments and environment to a quarter of the stack
limit; 4 MiB covers the default 8 MiB stack)."""


def new_mark() -> str:
    """A mark for one start of one server: 128 random bits, known to this process and the server's own."""
    return secrets.token_hex(16)


def end_marked(mark: str, *, grace: float = GRACE_SECONDS) -> int:
    """End every process whose environment holds ``MARK_ENV=mark`` (never this process): SIGTERM, then SIGKILL to
    those still running ``grace`` seconds later. Returns how many were found. Blocking: call it off the event loop.
    """
    if not hasattr(os, "pidfd_open") or not os.path.isdir("/proc"):
        return 0
    entry = f"{MARK_ENV}={mark}".encode()
    found: list[int] = []
    try:
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid() and (fd := _marked(int(name), entry)) is not None:
                found.append(fd)
        if not found:
            return 0
        running = _signal(found, signal.SIGTERM)
        running = _still_running(running, grace)
        _signal(running, signal.SIGKILL)
        _still_running(running, grace)  # gone from the process table's point of view once SIGKILL is taken
        return len(found)
    finally:
        for fd in found:
            os.close(fd)


def _marked(pid: int, entry: bytes) -> int | None:
    """A pidfd of ``pid`` when its environment holds ``entry``, else None. The pidfd is opened first: the
    environment read after it is the same process's, or nothing (a process that ended has none)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone, or not ours to see
        return None
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read(MAX_ENVIRON_BYTES)
    except OSError:  # another user's process, or it ended
        os.close(fd)
        return None
    if entry in environ.split(b"\0"):
        return fd
    os.close(fd)
    return None


def _signal(fds: list[int], signum: int) -> list[int]:
    """Send ``signum`` through each pidfd; the pidfds of the processes it reached."""
    reached = []
    for fd in fds:
        with suppress(OSError):  # ended meanwhile, or not ours to signal
            signal.pidfd_send_signal(fd, signum)
            reached.append(fd)
    return reached


def _still_running(fds: list[int], within: float) -> list[int]:
    """Wait up to ``within`` seconds for the processes to end (a pidfd is readable once its process has ended);
    the pidfds of those still running."""
    poll = select.poll()
    for fd in fds:
        poll.register(fd, select.POLLIN)
    running = set(fds)
    deadline = time.monotonic() + within
    while running and (left := deadline - time.monotonic()) > 0:
        for fd, _ in poll.poll(left * 1000):
            running.discard(fd)
            poll.unregister(fd)
    return [fd for fd in fds if fd in running]
