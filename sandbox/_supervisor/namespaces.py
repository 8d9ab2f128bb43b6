"""The container's network and mounts as its own process sees them, read by the supervisor before any user code runs.

The engine's inspection says the container has no network and a read-only root; the kernel's view from inside says
whether the runtime made it so. The supervisor reports its network interfaces (``/proc/net/dev``: the loopback alone
in a network namespace of its own) and the options of the mounts in effect at the paths that matter
(``/proc/self/mounts``, the last entry at a path being the one in effect); the host checks them (`sandbox.in_force`).
gVisor's Sentry shows both too.

Standard library only: this runs in the container; the host imports the same module.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_ENTRIES = 256
"""Interfaces reported at most (a host's namespace may hold many; a few are enough to say so)."""


def interfaces(text: str) -> list[str]:
    """The interface names of a ``/proc/net/dev`` text (its first two lines are headings)."""
    names = [line.split(":", 1)[0].strip() for line in text.splitlines()[2:] if ":" in line]
    return sorted(names)[:MAX_ENTRIES]


def _unescape(path: str) -> str:
    """A mount point as ``/proc/self/mounts`` writes it, with ``\\040`` for a space and the like, as a path."""
    return path.encode("latin-1").decode("unicode_escape") if "\\" in path else path


def mount_options(text: str, paths: Iterable[str]) -> dict[str, list[str]]:
    """The options of the mount in effect at each of ``paths`` (the last at that point) in a ``/proc/self/mounts``
    text: ``{path: [option, ...]}``; a path with no mount of its own is left out."""
    wanted = set(paths)
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and (point := _unescape(fields[1])) in wanted:
            found[point] = fields[3].split(",")[:64]
    return found


def report(paths: Iterable[str]) -> dict[str, Any]:
    """``{"interfaces": [...], "mounts": {path: [option, ...]}}``, or ``{"error": reason}``."""
    try:
        with open("/proc/net/dev", encoding="ascii", errors="replace") as f:
            names = interfaces(f.read(1024 * 1024))
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
            mounts = mount_options(f.read(4 * 1024 * 1024), paths)
    except OSError as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    return {"interfaces": names, "mounts": mounts}
