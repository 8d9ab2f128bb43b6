"""A container killed (status 137) is explained by the cause likeliest under the runtime it ran (`closed_channel`).

Before: the message gave both runtimes' causes whichever ran ("under gVisor most likely past its memory limit …;
under runc … most likely stopped from outside"), and under gVisor did not say that processes count against memory,
so a fork bomb read as a mystery kill rather than as the memory limit. Nor did it say that the entries of /tmp and
/dev/shm count (gVisor applies no cap on their number): a script making empty folders there was told of processes.
"""

from __future__ import annotations

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError
from sandbox.docker_backend import closed_channel
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import killed_in_a_call
from tests.sandbox.test_gvisor_limits import runsc  # noqa: F401  (a fixture)

STATUS = "the sandbox closed its channel: its container exited with status 137 (killed: "
GVISOR_CAUSE = (
    "under gVisor most likely past its memory limit, sandbox.memory, which ends the whole sandbox, with the workspace "
    "not saved and the last moment of output lost; each process costs gVisor about 6 MB and each file or folder in "
    "/tmp or /dev/shm some of it too (the cap of 16,384 on their number holds under runc only), so a script starting "
    "many processes, such as a fork bomb, or making many files reaches that limit first: raise sandbox.memory, or "
    "start fewer processes or make fewer files)"
)
RUNC_CAUSE = (
    "under runc, where the memory limit ends only the script, most likely stopped from outside: `docker kill`, "
    "`docker rm -f`)"
)


def test_a_kill_under_gvisor_names_the_memory_limit_and_what_processes_cost_it() -> None:
    assert closed_channel("137", gvisor=True) == STATUS + GVISOR_CAUSE
    assert closed_channel("137", gvisor=False) == STATUS + RUNC_CAUSE
    assert closed_channel("1", gvisor=True) == "the sandbox closed its channel: its container exited with status 1"


@pytest.mark.docker
def test_a_gvisor_sandbox_past_its_memory_limit_is_explained_by_gvisor_alone(
    runsc: EngineWithCLI,  # noqa: F811
    test_config: SandboxConfig,
) -> None:
    config = SandboxConfig(owner=test_config.owner, runtime="runsc", memory="256m")
    with Sandbox(DockerBackend(config, docker=runsc)) as sb, pytest.raises(SessionError) as ended:
        sb.execute("chunks = [bytearray(1 << 20) for _ in range(1024)]", timeout=20)
    assert str(ended.value).endswith(STATUS + GVISOR_CAUSE)


@pytest.mark.docker
def test_a_gvisor_sandbox_whose_scratch_folders_spent_its_memory_is_told_so(
    runsc: EngineWithCLI,  # noqa: F811
    test_config: SandboxConfig,
) -> None:
    # About 370,000 empty folders at the default 512m, 20 s; 5 s at 128m. Under runc the 16,384th stops with ENOSPC.
    config = SandboxConfig(owner=test_config.owner, runtime="runsc", memory="128m")
    folders = "import os\nn = 0\nwhile True:\n    os.mkdir(f'/tmp/d{n}')\n    n += 1"
    with Sandbox(DockerBackend(config, docker=runsc)) as sb, pytest.raises(SessionError) as ended:
        sb.execute(folders, timeout=60)
    assert str(ended.value).endswith(STATUS + GVISOR_CAUSE)
    assert "each file or folder in /tmp or /dev/shm" in str(ended.value)


@pytest.mark.docker
def test_a_runc_sandbox_killed_from_outside_is_explained_by_runc_alone(
    docker_engine: EngineWithCLI, backend: DockerBackend
) -> None:
    with killed_in_a_call(docker_engine, backend) as (_, error):
        assert str(error).endswith(STATUS + RUNC_CAUSE) and "gVisor" not in str(error)
