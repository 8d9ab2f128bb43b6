"""A sandbox that cannot start under the limits `sandbox:` sets says which limit, and where the config sets it.

Before: a `memory` of a few MB (above the engine's least, 6m, below what the sandbox's own processes need) failed with
"its container exited with status 137 (killed: under runc, where the memory limit ends only the script, most likely
stopped from outside: `docker kill`, `docker rm -f`)):" (a cause that was not it, and a colon with nothing after); a
`cpus` past the machine's, or a `nofile` too small for the container's start, in the engine's words alone, naming no
setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import SandboxConfig, SandboxError
from sandbox.docker_backend import closed_channel
from sandbox.host import Runtime
from sandbox.start_problems import limit_problem
from tests.support import TEST_OWNER
from tool_tree.config import load_config


def _config(tmp_path: Path, setting: str) -> Path:
    path = tmp_path / "tooltree.yaml"
    path.write_text(f"servers: {{}}\nsandbox:\n  timeout: 20\n  {setting}\n", encoding="utf-8")
    return path


def test_a_kill_the_engine_reported_out_of_memory_names_the_memory_limit_not_docker_kill() -> None:
    status = "the sandbox closed its channel: its container exited with status 137 (killed: "
    said = closed_channel("137", oom=True)
    assert said.startswith(status + "out of memory") and "raise sandbox.memory" in said and "docker kill" not in said
    assert "docker kill" in closed_channel("137")  # no word from the engine: still the likeliest cause under runc
    assert "gVisor" in closed_channel("137", gvisor=True, oom=True)  # gVisor's own explanation names memory too


@pytest.mark.parametrize(
    ("setting", "engine_words", "key"),
    [
        ("cpus: 64", "container create failed: Range of CPUs is from 0.01 to 2.00, as there are only 2 CPUs", "cpus"),
        ("nofile: 5", "container start failed: open /proc/self/fd: too many open files: unknown", "nofile"),
        ("pids_limit: 3", "the Python worker cannot start (the sandbox's processes fill its pids limit)", "pids_limit"),
        # Before, these four named no setting: a limit past what the engine, the kernel or a cgroup takes.
        (
            "pids_limit: 99999999999999999999999",
            "container create failed: json: cannot unmarshal number 99999999999999999999999 into Go struct field "
            "HostConfig.HostConfig.PidsLimit of type int64",
            "pids_limit",
        ),
        (
            "pids_limit: 4194305",
            "container start failed: failed to create shim task: OCI runtime create failed: runc create failed: unable "
            "to start container process: error during container init: error setting cgroup config for procHooks "
            'process: failed to write "4194305": write /sys/fs/cgroup/pids/docker/bf03/pids.max: invalid argument',
            "pids_limit",
        ),
        (
            "nofile: 65536",
            "container start failed: failed to create shim task: OCI runtime create failed: runc create failed: unable "
            "to start container process: error during container init: error setting rlimits for ready process: error "
            "setting rlimit type 7: operation not permitted: unknown",
            "nofile",
        ),
        (
            "memory: 99999999999999g",
            "container create failed: json: cannot unmarshal number 107374182399998926258176 into Go struct field "
            "HostConfig.HostConfig.Memory of type int64",
            "memory",
        ),
    ],
)
def test_an_engine_error_blaming_a_limit_names_the_config_file_line_and_key(
    tmp_path: Path, setting: str, engine_words: str, key: str
) -> None:
    config = load_config(_config(tmp_path, setting))
    named = limit_problem(SandboxError(engine_words), config)
    assert str(named) == f"{tmp_path / 'tooltree.yaml'}:4: sandbox.{key}: {engine_words}"
    # A limit the file does not set (its default) or a failure blaming none is left as it is.
    assert limit_problem(SandboxError(engine_words), load_config(_config(tmp_path, "tmp_size: 64m"))) is None
    assert limit_problem(SandboxError("no such image: x"), config) is None


@pytest.mark.docker
@pytest.mark.usefixtures("docker_engine")
@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("memory: 8m", "sandbox.memory: the sandbox failed to start (the sandbox closed its channel: its container "),
        ("cpus: 100000", "sandbox.cpus: container create failed: Range of CPUs is from"),
    ],
)
def test_a_sandbox_its_limits_cannot_start_says_which_and_where(
    sample_tree: Path, tmp_path: Path, setting: str, said: str
) -> None:
    config = load_config(_config(tmp_path, setting))
    settings = SandboxConfig.from_config(config, owner=TEST_OWNER)
    with Runtime(config, sample_tree, sandbox_config=settings) as rt, pytest.raises(SandboxError) as caught:
        rt.sandbox.execute("print(1)")
    error = str(caught.value)
    assert error.startswith(f"{tmp_path / 'tooltree.yaml'}:4: {said}"), error
    assert "docker kill" not in error and not error.endswith(":")
    if setting.startswith("memory"):
        assert "out of memory" in error and "raise sandbox.memory" in error
