"""Whether the seccomp filter in force is tooltree's, tried by the supervisor before any user code runs.

``/proc/self/status`` says that a filter is in force (``Seccomp: 2``), not which one. tooltree's profile removes calls
the engine's default allows (`sandbox.seccomp.REMOVED`); a runtime that put its own or the engine's default in its
place would still show a filter. So each removed call that can be tried without effect is made with arguments that
do nothing, and the error it gets is reported: ``EPERM`` (1) from the profile, anything else from the kernel, which
means the call got through. The host requires ``EPERM`` of each (`sandbox.in_force`). Under gVisor the Sentry answers
system calls itself: the host does not ask there.

Standard library only: this runs in the container; the host imports the same module.
"""

from __future__ import annotations

import os
import platform

IO_URING_SETUP = 425
"""The same number on every architecture (calls added since 4.17 share one table)."""
_NUMBERS = {
    "x86_64": {"ptrace": 101, "process_vm_readv": 310},
    "aarch64": {"ptrace": 117, "process_vm_readv": 270},
}
PTRACE_PEEKUSER = 3


def probe() -> dict[str, int]:
    """The errno each call got (0: it succeeded), by name. Every call is made so that it does nothing:

    - ``io_uring_setup(0, NULL)``: a ring of no entries, ``EINVAL`` where the call is allowed;
    - ``ptrace(PTRACE_PEEKUSER, 0, 0, 0)``: process 0 cannot be traced, ``ESRCH``;
    - ``process_vm_readv(own pid, NULL, 0, NULL, 0, 0)``: no vectors, 0 bytes read.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    numbers = {"io_uring_setup": IO_URING_SETUP, **_NUMBERS.get(platform.machine(), {})}
    arguments: dict[str, tuple[object, ...]] = {
        "io_uring_setup": (0, None),
        "ptrace": (PTRACE_PEEKUSER, 0, 0, 0),
        "process_vm_readv": (os.getpid(), None, 0, None, 0, 0),
    }
    errors: dict[str, int] = {}
    for name, number in numbers.items():
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *arguments[name])
        errors[name] = 0 if result >= 0 else ctypes.get_errno()
        if name == "io_uring_setup" and result >= 0:
            os.close(result)  # a ring was made after all: not left open
    return errors
