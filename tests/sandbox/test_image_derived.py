"""A derived image (``sandbox.image`` plus ``sandbox.pip_packages``) follows its parent's image ID (real engine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.errors import ImageError
from sandbox.image import DERIVED_REPOSITORY, context_tar, derived_image_name, derived_key, ensure_image, image_name
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER
from tooltree_cli.main import main

PARENT = f"tooltree-test-parent/{TEST_OWNER}:latest"


def _build_parent(docker: EngineWithCLI, generation: str) -> str:
    """Build (again) `PARENT` from the sandbox image, marked with ``generation``; its ID.

    A stand-in for pip records what it was asked to install, so that no package index is needed.
    """
    files = {
        "Dockerfile": (
            f"FROM {image_name()}\nCOPY pip /opt/fake-pip/pip\nENV PYTHONPATH=/opt/fake-pip\n"
            f"LABEL tooltree.test-generation={generation}\n"
            f"USER root\nRUN echo {generation} > /etc/parent-generation\nUSER 10001:10001\n"
        ).encode(),
        "pip/__init__.py": b"",
        "pip/__main__.py": b"import sys\n\nopen('/etc/tooltree-pip-args', 'w').write(' '.join(sys.argv[1:]))\n",
    }
    docker.build_image(context_tar(files), PARENT, build_args={}, labels={}, deadline=300)
    found = docker.image_id(PARENT)
    assert found is not None
    return found


def _derived_names(docker: EngineWithCLI) -> set[str]:
    key = derived_key(PARENT, ["six"])
    return {n for entry in docker.images(f"tooltree.derived-key={key}") for n in entry.names}


def _generation_seen_by_a_session() -> str:
    config = SandboxConfig(image=PARENT, pip_packages=("six",), owner=TEST_OWNER)
    with Sandbox(config=config) as sandbox:
        result = sandbox.execute("print(open('/etc/parent-generation').read().strip())")
    assert result.exit_status == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture
def derived_cleanup(docker_engine: EngineWithCLI) -> Iterator[None]:
    yield
    for name in sorted(_derived_names(docker_engine)):
        docker_engine.run(["rmi", name], check=False)
    docker_engine.run(["rmi", PARENT], check=False)


@pytest.mark.docker
@pytest.mark.usefixtures("derived_cleanup")
def test_a_parent_rebuilt_under_its_name_gets_a_new_derived_image_and_the_old_one_goes(
    docker_engine: EngineWithCLI,
) -> None:
    # Before: the derived image was named by a hash of the parent's NAME, so a rebuilt `myorg/base:latest` kept
    # running the derived image of the old parent, silently, until `--force`.
    first_id = _build_parent(docker_engine, "one")
    first = ensure_image(docker_engine, PARENT, ["six"], build=True)
    assert first == derived_image_name(first_id, ["six"])
    assert _generation_seen_by_a_session() == "one"

    second_id = _build_parent(docker_engine, "two")
    assert second_id != first_id
    with pytest.raises(ImageError) as info:  # a session never runs the derived image of the old parent
        _generation_seen_by_a_session()
    assert f"the sandbox image with six on {PARENT} as it is now (image {second_id[:19]}) is not built" in str(
        info.value
    )

    second = ensure_image(docker_engine, PARENT, ["six"], build=True)
    assert second == derived_image_name(second_id, ["six"]) != first
    assert _generation_seen_by_a_session() == "two"
    labels = docker_engine.json(["image", "inspect", second])[0]["Config"]["Labels"]
    assert labels["tooltree.parent-id"] == second_id and labels["tooltree.parent"] == PARENT
    assert _derived_names(docker_engine) == {second}  # the stale one is removed: its disk is freed
    assert not docker_engine.image_exists(first)


@pytest.mark.docker
@pytest.mark.usefixtures("derived_cleanup")
def test_a_stale_derived_image_a_container_uses_is_kept(docker_engine: EngineWithCLI) -> None:
    _build_parent(docker_engine, "one")
    first = ensure_image(docker_engine, PARENT, ["six"], build=True)
    container = docker_engine.text(["create", "--label", f"tooltree.owner={TEST_OWNER}", first, "true"])
    try:
        _build_parent(docker_engine, "two")
        assert ensure_image(docker_engine, PARENT, ["six"], build=True) != first
        assert docker_engine.image_exists(first)  # the engine keeps it while the container is there
    finally:
        docker_engine.run(["rm", "--force", container], check=False)


@pytest.mark.docker
@pytest.mark.usefixtures("derived_cleanup")
def test_a_derived_image_of_the_old_naming_goes_and_the_users_own_name_for_one_stays(
    docker_engine: EngineWithCLI,
) -> None:
    _build_parent(docker_engine, "one")
    first = ensure_image(docker_engine, PARENT, ["six"], build=True)
    first_id = docker_engine.image_id(first)
    # A derived image named as before (by the parent's name), left by an earlier version.
    old_style = f"{DERIVED_REPOSITORY}:{derived_key(PARENT, ['six'])}"
    docker_engine.run(["tag", first, old_style])
    user_image = f"tooltree-test-child/{TEST_OWNER}:1"  # the user's own name for it: never ours to remove
    docker_engine.run(["tag", first, user_image])
    try:
        _build_parent(docker_engine, "two")
        assert ensure_image(docker_engine, PARENT, ["six"], build=True) != first
        assert not docker_engine.image_exists(old_style) and not docker_engine.image_exists(first)
        assert docker_engine.image_id(user_image) == first_id
    finally:
        docker_engine.run(["rmi", user_image], check=False)


@pytest.mark.docker
@pytest.mark.usefixtures("derived_cleanup")
def test_prune_removes_a_derived_image_whose_parent_was_rebuilt_and_keeps_the_current_one(
    docker_engine: EngineWithCLI, capsys: pytest.CaptureFixture[str]
) -> None:
    _build_parent(docker_engine, "one")
    first = ensure_image(docker_engine, PARENT, ["six"], build=True, owner=TEST_OWNER)
    current = ensure_image(docker_engine, image_name(), ["six"], build=True, owner=TEST_OWNER)  # its image is current
    try:
        _build_parent(docker_engine, "two")  # and no build since: the derived image of "one" is stale
        assert main(["sandbox", "prune", "--owner", TEST_OWNER]) == 0
        out = capsys.readouterr().out  # this test run's stale images alone: prune selects images by owner too
        assert " stale image(s) with pip packages: " in out and first in out and current not in out
        assert not docker_engine.image_exists(first) and docker_engine.image_exists(current)
    finally:
        docker_engine.run(["rmi", current], check=False)
