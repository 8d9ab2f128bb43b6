"""`tooltree sandbox prune --dry-run` lists what the prune removes, and the prune lists it as it goes (real engine).

Every container, volume and image here carries an owner label of this test alone (the ``owner`` fixture), or is a
stale derived image of another owner of this test's, made to show that ``--owner`` selects images too.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Iterator

import pytest

from sandbox.image import (
    DERIVED_KEY_LABEL,
    DERIVED_REPOSITORY,
    IMAGE_REPOSITORY,
    PARENT_ID_LABEL,
    context_tar,
    image_name,
)
from sandbox.prune import age, size
from tests.docker_cli import EngineWithCLI
from tooltree_cli.main import main

NO_SUCH_PARENT_ID = "sha256:" + "0" * 64
"""The parent ID a stale derived image says it was built on: not the ID of the image its parent's name names."""


def _stale_derived_image(docker: EngineWithCLI, owner: str, tag: str) -> str:
    """A derived image of ``owner``'s built on a parent its name no longer names: labels only, on the sandbox
    image (nothing is installed), so the build takes a moment."""
    name = f"{DERIVED_REPOSITORY}:{tag}"
    labels = {
        "tooltree.owner": owner, DERIVED_KEY_LABEL: tag, PARENT_ID_LABEL: NO_SUCH_PARENT_ID,
        "tooltree.parent": image_name(),
    }  # fmt: skip
    dockerfile = f"FROM {image_name()}\nLABEL tooltree.test-stale={tag}\n".encode()
    docker.build_image(context_tar({"Dockerfile": dockerfile}), name, build_args={}, labels=labels, deadline=300)
    return name


@pytest.fixture
def images(docker_engine: EngineWithCLI, owner: str) -> Iterator[list[str]]:
    """The names of the images this test makes, removed after (those prune left)."""
    made: list[str] = []
    yield made
    for name in made:
        docker_engine.run(["rmi", name], check=False)


def _listed(out: str, prefix: str) -> list[str]:
    """The ``<kind> <name>`` of each line of ``out`` starting ``prefix`` and a kind (its details in brackets left
    out; not the count line)."""
    listed = [line[len(prefix) :].split(" (")[0] for line in out.splitlines() if line.startswith(prefix)]
    return [item for item in listed if item.split(" ")[0] in ("container", "volume", "image")]


def _said(out: str, start: str) -> str:
    """What the one line of ``out`` beginning ``start`` says after its details in brackets."""
    (line,) = [line for line in out.splitlines() if line.startswith(start)]
    return line.split(")", 1)[1]


@pytest.mark.docker
def test_dry_run_removes_nothing_and_lists_exactly_what_the_prune_then_removes(
    docker_engine: EngineWithCLI, owner: str, images: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: no --dry-run (argparse refused it); what prune would remove was only seen with `docker ps`, and its
    # stale images were removed engine-wide whatever --owner said.
    label = f"tooltree.owner={owner}"
    live = f"tooltree.host={socket.gethostname()}:{os.getpid()}"  # a running tooltree process's: it stays
    leftover, busy = f"tooltree-test-{owner}-left", f"tooltree-test-{owner}-busy"
    for volume in (leftover, busy):
        docker_engine.create_volume(volume, {"tooltree.owner": owner})
    create = ["create", "--label", label, "--network", "none"]
    dead = docker_engine.text([*create, "--name", f"{owner}-dead", "-v", f"{leftover}:/data", image_name(), "true"])
    kept = docker_engine.text([*create, "--label", live, "-v", f"{busy}:/data", image_name(), "true"])
    stale = _stale_derived_image(docker_engine, owner, f"test-{owner}")
    others = _stale_derived_image(docker_engine, f"{owner}-other", f"test-{owner}-other")
    images += [stale, others]
    try:
        assert main(["sandbox", "prune", "--owner", owner, "--dry-run"]) == 0
        dry = capsys.readouterr().out
        expected = [f"container {owner}-dead", f"volume {leftover}", f"image {stale}"]
        assert _listed(dry, "would remove ") == expected
        # Its id, state and age (before: `created` alone, the engine's words for one never started say no age).
        assert re.search(rf"would remove container {owner}-dead \({dead[:12]}, created (just now|\d+ \w+ ago)\)", dry)
        stale_size = size(docker_engine.images(f"{DERIVED_KEY_LABEL}=test-{owner}")[0].size)
        assert f"would remove image {stale} ({stale_size}, built " in dry and f"volume {leftover} (created " in dry
        assert _said(dry, f"would keep volume {busy} (created ") == ": a container that stays mounts it"
        assert (
            f"would remove 1 container(s) and 1 volume(s) labelled {label}, and 1 stale image(s) with pip packages: "
            f"{stale} (dry run: nothing was removed)\n"
        ) in dry
        assert "would keep the containers of tooltree processes still running here" in dry
        assert set(docker_engine.owned(owner)) == {dead[:12], kept[:12]}  # nothing was removed
        assert all(docker_engine.volume_exists(v) for v in (leftover, busy))
        assert docker_engine.image_exists(stale) and docker_engine.image_exists(others)

        assert main(["sandbox", "prune", "--owner", owner]) == 0
        real = capsys.readouterr().out
        assert _listed(real, "removed ") == expected  # the same, as each went
        assert real.startswith(f"removed container {owner}-dead ({dead[:12]}, created ")  # before the count
        assert _said(real, f"kept volume {busy} (created ") == ": a container that stays mounts it"
        assert docker_engine.owned(owner) == [kept[:12]]
        assert not docker_engine.volume_exists(leftover) and docker_engine.volume_exists(busy)
        assert not docker_engine.image_exists(stale)
        assert docker_engine.image_exists(others)  # another owner's stale image: not this prune's to remove
    finally:
        docker_engine.remove_container(kept)
        docker_engine.remove_container(dead)
        for volume in (leftover, busy):
            docker_engine.remove_volume(volume)


@pytest.mark.docker
def test_dry_run_with_nothing_left_says_so(
    docker_engine: EngineWithCLI, owner: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox", "prune", "--owner", owner, "--dry-run"]) == 0
    assert capsys.readouterr().out == (
        f"would remove 0 container(s) and 0 volume(s) labelled tooltree.owner={owner} (dry run: nothing was removed)\n"
    )


@pytest.mark.docker
def test_a_running_container_of_an_older_release_is_kept_and_an_ended_one_removed(
    docker_engine: EngineWithCLI, owner: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Releases before the tooltree.host label made none: a prune after an upgrade took the running containers of
    # the older tooltree still serving (its live sessions, with what their workspaces held unsaved) for leftovers.
    # One whose tooltree was killed ends on its own (its stdin closes), so a running one is kept unless --all.
    create = ["--label", f"tooltree.owner={owner}", "--network", "none"]
    live = docker_engine.text(
        ["run", "--detach", *create, "--name", f"{owner}-older-live", image_name(), "sleep", "600"]
    )
    ended = docker_engine.text(["create", *create, "--name", f"{owner}-older-ended", image_name(), "true"])
    try:
        for dry_run, said in ((["--dry-run"], "would keep"), ([], "kept")):
            assert main(["sandbox", "prune", "--owner", owner, *dry_run]) == 0
            out = capsys.readouterr().out
            assert _said(out, f"{said} container {owner}-older-live ({live[:12]}, up ") == (
                ": running, made by an older tooltree (it says not which process), whose session it may still be: "
                "--all removes it"
            )
            assert _listed(out, "would remove " if dry_run else "removed ") == [f"container {owner}-older-ended"]
        assert docker_engine.owned(owner) == [live[:12]]
        assert main(["sandbox", "prune", "--owner", owner, "--all"]) == 0
        assert _listed(capsys.readouterr().out, "removed ") == [f"container {owner}-older-live"]
        assert docker_engine.owned(owner) == []
    finally:
        docker_engine.run(["rm", "--force", live, ended], check=False)


@pytest.mark.docker
def test_a_running_container_of_a_process_not_running_here_is_kept_unless_all(
    docker_engine: EngineWithCLI, owner: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a prune without --all removed it, ending a live session of a tooltree on another host sharing the engine
    # (or in another PID namespace under this host's name), whose process the prune cannot see; one whose tooltree
    # was killed ends on its own (its stdin closes), as the sweep at a start already assumes.
    finished = subprocess.Popen(["true"])  # only its pid matters, once it has exited
    finished.wait()
    makers = {"elsewhere": f"another-host:{os.getpid()}", "namespace": f"{socket.gethostname()}:{finished.pid}"}
    made = {}
    for name, maker in makers.items():
        labels = ["--label", f"tooltree.owner={owner}", "--label", f"tooltree.host={maker}"]
        made[name] = docker_engine.text(
            ["run", "--detach", *labels, "--network", "none", "--name", f"{owner}-{name}", image_name(), "sleep", "600"]
        )
    try:
        for dry_run, said in ((["--dry-run"], "would keep"), ([], "kept")):
            assert main(["sandbox", "prune", "--owner", owner, *dry_run]) == 0
            out = capsys.readouterr().out
            assert _listed(out, "would remove " if dry_run else "removed ") == []
            for name, maker in makers.items():
                assert _said(out, f"{said} container {owner}-{name} ({made[name][:12]}, up ") == (
                    f": running, made by tooltree process {maker}, which is not running on this host (a process of "
                    "another host sharing the engine, or of another PID namespace), whose session it may still be: "
                    "--all removes it"
                )
        assert sorted(docker_engine.owned(owner)) == sorted(c[:12] for c in made.values())
        assert main(["sandbox", "prune", "--owner", owner, "--all"]) == 0
        removed = sorted(_listed(capsys.readouterr().out, "removed "))
        assert removed == [f"container {owner}-{name}" for name in sorted(makers)]
        assert docker_engine.owned(owner) == []
    finally:
        docker_engine.run(["rm", "--force", *made.values()], check=False)


@pytest.mark.docker
def test_a_container_whose_host_label_names_no_possible_process_is_listed_for_removal(
    docker_engine: EngineWithCLI, owner: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a PID of 20 digits (or `²`, a digit to str.isdigit alone) was an OverflowError (ValueError), exit 70.
    made = []
    for n, pid in enumerate(("9" * 20, "\u00b2")):
        labels = ["--label", f"tooltree.owner={owner}", "--label", f"tooltree.host={socket.gethostname()}:{pid}"]
        made.append(
            docker_engine.text(["create", *labels, "--network", "none", "--name", f"{owner}-{n}", image_name(), "true"])
        )
    try:
        assert main(["sandbox", "prune", "--owner", owner, "--dry-run"]) == 0
        listed = sorted(_listed(capsys.readouterr().out, "would remove "))
        assert listed == [f"container {owner}-0", f"container {owner}-1"]
    finally:
        docker_engine.run(["rm", "--force", *made], check=False)


@pytest.mark.docker
def test_the_sandbox_image_an_older_release_left_is_listed_as_kept_with_what_removes_it(
    docker_engine: EngineWithCLI, owner: str, images: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: each upgrade left the image of the older sources (~170 MB) and neither a prune nor its dry run said so.
    # It is kept: another install of tooltree sharing the engine may still run it.
    older = f"{IMAGE_REPOSITORY}:test-{owner}"
    dockerfile = f"FROM {image_name()}\nLABEL tooltree.test-older={owner}\n".encode()
    docker_engine.build_image(context_tar({"Dockerfile": dockerfile}), older, build_args={},
                              labels={"tooltree.owner": owner}, deadline=300)  # fmt: skip
    images.append(older)
    for dry_run, said in ((["--dry-run"], "would keep"), ([], "kept")):
        assert main(["sandbox", "prune", "--owner", owner, *dry_run]) == 0
        out = capsys.readouterr().out
        assert _said(out, f"{said} image {older} (") == ": the sandbox image of other tooltree sources"
        assert out.endswith(
            "1 sandbox image(s) of other tooltree sources than these: an older release's (each upgrade leaves one), "
            "or another install's on this engine, which may still run it; not removed: `docker image rm NAME` "
            "removes one once no tooltree runs it\n"
        )
        assert docker_engine.image_exists(older)


def test_ages_and_sizes_read_as_docker_says_them() -> None:
    assert [age(1000.0, now) for now in (1000.5, 1030.0, 1000.0 + 3 * 60, 1000.0 + 7200, 1000.0 + 86400)] == [
        "just now", "30 seconds ago", "3 minutes ago", "2 hours ago", "1 day ago",
    ]  # fmt: skip
    assert [size(n) for n in (512, 166_499_512, 3_200_000_000)] == ["512B", "166MB", "3.2GB"]


def test_dry_run_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sandbox", "prune", "--help"])
    assert "--dry-run" in capsys.readouterr().out
