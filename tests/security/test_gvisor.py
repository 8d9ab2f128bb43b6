"""The attack probes once more under gVisor (``runtime="runsc"``), when the engine has that runtime.

gVisor answers system calls from its own kernel (the Sentry), so error numbers can differ from
Linux's (``unshare`` of a user namespace gives ``EINVAL``, a connection ``EHOSTUNREACH``); what must
hold is that every attempt fails. Skipped where the engine has no ``runsc`` runtime; SECURITY.md
says how to register it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError
from tests.docker_cli import EngineWithCLI
from tests.security.probes import probe, run_ok
from tests.security.test_attack_egress import CASES as EGRESS
from tests.security.test_attack_filesystem import CASES as FILESYSTEM
from tests.security.test_attack_privilege import SYSCALLS

pytestmark = pytest.mark.docker

CASES = {
    **{f"egress-{k}": v[0] for k, v in EGRESS.items()},
    **{f"fs-{k}": v[0] for k, v in FILESYSTEM.items()},
    **{f"priv-{k}": v for k, v in SYSCALLS.items()},
}


@pytest.fixture(scope="module")
def runsc(docker_engine: EngineWithCLI) -> EngineWithCLI:
    """The engine, when it has the ``runsc`` runtime; otherwise skip (fail with ``REQUIRE_GVISOR=1``, as on CI)."""
    runtimes = docker_engine.text(["info", "--format", "{{json .Runtimes}}"])
    if '"runsc"' not in runtimes:
        if os.environ.get("REQUIRE_GVISOR") == "1":
            pytest.fail("REQUIRE_GVISOR=1 but the engine has no runsc runtime (.ci/docker-setup.sh registers it)")
        pytest.skip("the engine has no runsc (gVisor) runtime; .ci/docker-setup.sh installs and registers it")
    return docker_engine


@pytest.fixture(scope="module")
def gvisor(runsc: EngineWithCLI, test_config: SandboxConfig) -> Iterator[Sandbox]:
    docker_engine = runsc
    config = SandboxConfig(owner=test_config.owner, timeout=test_config.timeout, runtime="runsc")
    backend = DockerBackend(config, docker=docker_engine)
    with Sandbox(backend) as sb:
        yield sb


def test_the_sandbox_runs_under_gvisor_with_the_same_confinement(gvisor: Sandbox) -> None:
    code = "import os, platform, socket\nprint(platform.release(), os.getuid(), socket.if_nameindex())"
    assert run_ok(gvisor, code) == "4.4.0 10001 [(1, 'lo')]\n"  # the Sentry's made-up kernel version


# Where gVisor (release 20221219, Debian's runsc) does not hold what Linux holds; see SECURITY.md.
KNOWN_GAPS = {
    "fs-read_supervisor_environ": "the Sentry ignores the supervisor's non-dumpable flag for /proc/1",
    "fs-read_supervisor_fds": "the Sentry ignores the supervisor's non-dumpable flag for /proc/1",
    "fs-make_char_device": "mknod succeeds inside the Sentry's own tmpfs (no host device is reached)",
    "fs-make_block_device": "mknod succeeds inside the Sentry's own tmpfs (no host device is reached)",
    "priv-unshare_mount_namespace": "the Sentry implements mount namespaces itself (not the host's)",
    "priv-clone_into_a_user_namespace": "the Sentry implements user namespaces itself (not the host's)",
}


@pytest.mark.parametrize("name", [n for n in CASES if n not in KNOWN_GAPS])
def test_an_attack_fails_under_gvisor_too(gvisor: Sandbox, name: str) -> None:
    outcome = probe(gvisor, name, CASES[name], setup="GATEWAY = '172.17.0.1'")
    assert outcome.startswith(f"{name}: ") and outcome != f"{name}: OK"


@pytest.mark.parametrize("name", list(KNOWN_GAPS))
def test_the_documented_gvisor_gaps_are_exactly_these(gvisor: Sandbox, name: str) -> None:
    """Each gap in SECURITY.md is real under this runsc; if one closes, this fails and the doc must change."""
    outcome = probe(gvisor, name, CASES[name], setup="GATEWAY = '172.17.0.1'")
    assert outcome == f"{name}: OK", KNOWN_GAPS[name]


def test_a_fork_bomb_is_contained_under_gvisor(runsc: EngineWithCLI, test_config: SandboxConfig) -> None:
    from tests.security.test_attack_resources import FORK_BOMB, OTHER_PROCESSES

    config = SandboxConfig(owner=test_config.owner, runtime="runsc")
    sb = Sandbox(DockerBackend(config, docker=runsc))
    with sb:
        try:
            # The bomb reaches a limit in about 3.5 s here: the nproc ulimit (EAGAIN) or, more often, the
            # memory limit, which ends the whole sandbox. The timeout leaves room for a loaded machine (a
            # timeout of 3 s there came before either limit); only a bomb that reaches neither waits it out.
            result = sb.execute(FORK_BOMB, timeout=30)
        except SessionError:
            # Under gVisor the memory limit, or the supervisor failing to start a thread at the pids limit,
            # ends the sandbox and the execution fails; the container must then be gone.
            left = runsc.text(["ps", "--all", "--quiet", "--filter", f"name={sb.name}"])
            assert left == ""
            return
        assert result.timed_out and result.stdout == "fork failed with EAGAIN\n"
        assert run_ok(sb, OTHER_PROCESSES) == "[]\n"


# The calls our seccomp profile removes are answered by the Sentry's own implementations under gVisor:
# runsc applies an OCI seccomp profile only with --oci-seccomp, which SECURITY.md says not to set. They
# reach no host kernel code; SECURITY.md lists them. If one starts failing, this fails and the doc must change.
SENTRY_ANSWERS = {
    "io_uring_setup": "syscall(425, 4, ctypes.create_string_buffer(120))",
    "ptrace_attach_own_child": "attach_to_a_child()",
}
_ATTACH = """
def attach_to_a_child():
    import time
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    try:
        syscall(101, 16, pid, 0, 0)  # PTRACE_ATTACH
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("name", list(SENTRY_ANSWERS))
def test_calls_our_seccomp_profile_removes_are_answered_by_the_sentry(gvisor: Sandbox, name: str) -> None:
    assert probe(gvisor, name, SENTRY_ANSWERS[name], setup=_ATTACH) == f"{name}: OK"


def test_past_its_memory_limit_the_whole_gvisor_sandbox_ends(runsc: EngineWithCLI, test_config: SandboxConfig) -> None:
    """Under runc the kernel kills the interpreter alone; under gVisor the host's OOM killer kills the Sentry.

    The session ends (its output and unsaved workspace with it), and no container is left (SECURITY.md, Known
    limits). If this starts to behave as under runc, this fails and the doc must change.
    """
    config = SandboxConfig(owner=test_config.owner, runtime="runsc", memory="256m")
    sb = Sandbox(DockerBackend(config, docker=runsc))
    with sb:
        with pytest.raises(SessionError, match="exited with status 137") as ended:
            sb.execute("chunks = [bytearray(1 << 20) for _ in range(1024)]", timeout=20)
        assert "under gVisor most likely past its memory limit, sandbox.memory, which ends the whole sandbox" in str(
            ended.value
        )
        left = runsc.text(["ps", "--all", "--quiet", "--filter", f"name={sb.name}"])
        assert left == ""
