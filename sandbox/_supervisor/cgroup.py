"""The container's resource limits as its own cgroup holds them, read by the supervisor before any user code runs.

The engine's inspection of a container shows the limits it was asked for, whether or not they are applied: rootless
Docker on cgroup v1 runs containers without cgroups, and an engine or runtime can drop a limit on the way. What the
kernel enforces is what the container's cgroup says, so the supervisor reads it there and reports it with its
status; the host checks it against the configuration (`sandbox.in_force`).

The container has a cgroup namespace of its own (``CgroupnsMode: private``), so its cgroup is the root of the
hierarchy it sees; with the host's namespace it is the path ``/proc/self/cgroup`` names. A limit set on any cgroup
from there up to the root it sees holds, so each limit reported is the lowest found on the way. Under gVisor the
Sentry shows no cgroup files: the host does not ask there.

Standard library only: this runs in the container; the host imports the same module.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ROOT = "/sys/fs/cgroup"
UNLIMITED_FROM = 1 << 62
"""A value at least this large means no limit (cgroup v1 writes its "none" as 9223372036854771712)."""

LIMITS = ("memory", "memory_swap", "pids", "cpus")
"""The keys of a report: bytes of memory, bytes of memory and swap together, processes, CPUs (None: unlimited)."""


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read(256).strip()


def _number(text: str) -> int | None:
    """A limit file's value: None for no limit ("max", -1, or v1's largest values)."""
    if text == "max":
        return None
    value = int(text)
    return None if value < 0 or value >= UNLIMITED_FROM else value


def own_paths(proc_cgroup: str) -> dict[str, str]:
    """The cgroup of each controller (``""`` for cgroup v2's unified hierarchy) from ``/proc/self/cgroup``."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                paths.setdefault(controller, parts[2])
    return paths


def _chain(mount: str, path: str) -> list[str]:
    """The folders from this process's cgroup up to the mount, its own first.

    Its own folder is its path under the mount when that is there (the host's namespace), else the mount itself (a
    namespace of its own, or a v1 mount of the container's cgroup alone). A limit holds from any of them."""
    inner = os.path.normpath(os.path.join(mount, path.lstrip("/")))
    folder = inner if path not in ("", "/") and os.path.isdir(inner) else mount
    chain = [folder]
    while folder != mount and len(chain) < 64:
        folder = os.path.dirname(folder)
        chain.append(folder)
    return chain


def _least(chain: list[str], read: Callable[[str], float | None]) -> float | None:
    """The lowest limit ``read`` finds in the folders of ``chain`` (None: none sets one; a missing file sets none)."""
    least: float | None = None
    for folder in chain:
        try:
            value = read(folder)
        except FileNotFoundError:
            continue
        if value is not None and (least is None or value < least):
            least = value
    return least


def _file(name: str) -> Callable[[str], float | None]:
    return lambda folder: _number(_read(os.path.join(folder, name)))


def _cpu_v2(folder: str) -> float | None:
    quota, _, period = _read(os.path.join(folder, "cpu.max")).partition(" ")
    return _cpus(_number(quota), _number(period or "0"))


def _cpu_v1(folder: str) -> float | None:
    quota = _number(_read(os.path.join(folder, "cpu.cfs_quota_us")))
    return _cpus(quota, _number(_read(os.path.join(folder, "cpu.cfs_period_us"))))


def _cpus(quota: int | None, period: int | None) -> float | None:
    return None if quota is None or not period else quota / period


def read_limits(root: str = ROOT, proc_cgroup: str = "/proc/self/cgroup") -> dict[str, Any]:
    """``{"version": 1 | 2, "memory": …, "memory_swap": …, "pids": …, "cpus": …}`` (None: no limit), each the lowest
    set on the way from the process's cgroup up to the root it sees; or ``{"error": reason}``."""
    try:
        paths = own_paths(_read_all(proc_cgroup))
        if os.path.isfile(os.path.join(root, "cgroup.controllers")):
            chain = _chain(root, paths.get("", "/"))
            memory = _least(chain, _file("memory.max"))
            swap = _least(chain, _file("memory.swap.max"))
            return {
                "version": 2,
                "memory": memory,
                "memory_swap": None if memory is None or swap is None else memory + swap,
                "pids": _least(chain, _file("pids.max")),
                "cpus": _least(chain, _cpu_v2),
            }
        mounts = {name: os.path.join(root, name) for name in ("memory", "pids", "cpu")}
        for mount in mounts.values():
            if not os.path.isdir(mount):
                raise FileNotFoundError(f"no cgroup v2 hierarchy and no cgroup v1 folder {mount}")
        memory_chain = _chain(mounts["memory"], paths.get("memory", "/"))
        return {
            "version": 1,
            "memory": _least(memory_chain, _file("memory.limit_in_bytes")),
            "memory_swap": _least(memory_chain, _file("memory.memsw.limit_in_bytes")),
            "pids": _least(_chain(mounts["pids"], paths.get("pids", "/")), _file("pids.max")),
            "cpus": _least(_chain(mounts["cpu"], paths.get("cpu", "/")), _cpu_v1),
        }
    except (OSError, ValueError) as e:
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def _read_all(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read(64 * 1024)
