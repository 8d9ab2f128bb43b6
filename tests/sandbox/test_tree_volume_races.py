"""A tree's volume removed while a sandbox starts on it (`tooltree sandbox prune`, another tooltree process of the
same owner removing a copy it no longer uses): the start copies the tree again and goes on.

A copy is named by its tree's content and owner, so every tooltree process of that owner on the engine shares it. The
engine refuses to remove a volume a container uses, but between a backend's finding its volume and the create of the
container that mounts it, nothing holds it: there the remover is run (`RacingEngine`), and the engine makes an empty
volume of that name for the create.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.config import TREE_MOUNT
from sandbox.errors import IncompleteTreeError
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import write_sample_tree

pytestmark = pytest.mark.docker

READ_STUB = "from servers.crm import list_leads\nprint(list_leads.__name__)"


class RacingEngine(EngineWithCLI):
    """The engine, running ``remover`` just before each of its first ``times`` creates of a sandbox container that
    mounts the tree (not of the container copying a tree into its volume)."""

    def __init__(self, remover: Callable[[], object], times: int = 1) -> None:
        super().__init__()
        self.remover = remover
        self.times = times
        self.creates = 0
        """Creates of sandbox containers that mount the tree."""

    def create_container(self, spec: Mapping[str, Any]) -> str:
        mounts = (spec.get("host_config") or {}).get("Mounts") or []
        if any(mount.get("Target") == TREE_MOUNT for mount in mounts):
            self.creates += 1
            if self.creates <= self.times:
                self.remover()
        return super().create_container(spec)


@pytest.fixture
def config(owner: str) -> SandboxConfig:
    return SandboxConfig(owner=owner, timeout=20.0)


@pytest.fixture
def racing(docker_engine: EngineWithCLI) -> Iterator[list[RacingEngine]]:
    """The `RacingEngine`s a test makes, closed after it."""
    made: list[RacingEngine] = []
    yield made
    for engine in made:
        engine.close()


def test_a_prune_between_a_starts_lookup_of_the_tree_volume_and_its_create_costs_that_start_a_copy_not_a_failure(
    docker_engine: EngineWithCLI, config: SandboxConfig, owner: str, tmp_path: Path, racing: list[RacingEngine]
) -> None:
    # Before: the start failed, 'its tree volume holds no whole copy of the tree' (the engine made an empty volume
    # for the create); only the next start copied the tree again.
    from tooltree_cli.main import main

    tree = write_sample_tree(tmp_path / "tree", unique=True)
    pruned: list[bool] = []

    def prune() -> None:
        assert main(["sandbox", "prune", "--owner", owner]) == 0
        pruned.append(backend.tree_volume is not None and not docker_engine.volume_exists(backend.tree_volume))

    racing.append(engine := RacingEngine(prune))
    backend = DockerBackend(config, tree=tree, docker=engine)
    with Sandbox(backend) as sb:
        result = sb.execute(READ_STUB)
    assert (result.stdout, result.error, pruned) == ("list_leads\n", None, [True])
    assert engine.creates == 2  # the start that found the volume emptied, and the one after the copy


def test_a_start_that_finds_no_whole_tree_twice_fails_saying_so_and_the_next_start_gets_the_tree(
    docker_engine: EngineWithCLI, config: SandboxConfig, tmp_path: Path, racing: list[RacingEngine]
) -> None:
    # The start is tried once more, not until the tree is there: a volume emptied before each create fails it.
    tree = write_sample_tree(tmp_path / "tree", unique=True)

    def remove() -> None:
        assert backend.tree_volume is not None and docker_engine.remove_volume(backend.tree_volume)

    racing.append(engine := RacingEngine(remove, times=2))
    backend = DockerBackend(config, tree=tree, docker=engine)
    with pytest.raises(IncompleteTreeError, match="its tree volume holds no whole copy of the tree"):
        Sandbox(backend).start()
    assert engine.creates == 2
    with Sandbox(backend) as sb:
        result = sb.execute(READ_STUB)
    assert (result.stdout, result.error, engine.creates) == ("list_leads\n", None, 3)
