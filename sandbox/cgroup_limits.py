"""The limits a container's own cgroup holds, checked against the configuration before any user code runs.

`check_hardening` reads the engine's inspection of a container, which shows the memory, swap, pids and CPU limits
asked for whether or not the kernel applies them: rootless Docker on cgroup v1 runs containers without cgroups, and
the engine's ``GET /info`` (`engine_problem`) is its own word about itself. So the supervisor reads the limits
where the kernel keeps them (`sandbox._supervisor.cgroup`) and reports them in its ready status, and the session
starts only when each is set and no higher than the configuration's. A stricter limit passes (the kernel rounds
memory down to a page).

Under gVisor the Sentry shows the container no cgroup files; there the host's cgroup of the whole sandbox bounds it
(SECURITY.md, "Under gVisor, exceeding the memory limit ends the whole sandbox"), and this check is not made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox.config import SandboxConfig
from sandbox.hardening import host_pids_limit

_NAMES = {"memory": "memory", "memory_swap": "memory+swap", "pids": "pids", "cpus": "CPU"}


def expected_limits(config: SandboxConfig) -> dict[str, float]:
    """What the container's cgroup must hold at most, by `sandbox._supervisor.cgroup.LIMITS` key (under runc)."""
    return {
        "memory": config.memory_bytes,
        "memory_swap": config.memory_bytes,  # no swap
        "pids": host_pids_limit(config, gvisor=False),
        "cpus": config.cpus,
    }


def check_cgroup_limits(status: Mapping[str, Any], config: SandboxConfig, *, gvisor: bool = False) -> list[str]:
    """Every limit of ``config`` that the supervisor's report of its cgroup (``status["cgroup"]``) does not show
    applied. Empty: the container may run. ``gvisor``: `engine_runs_gvisor`'s answer (no check there)."""
    if gvisor:
        return []
    report = status.get("cgroup")
    if not isinstance(report, Mapping) or "error" in report:
        why = report.get("error") if isinstance(report, Mapping) else "no report"
        return [
            f"the container's cgroup limits could not be read ({str(why)[:200]}), so the engine's word alone would "
            "say they are applied"
        ]
    v: list[str] = []
    for key, want in expected_limits(config).items():
        got = report.get(key)
        name = _NAMES[key]
        if got is None:
            v.append(f"its cgroup sets no {name} limit, though {_shown(key, want)} was asked for: not applied")
        elif isinstance(got, bool) or not isinstance(got, int | float):
            v.append(f"its cgroup's {name} limit was reported as {got!r:.80}")
        elif got > want * (1 + 1e-6):
            v.append(f"its cgroup's {name} limit is {_shown(key, got)}, above the {_shown(key, want)} asked for")
    return v


def _shown(key: str, value: float) -> str:
    return f"{value:g}" if key == "cpus" else f"{int(value):,}" + (" bytes" if key.startswith("memory") else "")
