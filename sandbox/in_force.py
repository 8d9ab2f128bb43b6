"""What the kernel applies to a container, as its supervisor finds it before any user code runs, checked.

`check_hardening` reads the engine's inspection of a container, which shows the settings asked for whether or not
they are applied: rootless Docker on cgroup v1 runs containers without cgroups, and the engine's ``GET /info``
(`engine_problem`) is its own word about itself. So the supervisor also reports, in its ready status:

- the limits its own cgroup holds (`sandbox._supervisor.cgroup`): the session starts only when the memory, swap,
  pids and CPU limits are each set and no higher than the configuration's (a stricter one passes: the kernel
  rounds memory down to a page);
- the calls tooltree's seccomp profile removes from the engine's default, tried with arguments that do nothing
  (`sandbox._supervisor.seccomp_probe`): each must be refused with ``EPERM``. ``Seccomp: 2`` in its status says a
  filter is in force, not that it is this one;
- its network interfaces and the options of its mounts (`sandbox._supervisor.namespaces`): the loopback alone; the
  root and the tree read-only; ``/tmp`` and the workspace not executable (and, but under gVisor, which does not
  show them, without set-user-id files or devices);
- whether the tree volume it mounts holds a whole copy of the tree (`sandbox._supervisor.tree_state`,
  `tree_incomplete`): the volume of a tree's name may hold a copy cut short.

Under gVisor the first two are not checked: the Sentry shows the container no cgroup files (the host's cgroup of the
whole sandbox bounds it: SECURITY.md, "Under gVisor, exceeding the memory limit ends the whole sandbox") and
answers system calls itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox._supervisor.seccomp_probe import IO_URING_SETUP
from sandbox.config import TREE_MOUNT, WORKSPACE, SandboxConfig
from sandbox.hardening import host_pids_limit
from sandbox.seccomp import REMOVED

EPERM = 1

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


def check_seccomp_probe(status: Mapping[str, Any], *, gvisor: bool = False) -> list[str]:
    """Every call tooltree's seccomp profile removes that the supervisor's probe (``status["seccomp_probe"]``) found
    not refused. Empty: the container may run. ``gvisor``: as for `check_cgroup_limits`."""
    if gvisor:
        return []
    probe = status.get("seccomp_probe")
    if not isinstance(probe, Mapping) or "io_uring_setup" not in probe:
        return [f"the supervisor did not try the calls the seccomp profile removes (io_uring_setup, {IO_URING_SETUP})"]
    return [
        f"{name} is not refused by the seccomp filter in force (errno {errno!r:.20}, not EPERM): "
        "it is not tooltree's profile"
        for name, errno in probe.items()
        if name in REMOVED and errno != EPERM
    ]


def check_view(status: Mapping[str, Any], *, gvisor: bool = False, tree: bool = False) -> list[str]:
    """Every way in which the network and mounts the supervisor sees (``status["view"]``) differ from what was asked
    for. ``tree``: the tree volume is mounted. Empty: the container may run."""
    view = status.get("view")
    if not isinstance(view, Mapping) or "error" in view:
        why = view.get("error") if isinstance(view, Mapping) else "no report"
        return [f"the container's network and mounts could not be read ({str(why)[:200]})"]
    v: list[str] = []
    names = view.get("interfaces")
    if not isinstance(names, list) or [str(n) for n in names] != ["lo"]:
        shown = ", ".join(str(n)[:40] for n in names[:8]) if isinstance(names, list) else repr(names)[:80]
        v.append(f"the container has network interfaces other than the loopback alone ({shown}): it was asked for none")
    mounts = view.get("mounts")
    mounts = mounts if isinstance(mounts, Mapping) else {}
    tmpfs = ["noexec"] if gvisor else ["noexec", "nosuid", "nodev"]
    required = {"/": ["ro"], "/tmp": tmpfs, WORKSPACE: tmpfs, **({TREE_MOUNT: ["ro"]} if tree else {})}
    for path, options in required.items():
        held = mounts.get(path)
        if not isinstance(held, list):
            v.append(f"nothing is mounted at {path} as asked")
        elif missing := [o for o in options if o not in held]:
            v.append(f"{path} is mounted without {', '.join(missing)}")
    return v


def tree_incomplete(status: Mapping[str, Any]) -> str | None:
    """Why the tree the supervisor mounts is not a whole copy (`sandbox._supervisor.tree_state`:
    ``status["tree_complete"]``), or None when it is."""
    if status.get("tree_complete") is True:
        return None
    return (
        "its tree volume holds no whole copy of the tree (a copy cut short, or one still being made); the next start "
        "copies the tree into it again"
    )


def check_in_force(
    status: Mapping[str, Any], config: SandboxConfig, *, gvisor: bool = False, tree: bool = False
) -> list[str]:
    """`check_cgroup_limits`, `check_seccomp_probe` and `check_view` together."""
    return (
        check_cgroup_limits(status, config, gvisor=gvisor)
        + check_seccomp_probe(status, gvisor=gvisor)
        + check_view(status, gvisor=gvisor, tree=tree)
    )
