"""Privilege and kernel surface: every way up or out that a script can ask the kernel for is refused.

System calls are made directly (``syscall(2)`` through ctypes) so that no library decides for us.
Each is refused by the seccomp profile (`sandbox.seccomp`), the missing capabilities, or both; the
outcome is the same ``EPERM`` either way.

Covered elsewhere: ``io_uring_setup``, ``ptrace(PTRACE_TRACEME)`` and ``unshare(0)``
(tests/sandbox/test_seccomp.py::test_io_uring_ptrace_and_unshare_fail_with_eperm_in_the_sandbox);
signalling pid 1 and opening ``/proc/1/fd`` or ``/proc/1/mem``
(tests/sandbox/test_sandbox_session.py::test_the_script_can_neither_reach_the_channel_through_proc_nor_kill_the_supervisor);
no setuid files in the image (tests/sandbox/test_sandbox_image.py).
"""

from __future__ import annotations

import platform

import pytest

from sandbox import Sandbox
from tests.security.probes import probe, run_ok

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the system call numbers below are x86_64's"),
]

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, SIGCHLD = 0x20000, 0x10000000, 0x40000000, 17

SYSCALLS = {
    # name: expression (x86_64 numbers); every one must fail with EPERM
    "setuid_root": "syscall(105, 0)",
    "setgid_root": "syscall(106, 0)",
    "setgroups": "syscall(116, 0, 0)",
    "unshare_user_namespace": f"syscall(272, {CLONE_NEWUSER})",
    "unshare_mount_namespace": f"syscall(272, {CLONE_NEWNS})",
    "unshare_network_namespace": f"syscall(272, {CLONE_NEWNET})",
    "clone_into_a_user_namespace": f"syscall(56, {CLONE_NEWUSER | SIGCHLD}, 0, 0, 0, 0)",
    "setns": "syscall(308, 0, 0)",
    "mount_tmpfs": "syscall(165, b'none', b'/tmp', b'tmpfs', 0, 0)",
    "remount_root_writable": "syscall(165, b'none', b'/', 0, 0x20 | 0x1000, 0)",  # MS_REMOUNT | MS_BIND
    "umount_proc_sys": "syscall(166, b'/proc/sys', 2)",
    "pivot_root": "syscall(155, b'/tmp', b'/tmp')",
    "chroot": "syscall(161, b'/tmp')",
    "bpf": "syscall(321, 0, 0, 0)",
    "perf_event_open": "syscall(298, 0, 0, -1, -1, 0)",
    "keyctl": "syscall(250, 0, 0, 0, 0, 0)",
    "add_key": "syscall(248, b'user', b'k', b'v', 1, -2)",
    "request_key": "syscall(249, b'user', b'k', 0, -2)",
    "userfaultfd": "syscall(323, 0)",
    "kexec_load": "syscall(246, 0, 0, 0, 0)",
    "kexec_file_load": "syscall(320, -1, -1, 0, 0, 0)",
    "init_module": "syscall(175, 0, 0, b'')",
    "finit_module": "syscall(313, 0, b'', 0)",
    "delete_module": "syscall(176, b'overlay', 0)",
    "io_uring_enter": "syscall(426, 0, 0, 0, 0, 0, 0)",
    "io_uring_register": "syscall(427, 0, 0, 0, 0)",
    "ptrace_attach_the_supervisor": "syscall(101, 16, 1, 0, 0)",
    "ptrace_seize_the_supervisor": "syscall(101, 0x4206, 1, 0, 0)",
    "process_vm_readv_the_supervisor": "syscall(310, 1, 0, 0, 0, 0, 0)",
    "open_by_handle_at": "syscall(304, -100, 0, 0)",
    "reboot": "syscall(169, 0xfee1dead, 672274793, 0x1234567, 0)",
    "swapon": "syscall(167, b'/tmp/swap', 0)",
    "sethostname": "syscall(170, b'owned', 5)",
    "settimeofday": "syscall(164, 0, 0)",
    "clock_settime": "syscall(227, 0, 0)",
    "acct": "syscall(163, 0)",
    "iopl": "syscall(172, 3)",
    "ioperm": "syscall(173, 0, 1024, 1)",
    "quotactl": "syscall(179, 0, 0, 0, 0)",
    "fanotify_init": "syscall(300, 0, 0)",
    "personality_read_implies_exec": "syscall(135, 0x0400000)",
    "chown_to_root": "(open('/workspace/mine', 'w').close(), os.chown('/workspace/mine', 0, 0))",
}


@pytest.mark.parametrize("name", list(SYSCALLS))
def test_a_privileged_or_risky_system_call_is_refused(shared: Sandbox, name: str) -> None:
    assert probe(shared, name, SYSCALLS[name]) == f"{name}: EPERM"


def test_a_script_holds_no_capabilities_and_cannot_gain_any(shared: Sandbox) -> None:
    code = (
        "import os\n"
        "keys = ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp')\n"
        "for line in open('/proc/self/status'):\n"
        "    key, _, value = line.partition(':')\n"
        "    if key in keys:\n"
        "        print(key, value.strip())\n"
        "print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())\n"
    )
    assert run_ok(shared, code).splitlines() == [
        "CapInh 0000000000000000",
        "CapPrm 0000000000000000",
        "CapEff 0000000000000000",
        "CapBnd 0000000000000000",
        "CapAmb 0000000000000000",
        "NoNewPrivs 1",
        "Seccomp 2",
        "10001 10001 10001 [10001]",
    ]


def test_su_fails_and_there_is_no_sudo(shared: Sandbox) -> None:
    code = (
        "import shutil, subprocess\n"
        "done = subprocess.run(['su', '-c', 'id', 'root'], input='root\\n', capture_output=True, text=True)\n"
        "print(done.returncode, done.stderr.strip().splitlines()[-1])\n"
        "print(shutil.which('sudo'))\n"
    )
    assert run_ok(shared, code) == "1 Password: su: Authentication failure\nNone\n"


def test_no_signal_sent_from_inside_reaches_the_supervisor(shared: Sandbox) -> None:
    code = (
        "import os\n"
        "refused = []\n"
        "for number in range(1, 65):\n"
        "    try:\n"
        "        os.kill(1, number)\n"
        "    except OSError:\n"
        "        refused.append(number)\n"
        "print('sent', refused)\n"
    )
    assert run_ok(shared, code) == "sent []\n"  # delivered to pid 1, and ignored by the kernel
    assert run_ok(shared, "print('the supervisor is still there')") == "the supervisor is still there\n"
