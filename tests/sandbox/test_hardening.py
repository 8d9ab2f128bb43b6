"""The hardening check refuses any container that lacks a required setting."""

from __future__ import annotations

import copy
import json
import os
import socket
from collections.abc import Callable
from typing import Any

import pytest

from sandbox import DockerBackend, HardeningError, SandboxConfig
from sandbox.config import TREE_MOUNT
from sandbox.hardening import SUPERVISOR_COMMAND, check_hardening, check_process_status, container_spec
from sandbox.seccomp import build_profile
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER

CONFIG = SandboxConfig(owner=TEST_OWNER)


def compliant_inspect(config: SandboxConfig = CONFIG) -> dict[str, Any]:
    """What ``docker inspect`` reports for a container made from `container_spec` (trimmed)."""
    profile = json.dumps(build_profile())
    return {
        "HostConfig": {
            "NetworkMode": "none",
            "ReadonlyRootfs": True,
            "Tmpfs": {
                "/tmp": "rw,noexec,nosuid,nodev,size=64m,nr_inodes=16384",
                "/dev/shm": "rw,noexec,nosuid,nodev,size=64m,nr_inodes=16384",
                "/workspace": "rw,noexec,nosuid,nodev,size=256m,nr_inodes=32784,uid=10001,gid=10001,mode=0700",
            },
            "CapDrop": ["ALL"],
            "CapAdd": None,
            "SecurityOpt": ["no-new-privileges", f"seccomp={profile}"],
            "Privileged": False,
            "Init": None,
            "PidsLimit": 256,
            "Memory": 536870912,
            "MemorySwap": 536870912,
            "NanoCpus": 1000000000,
            "LogConfig": {"Type": "none", "Config": {}},
            "Ulimits": [{"Name": "core", "Hard": 0, "Soft": 0}, {"Name": "nofile", "Hard": 1024, "Soft": 1024}],
            "IpcMode": "private",
            "PidMode": "",
            "UTSMode": "",
            "UsernsMode": "",
            "CgroupnsMode": "private",
            "Devices": [],
            "Binds": None,
            "PortBindings": {},
            "PublishAllPorts": False,
            "Runtime": "runc",
        },
        "Config": {
            "User": "10001:10001",
            "Labels": {"tooltree.owner": TEST_OWNER, "tooltree.session": "s1"},
            "Entrypoint": None,
            "Cmd": [*SUPERVISOR_COMMAND, "--tree", TREE_MOUNT],
        },
        "Mounts": [],
    }


def test_a_compliant_container_passes() -> None:
    assert check_hardening(compliant_inspect(), CONFIG) == []


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        *parents, key = path.split(".")
        target = d
        for p in parents:
            target = target[p]
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value

    return mutate


_DELETE = object()
_ALLOWS_IO_URING = "seccomp=" + json.dumps(
    {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read", "io_uring_setup"], "action": "SCMP_ACT_ALLOW"}]}
)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set("HostConfig.ReadonlyRootfs", _DELETE), "read-only"),
        (_set("HostConfig.ReadonlyRootfs", False), "read-only"),
        (_set("HostConfig.NetworkMode", "bridge"), "network"),
        (_set("HostConfig.NetworkMode", "host"), "network"),
        (_set("HostConfig.CapDrop", []), "CapDrop ALL"),
        (_set("HostConfig.CapAdd", ["NET_RAW"]), "capabilities are added"),
        (_set("HostConfig.SecurityOpt", [f"seccomp={json.dumps(build_profile())}"]), "no-new-privileges"),
        (_set("HostConfig.SecurityOpt", ["no-new-privileges"]), "no seccomp profile"),
        (_set("HostConfig.SecurityOpt", ["no-new-privileges", "seccomp=unconfined"]), "unconfined"),
        (_set("HostConfig.SecurityOpt", ["no-new-privileges", _ALLOWS_IO_URING]), "allows io_uring_setup"),
        (_set("HostConfig.Privileged", True), "privileged"),
        (_set("HostConfig.Init", True), "docker-init would be pid 1"),
        (_set("Config.Cmd", ["sh", "-c", "sleep 1000"]), "supervisor as its init"),
        (_set("Config.Entrypoint", ["/bin/sh"]), "supervisor as its init"),
        (_set("HostConfig.PidsLimit", 0), "pids limit"),
        (_set("HostConfig.PidsLimit", -1), "pids limit"),
        (_set("HostConfig.PidsLimit", None), "pids limit"),
        (_set("HostConfig.Memory", 0), "memory limit"),
        (_set("HostConfig.MemorySwap", -1), "no swap"),
        (_set("HostConfig.NanoCpus", 0), "CPU limit"),
        (_set("HostConfig.LogConfig", {"Type": "json-file"}), "log driver"),
        (_set("HostConfig.Ulimits", []), "nofile"),
        (_set("HostConfig.Tmpfs", {"/workspace": "rw,noexec,nosuid,nodev,size=256m"}), "/tmp is not a tmpfs"),
        (_set("HostConfig.Tmpfs./tmp", "rw,nosuid,nodev,size=64m,nr_inodes=16384"), "lacks noexec"),
        (_set("HostConfig.Tmpfs./tmp", "rw,noexec,nosuid,nodev,size=64m"), "tmpfs /tmp lacks nr_inodes=16384"),
        (_set("HostConfig.Tmpfs./dev/shm", "rw,noexec,nosuid,nodev,size=64m"), "tmpfs /dev/shm lacks nr_inodes=16384"),
        (_set("HostConfig.Tmpfs./workspace", "rw,noexec,nosuid,nodev"), "lacks size=256m"),
        (_set("HostConfig.Tmpfs./workspace", "rw,noexec,nosuid,nodev,size=256m"), "lacks nr_inodes=32784"),
        (_set("HostConfig.IpcMode", "host"), "IPC"),
        (_set("HostConfig.PidMode", "host"), "PidMode"),
        (_set("HostConfig.Devices", [{"PathOnHost": "/dev/kvm"}]), "devices"),
        (_set("HostConfig.Binds", ["/:/host"]), "bind-mounted"),
        (_set("HostConfig.PortBindings", {"80/tcp": [{}]}), "ports"),
        (_set("Config.User", ""), "user"),
        (_set("Config.User", "0:0"), "user"),
        (_set("Config.User", "10001:0"), "user"),
        (_set("Config.Labels", {}), "label"),
        (_set("Mounts", [{"Type": "bind", "Source": "/", "Destination": "/host", "RW": False}]), "unexpected mount"),
    ],
)
def test_a_container_lacking_a_setting_is_refused(mutate: Callable[[dict[str, Any]], None], expected: str) -> None:
    details = copy.deepcopy(compliant_inspect())
    mutate(details)
    violations = check_hardening(details, CONFIG)
    assert any(expected in v for v in violations), violations


def test_the_tree_volume_must_be_mounted_read_only() -> None:
    details = compliant_inspect()
    mount = {"Type": "volume", "Name": "tooltree-tree-x", "Destination": TREE_MOUNT, "RW": False}
    details["Mounts"] = [mount]
    assert check_hardening(details, CONFIG, tree_volume="tooltree-tree-x") == []
    mount["RW"] = True
    assert "the tree volume is writable" in check_hardening(details, CONFIG, tree_volume="tooltree-tree-x")
    details["Mounts"] = []
    assert "the tree volume is not mounted" in check_hardening(details, CONFIG, tree_volume="tooltree-tree-x")


def test_a_requested_runtime_must_be_in_effect() -> None:
    config = SandboxConfig(owner=TEST_OWNER, runtime="runsc")
    assert any("runtime" in v for v in check_hardening(compliant_inspect(), config))


def test_the_supervisor_self_report_must_show_no_privileges() -> None:
    good = {
        "uid": 10001,
        "pid": 1,
        "dumpable": 0,
        "CapEff": "0000000000000000",
        "CapPrm": "0000000000000000",
        "NoNewPrivs": "1",
        "Seccomp": "2",
    }
    assert check_process_status(good) == []
    assert check_process_status({**good, "pid": 7})
    assert check_process_status({**good, "dumpable": 1})
    assert check_process_status({**good, "dumpable": -1})
    assert check_process_status({**good, "uid": 0})
    assert check_process_status({**good, "CapEff": "00000000a80425fb"})
    assert check_process_status({**good, "NoNewPrivs": "0"})
    assert check_process_status({**good, "Seccomp": "0"})
    assert check_process_status({**good, "Seccomp": "0"}, gvisor=True) == []
    assert check_process_status({"uid": 10001})


def test_the_container_spec_asks_for_every_setting() -> None:
    spec = container_spec(CONFIG, name="n", session_id="s", image="img", tree_volume="vol")
    host = spec["host_config"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert any(opt.startswith("seccomp={") for opt in host["SecurityOpt"])
    assert (host["PidsLimit"], host["Memory"], host["MemorySwap"]) == (256, 512 << 20, 512 << 20)
    assert host["LogConfig"]["Type"] == "none" and "Init" not in host
    assert host["Mounts"] == [
        {
            "Type": "volume",
            "Source": "vol",
            "Target": TREE_MOUNT,
            "ReadOnly": True,
            "VolumeOptions": {"NoCopy": True, "Labels": {"tooltree.owner": TEST_OWNER}},
        }
    ]
    maker = f"{socket.gethostname()}:{os.getpid()}"
    assert spec["user"] == "10001:10001"
    assert spec["labels"] == {"tooltree.owner": TEST_OWNER, "tooltree.session": "s", "tooltree.host": maker}
    assert spec["stdin_open"] is True and spec["command"] == [*SUPERVISOR_COMMAND, "--tree", TREE_MOUNT]


def test_extra_labels_never_replace_the_owner_or_session_label() -> None:
    config = SandboxConfig(owner=TEST_OWNER, labels={"tooltree.owner": "someone-else", "team": "a"})
    labels = container_spec(config, name="n", session_id="s", image="img")["labels"]
    maker = f"{socket.gethostname()}:{os.getpid()}"
    assert labels == {"team": "a", "tooltree.owner": TEST_OWNER, "tooltree.session": "s", "tooltree.host": maker}


@pytest.mark.docker
def test_a_real_container_created_with_our_settings_passes(
    docker_engine: EngineWithCLI, backend: DockerBackend
) -> None:
    config = backend.config
    spec = container_spec(
        config, name=f"tooltree-hardening-probe-{TEST_OWNER}", session_id="probe", image=backend.image
    )
    container = docker_engine.create_container(spec)
    try:
        details = docker_engine.json(["inspect", container])[0]  # as the command line sees it
        assert check_hardening(details, config) == []
        assert check_hardening(docker_engine.inspect_container(container), config) == []
        del details["HostConfig"]["ReadonlyRootfs"]
        assert "the root filesystem is not read-only (ReadonlyRootfs)" in check_hardening(details, config)
    finally:
        docker_engine.remove_container(container)


@pytest.mark.docker
def test_launch_refuses_and_removes_a_container_created_without_a_setting(
    docker_engine: EngineWithCLI, backend: DockerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sandbox.docker_backend as docker_backend

    def without_read_only(*args: Any, **kwargs: Any) -> dict[str, Any]:
        spec = container_spec(*args, **kwargs)
        del spec["host_config"]["ReadonlyRootfs"]
        return spec

    monkeypatch.setattr(docker_backend, "container_spec", without_read_only)
    with pytest.raises(HardeningError) as info:
        backend.launch("refused-session")
    assert any("read-only" in v for v in info.value.violations)
    left = docker_engine.text(["ps", "--all", "--quiet", "--filter", "label=tooltree.session=refused-session"])
    assert left == ""


def test_a_hardening_error_pickled_or_copied_keeps_its_container_and_violations() -> None:
    import pickle

    error = HardeningError("tooltree-1", ["network mode is bridge, not none"])
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error)):  # before: TypeError, missing 'violations'
        assert (type(again), str(again), again.container, again.violations) == (
            HardeningError,
            str(error),
            "tooltree-1",
            ["network mode is bridge, not none"],
        )
