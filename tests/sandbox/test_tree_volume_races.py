"""A tree's volume removed while a sandbox starts on it (`tooltree sandbox prune`, another tooltree process of the
same owner removing a copy it no longer uses): the start copies the tree again and goes on.

A copy is named by its tree's content and owner, so every tooltree process of that owner on the engine shares it. The
engine refuses to remove a volume a container uses, but between a backend's finding its volume and the create of the
container that mounts it, nothing holds it: there the remover is run (`RacingEngine`), and the engine makes an empty
volume of that name for the create.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.config import TREE_MOUNT
from sandbox.docker_backend import TREE_VOLUME_PREFIX
from sandbox.errors import IncompleteTreeError
from sandbox.tree_pack import pack_tree
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import write_sample_tree

pytestmark = pytest.mark.docker

READ_STUB = "from servers.crm import list_leads\nprint(list_leads.__name__)"


COPY_TARGET = "/dst"
"""Where the container copying a tree into its volume mounts that volume (`DockerBackend._fill_tree_volume`)."""


class RacingEngine(EngineWithCLI):
    """The engine, running ``remover`` just before each of its first ``times`` creates of a container mounting a
    volume at ``target``: a sandbox's tree (default), or the volume a tree is copied into (`COPY_TARGET`)."""

    def __init__(self, remover: Callable[[], object], times: int = 1, target: str = TREE_MOUNT) -> None:
        super().__init__()
        self.remover = remover
        self.times = times
        self.target = target
        self.creates = 0
        """Creates of containers mounting a volume at ``target``."""

    def create_container(self, spec: Mapping[str, Any]) -> str:
        mounts = (spec.get("host_config") or {}).get("Mounts") or []
        if any(mount.get("Target") == self.target for mount in mounts):
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


@pytest.mark.parametrize("target", [TREE_MOUNT, COPY_TARGET], ids=["sandbox", "copy"])
def test_a_tree_volume_the_engine_makes_again_for_a_create_is_its_owners_and_a_prune_removes_it(
    docker_engine: EngineWithCLI, config: SandboxConfig, owner: str, tmp_path: Path, racing: list[RacingEngine],
    target: str,
) -> None:  # fmt: skip
    # The volume removed just before the create of a sandbox mounting it, or of the container copying the tree into
    # it: the engine makes one of that name for the mount. Before: without labels, so the copy then made into it (a
    # create of a volume that exists does nothing) was no owner's, and `tooltree sandbox prune` never removed it.
    from tooltree_cli.main import main

    tree = write_sample_tree(tmp_path / "tree", unique=True)
    backend = DockerBackend(config, tree=tree, docker=docker_engine)
    if target == TREE_MOUNT:
        backend.prepare()
    volume = TREE_VOLUME_PREFIX + backend._owned(pack_tree(tree))[:20]

    def remove() -> None:
        assert docker_engine.remove_volume(volume)

    racing.append(engine := RacingEngine(remove, target=target))
    backend.docker = engine
    with Sandbox(backend) as sb:
        result = sb.execute(READ_STUB)
    starts = 2 if target == TREE_MOUNT else 1  # the sandbox's first start found the volume empty
    assert (result.stdout, result.error, engine.creates, backend.tree_volume) == ("list_leads\n", None, starts, volume)
    assert (docker_engine.volume_labels(volume) or {}).get("tooltree.owner") == owner
    assert main(["sandbox", "prune", "--owner", owner]) == 0
    assert not docker_engine.volume_exists(volume)


def _regenerated(backend: DockerBackend, status: str) -> tuple[str | None, str | None]:
    """Rewrite ``backend``'s tree with a new default ``status`` and have it take that tree: the record and volume it
    used before."""
    assert backend.tree is not None
    record, volume = backend._tree_record, backend.tree_volume
    stub = backend.tree / "servers" / "crm" / "list_leads.py"
    text = re.sub(r'status: str = "\w+"', f'status: str = "{status}"', stub.read_text(encoding="utf-8"))
    stub.write_text(text, encoding="utf-8")
    assert backend.refresh_tree()
    return record, volume


def test_a_regenerated_tree_leaves_no_copy_of_the_old_one_once_no_sandbox_mounts_it(
    docker_engine: EngineWithCLI, config: SandboxConfig, owner: str, tmp_path: Path
) -> None:
    # Before: each regeneration that changed the tree (`tooltree serve` follows its servers' changes all day) left the
    # old tree's volume and its record for good, two volumes more each time until a `tooltree sandbox prune`.
    backend = DockerBackend(config, tree=write_sample_tree(tmp_path / "tree", unique=True), docker=docker_engine)
    count_status = "print(open('servers/crm/list_leads.py').read().count('= \"{}\"'))"
    with Sandbox(backend) as old:
        assert old.execute("print(1)").stdout == "1\n"
        record, volume = _regenerated(backend, "shut")
        assert volume is not None and record is not None
        assert docker_engine.volume_exists(volume) and not docker_engine.volume_exists(record)  # the sandbox mounts it
        assert old.execute(count_status.format("open")).stdout == "1\n"
    assert not docker_engine.volume_exists(volume)
    for name in _regenerated(backend, "held"):
        assert name is not None and not docker_engine.volume_exists(name)
    with Sandbox(backend) as sb:
        result = sb.execute(count_status.format("held"))
    assert result.stdout == "1\n"
    current = sorted([backend.tree_volume or "", backend._tree_record or ""])
    assert sorted(docker_engine.volumes(f"tooltree.owner={owner}")) == current


def test_a_copy_another_backend_removes_as_no_longer_used_while_a_sandbox_starts_on_it_costs_that_start_a_copy(
    docker_engine: EngineWithCLI, config: SandboxConfig, tmp_path: Path, racing: list[RacingEngine]
) -> None:
    # A copy is named by its content and owner: two tooltree processes of one owner serving the same tree share it.
    # Before (as the removal of a copy no longer used was first made): the other's start, between finding the copy
    # and its container's create, got an empty volume and failed, 'its tree volume holds no whole copy of the tree'.
    first = write_sample_tree(tmp_path / "first", unique=True)
    second = tmp_path / "second"
    shutil.copytree(first, second)
    regenerating = DockerBackend(config, tree=first, docker=docker_engine)
    regenerating.prepare()
    removed: list[bool] = []

    def regenerate() -> None:
        _record, volume = _regenerated(regenerating, "shut")
        removed.append(volume is not None and not docker_engine.volume_exists(volume))

    racing.append(engine := RacingEngine(regenerate))
    starting = DockerBackend(config, tree=second, docker=engine)
    starting.prepare()
    assert starting.tree_volume is not None and starting.tree_volume == regenerating.tree_volume  # one copy of both
    with Sandbox(starting) as sb:
        result = sb.execute(READ_STUB)
    assert (result.stdout, result.error, removed, engine.creates) == ("list_leads\n", None, [True], 2)


def test_a_refresh_of_the_tree_while_a_sandbox_starts_on_its_backend_leaves_that_start_the_tree_it_began_with(
    docker_engine: EngineWithCLI, config: SandboxConfig, tmp_path: Path, racing: list[RacingEngine]
) -> None:
    # `tooltree serve` starts every session's sandbox on one backend, which a regeneration refreshes meanwhile. Before:
    # the start failed, "unexpected mount at '/opt/tooltree/tree'": the old tree's volume, removed as superseded just
    # before the create (the engine made it again, empty, for the mount), was checked against the new tree's.
    count_status = "print(open('servers/crm/list_leads.py').read().count('= \"{}\"'))"
    racing.append(engine := RacingEngine(lambda: _regenerated(backend, "shut")))
    backend = DockerBackend(config, tree=write_sample_tree(tmp_path / "tree", unique=True), docker=engine)
    backend.prepare()
    first = backend.tree_volume
    assert first is not None
    with Sandbox(backend) as sb:
        began = sb.execute(count_status.format("open"))
    assert (began.stdout, began.error, engine.creates) == ("1\n", None, 1)
    assert backend.tree_volume != first and not docker_engine.volume_exists(first)  # removed once its sandbox ended
    with Sandbox(backend) as sb:
        assert sb.execute(count_status.format("shut")).stdout == "1\n"
