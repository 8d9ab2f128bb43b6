"""Limits and settings that gVisor (``runtime: runsc``) needs told differently, and a misconfigured runtime.

Under gVisor the engine's pids limit counts the Sentry's host threads (about five for each process of
the sandbox), so the sandbox's own processes are bounded by an ``nproc`` ulimit, which the Sentry
enforces. The tests that run containers under runsc skip where the engine has no such runtime (a
failure under ``REQUIRE_GVISOR=1``, as on CI).
"""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, SandboxError
from sandbox.hardening import check_hardening, container_spec, host_pids_limit
from sandbox.host import Runtime
from sandbox.start_problems import runtime_problem
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import SIGNAL, TAKE_EVERY_PROCESS, StartSignal, run_and_cancel
from tests.sandbox.test_hardening import compliant_inspect
from tests.sandbox.test_reset_leftovers import assert_a_reset_leaves_nothing_behind
from tests.support import TEST_OWNER
from tool_tree.config import ConfigError, load_config

GVISOR = SandboxConfig(owner=TEST_OWNER, runtime="runsc")


def _ulimits(spec_or_host: dict[str, Any]) -> dict[str, tuple[int, int]]:
    items = spec_or_host["Ulimits"]
    assert isinstance(items, list)
    return {u["Name"]: (u["Soft"], u["Hard"]) for u in items}


def test_under_gvisor_the_sandbox_processes_are_bounded_by_nproc_and_the_sentry_has_room() -> None:
    host = container_spec(GVISOR, name="n", session_id="s", image="img")["host_config"]
    assert _ulimits(host)["nproc"] == (256, 256)
    assert host["PidsLimit"] == host_pids_limit(GVISOR) == 256 * 8 + 256
    plain = container_spec(SandboxConfig(owner=TEST_OWNER), name="n", session_id="s", image="img")["host_config"]
    # Under runc the host kernel would count every container's uid 10001 together: never an nproc there.
    assert plain["PidsLimit"] == 256 and "nproc" not in _ulimits(plain)


def _gvisor_inspect() -> dict[str, Any]:
    details = copy.deepcopy(compliant_inspect(GVISOR))
    host = details["HostConfig"]
    host.update(Runtime="runsc", PidsLimit=host_pids_limit(GVISOR))
    host["Ulimits"] = [*host["Ulimits"], {"Name": "nproc", "Soft": 256, "Hard": 256}]
    return details


def test_the_hardening_check_requires_the_nproc_ulimit_under_gvisor() -> None:
    assert check_hardening(_gvisor_inspect(), GVISOR) == []
    without = _gvisor_inspect()
    without["HostConfig"]["Ulimits"] = [u for u in without["HostConfig"]["Ulimits"] if u["Name"] != "nproc"]
    assert any("no nproc ulimit of 256" in v for v in check_hardening(without, GVISOR))
    too_many = _gvisor_inspect()
    too_many["HostConfig"]["PidsLimit"] = host_pids_limit(GVISOR) + 1
    assert any("pids limit" in v for v in check_hardening(too_many, GVISOR))


def test_an_empty_runtime_is_refused_rather_than_the_default_run(tmp_path: Path) -> None:
    # `runtime: "${RUNTIME:-}"` with RUNTIME unset: the user asked for a runtime and must not get runc silently.
    with pytest.raises(SandboxError, match="runtime: an empty runtime: the engine would run its default"):
        SandboxConfig(owner=TEST_OWNER, runtime="")
    with pytest.raises(ConfigError) as raised:
        SandboxConfig.from_config(load_config(_config_with_runtime(tmp_path, "''")))
    assert str(raised.value).startswith(f"{tmp_path / 'tooltree.yaml'}:4: sandbox.runtime: an empty runtime")


def _config_with_runtime(tmp_path: Path, runtime: str) -> Path:
    path = tmp_path / "tooltree.yaml"
    path.write_text(f"servers: {{}}\nsandbox:\n  memory: 512m\n  runtime: {runtime}\n", encoding="utf-8")
    return path


def test_an_engine_error_about_the_runtime_names_the_config_file_line_and_key(tmp_path: Path) -> None:
    config = load_config(_config_with_runtime(tmp_path, "nosuch"))
    error = SandboxError("container create failed: Unknown runtime specified nosuch")
    named = runtime_problem(error, "nosuch", config)
    assert named is not None
    assert str(named).startswith(f"{tmp_path / 'tooltree.yaml'}:4: sandbox.runtime: ")
    assert "Unknown runtime specified nosuch" in str(named) and "docker info" in str(named)
    # Other failures are left as they are.
    assert runtime_problem(SandboxError("no such image: x"), "nosuch", config) is None
    assert runtime_problem(error, None, config) is None


@pytest.mark.docker
def test_an_unknown_runtime_fails_naming_the_config_and_leaves_no_container(
    docker_engine: EngineWithCLI, sample_tree: Path, tmp_path: Path
) -> None:
    config = load_config(_config_with_runtime(tmp_path, "nosuch-runtime"))
    settings = SandboxConfig.from_config(config, owner=TEST_OWNER)
    mine = ["ps", "--all", "--quiet", "--no-trunc", "--filter", f"label=tooltree.owner={TEST_OWNER}"]
    before = set(docker_engine.text(mine).split())
    with Runtime(config, sample_tree, sandbox_config=settings) as rt, pytest.raises(SandboxError) as caught:
        rt.sandbox.execute("print(1)")
    assert str(caught.value).startswith(f"{tmp_path / 'tooltree.yaml'}:4: sandbox.runtime: ")
    assert "'nosuch-runtime'" in str(caught.value)
    assert set(docker_engine.text(mine).split()) <= before


@pytest.mark.docker
def test_a_pool_of_sandboxes_under_an_unknown_runtime_fails_at_once_naming_the_config(
    docker_engine: EngineWithCLI, sample_tree: Path, tmp_path: Path
) -> None:
    # Before: `tooltree serve`'s warm pool retried the refused create, and the first client waited 60 s for it.
    from sandbox import SandboxPool

    config = load_config(_config_with_runtime(tmp_path, "nosuch-runtime"))
    settings = SandboxConfig.from_config(config, owner=TEST_OWNER)
    pool = SandboxPool(DockerBackend(settings, tree=sample_tree), size=1)
    with pool, Runtime(config, sample_tree, sandbox_config=settings, sandbox_pool=pool) as rt:
        started = time.monotonic()
        with pytest.raises(SandboxError) as caught:
            rt.sandbox.execute("print(1)")
        assert time.monotonic() - started < 20
    assert str(caught.value).startswith(f"{tmp_path / 'tooltree.yaml'}:4: sandbox.runtime: ")
    assert "no pooled sandbox can start" in str(caught.value) and "'nosuch-runtime'" in str(caught.value)


@pytest.fixture(scope="module")
def runsc(docker_engine: EngineWithCLI) -> EngineWithCLI:
    """The engine, when it has the ``runsc`` runtime; otherwise skip (fail with ``REQUIRE_GVISOR=1``, as on CI)."""
    if '"runsc"' not in docker_engine.text(["info", "--format", "{{json .Runtimes}}"]):
        if os.environ.get("REQUIRE_GVISOR") == "1":
            pytest.fail("REQUIRE_GVISOR=1 but the engine has no runsc runtime (.ci/docker-setup.sh registers it)")
        pytest.skip("the engine has no runsc (gVisor) runtime; .ci/docker-setup.sh installs and registers it")
    return docker_engine


CHILDREN = """
import os
r, w = os.pipe()
kids = []
for _ in range({n}):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        os.read(r, 1)  # until the parent has made them all and closed its end: all of them alive at once
        os._exit(0)
    kids.append(pid)
os.close(w)
print(sum(os.waitpid(k, 0)[1] == 0 for k in kids), "children ran")
"""


@pytest.mark.docker
def test_a_script_with_thirty_child_processes_runs_under_gvisor(runsc: EngineWithCLI) -> None:
    """Before, the engine's pids limit of 256 counted the Sentry's threads: about 30 processes killed the sandbox."""
    with Sandbox(DockerBackend(GVISOR, docker=runsc)) as sb:
        result = sb.execute(CHILDREN.format(n=30), timeout=20)
        assert (result.stdout, result.error) == ("30 children ran\n", None)


FORK_UNTIL_REFUSED = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError as e:
    print("fork failed with", e.errno == 11 and "EAGAIN")
print(n < 40)
"""


FORKED_TO_THE_LIMIT = SandboxConfig(owner=TEST_OWNER, runtime="runsc", pids_limit=40)


@pytest.mark.docker
def test_forking_past_pids_limit_fails_with_eagain_under_gvisor_and_the_session_lives_on(runsc: EngineWithCLI) -> None:
    # The nproc ulimit counts the supervisor's threads too (it runs as the sandbox user). Before, each execution
    # started a timer thread, in the place the previous one's freed only once that thread had ended: the next
    # execution often came first, "can't start new thread", and the supervisor exited with status 1 (once in 5
    # CI runs here, where the test ran one execution after the fork bomb; within 60 of them back to back).
    with Sandbox(DockerBackend(FORKED_TO_THE_LIMIT, docker=runsc)) as sb:
        result = sb.execute(FORK_UNTIL_REFUSED, timeout=20)
        assert (result.stdout, result.error) == ("fork failed with EAGAIN\nTrue\n", None)
        outputs = [sb.execute(f"print({i})").stdout for i in range(200)]
        assert outputs == [f"{i}\n" for i in range(200)]


@pytest.mark.docker
def test_a_cancel_while_the_script_holds_every_process_the_limit_allows_interrupts_it(runsc: EngineWithCLI) -> None:
    # Before, the cancel started a thread in the supervisor, which the limit refused: the session ended.

    bridge = StartSignal()
    with Sandbox(DockerBackend(FORKED_TO_THE_LIMIT, docker=runsc), tools=bridge) as sb:
        result = run_and_cancel(sb, bridge, TAKE_EVERY_PROCESS + SIGNAL + "time.sleep(600)\n")
        assert result.cancelled and not result.state_reset
        assert result.error == "cancelled (KeyboardInterrupt)"
        assert sb.execute("print(2)").stdout == "2\n"


@pytest.mark.docker
def test_a_reset_after_a_script_took_every_process_the_limit_allows_starts_a_fresh_interpreter(
    runsc: EngineWithCLI,
) -> None:
    # Before, the new interpreter's process and threads raced the end of the processes the reset had killed: "can't
    # start new thread", and the supervisor exited (about one reset in two).
    with Sandbox(DockerBackend(FORKED_TO_THE_LIMIT, docker=runsc)) as sb:
        # 3 rounds: the ptrace platform's stub processes keep the host threads each fork bomb adds (about 100 here,
        # 3 x pids_limit at 128 and 256; see SENTRY_THREADS_PER_TASK), and a 4th reaches the engine's limit of 576.
        for i in range(3):
            result = sb.execute(f"x = {i}\n" + TAKE_EVERY_PROCESS, timeout=20)
            assert (result.error, result.timed_out) == (None, False)
            sb.reset()
            assert sb.execute("print('x' in globals())").stdout == "False\n"


@pytest.mark.docker
def test_a_reset_under_gvisor_answers_once_the_processes_it_killed_are_gone(runsc: EngineWithCLI) -> None:
    # Before, they were zombies until the reaper's next round: 81 of 128 places were taken right after a reset.
    with Sandbox(DockerBackend(GVISOR, docker=runsc)) as sb:
        assert_a_reset_leaves_nothing_behind(sb)


@pytest.mark.docker
def test_a_gvisor_sandbox_that_ended_past_its_memory_limit_is_replaced_at_the_next_execution(
    runsc: EngineWithCLI, test_config: SandboxConfig, sample_tree: Path
) -> None:
    """The whole gVisor sandbox ends past its memory limit (tests/security/test_gvisor.py): that no longer ends the
    run, the next execution starts a new sandbox and says so."""
    from agent.toolsets.code import NEXT_IS_NEW, CodeToolset
    from sandbox.host import Runtime
    from tool_tree.config import Config

    config = SandboxConfig(owner=test_config.owner, runtime="runsc", memory="256m")
    toolset = CodeToolset(sample_tree)
    with Runtime(Config(servers=()), sample_tree, sandbox_config=config) as rt:
        grown = toolset.call("execute_python", {"code": "chunks = [bytearray(1 << 20) for _ in range(1024)]"}, rt)
        text = str(grown.content[0]["text"])
        assert grown.is_error and "exited with status 137" in text and text.endswith(NEXT_IS_NEW)
        after = toolset.call("execute_python", {"code": "print('chunks' in dir())"}, rt)
        text = str(after.content[0]["text"])
        assert not after.is_error and text.startswith("[a new sandbox was started: the previous one ended (")
        assert text.endswith("\n\nFalse") and rt.sandbox_replacements == 1
