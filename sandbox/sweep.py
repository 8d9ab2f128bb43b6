"""The containers a tooltree process left when it was killed on this host (``kill -9`` while it started a sandbox,
which leaves the container created, or while it copied a tree, which leaves the copy exited), removed by the first
sandbox start of each later process (`sweep_once`), once per engine and owner, without `tooltree sandbox prune`.

A container is removed only when it carries the owner's `OWNER_LABEL` and a `HOST_LABEL` (``HOSTNAME:PID``) naming
this host's name and a process that no longer runs (`made_by_a_dead_process_here`): never one another host sharing
the engine made, one of a running process, or one without both labels. A PID the system has since given to another
process looks alive, so that container stays (safe; `tooltree sandbox prune` removes it). Nor is one that runs: a
tooltree of another PID namespace with this host's name (in a container run with ``--network host``) has PIDs that
look ended here, and the sweep killed its live sessions; one whose tooltree was killed ends on its own (its stdin
closes), and a later sweep removes it.

Volumes stay: the only named volumes a sandbox mounts are tree volumes, named by their content and shared by every
process of that tree, one of which may be about to mount it; `tooltree sandbox prune` removes those no container
mounts.

The sweep runs on a thread of its own: one list call, then one removal per container found. A failure is logged at
debug and dropped, so it never fails or slows a start; a process that exits first leaves the rest to the next.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import weakref

from sandbox._docker import DockerEngine
from sandbox.errors import EngineError, EngineUnavailableError
from sandbox.hardening import HOST_LABEL, OWNER_LABEL
from sandbox.host_folders import alive

logger = logging.getLogger(__name__)

_PID_LIMIT = 1 << 22
"""Linux's largest process ID (``PID_MAX_LIMIT``): a label past it names no process (and ``kill`` would overflow)."""
_sweeps: weakref.WeakKeyDictionary[DockerEngine, dict[str, threading.Thread]] = weakref.WeakKeyDictionary()
_sweeps_lock = threading.Lock()


def made_by_a_dead_process_here(labels: dict[str, str], owner: str) -> bool:
    """Whether a container's ``labels`` say ``owner``'s tooltree process on this host made it and no longer runs."""
    host, _, pid = labels.get(HOST_LABEL, "").rpartition(":")
    if labels.get(OWNER_LABEL) != owner or not host or host != socket.gethostname():
        return False
    if not (pid.isascii() and pid.isdigit()) or not 0 < int(pid) < _PID_LIMIT or int(pid) == os.getpid():
        return False
    return not alive(int(pid))


def sweep(engine: DockerEngine, owner: str) -> int:
    """Remove ``owner``'s containers that processes of this host left when they died (`made_by_a_dead_process_here`):
    how many were removed. One the engine fails to remove is logged at debug and skipped.

    Raises:
        EngineUnavailableError: no engine answers.
        EngineError: the engine failed the listing.
    """
    removed = 0
    for entry in engine.container_entries(f"{OWNER_LABEL}={owner}"):
        if entry.running or not made_by_a_dead_process_here(entry.labels, owner):
            continue
        try:
            engine.remove_container(entry.id)
        except EngineUnavailableError:
            raise
        except EngineError as e:
            logger.debug(
                "could not remove sandbox container %s left by %s: %s", entry.id[:12], entry.labels[HOST_LABEL], e
            )
            continue
        removed += 1
    return removed


def sweep_once(engine: DockerEngine, owner: str) -> None:
    """Start the sweep of ``owner``'s containers on ``engine`` on a thread (`sweep`), unless this process did."""
    with _sweeps_lock:
        started = _sweeps.setdefault(engine, {})
        if owner in started:
            return
        thread = started[owner] = threading.Thread(
            target=_sweep_logged, args=(engine, owner), name="tooltree-sweep", daemon=True
        )
    try:
        thread.start()
    except RuntimeError as e:  # no thread to be had (the process is at its limit, or exiting): the next one sweeps
        logger.debug("the sweep of containers left by ended tooltree processes did not start: %s", e)


def started(engine: DockerEngine, owner: str) -> threading.Thread | None:
    """The thread of this process's sweep of ``owner``'s containers on ``engine``; None before `sweep_once`."""
    with _sweeps_lock:
        return _sweeps.get(engine, {}).get(owner)


def _sweep_logged(engine: DockerEngine, owner: str) -> None:
    try:
        removed = sweep(engine, owner)
    except Exception as e:  # the thread's top: a sweep never disturbs a start, whatever went wrong
        logger.debug("the sweep of containers left by ended tooltree processes failed: %s", e, exc_info=True)
        return
    if removed:
        logger.info("removed %d sandbox container(s) left by ended tooltree processes on this host", removed)
