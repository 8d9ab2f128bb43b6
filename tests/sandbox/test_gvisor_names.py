"""gVisor under any name the engine registered for it (``runsc install --runtime runsc-kvm``), not ``runsc`` alone.

Before, only the name ``runsc`` was taken for gVisor: under another name for the same binary the supervisor's
missing seccomp report failed the hardening check, and no session could start. The test that runs a session
skips where the engine has no second name for runsc (`ALIAS`, registered by .ci/docker-setup.sh); a failure
under ``REQUIRE_GVISOR=1``, as on CI.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.hardening import check_hardening, check_process_status, container_spec, engine_runs_gvisor, host_pids_limit
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_gvisor_limits import CHILDREN, FORK_UNTIL_REFUSED
from tests.sandbox.test_hardening import compliant_inspect
from tests.support import TEST_OWNER

ALIAS = "runsc-alias"
"""The second name .ci/docker-setup.sh registers for the runsc binary."""
RUNSC = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}
RUNC = {"path": "runc"}


@pytest.mark.parametrize(
    ("runtime", "info", "gvisor"),
    [
        ("runsc", {"Runtimes": {"runc": RUNC, "runsc": RUNSC}}, True),
        ("runsc-kvm", {"Runtimes": {"runsc-kvm": {"path": "/usr/bin/runsc", "runtimeArgs": ["--platform=kvm"]}}}, True),
        ("sandboxed", {"Runtimes": {"sandboxed": {"path": "runsc"}}}, True),
        ("gvisor", {"Runtimes": {"gvisor": {"runtimeType": "io.containerd.runsc.v1"}}}, True),
        ("gvisor", {"Runtimes": {"gvisor": {"runtimeType": "/opt/bin/containerd-shim-runsc-v1"}}}, True),
        ("io.containerd.runsc.v1", {"Runtimes": {"runc": RUNC}}, True),  # a shim named directly (Docker 23+)
        (None, {"DefaultRuntime": "runsc-kvm", "Runtimes": {"runsc-kvm": RUNSC}}, True),
        ("runc", {"Runtimes": {"runc": RUNC, "runsc": RUNSC}}, False),
        ("io.containerd.runc.v2", {"Runtimes": {"io.containerd.runc.v2": RUNC}}, False),
        ("crun", {"Runtimes": {"crun": {"path": "/usr/bin/crun"}}}, False),
        (None, {"DefaultRuntime": "runc", "Runtimes": {"runc": RUNC, "runsc": RUNSC}}, False),
        # Kinds that cannot be told stay runc, whose every check the container must then pass (fail closed).
        ("runsc-kvm", {"Runtimes": {"runsc-kvm": {"path": "/usr/local/bin/runsc-wrapper"}}}, False),
        ("runsc-kvm", {"Runtimes": {"runsc-kvm": "/usr/bin/runsc"}}, False),
        ("runsc-kvm", {"Runtimes": ["runsc-kvm"]}, False),
        ("runsc-kvm", {"Runtimes": {"runsc-kvm": {"path": 7, "runtimeType": None}}}, False),
        ("runsc-kvm", {}, False),
        (None, {}, False),
    ],
)
def test_gvisor_is_told_by_the_runtime_the_engine_registered_not_by_its_name(
    runtime: str | None, info: dict[str, Any], gvisor: bool
) -> None:
    assert engine_runs_gvisor(info, runtime) is gvisor


KVM = SandboxConfig(owner=TEST_OWNER, runtime="runsc-kvm")


def test_the_gvisor_limits_and_checks_follow_the_engines_answer_for_another_name() -> None:
    host = container_spec(KVM, name="n", session_id="s", image="img", gvisor=True)["host_config"]
    assert host["Runtime"] == "runsc-kvm"
    assert host["PidsLimit"] == host_pids_limit(KVM, gvisor=True) == 256 * 8 + 256
    assert {u["Name"]: u["Hard"] for u in host["Ulimits"]}["nproc"] == 256
    inspected = compliant_inspect(KVM)
    inspected["HostConfig"].update(Runtime="runsc-kvm", PidsLimit=host["PidsLimit"], Ulimits=host["Ulimits"])
    assert check_hardening(inspected, KVM, gvisor=True) == []
    # The same container, were the name not gVisor, has too high a pids limit; and without nproc, gVisor refuses it.
    assert check_hardening(inspected, KVM, gvisor=False) == ["pids limit is 2304, not 256"]
    inspected["HostConfig"]["Ulimits"] = [u for u in host["Ulimits"] if u["Name"] != "nproc"]
    assert any("no nproc ulimit of 256" in v for v in check_hardening(inspected, KVM, gvisor=True))
    # gVisor's kernel filters system calls itself and reports no seccomp filter: refused only where it is not gVisor.
    status = {"uid": 10001, "pid": 1, "dumpable": 0, "CapEff": "0", "CapPrm": "0", "NoNewPrivs": "1", "Seccomp": "0"}
    assert check_process_status(status, gvisor=True) == []
    assert check_process_status(status) == ["the supervisor is not under a seccomp filter"]
    # Without the engine's answer, the name alone decides (as before): runsc-kvm is then not gVisor.
    assert "nproc" not in {
        u["Name"] for u in container_spec(KVM, name="n", session_id="s", image="i")["host_config"]["Ulimits"]
    }


@pytest.fixture(scope="module")
def alias(docker_engine: EngineWithCLI) -> EngineWithCLI:
    """The engine, when it has runsc under the name `ALIAS`; otherwise skip (fail with ``REQUIRE_GVISOR=1``)."""
    runtimes = docker_engine.json(["info", "--format", "{{json .Runtimes}}"])
    if ALIAS not in runtimes:
        problem = (
            f"the engine has no runtime {ALIAS!r} (the runsc binary under a second name); .ci/docker-setup.sh "
            "registers it in /etc/docker/daemon.json"
        )
        if os.environ.get("REQUIRE_GVISOR") == "1":
            pytest.fail(f"REQUIRE_GVISOR=1 but {problem}")
        pytest.skip(problem)
    return docker_engine


@pytest.mark.docker
def test_a_session_under_a_second_name_for_runsc_runs_under_gvisor_with_its_limits(alias: EngineWithCLI) -> None:
    config = SandboxConfig(owner=TEST_OWNER, runtime=ALIAS, pids_limit=40)
    backend = DockerBackend(config, docker=alias)
    with Sandbox(backend) as sb:
        assert backend.gvisor is True
        host = alias.json(["inspect", sb.name])[0]["HostConfig"]  # as the command line sees it
        assert (host["Runtime"], host["PidsLimit"]) == (ALIAS, 40 * 8 + 256)
        assert {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}["nproc"] == (40, 40)
        # gVisor's own kernel answers (under runc the sandbox would see the host's kernel release).
        result = sb.execute("import os\nprint(os.uname().release)")
        assert result.error is None and result.stdout.strip() not in ("", platform.release())
        # More processes than a host pids limit of 40 would leave the Sentry threads for (about five each).
        result = sb.execute(CHILDREN.format(n=20), timeout=20)
        assert (result.stdout, result.error) == ("20 children ran\n", None)
        # The nproc ulimit bounds the sandbox's own processes, and the session lives on.
        result = sb.execute(FORK_UNTIL_REFUSED, timeout=20)
        assert (result.stdout, result.error) == ("fork failed with EAGAIN\nTrue\n", None)
        assert sb.execute("print(2)").stdout == "2\n"
