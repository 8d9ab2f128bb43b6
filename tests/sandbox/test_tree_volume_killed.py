"""A tree volume whose copy was cut short (its tooltree killed midway) is never taken for a whole tree."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.errors import SandboxError
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import write_sample_tree

BULK = 200
"""Modules of the tree's extra server: enough that a copy cut halfway leaves many out."""
COUNT_BULK = "import os\nprint(sum(n.endswith('.py') for n in os.listdir('/opt/tooltree/tree/servers/bulk')))"


def bulk_tree(tmp_path: Path) -> Path:
    """A tree of its own content with `BULK` modules in ``servers/bulk``."""
    tree = write_sample_tree(tmp_path / "tree", unique=True)
    (tree / "servers" / "bulk").mkdir()
    for i in range(BULK):
        (tree / "servers" / "bulk" / f"m{i}.py").write_text(f"X = {i}\n", encoding="utf-8")
    return tree


def copy_cut_short(backend: DockerBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prepare ``backend`` as a tooltree killed halfway through copying the tree would: the stream up to a file's
    header, then its end. The copy must fail and mark nothing complete."""
    from sandbox import docker_backend

    feed = docker_backend._feed

    def cut_short(attached: Any, data: bytes) -> None:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            members = tar.getmembers()
        feed(attached, data[: members[len(members) // 2].offset])

    with monkeypatch.context() as patched:
        patched.setattr(docker_backend, "_feed", cut_short)
        with pytest.raises(SandboxError, match="ended before its archive did"):
            backend.prepare()


@pytest.mark.docker
def test_a_copy_cut_between_two_files_is_not_marked_complete_and_the_next_session_gets_the_whole_tree(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tooltree killed while copying its tree into the volume closes the copying container's stdin wherever the
    # stream was: often between two files, which `tarfile` takes for the archive's end. Before: that volume was
    # marked complete with the files sent so far (3,604 of 20,029 in a `kill -9` of `tooltree exec`), and every
    # later session of the same tree mounted it.
    tree = bulk_tree(tmp_path)
    copy_cut_short(DockerBackend(test_config, tree=tree, docker=docker_engine), monkeypatch)
    with Sandbox(DockerBackend(test_config, tree=tree, docker=docker_engine)) as sb:
        result = sb.execute(f"from servers.bulk import m{BULK - 1}\n{COUNT_BULK}")
    assert (result.stdout, result.error) == (f"{BULK}\n", None)


@pytest.mark.docker
def test_a_module_costly_to_compile_ends_the_copy_at_its_memory_limit_with_a_clear_error(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path
) -> None:
    # A tree from elsewhere: 8 MB of `a` lines, under the copy's module cap, take 5 GiB and 20 s to compile. Before:
    # the copying container had no memory limit, so the host gave it all of that.
    from sandbox.docker_backend import POPULATE_MEMORY

    tree = write_sample_tree(tmp_path / "tree", unique=True)
    (tree / "servers" / "crm" / "heavy.py").write_text("a\n" * (4 * 1024 * 1024 - 16), encoding="utf-8")
    with pytest.raises(SandboxError, match=f"the copy was killed \\(out of its {POPULATE_MEMORY >> 20} MiB") as killed:
        DockerBackend(test_config, tree=tree, docker=docker_engine).prepare()
    # The command for this tree (before: `tooltree generate-tree` alone, of ./tooltree.yaml and ./tree).
    assert f"; regenerate the tree with `tooltree generate-tree --out {tree}` with --config naming" in str(killed.value)


@pytest.mark.docker
def test_a_record_of_a_removed_volume_never_leads_a_session_to_a_copy_cut_short(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unchanged tree finds its volume through a record (`TREE_KNOWN_PREFIX`). The volume removed alone (`docker
    # volume rm`, a prune that kept the record), then a copy into a volume of that name cut short: before, the next
    # session of the same tree followed the record to that volume and mounted half a tree.
    tree = bulk_tree(tmp_path)
    first = DockerBackend(test_config, tree=tree, docker=docker_engine)
    first.prepare()
    assert first.tree_volume is not None and docker_engine.remove_volume(first.tree_volume)
    copy_cut_short(DockerBackend(test_config, tree=tree, docker=docker_engine), monkeypatch)
    with Sandbox(DockerBackend(test_config, tree=tree, docker=docker_engine)) as sb:
        result = sb.execute(COUNT_BULK)
    assert (result.stdout, result.error) == (f"{BULK}\n", None)


@pytest.mark.docker
def test_a_start_on_a_tree_volume_without_a_whole_copy_copies_the_tree_again_and_starts(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, tmp_path: Path
) -> None:
    # The last check, whatever led to the volume: one that holds no whole copy (here: none at all; a copy still
    # being made, found through a record of a volume removed meanwhile, looks alike) is refused by the session's
    # own view of it, and the backend copies the tree again and starts the sandbox once more (before: that start
    # failed, and only the next one copied the tree again).
    tree = write_sample_tree(tmp_path / "tree", unique=True)
    first = DockerBackend(test_config, tree=tree, docker=docker_engine)
    first.prepare()
    volume = first.tree_volume
    assert volume is not None and docker_engine.remove_volume(volume)
    docker_engine.create_volume(volume, {"tooltree.owner": test_config.owner})  # as the engine, not the copy, makes it
    backend = DockerBackend(test_config, tree=tree, docker=docker_engine)
    with Sandbox(backend) as sb:
        result = sb.execute("from servers.crm import list_leads\nprint(list_leads.__name__)")
    assert (result.stdout, result.error, backend.tree_volume) == ("list_leads\n", None, volume)
