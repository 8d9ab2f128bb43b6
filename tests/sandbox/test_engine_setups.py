"""Engine setups users have and CI does not: Docker 26 and later, the containerd image store, user-namespace remapping.

CI's engine is one Docker 20.10 with the overlay2 store. The engines' answers below were captured from Docker 26.1
with ``"features": {"containerd-snapshotter": true}`` and from Docker 20.10 with ``--userns-remap=default``; the
decisions taken on them must stay what they are on CI's engine. (Docker 26 and later also leave ``::1`` on a
``--network none`` container's ``lo``, which 20.10 took off: `security/test_attack_egress.py` allows that address
and no other. Asking for IPv6 off with a sysctl would stop every container from starting on a host booted with
``ipv6.disable=1``, where the sysctl does not exist.)

Rootless Docker on a cgroup v1 host (``dockerd-rootless.sh``) is refused before anything is made on it: it runs
containers without cgroups, so none of the limits would hold. (Podman: `test_podman.py`.)
"""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.hardening import engine_problem, engine_runs_gvisor
from sandbox.image import derived_image_name, session_image

RUNC_FEATURES = '{"ociVersionMin":"1.0.0","ociVersionMax":"1.0.2-dev","linux":{"namespaces":["network","user"]}}'
RUNC_STATUS = {"path": "runc", "status": {"org.opencontainers.runtime-spec.features": RUNC_FEATURES}}
CONTAINERD_STORE_INFO: dict[str, Any] = {
    "ServerVersion": "26.1.5+dfsg1",
    "Driver": "overlayfs",
    "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]],
    "DefaultRuntime": "runc",
    "Runtimes": {
        "io.containerd.runc.v2": RUNC_STATUS,
        "runc": RUNC_STATUS,
        "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]},
    },
}
"""``GET /info`` of Docker 26.1 with the containerd image store (trimmed): runc's entries carry a ``status``."""
USERNS_INFO: dict[str, Any] = {
    "ServerVersion": "20.10.24+dfsg1",
    "Driver": "overlay2",
    "DefaultRuntime": "runc",
    "Runtimes": {
        "io.containerd.runc.v2": {"path": "runc"},
        "io.containerd.runtime.v1.linux": {"path": "runc"},
        "runc": {"path": "runc"},
        "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]},
    },
    "SecurityOptions": ["name=seccomp,profile=default", "name=userns"],
}
"""``GET /info`` of Docker 20.10 with ``--userns-remap=default`` (trimmed)."""
CI_INFO: dict[str, Any] = {
    "ServerVersion": "20.10.24+dfsg1",
    "MemoryLimit": True,
    "SwapLimit": True,
    "CpuCfsQuota": True,
    "PidsLimit": True,
    "CgroupDriver": "cgroupfs",
    "CgroupVersion": "1",
    "SecurityOptions": ["name=seccomp,profile=default"],
}
"""``GET /info`` of CI's rootful Docker 20.10 on cgroup v1 (trimmed)."""
ROOTLESS_V1_INFO: dict[str, Any] = {
    **CI_INFO,
    "MemoryLimit": False,
    "SwapLimit": False,
    "CpuCfsQuota": False,
    "PidsLimit": False,
    "CgroupDriver": "none",
    "SecurityOptions": ["name=seccomp,profile=default", "name=rootless"],
    "Warnings": [
        "WARNING: Running in rootless-mode without cgroups. To enable cgroups in rootless-mode, you need to boot the "
        "system in cgroup v2 mode."
    ],
}
"""``GET /info`` of the same Docker run rootless (``dockerd-rootless.sh``) on that cgroup v1 host (trimmed). Its
containers ran with no limit: a script allocated 900 MiB under ``memory`` 512m and forked 400 processes under
``pids_limit`` 256, while their inspection reported every limit asked for, so `check_hardening` passed them."""
DOCKER_VERSION: dict[str, Any] = {"Components": [{"Name": "Engine", "Version": "20.10.24+dfsg1"}]}
MANIFEST_DIGEST_ID = "sha256:9618a858c9eda7f5247534154294003b1839c08517882efa5b553c1fb13d2c0c"
"""The sandbox image's ID on the containerd store after ``docker load``: its manifest's digest, not its config's."""


@pytest.mark.parametrize("info", [CONTAINERD_STORE_INFO, USERNS_INFO], ids=["containerd-store", "userns-remap"])
def test_the_engines_answers_name_gvisor_and_runc_as_on_ci(info: dict[str, Any]) -> None:
    assert engine_runs_gvisor(info, "runsc") is True
    assert engine_runs_gvisor(info, None) is False
    assert engine_runs_gvisor(info, "runc") is False
    assert engine_runs_gvisor(info, "io.containerd.runc.v2") is False


def test_a_derived_image_on_the_containerd_store_is_named_by_the_parents_manifest_digest() -> None:
    parent, name = session_image("tooltree-sandbox:e02997c733af8036", ["six"], MANIFEST_DIGEST_ID)
    assert parent == "tooltree-sandbox:e02997c733af8036"
    assert name == derived_image_name(MANIFEST_DIGEST_ID, ["six"])
    assert name.startswith("tooltree-sandbox-custom:") and len(name.split(":", 1)[1]) == 16


def test_rootless_docker_on_cgroup_v1_is_refused_for_the_limits_it_does_not_apply() -> None:
    assert engine_problem(DOCKER_VERSION, ROOTLESS_V1_INFO) == (
        "it cannot apply the sandbox's memory, swap, pids, CPU limits: rootless Docker on cgroup v1 runs containers "
        "without cgroups (boot the host with cgroup v2, or use a rootful engine)"
    )
    assert engine_problem(DOCKER_VERSION, CI_INFO) is None
    assert engine_problem(DOCKER_VERSION, USERNS_INFO | CI_INFO) is None


def test_an_engine_that_does_not_say_it_applies_a_limit_is_refused() -> None:
    # Rootless Docker on cgroup v2 where systemd delegates only the memory and pids controllers (its default) lacks CPU.
    no_cpu = {**CI_INFO, "CgroupVersion": "2", "CpuCfsQuota": False, "SecurityOptions": ["name=rootless"]}
    assert engine_problem(DOCKER_VERSION, no_cpu) == (
        "it cannot apply the sandbox's CPU limits: its GET /info does not report CpuCfsQuota=true"
    )
    assert engine_problem(DOCKER_VERSION, {}) == (
        "it cannot apply the sandbox's memory, swap, pids, CPU limits: its GET /info does not report "
        "MemoryLimit=true, SwapLimit=true, PidsLimit=true, CpuCfsQuota=true"
    )
