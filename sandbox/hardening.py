"""The confinement of a sandbox container: the settings that create it, and the checks that prove them.

A container is created (not started), inspected, and started only when `check_hardening`
finds every setting in effect; otherwise it is removed and `HardeningError` raised — fail
closed, before any code runs. Once its supervisor is up it reports what the kernel says about
its own process (uid, capabilities, no_new_privs, seccomp mode), read before any user code
runs, and `check_process_status` verifies that too.

(Over 400 lines: each setting that creates a container and the check that reads it back are kept side by side.)

Defaults, all verified: ``--network none``; read-only root; tmpfs ``/tmp`` and ``/dev/shm`` (noexec, nosuid,
nodev, size- and entry-capped); tmpfs ``/workspace`` (same, size = quota); uid/gid 10001; ``--cap-drop
ALL``; ``no-new-privileges``; the seccomp profile of `sandbox.seccomp` (the engine default
minus io_uring and ptrace); pids, memory (swap = memory) and CPU limits; ``--log-driver
none``; an open-file ulimit; private IPC and cgroup namespaces; no devices, binds, published
ports or host namespaces; the owner and session labels; the tree volume, if any, mounted read-only; the requested OCI
runtime (e.g. ``runsc``) when configured.

Under gVisor (`engine_runs_gvisor`: the runtime ``runsc``, or any name the engine registered for the runsc binary
or its containerd shim) the engine's pids limit counts the host threads of the Sentry,
not the script's processes: about five host threads for each process of the sandbox (ptrace
platform), and the Sentry dies (the whole session with it) when it cannot start one. There the
sandbox's processes and threads are bounded by an ``nproc`` ulimit of ``pids_limit`` instead,
which the Sentry enforces for the sandbox user (``fork`` fails with ``EAGAIN``, as under runc),
and the engine's pids limit is `host_pids_limit`: room for the Sentry's threads at that count.

One deliberate difference from a plain ``docker run``: no ``--init``. The supervisor itself is
the container's init (pid 1), because the container's stdio is the channel and whichever
process is pid 1 holds it: with docker-init there, code running as the sandbox user can open
``/proc/1/fd/1`` and write raw bytes to the host. The supervisor, as pid 1, makes itself
non-dumpable (closing its ``/proc`` entries to that user), cannot be signalled from inside, and
reaps orphans; the check requires exactly that (no ``Init``, the supervisor as the command,
and a self-report of pid 1, not dumpable).
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox.config import SANDBOX_UID, TREE_MOUNT, WORKSPACE, SandboxConfig
from sandbox.seccomp import PROFILE_PATH, REMOVED
from sandbox.workspace import TMPFS_INODES

OWNER_LABEL = "tooltree.owner"
SESSION_LABEL = "tooltree.session"
HOST_LABEL = "tooltree.host"
"""``HOSTNAME:PID`` of the process that made the container: `tooltree sandbox prune` spares the containers of a
tooltree process still running on this host (a `tooltree serve`'s live sessions)."""
SUPERVISOR_COMMAND = ["python3", "-I", "-m", "tooltree_supervisor", "--kill-all-on-timeout"]
GVISOR_RUNTIMES = frozenset({"runsc"})
"""Runtime names that are gVisor whatever the engine says of them: its kernel answers the sandbox's system calls (see
the module's text). Other names are gVisor when the engine registered them as runsc (`engine_runs_gvisor`)."""
_RUNSC = re.compile(r"runsc|io\.containerd\.runsc\.v\d+|containerd-shim-runsc-v\d+")
"""The runsc binary, its containerd shim's runtime type, or the shim's binary (a path's last part)."""
SENTRY_THREADS_PER_TASK = 8
"""Host threads the engine's pids limit allows the Sentry for each task of the sandbox (about 5.3 measured).

Room for one burst to ``pids_limit``, not for many: the ptrace platform (runsc 2022-12) never ends a stub process, it
keeps it for the next address space, with one host thread for each Sentry thread that ever ran a task in it. So each
later burst leaves about 3 x ``pids_limit`` more host threads (measured at 40, 128 and 256), toward a ceiling near
2 x ``pids_limit`` squared; the default's 2,304 holds the first fork bomb (1,731) but not the second (2,511)."""
SENTRY_THREADS_BASE = 256
"""Host threads the engine's pids limit allows the Sentry and its gofer besides (about 50 measured)."""


def host_label() -> str:
    """`HOST_LABEL`'s value for a container this process makes."""
    return f"{socket.gethostname()}:{os.getpid()}"


def is_gvisor(runtime: str | None) -> bool:
    """Whether ``runtime`` names gVisor by its name alone (`GVISOR_RUNTIMES`); `engine_runs_gvisor` asks the engine."""
    return runtime in GVISOR_RUNTIMES


def _names_runsc(value: object) -> bool:
    return isinstance(value, str) and _RUNSC.fullmatch(value.rsplit("/", 1)[-1]) is not None


def engine_runs_gvisor(info: Mapping[str, Any], runtime: str | None) -> bool:
    """Whether the engine runs a container of ``runtime`` (None: the engine's default runtime) under gVisor.

    ``info`` is the engine's ``GET /info``. Its ``Runtimes`` maps each registered name to its ``path`` and
    ``runtimeArgs`` (``runsc install --runtime runsc-kvm -- --platform=kvm`` registers ``/usr/bin/runsc`` as
    ``runsc-kvm``) or to a containerd shim's ``runtimeType`` (``io.containerd.runsc.v1``). The runtime is gVisor
    when its name is in `GVISOR_RUNTIMES`, or its name, path or runtime type names runsc. A runtime whose kind
    cannot be told is not: its container must pass every check of runc (fail closed).
    """
    name = runtime if runtime is not None else info.get("DefaultRuntime")
    if not isinstance(name, str) or not name:
        return False
    if is_gvisor(name) or _names_runsc(name):  # a shim's type is a runtime name too (Docker 23 and later)
        return True
    runtimes = info.get("Runtimes")
    entry = runtimes.get(name) if isinstance(runtimes, Mapping) else None
    return isinstance(entry, Mapping) and (_names_runsc(entry.get("path")) or _names_runsc(entry.get("runtimeType")))


ENGINE_LIMITS = (("MemoryLimit", "memory"), ("SwapLimit", "swap"), ("PidsLimit", "pids"), ("CpuCfsQuota", "CPU"))
"""The ``GET /info`` fields by which an engine says it applies each cgroup limit of `container_spec`."""


def engine_problem(version: Mapping[str, Any], info: Mapping[str, Any]) -> str | None:
    """Why the engine that answered ``version`` and ``info`` (its ``GET /version`` and ``GET /info``) cannot run a
    sandbox confined as `container_spec` asks; None when it can (`check_hardening` then checks each container).

    - Podman's Docker-compatible API (``podman system service``), whatever its version: it reads a seccomp profile
      only from a file on its own host (tooltree sends the profile itself, as the Engine API allows), and mounts a
      writable tmpfs at ``/run`` and ``/var/tmp`` of a read-only root, where files may be executed. (Podman 4.3 also
      refuses the workspace tmpfs's ``nr_inodes``, ``uid`` and ``gid``.)
    - An engine that does not say it applies every limit (`ENGINE_LIMITS`): rootless Docker on cgroup v1 runs
      containers without cgroups, yet reports the limits asked for in each container's inspection as if in effect.
    """
    for component in version.get("Components") or []:
        name = component.get("Name") if isinstance(component, Mapping) else None
        if isinstance(name, str) and name.lower().startswith("podman"):
            return (
                f"it is Podman {str(component.get('Version') or version.get('Version') or '')[:40]} (its "
                "Docker-compatible API), which cannot confine a sandbox as tooltree requires: it takes a seccomp "
                "profile only as a file on its own host, not the profile tooltree sends, and adds a writable tmpfs "
                "where files may be executed (/run, /var/tmp) to the read-only root; point DOCKER_HOST at a Docker "
                "engine"
            )
    missing = [limit for key, limit in ENGINE_LIMITS if info.get(key) is not True]
    if not missing:
        return None
    rootless = "name=rootless" in (info.get("SecurityOptions") or [])
    why = (
        "rootless Docker on cgroup v1 runs containers without cgroups (boot the host with cgroup v2, or use a "
        "rootful engine)"
        if rootless and str(info.get("CgroupVersion")) == "1"
        else "its GET /info does not report " + ", ".join(f"{k}=true" for k, limit in ENGINE_LIMITS if limit in missing)
    )
    return f"it cannot apply the sandbox's {', '.join(missing)} limits: {why}"


def _gvisor(config: SandboxConfig, gvisor: bool | None) -> bool:
    return is_gvisor(config.runtime) if gvisor is None else gvisor


def host_pids_limit(config: SandboxConfig, *, gvisor: bool | None = None) -> int:
    """The engine's pids limit: ``pids_limit``, or under gVisor room for the Sentry's host threads.

    Under gVisor ``pids_limit`` bounds the sandbox's tasks through the ``nproc`` ulimit instead. ``gvisor``
    is `engine_runs_gvisor`'s answer for ``config.runtime``; None judges by the name alone (`is_gvisor`).
    """
    if _gvisor(config, gvisor):
        return config.pids_limit * SENTRY_THREADS_PER_TASK + SENTRY_THREADS_BASE
    return config.pids_limit


def _ulimits(config: SandboxConfig, gvisor: bool) -> list[dict[str, Any]]:
    ulimits: list[dict[str, Any]] = [
        {"Name": "nofile", "Soft": config.nofile, "Hard": config.nofile},
        {"Name": "core", "Soft": 0, "Hard": 0},
    ]
    if gvisor:
        # Counted per uid by the Sentry's own kernel: this sandbox's tasks alone. (Under runc the host
        # kernel would count every container's processes of uid 10001 together, so it is never set there.)
        ulimits.append({"Name": "nproc", "Soft": config.pids_limit, "Hard": config.pids_limit})
    return ulimits


def container_spec(
    config: SandboxConfig,
    *,
    name: str,
    session_id: str,
    image: str,
    tree_volume: str | None = None,
    seccomp_profile: Path = PROFILE_PATH,
    auto_remove: bool = True,
    gvisor: bool | None = None,
) -> dict[str, Any]:
    """The arguments of docker-py's ``APIClient.create_container`` for one sandbox container.

    ``host_config`` is written in the Engine API's own terms, the same ones `check_hardening`
    reads back from the inspected container. ``gvisor``: as for `host_pids_limit`.
    """
    gvisor = _gvisor(config, gvisor)
    ids = f"uid={SANDBOX_UID},gid={SANDBOX_UID}"
    profile = json.dumps(json.loads(seccomp_profile.read_text(encoding="utf-8")), separators=(",", ":"))
    host_config: dict[str, Any] = {
        "NetworkMode": "none",
        "ReadonlyRootfs": True,
        "Tmpfs": {
            **{path: f"rw,noexec,nosuid,nodev,{','.join(_scratch_sizes(config))}" for path in SCRATCH},
            WORKSPACE: f"rw,noexec,nosuid,nodev,{','.join(_workspace_sizes(config))},{ids},mode=0700",
        },
        "CapDrop": ["ALL"],
        "SecurityOpt": ["no-new-privileges", f"seccomp={profile}"],
        "IpcMode": "private",
        "CgroupnsMode": "private",
        "PidsLimit": host_pids_limit(config, gvisor=gvisor),
        "Memory": config.memory_bytes,
        "MemorySwap": config.memory_bytes,
        "NanoCpus": round(config.cpus * 1e9),
        "Ulimits": _ulimits(config, gvisor),
        "LogConfig": {"Type": "none", "Config": {}},
        "AutoRemove": auto_remove,
    }
    if config.runtime:
        host_config["Runtime"] = config.runtime
    command = list(SUPERVISOR_COMMAND)
    if tree_volume:
        host_config["Mounts"] = [
            {
                "Type": "volume",
                "Source": tree_volume,
                "Target": TREE_MOUNT,
                "ReadOnly": True,
                # Labels: a volume the engine makes for this mount (the tree's was removed since the backend found
                # it) is its owner's, which `tooltree sandbox prune` removes; before, it had none and stayed for good.
                "VolumeOptions": {"NoCopy": True, "Labels": {OWNER_LABEL: config.owner}},
            }
        ]
        command += ["--tree", TREE_MOUNT]
    labels = {
        **dict(sorted(config.labels.items())),
        OWNER_LABEL: config.owner,
        SESSION_LABEL: session_id,
        HOST_LABEL: host_label(),
    }
    return {
        "image": image,
        "command": command,
        "name": name,
        "hostname": "sandbox",
        "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
        "entrypoint": [""],
        "stdin_open": True,  # with attaching (not detach): OpenStdin, AttachStdin and StdinOnce
        "labels": labels,
        "host_config": host_config,
        "use_config_proxy": False,  # the host's proxy settings stay on the host
    }


SCRATCH, SCRATCH_INODES = ("/tmp", "/dev/shm"), 16384
"""The scratch tmpfs mounts (``/dev/shm`` too: the engine's has no entry cap), each of ``tmp_size`` and this many
entries (before, none: empty folders made until the memory was spent broke the session's interpreter for good)."""


def _scratch_sizes(config: SandboxConfig) -> list[str]:
    return [f"size={config.tmp_size}", f"nr_inodes={SCRATCH_INODES}"]


def _workspace_sizes(config: SandboxConfig) -> list[str]:
    # Inodes too: without a cap, empty folders would cost the host disk and time but no quota.
    return [f"size={config.workspace_size}", f"nr_inodes={TMPFS_INODES}"]


def _tmpfs_options(tmpfs: Mapping[str, str], path: str) -> set[str] | None:
    options = tmpfs.get(path)
    return set(options.split(",")) if isinstance(options, str) else None


def _check_seccomp(security_opts: list[str]) -> list[str]:
    profiles = [
        opt.split("=", 1)[1] for opt in security_opts if opt.startswith("seccomp=") or opt.startswith("seccomp:")
    ]
    if not profiles:
        return ["no seccomp profile of ours is set (SecurityOpt seccomp=...)"]
    problems: list[str] = []
    for text in profiles:
        if text.strip() == "unconfined":
            return ["seccomp is unconfined"]
        try:
            profile = json.loads(text)
        except ValueError:
            return ["the seccomp profile is not readable JSON"]
        if not isinstance(profile, dict) or not str(profile.get("defaultAction", "")).startswith(
            ("SCMP_ACT_ERRNO", "SCMP_ACT_KILL")
        ):
            problems.append("the seccomp profile does not deny by default")
            continue
        for rule in profile.get("syscalls") or []:
            if isinstance(rule, dict) and rule.get("action") == "SCMP_ACT_ALLOW":
                allowed = set(rule.get("names") or []) & set(REMOVED)
                if allowed:
                    problems.append(f"the seccomp profile allows {', '.join(sorted(allowed))}")
    return problems


def check_hardening(
    inspect: Mapping[str, Any], config: SandboxConfig, *, tree_volume: str | None = None, gvisor: bool | None = None
) -> list[str]:
    """Every way in which an inspected container differs from the required confinement.

    ``inspect`` is the engine's inspection of the container (``GET /containers/{id}/json``). An empty list means the
    container may run. ``gvisor``: as for `host_pids_limit`.
    """
    gvisor = _gvisor(config, gvisor)
    v: list[str] = []
    host = inspect.get("HostConfig") or {}
    cfg = inspect.get("Config") or {}

    if host.get("NetworkMode") != "none":
        v.append(f"network is {host.get('NetworkMode')!r}, not 'none'")
    if host.get("ReadonlyRootfs") is not True:
        v.append("the root filesystem is not read-only (ReadonlyRootfs)")
    tmpfs = host.get("Tmpfs") or {}
    for path, sizes in (*((p, _scratch_sizes(config)) for p in SCRATCH), (WORKSPACE, _workspace_sizes(config))):
        options = _tmpfs_options(tmpfs, path)
        if options is None:
            v.append(f"{path} is not a tmpfs")
            continue
        for required in ("noexec", "nosuid", "nodev", *sizes):
            if required not in options:
                v.append(f"tmpfs {path} lacks {required}")
    for path in sorted(set(tmpfs) - {*SCRATCH, WORKSPACE}):  # Podman adds /run and /var/tmp, executables allowed
        v.append(f"a tmpfs is mounted at {path!r} that tooltree did not ask for (writable past the read-only root)")
    user = str(cfg.get("User") or "")
    if user.split(":")[0] != str(SANDBOX_UID) or user.split(":")[-1] in ("0", "root"):
        v.append(f"user is {user or 'unset (root)'!r}, not {SANDBOX_UID}:{SANDBOX_UID}")
    if "ALL" not in [str(c).upper() for c in host.get("CapDrop") or []]:
        v.append("capabilities are not all dropped (CapDrop ALL)")
    if host.get("CapAdd"):
        v.append(f"capabilities are added: {host.get('CapAdd')}")
    security = [str(s) for s in host.get("SecurityOpt") or []]
    if not any(s in ("no-new-privileges", "no-new-privileges:true", "no-new-privileges=true") for s in security):
        v.append("no-new-privileges is not set")
    v += _check_seccomp(security)
    if host.get("Privileged"):
        v.append("the container is privileged")
    if host.get("Init"):
        v.append("docker-init would be pid 1 and hold the channel (--init); the supervisor must be the init")
    if cfg.get("Entrypoint") or list(cfg.get("Cmd") or [])[: len(SUPERVISOR_COMMAND)] != SUPERVISOR_COMMAND:
        v.append("the container does not run the supervisor as its init process")
    pids = host_pids_limit(config, gvisor=gvisor)
    if not isinstance(host.get("PidsLimit"), int) or not 0 < host["PidsLimit"] <= pids:
        v.append(f"pids limit is {host.get('PidsLimit')!r}, not {pids}")
    memory = config.memory_bytes
    if host.get("Memory") != memory:
        v.append(f"memory limit is {host.get('Memory')!r}, not {memory}")
    if host.get("MemorySwap") != memory:
        v.append(f"memory+swap limit is {host.get('MemorySwap')!r}, not {memory} (no swap)")
    nano = host.get("NanoCpus")
    if not isinstance(nano, int) or not 0 < nano <= round(config.cpus * 1e9):
        v.append(f"CPU limit is {nano!r}, not {config.cpus:g} CPUs")
    if (host.get("LogConfig") or {}).get("Type") != "none":
        v.append("the log driver is not 'none'")
    ulimits = {u.get("Name"): u for u in host.get("Ulimits") or [] if isinstance(u, dict)}
    nofile = ulimits.get("nofile")
    if not nofile or nofile.get("Hard") != config.nofile:
        v.append(f"no nofile ulimit of {config.nofile}")
    nproc = ulimits.get("nproc")
    if gvisor and not (nproc and isinstance(nproc.get("Hard"), int) and 0 < nproc["Hard"] <= config.pids_limit):
        v.append(f"no nproc ulimit of {config.pids_limit} (under gVisor it is what bounds the sandbox's processes)")
    if host.get("IpcMode") not in ("private", "none"):
        v.append(f"IPC mode is {host.get('IpcMode')!r}, not private")
    for key in ("PidMode", "UTSMode", "UsernsMode", "CgroupnsMode"):
        if str(host.get(key) or "") == "host":
            v.append(f"{key} is host")
    if host.get("Devices"):
        v.append("devices are mapped in")
    if host.get("Binds"):
        v.append("host paths are bind-mounted")
    if host.get("PortBindings") or host.get("PublishAllPorts"):
        v.append("ports are published")
    if config.runtime and host.get("Runtime") != config.runtime:  # an empty one is refused by `SandboxConfig`
        v.append(f"runtime is {host.get('Runtime')!r}, not {config.runtime!r}")

    mounts = [m for m in inspect.get("Mounts") or [] if isinstance(m, dict)]
    for m in mounts:
        if m.get("Destination") == TREE_MOUNT and m.get("Type") == "volume" and m.get("Name") == tree_volume:
            if m.get("RW") is not False:
                v.append("the tree volume is writable")
        else:
            v.append(f"unexpected mount at {m.get('Destination')!r}")
    if tree_volume and not any(m.get("Destination") == TREE_MOUNT for m in mounts):
        v.append("the tree volume is not mounted")

    labels = cfg.get("Labels") or {}
    if labels.get(OWNER_LABEL) != config.owner:
        v.append(f"label {OWNER_LABEL} is not {config.owner!r}")
    if not labels.get(SESSION_LABEL):
        v.append(f"label {SESSION_LABEL} is missing")
    return v


def check_process_status(status: Mapping[str, Any], *, gvisor: bool = False) -> list[str]:
    """What the supervisor's own process reports (from ``/proc/self/status``), checked.

    The report is read before any user code runs, so it can be trusted at that moment. Under
    gVisor (``gvisor``, `engine_runs_gvisor`'s answer) the sandbox kernel filters system calls itself
    and may report no seccomp.
    """
    v: list[str] = []
    if status.get("uid") != SANDBOX_UID:
        v.append(f"the supervisor runs as uid {status.get('uid')!r}, not {SANDBOX_UID}")
    if status.get("pid") != 1:
        v.append(f"the supervisor is pid {status.get('pid')!r}, not the container's init")
    if status.get("dumpable") != 0:
        v.append("the supervisor is dumpable: the sandbox user could reach its channel through /proc")
    for key in ("CapEff", "CapPrm"):
        try:
            if int(str(status.get(key)), 16) != 0:
                v.append(f"the supervisor holds capabilities ({key} {status.get(key)})")
        except ValueError:
            v.append(f"the supervisor did not report {key}")
    if str(status.get("NoNewPrivs")) != "1":
        v.append("no_new_privs is not set on the supervisor")
    if str(status.get("Seccomp")) != "2" and not gvisor:
        v.append("the supervisor is not under a seccomp filter")
    return v
