"""`tooltree sandbox prune` and `tooltree image name` against the real engine."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from sandbox.image import image_name
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER
from tooltree_cli.main import main


@pytest.mark.docker
def test_prune_removes_every_container_with_the_owner_label(
    docker_engine: EngineWithCLI, capsys: pytest.CaptureFixture[str]
) -> None:
    label = f"tooltree.owner={TEST_OWNER}"
    for _ in range(2):
        docker_engine.text(["create", "--label", label, "--network", "none", image_name(), "true"])
    assert main(["sandbox", "prune", "--owner", TEST_OWNER]) == 0
    assert "removed 2 container(s)" in capsys.readouterr().out
    left = docker_engine.text(["ps", "--all", "--quiet", "--filter", f"label={label}"]).split()
    assert left == []


@pytest.mark.docker
def test_prune_keeps_the_containers_of_a_running_tooltree_process_unless_all(
    docker_engine: EngineWithCLI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: prune removed a running `tooltree serve`'s live sessions too (their variables and unsaved files).
    finished = subprocess.Popen(["true"])  # only its pid matters, once it has exited
    finished.wait()
    here = socket.gethostname()
    label = f"tooltree.owner={TEST_OWNER}"

    def create(maker: str) -> str:
        argv = ["create", "--label", label, "--label", f"tooltree.host={maker}", "--network", "none", image_name()]
        return docker_engine.text([*argv, "true"]).strip()

    live = create(f"{here}:{os.getpid()}")
    dead = create(f"{here}:{finished.pid}")
    elsewhere = create(f"another-host:{os.getpid()}")
    unlabelled = docker_engine.text(["create", "--label", label, "--network", "none", image_name(), "true"]).strip()

    def left() -> set[str]:
        ids = docker_engine.text(["ps", "--all", "--quiet", "--no-trunc", "--filter", f"label={label}"]).split()
        return set(ids)

    assert main(["sandbox", "prune", "--owner", TEST_OWNER]) == 0
    out = capsys.readouterr().out
    assert "removed 3 container(s)" in out
    assert f"kept the containers of tooltree processes still running here ({here}:{os.getpid()})" in out
    assert left() == {live} and {dead, elsewhere, unlabelled}.isdisjoint(left())
    assert main(["sandbox", "prune", "--owner", TEST_OWNER, "--all"]) == 0
    assert "removed 1 container(s)" in capsys.readouterr().out and left() == set()


def test_image_name_is_the_content_hash_tag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["image", "name"]) == 0
    assert capsys.readouterr().out.strip() == image_name()
    assert image_name().startswith("tooltree-sandbox:")


@pytest.mark.parametrize("argv", [["image", "build"], ["sandbox", "prune"]])
def test_without_an_engine_image_and_sandbox_commands_exit_4_in_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: "tooltree: error: EngineUnavailableError: … (run with --debug for the traceback)", exit 1.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert err.startswith("tooltree: error: no Docker engine answers at") and err.count("\n") == 1


def test_image_build_with_a_config_mistake_exits_2_before_building(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # it must not get as far as the engine
    config = tmp_path / "tooltree.yaml"
    config.write_text("servers: {}\nsandbox:\n  pip_pakages: [pandas]\n", encoding="utf-8")
    assert main(["image", "build", "--config", str(config)]) == 2
    expected = f"tooltree: error: {config}:3: sandbox.pip_pakages: unknown key (did you mean 'pip_packages'?)\n"
    assert capsys.readouterr().err == expected
