"""`tooltree sandbox prune` and `tooltree image name` against the real engine."""

from __future__ import annotations

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


def test_image_name_is_the_content_hash_tag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["image", "name"]) == 0
    assert capsys.readouterr().out.strip() == image_name()
    assert image_name().startswith("tooltree-sandbox:")
