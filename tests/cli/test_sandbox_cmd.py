"""`tooltree sandbox prune` and `tooltree image name` against the real engine."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sandbox.image import image_name
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import write_sample_tree
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


@pytest.mark.docker
def test_prune_counts_a_volume_in_use_as_kept_not_removed(
    docker_engine: EngineWithCLI, owner: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "removed 0 container(s) and 1 volume(s)" while `docker volume ls` still showed the volume.
    monkeypatch.setattr("sandbox.image.remove_stale_derived_images", lambda: [])  # the engine's images stay
    label, volume = f"tooltree.owner={owner}", f"tooltree-test-{owner}"
    docker_engine.create_volume(volume, {"tooltree.owner": owner})
    maker = f"tooltree.host={socket.gethostname()}:{os.getpid()}"  # a live process's: kept, and its volume in use
    argv = ["create", "--label", label, "--label", maker, "--network", "none", "-v", f"{volume}:/data", image_name()]
    container = docker_engine.text([*argv, "true"])
    try:
        assert main(["sandbox", "prune", "--owner", owner]) == 0
        assert capsys.readouterr().out.startswith(f"removed 0 container(s) and 0 volume(s) labelled {label}\n")
        assert docker_engine.volume_exists(volume)
    finally:
        docker_engine.remove_container(container)
        docker_engine.remove_volume(volume)


@pytest.mark.docker
def test_prune_while_a_session_copies_its_tree_leaves_the_copy_and_the_session_starts(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the copy's container carried no maker, so prune removed it mid-copy and `tooltree exec` failed
    # (exit 4, "container wait failed: No such container").
    from sandbox import DockerBackend, Sandbox, SandboxConfig, docker_backend, prune

    label, feed, pruned = f"tooltree.owner={owner}", docker_backend._feed, []

    def prune_then_feed(attached: Any, data: bytes) -> None:  # the copy's container runs, waiting for the tree
        pruned.append(prune.prune_containers(docker_engine, label=label))
        prune.remove_volumes(docker_engine, label=label)
        feed(attached, data)

    monkeypatch.setattr(docker_backend, "_feed", prune_then_feed)
    backend = DockerBackend(SandboxConfig(owner=owner), tree=own_tree(tmp_path, owner), docker=docker_engine)
    try:
        with Sandbox(backend) as sandbox:
            result = sandbox.execute("from servers.crm import list_leads\nprint(list_leads.__name__)")
        assert (result.stdout, result.error) == ("list_leads\n", None)
        assert pruned == [(0, [f"{socket.gethostname()}:{os.getpid()}"])]
    finally:
        prune.remove_volumes(docker_engine, label=label)


@pytest.mark.docker
def test_a_session_started_after_prune_removed_the_tree_volume_sees_the_tree(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path
) -> None:
    # Before: the engine made an empty, unlabelled volume of the pruned volume's name for the next session of the
    # same backend: no /workspace/servers (FileNotFoundError, ImportError), and no prune removed that volume.
    from sandbox import DockerBackend, Sandbox, SandboxConfig
    from sandbox.prune import remove_volumes

    label = f"tooltree.owner={owner}"
    backend = DockerBackend(SandboxConfig(owner=owner), tree=own_tree(tmp_path, owner), docker=docker_engine)
    try:
        with Sandbox(backend) as sandbox:
            assert sandbox.execute("print(1)").stdout == "1\n"
        assert remove_volumes(docker_engine, label=label) == 2  # the tree's volume and its record: no session runs
        with Sandbox(backend) as sandbox:
            result = sandbox.execute("from servers.crm import list_leads\nprint(list_leads.__name__)")
        assert (result.stdout, result.error) == ("list_leads\n", None)
        assert backend.tree_volume is not None and docker_engine.volume_labels(backend.tree_volume) == {
            "tooltree.owner": owner
        }
    finally:
        remove_volumes(docker_engine, label=label)


@pytest.mark.docker
def test_prune_of_one_owner_leaves_the_tree_volume_another_owners_idle_backend_uses(
    docker_engine: EngineWithCLI, owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: one volume for the tree whoever copied it, labelled with its first maker's owner: a prune of that owner
    # removed it while another owner's backend, idle (no container mounting it), was to start its next session on
    # it, which then copied the tree again (3 s for 20,000 stubs) or, pruned between its check and its start, failed.
    from sandbox import DockerBackend, Sandbox, SandboxConfig, docker_backend, prune
    from sandbox.prune import remove_volumes

    monkeypatch.setattr("sandbox.image.remove_stale_derived_images", lambda: [])  # the engine's images stay
    tree, other = write_sample_tree(tmp_path / "tree", unique=True), f"{owner}-b"
    packs: list[Path] = []
    pack = docker_backend.pack_tree
    monkeypatch.setattr(docker_backend, "pack_tree", lambda path, **kw: packs.append(path) or pack(path, **kw))
    first = DockerBackend(SandboxConfig(owner=owner), tree=tree, docker=docker_engine)
    idle = DockerBackend(SandboxConfig(owner=other), tree=tree, docker=docker_engine)
    try:
        first.prepare()
        idle.prepare()
        assert idle.tree_volume is not None and idle.tree_volume != first.tree_volume
        assert docker_engine.volume_labels(idle.tree_volume) == {"tooltree.owner": other}
        assert main(["sandbox", "prune", "--owner", owner]) == 0
        assert first.tree_volume is not None and not docker_engine.volume_exists(first.tree_volume)
        copies = len(packs)
        with Sandbox(idle) as sandbox:
            result = sandbox.execute("from servers.crm import list_leads\nprint(list_leads.__name__)")
        assert (result.stdout, result.error, len(packs)) == ("list_leads\n", None, copies)  # its copy, as it was
    finally:
        for label in (f"tooltree.owner={owner}", f"tooltree.owner={other}"):
            prune.remove_containers(docker_engine, label=label)
            remove_volumes(docker_engine, label=label)


def own_tree(folder: Path, owner: str) -> Path:
    """A sample tree of its own (copied into a volume of its own, which no other test's session uses)."""
    tree = write_sample_tree(folder / "tree")
    (tree / "servers" / "crm" / "OWNER.md").write_text(owner, encoding="utf-8")
    return tree


def test_prune_help_says_where_the_owner_label_comes_from(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sandbox", "prune", "--help"])
    assert "$TOOLTREE_SANDBOX_OWNER" in " ".join(capsys.readouterr().out.split())


@pytest.mark.docker
def test_image_build_with_nothing_to_build_says_so(
    docker_engine: EngineWithCLI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: it printed the name alone, as a build does: nothing said the build was skipped.
    assert main(["image", "build"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{image_name()}\n"
    assert captured.err == f"tooltree image: {image_name()} is current: nothing to build (--force rebuilds it)\n"


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


@pytest.mark.parametrize(
    ("given", "env", "chosen"), [([], "mine", "mine"), ([], None, "tooltree"), (["--owner", "x"], "mine", "x")]
)
def test_prune_selects_the_owner_the_commands_that_made_them_had(
    given: list[str], env: str | None, chosen: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree" whatever $TOOLTREE_SANDBOX_OWNER said, so a user who set it never saw their leftovers listed.
    from sandbox.errors import SandboxError

    asked: list[str] = []

    def plan_prune(*, owner: str, live_too: bool) -> None:
        asked.append(owner)
        raise SandboxError("no engine here")

    monkeypatch.setattr("sandbox.prune.plan_prune", plan_prune)
    if env is None:
        monkeypatch.delenv("TOOLTREE_SANDBOX_OWNER", raising=False)
    else:
        monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", env)
    assert main(["sandbox", "prune", "--dry-run", *given]) == 4
    assert asked == [chosen] and "no engine here" in capsys.readouterr().err
