"""The seccomp profile: current on disk, without io_uring and ptrace, and enforced in a container."""

from __future__ import annotations

import json

import pytest

from sandbox import Sandbox
from sandbox.docker_backend import DockerBackend
from sandbox.seccomp import PROFILE_PATH, REMOVED, allowed_syscalls, build_profile, main


def test_the_shipped_profile_file_is_current() -> None:
    assert main(["--check"]) == 0
    assert json.loads(PROFILE_PATH.read_text(encoding="utf-8")) == build_profile()


def test_the_profile_denies_by_default_and_never_allows_io_uring_or_ptrace() -> None:
    profile = build_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    allowed = {name for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for name in rule["names"]}
    assert allowed.isdisjoint(REMOVED)
    assert {"io_uring_setup", "io_uring_enter", "io_uring_register", "ptrace"} <= set(REMOVED)


def test_the_profile_allows_what_python_needs_and_nothing_that_needs_a_capability() -> None:
    names = set(allowed_syscalls())
    assert {"read", "write", "openat", "mmap", "futex", "execve", "wait4", "getrandom"} <= names
    assert names.isdisjoint({"mount", "umount2", "unshare", "setns", "bpf", "perf_event_open", "keyctl", "reboot"})


_PROBE = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
for name, number in [("io_uring_setup", 425), ("ptrace", 101), ("unshare", 272)]:
    result = libc.syscall(number, 0, 0, 0, 0, 0)
    print(name, result, errno.errorcode.get(ctypes.get_errno()))
"""


@pytest.mark.docker
def test_io_uring_ptrace_and_unshare_fail_with_eperm_in_the_sandbox(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        result = sb.execute(_PROBE)
    assert result.ok, result.traceback
    assert result.stdout.splitlines() == ["io_uring_setup -1 EPERM", "ptrace -1 EPERM", "unshare -1 EPERM"]
