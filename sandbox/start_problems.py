"""A sandbox that the engine could not start, said naming the setting to change: ``sandbox.runtime`` (`runtime_problem`)
or one of the limits (`limit_problem`), with its file and line. `sandbox.host.Runtime` raises these in place of the
engine's words alone."""

from __future__ import annotations

from sandbox.errors import SandboxError
from tool_tree.config import Config


def runtime_problem(error: SandboxError, runtime: str | None, config: Config) -> SandboxError | None:
    """``error`` naming where ``runtime`` was configured, when the engine's words blame the runtime; else None.

    The engine refuses a runtime it has not registered ("Unknown runtime specified nosuch") and reports
    one that fails to start ("OCI runtime create failed: ..."): either way the fix is ``sandbox.runtime``
    in the config (or registering the runtime), so the message names the file, the line and the key.
    """
    text = str(error)
    if runtime is None or (runtime not in text and "runtime" not in text.lower()):
        return None
    where = config.source if config.source != "<config>" else "the sandbox settings"
    line = config.section("sandbox").lines.get("runtime")
    if line is not None:
        where += f":{line}"
    return SandboxError(
        f"{where}: sandbox.runtime: the engine could not run the sandbox under the runtime {runtime!r}: {text} "
        "(`docker info` lists the runtimes registered with the engine; SECURITY.md, "
        '"Optional stronger boundary: gVisor", says how to register runsc)'
    )


_LIMIT_WORDS = (
    ("sandbox.memory", "memory"),
    ("HostConfig.Memory ", "memory"),
    ("Range of CPUs", "cpus"),
    ("too many open files", "nofile"),
    ("rlimit type 7:", "nofile"),
    ("HostConfig.Ulimits", "nofile"),
    ("pids limit", "pids_limit"),
    ("HostConfig.PidsLimit ", "pids_limit"),
    ("/pids.max:", "pids_limit"),
)
"""Words of a start's failure that blame one of the sandbox's limits, and the key that sets it: the engine's own
("Range of CPUs is from 0.01 to 2.00", "too many open files"), a limit past what it takes (a number past its int64
"into Go struct field HostConfig.HostConfig.PidsLimit", a ``pids.max`` past the kernel's, a ``nofile`` past the
engine's own, "error setting rlimit type 7") or the sandbox's."""


def limit_problem(error: SandboxError, config: Config) -> SandboxError | None:
    """``error`` naming where the limit it blames was set (the file, the line, the key), when the config sets it;
    else None.

    Before: a `cpus` past the machine's, a `nofile` too small for the container's start, or a `pids_limit`, `nofile`
    or `memory` past what the engine takes failed in the engine's words alone ("Range of CPUs is from 0.01 to 2.00",
    "too many open files", "cannot unmarshal number … PidsLimit of type int64"), naming no setting.
    """
    text = str(error)
    key = next((key for words, key in _LIMIT_WORDS if words in text), None)
    line = config.section("sandbox").lines.get(key) if key is not None else None
    if line is None or config.source == "<config>":
        return None
    return SandboxError(f"{config.source}:{line}: sandbox.{key}: {text}")
