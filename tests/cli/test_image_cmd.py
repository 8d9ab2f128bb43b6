"""`tooltree image build --config`: the image built is the image `tooltree exec` runs, against the real engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.image import context_tar, derived_image_name, derived_key, image_name
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER
from tooltree_cli.common import load_optional_config
from tooltree_cli.main import main

# A stand-in for pip, so that the test needs no package index: it records what it was asked to install.
_PARENT_FILES = {
    "Dockerfile": f"FROM {image_name()}\nCOPY pip /opt/fake-pip/pip\nENV PYTHONPATH=/opt/fake-pip\n".encode(),
    "pip/__init__.py": b"",
    "pip/__main__.py": b"import sys\n\nopen('/etc/tooltree-pip-args', 'w').write(' '.join(sys.argv[1:]))\n",
}


@pytest.fixture(autouse=True)
def test_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    """Containers of these runs carry the test label, which the engine fixture removes."""
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)


@pytest.mark.docker
def test_image_build_puts_the_pip_packages_on_the_configured_image_and_exec_runs_that(
    docker_engine: EngineWithCLI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: the build put them on the sources' image while a session (`tooltree exec`) looked for them on
    # sandbox.image, and failed with "run `tooltree image build --config tooltree.yaml`", which changed nothing.
    parent = f"tooltree-test-parent:{TEST_OWNER}"
    docker_engine.build_image(context_tar(_PARENT_FILES), parent, build_args={}, labels={}, deadline=300)
    parent_id = docker_engine.image_id(parent)
    assert parent_id is not None
    derived = derived_image_name(parent_id, ["six"])
    config = tmp_path / "tooltree.yaml"
    config.write_text(f"servers: {{}}\nsandbox:\n  image: {parent}\n  pip_packages: [six]\n", encoding="utf-8")
    try:
        assert main(["image", "build", "--config", str(config)]) == 0
        assert capsys.readouterr().out == f"{derived}\n"
        # What `tooltree exec --config` runs its script in (here without a generated tree).
        limits = SandboxConfig.from_config(load_optional_config(str(config)), owner=TEST_OWNER)
        with Sandbox(config=limits) as sandbox:
            result = sandbox.execute("print(open('/etc/tooltree-pip-args').read())")
        assert result.exit_status == 0, result.stderr
        assert result.stdout.startswith("install ") and result.stdout.rstrip().endswith(" six")
    finally:
        docker_engine.run(["rmi", derived], check=False)
        docker_engine.run(["rmi", parent], check=False)


@pytest.mark.docker
def test_image_build_with_a_configured_image_that_is_missing_exits_4_in_one_line_whatever_its_servers_need(
    docker_engine: EngineWithCLI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = f"tooltree-test-missing:{TEST_OWNER}"
    config = tmp_path / "tooltree.yaml"
    # A server's token that is not set is no matter to a build (before: "environment variable ${DRIVE_TOKEN} is not
    # set", exit 2, though the build starts no server).
    server = "  drive:\n    url: https://drive.example/mcp\n    headers: {Authorization: 'Bearer ${DRIVE_TOKEN}'}\n"
    config.write_text(f"servers:\n{server}sandbox:\n  image: {missing}\n  pip_packages: [six]\n", encoding="utf-8")
    assert "DRIVE_TOKEN" not in os.environ
    assert main(["image", "build", "--config", str(config)]) == 4
    err = capsys.readouterr().err
    # Before: "the sandbox image … (sandbox.image) is not there", not saying which file set it.
    assert (
        err
        == f"tooltree: error: {config}:6: sandbox.image: the sandbox image {missing} is not there: pull or build it\n"
    )
    assert docker_engine.images(f"tooltree.derived-key={derived_key(missing, ['six'])}") == []


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "1e10", "1e308"])  # before: 1e10 was an OverflowError
def test_image_build_refuses_a_timeout_that_is_not_a_positive_number(
    value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # it must not get as far as the engine
    assert main(["image", "build", "--timeout", value]) == 2
    assert capsys.readouterr().err.startswith("tooltree: error: --timeout must be a positive number of seconds")
