"""A sandbox starts only when its own cgroup holds the limits of its configuration and its seccomp filter refuses
what tooltree's profile removes.

The engine's inspection shows the settings it was asked for whether or not they are applied. Before, a container
whose runtime applied no limits (as rootless Docker on cgroup v1 does) passed every check, and a script in it could
allocate past ``memory`` and fork past ``pids_limit``; one under another seccomp filter than tooltree's reported
``Seccomp: 2`` and passed too. The session tests run under ``tooltree-test-unlimited`` and ``tooltree-test-seccomp``
(runc with the limits, or the profile's removals, taken out: `.ci/runc-loosened`, registered by
`.ci/docker-setup.sh --test-runtimes`); they skip where the engine lacks them, a failure under
``REQUIRE_TEST_RUNTIMES=1``, as on CI.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, HardeningError, Sandbox, SandboxConfig
from sandbox._supervisor.cgroup import own_paths, read_limits
from sandbox._supervisor.namespaces import interfaces, mount_options
from sandbox._supervisor.seccomp_probe import probe
from sandbox.config import TREE_MOUNT, WORKSPACE
from sandbox.in_force import check_cgroup_limits, check_in_force, check_seccomp_probe, check_view, expected_limits
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER

UNLIMITED_RUNTIME = "tooltree-test-unlimited"
SECCOMP_RUNTIME = "tooltree-test-seccomp"
NETWORK_RUNTIME = "tooltree-test-network"
MOUNTS_RUNTIME = "tooltree-test-mounts"
TMPFS = ["rw", "nosuid", "nodev", "noexec", "relatime", "size=65536k"]
VIEW = {"interfaces": ["lo"], "mounts": {"/": ["ro", "relatime"], "/tmp": TMPFS, WORKSPACE: TMPFS}}
REFUSED = {"io_uring_setup": 1, "ptrace": 1, "process_vm_readv": 1}
V1_NONE = "9223372036854771712"
CONFIG = SandboxConfig(owner=TEST_OWNER, memory="256m", pids_limit=64, cpus=0.5)
MIB_256 = 256 * 1024 * 1024


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")


def _v1(folder: str = "") -> dict[str, str]:
    return {
        f"memory{folder}/memory.limit_in_bytes": str(MIB_256),
        f"memory{folder}/memory.memsw.limit_in_bytes": str(MIB_256),
        f"pids{folder}/pids.max": "64",
        f"cpu{folder}/cpu.cfs_quota_us": "50000",
        f"cpu{folder}/cpu.cfs_period_us": "100000",
    }


def _v2(folder: str = "") -> dict[str, str]:
    return {
        "cgroup.controllers": "cpuset cpu io memory pids",
        f"{folder}memory.max": str(MIB_256),
        f"{folder}memory.swap.max": "0",
        f"{folder}pids.max": "64",
        f"{folder}cpu.max": "50000 100000",
    }


LIMITS = {"memory": MIB_256, "memory_swap": MIB_256, "pids": 64, "cpus": 0.5}


@pytest.mark.parametrize(
    ("files", "proc", "version"),
    [
        (_v1(), "4:memory:/\n3:pids:/\n2:cpu,cpuacct:/\n", 1),  # a namespace of its own: its cgroup is the root
        (_v1(), "4:memory:/docker/abc\n3:pids:/docker/abc\n2:cpu,cpuacct:/docker/abc\n", 1),  # v1 mounts its own
        (_v1("/docker/abc"), "4:memory:/docker/abc\n3:pids:/docker/abc\n2:cpu,cpuacct:/docker/abc\n", 1),
        (_v2(), "0::/\n", 2),
        (_v2("system.slice/docker-abc.scope/"), "0::/system.slice/docker-abc.scope\n", 2),  # the host's namespace
    ],
)
def test_the_supervisor_reads_the_limits_its_cgroup_holds(
    tmp_path: Path, files: dict[str, str], proc: str, version: int
) -> None:
    _write(tmp_path / "cg", files)
    (tmp_path / "proc").write_text(proc)
    assert read_limits(str(tmp_path / "cg"), str(tmp_path / "proc")) == {"version": version, **LIMITS}
    assert check_cgroup_limits({"cgroup": {"version": version, **LIMITS}}, CONFIG) == []


@pytest.mark.parametrize(
    ("files", "proc"),
    [
        (
            {
                "memory/memory.limit_in_bytes": V1_NONE,
                "memory/memory.memsw.limit_in_bytes": V1_NONE,
                "pids/pids.max": "max",
                "cpu/cpu.cfs_quota_us": "-1",
                "cpu/cpu.cfs_period_us": "100000",
            },
            "4:memory:/\n",
        ),
        (
            {
                "cgroup.controllers": "memory",
                "memory.max": "max",
                "memory.swap.max": "max",
                "pids.max": "max",
                "cpu.max": "max 100000",
            },
            "0::/\n",
        ),
    ],
)
def test_a_cgroup_without_limits_reads_as_none_and_is_refused(tmp_path: Path, files: dict[str, str], proc: str) -> None:
    _write(tmp_path / "cg", files)
    (tmp_path / "proc").write_text(proc)
    report = read_limits(str(tmp_path / "cg"), str(tmp_path / "proc"))
    assert {k: report[k] for k in LIMITS} == dict.fromkeys(LIMITS)
    assert check_cgroup_limits({"cgroup": report}, CONFIG) == [
        "its cgroup sets no memory limit, though 268,435,456 bytes was asked for: not applied",
        "its cgroup sets no memory+swap limit, though 268,435,456 bytes was asked for: not applied",
        "its cgroup sets no pids limit, though 64 was asked for: not applied",
        "its cgroup sets no CPU limit, though 0.5 was asked for: not applied",
    ]


def test_a_limit_set_above_the_processs_own_cgroup_holds_and_the_lowest_is_reported(tmp_path: Path) -> None:
    scope = "system.slice/docker-abc.scope/"
    files = {**_v2(scope), f"{scope}memory.max": "max", f"{scope}pids.max": "max", f"{scope}cpu.max": "max 100000"}
    files |= {
        "system.slice/memory.max": str(MIB_256),
        "system.slice/pids.max": "100",
        "system.slice/cpu.max": "25000 50000",
    }
    files |= {"system.slice/docker-abc.scope/init/pids.max": "64", "system.slice/docker-abc.scope/init/cpu.max": "max"}
    _write(tmp_path / "cg", files)
    (tmp_path / "proc").write_text("0::/system.slice/docker-abc.scope/init\n")
    assert read_limits(str(tmp_path / "cg"), str(tmp_path / "proc")) == {"version": 2, **LIMITS}
    # No memory controller anywhere on the way: no memory limit, reported as such rather than as unreadable.
    for name in ("memory.max", "memory.swap.max"):
        for folder in ("", "system.slice/", scope):
            (tmp_path / "cg" / f"{folder}{name}").unlink(missing_ok=True)
    report = read_limits(str(tmp_path / "cg"), str(tmp_path / "proc"))
    assert report == {"version": 2, **LIMITS, "memory": None, "memory_swap": None}


def test_a_limit_above_the_configuration_is_refused_a_stricter_one_passes() -> None:
    stricter = {"memory": MIB_256 - 4096, "memory_swap": MIB_256 - 4096, "pids": 10, "cpus": 0.25}
    assert check_cgroup_limits({"cgroup": stricter}, CONFIG) == []
    looser = {**LIMITS, "memory_swap": 2 * MIB_256, "cpus": 2.0}
    assert check_cgroup_limits({"cgroup": looser}, CONFIG) == [
        "its cgroup's memory+swap limit is 536,870,912 bytes, above the 268,435,456 bytes asked for",
        "its cgroup's CPU limit is 2, above the 0.5 asked for",
    ]
    assert check_cgroup_limits({"cgroup": {**LIMITS, "pids": True}}, CONFIG) == [
        "its cgroup's pids limit was reported as True"
    ]


def test_an_unreadable_or_missing_report_is_refused_except_under_gvisor(tmp_path: Path) -> None:
    (tmp_path / "proc").write_text("")
    report = read_limits(str(tmp_path / "nothing"), str(tmp_path / "proc"))  # gVisor's Sentry shows no cgroup files
    assert report == {
        "error": f"FileNotFoundError: no cgroup v2 hierarchy and no cgroup v1 folder {tmp_path}/nothing/memory"
    }
    for status in ({"cgroup": report}, {}, {"cgroup": "256m"}):
        (problem,) = check_cgroup_limits(status, CONFIG)
        assert problem.startswith("the container's cgroup limits could not be read (")
        assert check_cgroup_limits(status, CONFIG, gvisor=True) == []
    assert "FileNotFoundError" in check_cgroup_limits({"cgroup": report}, CONFIG)[0]


def test_the_seccomp_probe_makes_each_call_and_the_host_requires_eperm_of_each() -> None:
    # Here, outside any filter, the calls get through: the kernel's own errors (process 0 cannot be traced; no
    # vectors read nothing). io_uring_setup's depends on the kernel's settings, and is never EPERM from a filter.
    found = probe()
    assert set(found) >= {"io_uring_setup"}
    assert {k: found[k] for k in found if k != "io_uring_setup"} in ({}, {"ptrace": 3, "process_vm_readv": 0})
    assert check_seccomp_probe({"seccomp_probe": REFUSED}) == []
    assert check_seccomp_probe({"seccomp_probe": {**REFUSED, "io_uring_setup": 14, "ptrace": 3}}) == [
        f"{name} is not refused by the seccomp filter in force (errno {errno}, not EPERM): it is not tooltree's profile"
        for name, errno in (("io_uring_setup", 14), ("ptrace", 3))
    ]
    for status in ({}, {"seccomp_probe": {}}, {"seccomp_probe": [1]}):
        assert check_seccomp_probe(status) == [
            "the supervisor did not try the calls the seccomp profile removes (io_uring_setup, 425)"
        ]
        assert check_seccomp_probe(status, gvisor=True) == []
    good = {"cgroup": LIMITS, "seccomp_probe": REFUSED, "view": VIEW}
    assert check_in_force(good, CONFIG) == []
    assert len(check_in_force({}, CONFIG)) == 3


NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls
  eth0:    1296      12    0    0    0     0          0         0      656       8    0    0    0     0
    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0
"""
MOUNTS = """overlay / overlay ro,relatime,lowerdir=/a:/b 0 0
tmpfs /tmp tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0
tmpfs /workspace tmpfs rw,relatime 0 0
tmpfs /workspace tmpfs rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /opt/my\\040tree tmpfs ro 0 0
"""


def test_the_supervisor_reads_its_interfaces_and_the_mounts_in_effect() -> None:
    assert interfaces(NET_DEV) == ["eth0", "lo"]
    found = mount_options(MOUNTS, ["/", "/tmp", "/workspace", "/opt/my tree", "/opt/tooltree/tree"])
    assert found == {
        "/": ["ro", "relatime", "lowerdir=/a:/b"],
        "/tmp": ["rw", "nosuid", "nodev", "noexec", "relatime", "size=65536k"],
        "/workspace": ["rw", "nosuid", "nodev", "noexec", "relatime"],  # the last mount there is the one in effect
        "/opt/my tree": ["ro"],
    }


def test_the_host_requires_the_loopback_alone_and_the_mount_options_asked_for() -> None:
    assert check_view({"view": VIEW}) == []
    tree = {**VIEW, "mounts": {**VIEW["mounts"], TREE_MOUNT: ["rw"]}}
    assert check_view({"view": tree}, tree=True) == [f"{TREE_MOUNT} is mounted without ro"]
    assert check_view({"view": VIEW}, tree=True) == [f"nothing is mounted at {TREE_MOUNT} as asked"]
    host_network = {**VIEW, "interfaces": ["docker0", "eth0", "lo"]}
    assert check_view({"view": host_network}) == [
        "the container has network interfaces other than the loopback alone (docker0, eth0, lo): it was asked for none"
    ]
    open_mounts = {"/": ["rw"], "/tmp": ["rw", "noexec"], WORKSPACE: ["rw", "nodev", "nosuid", "noexec"]}
    assert check_view({"view": {**VIEW, "mounts": open_mounts}}) == [
        "/ is mounted without ro",
        "/tmp is mounted without nosuid, nodev",
    ]
    # gVisor's Sentry shows a tmpfs's noexec, not its nosuid and nodev: those are not asked of it.
    assert check_view({"view": {**VIEW, "mounts": open_mounts}}, gvisor=True) == ["/ is mounted without ro"]
    for status in ({}, {"view": {"error": "OSError: gone"}}, {"view": []}):
        (problem,) = check_view(status, gvisor=True)
        assert problem.startswith("the container's network and mounts could not be read (")


def test_the_cgroup_paths_of_each_controller() -> None:
    paths = own_paths("12:cpu,cpuacct:/a\n11:memory:/b\n0::/c\nnot a line\n")
    assert paths == {"cpu": "/a", "cpuacct": "/a", "memory": "/b", "": "/c"}


@pytest.mark.docker
def test_a_sandbox_reports_the_limits_of_its_configuration_and_the_refused_calls(
    docker_engine: EngineWithCLI, sample_tree: Path
) -> None:
    statuses: list[dict[str, Any]] = []

    class Recording(DockerBackend):
        def verify_ready(self, connection: Any, status: Any) -> None:
            statuses.append(dict(status))
            super().verify_ready(connection, status)

    with Sandbox(Recording(CONFIG, docker=docker_engine, tree=sample_tree)) as sb:
        assert sb.execute("print(6 * 7)").stdout == "42\n"
    (status,) = statuses
    assert {k: status["cgroup"][k] for k in LIMITS} == expected_limits(CONFIG) == LIMITS
    assert status["seccomp_probe"] in ({"io_uring_setup": 1}, REFUSED)  # EPERM, from tooltree's profile
    assert status["view"]["interfaces"] == ["lo"]
    assert "ro" in status["view"]["mounts"]["/"] and "ro" in status["view"]["mounts"][TREE_MOUNT]
    assert {"noexec", "nosuid", "nodev"} <= set(status["view"]["mounts"][WORKSPACE])
    assert status["tree_complete"] is True


def test_a_tree_is_taken_for_whole_only_when_the_supervisor_found_its_marker(tmp_path: Path) -> None:
    from sandbox._supervisor.tree_state import MARKER, tree_complete
    from sandbox.in_force import tree_incomplete

    assert not tree_complete(str(tmp_path))
    (tmp_path / MARKER).mkdir()  # not the file `populate` writes
    assert not tree_complete(str(tmp_path))
    (tmp_path / MARKER).rmdir()
    (tmp_path / MARKER).write_text("ok\n", encoding="ascii")
    assert tree_complete(str(tmp_path))
    assert tree_incomplete({"tree_complete": True}) is None
    for status in ({}, {"tree_complete": False}, {"tree_complete": "yes"}, {"tree_complete": 1}):
        assert "holds no whole copy of the tree" in (tree_incomplete(status) or "")


@pytest.fixture(scope="module")
def unlimited(docker_engine: EngineWithCLI) -> EngineWithCLI:
    """The engine, when it has the test runtimes; otherwise skip (fail with ``REQUIRE_TEST_RUNTIMES=1``, as on CI)."""
    runtimes = docker_engine.json(["info", "--format", "{{json .Runtimes}}"])
    for runtime in (UNLIMITED_RUNTIME, SECCOMP_RUNTIME, NETWORK_RUNTIME, MOUNTS_RUNTIME):
        if runtime not in runtimes:
            problem = f"the engine has no runtime {runtime!r}; .ci/docker-setup.sh --test-runtimes registers it"
            if os.environ.get("REQUIRE_TEST_RUNTIMES") == "1":
                pytest.fail(f"REQUIRE_TEST_RUNTIMES=1 but {problem}")
            pytest.skip(problem)
    return docker_engine


@pytest.mark.docker
def test_no_sandbox_starts_where_the_engine_shows_limits_its_cgroup_does_not_hold(
    unlimited: EngineWithCLI, backend: DockerBackend, sample_tree: Path
) -> None:
    # The premise, seen from outside: the engine records the limits, the container's cgroup holds none of them.
    read = "from tooltree_supervisor.cgroup import read_limits; import json; print(json.dumps(read_limits()))"
    name = f"tooltree-unlimited-probe-{TEST_OWNER}"
    flags = ["--memory", "256m", "--memory-swap", "256m", "--pids-limit", "64", "--cpus", "0.5"]
    unlimited.text(["create", "--name", name, "--label", f"tooltree.owner={TEST_OWNER}", "--runtime", UNLIMITED_RUNTIME,
                    *flags, "--entrypoint", "python3", backend.image, "-I", "-c", read])  # fmt: skip
    try:
        host = unlimited.json(["inspect", name])[0]["HostConfig"]
        assert (host["Memory"], host["PidsLimit"], host["NanoCpus"]) == (MIB_256, 64, 500_000_000)
        unlimited.text(["start", name])
        assert unlimited.text(["wait", name]) == "0"
        report = json.loads(unlimited.text(["logs", name]))
        assert {k: report[k] for k in LIMITS} == dict.fromkeys(LIMITS)
    finally:
        unlimited.run(["rm", "--force", name], check=False)

    config = SandboxConfig(owner=TEST_OWNER, memory="256m", pids_limit=64, cpus=0.5, runtime=UNLIMITED_RUNTIME)
    refused = DockerBackend(config, docker=unlimited, tree=sample_tree)
    with pytest.raises(HardeningError) as caught, Sandbox(refused) as sb:
        sb.execute("print('user code ran')")
    assert caught.value.violations == [
        "its cgroup sets no memory limit, though 268,435,456 bytes was asked for: not applied",
        "its cgroup sets no memory+swap limit, though 268,435,456 bytes was asked for: not applied",
        "its cgroup sets no pids limit, though 64 was asked for: not applied",
        "its cgroup sets no CPU limit, though 0.5 was asked for: not applied",
    ]
    left = unlimited.text(["ps", "--all", "--quiet", "--filter", f"name=^/{caught.value.container}$"])
    assert left == ""  # killed and removed, as any container refused


@pytest.mark.docker
def test_no_sandbox_starts_under_a_seccomp_filter_that_lets_through_what_tooltrees_removes(
    unlimited: EngineWithCLI, sample_tree: Path
) -> None:
    config = SandboxConfig(owner=TEST_OWNER, runtime=SECCOMP_RUNTIME)
    with pytest.raises(HardeningError) as caught, Sandbox(DockerBackend(config, docker=unlimited, tree=sample_tree)):
        pass
    # A filter is in force (the supervisor's Seccomp: 2 passed), its limits too: only the probe tells.
    violations = caught.value.violations
    assert [v.split(" ", 1)[0] for v in violations] == ["io_uring_setup", "ptrace", "process_vm_readv"]
    assert all("is not refused by the seccomp filter in force (errno " in v for v in violations)
    assert "(errno 3, not EPERM)" in violations[1] and "(errno 0, not EPERM)" in violations[2]


@pytest.mark.docker
def test_no_sandbox_starts_on_the_hosts_network_or_with_a_writable_root_or_executable_tmpfs(
    unlimited: EngineWithCLI, sample_tree: Path
) -> None:
    violations = {}
    for runtime in (NETWORK_RUNTIME, MOUNTS_RUNTIME):
        config = SandboxConfig(owner=TEST_OWNER, runtime=runtime)
        with (
            pytest.raises(HardeningError) as caught,
            Sandbox(DockerBackend(config, docker=unlimited, tree=sample_tree)),
        ):
            pass
        violations[runtime] = caught.value.violations
    (network,) = violations[NETWORK_RUNTIME]
    assert network.startswith("the container has network interfaces other than the loopback alone (")
    assert network.endswith("): it was asked for none") and "lo" in network and len(network) > 90
    assert violations[MOUNTS_RUNTIME] == [
        "/ is mounted without ro",
        "/tmp is mounted without noexec, nosuid, nodev",
        f"{WORKSPACE} is mounted without noexec, nosuid, nodev",
    ]
