"""Podman's Docker-compatible API (``podman system service``) as an engine: tooltree refuses it at once, naming it and
what it cannot guarantee, before it makes anything on it.

Measured with Podman 4.3.1 (Debian 12, rootful, runc, cgroup v1), given the settings of `container_spec`:

- the create fails on the workspace tmpfs's ``nr_inodes`` and ``uid``/``gid`` options ("unknown mount option");
- with those dropped, on the seccomp profile: ``seccomp=`` is read as a path on the engine's host ("file name too
  long"), so the profile tooltree sends cannot be applied, and a remote engine cannot read one from this host;
- with a profile file on its host, the container is made with a writable tmpfs at ``/run`` and ``/var/tmp`` besides
  ours, without ``noexec`` or a size, over the read-only root: `check_hardening` did not look for one.

The tests that need Podman use the ``podman_engine`` fixture (a service of their own on a temporary socket) and carry
the ``podman`` marker; ``REQUIRE_PODMAN=1`` turns a missing ``podman`` into a failure.
"""

from __future__ import annotations

import io
import json
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, SandboxConfig
from sandbox._docker import DockerEngine
from sandbox.errors import EngineError
from sandbox.hardening import check_hardening, container_spec, engine_problem
from sandbox.seccomp import build_profile
from tests.sandbox.test_engine_setups import CI_INFO
from tests.sandbox.test_hardening import compliant_inspect
from tests.support import TEST_OWNER

CONFIG = SandboxConfig(owner=TEST_OWNER)
PODMAN_VERSION: dict[str, Any] = {
    "Platform": {"Name": "linux/amd64/debian-12"},
    "Components": [
        {"Name": "Podman Engine", "Version": "4.3.1", "Details": {"APIVersion": "4.3.1", "MinAPIVersion": "4.0.0"}},
        {"Name": "Conmon", "Version": "conmon version 2.1.6, commit: unknown"},
        {"Name": "OCI Runtime (runc)", "Version": "runc version 1.1.5+ds1"},
    ],
    "Version": "4.3.1",
    "ApiVersion": "1.41",
    "MinAPIVersion": "1.24",
}
"""``GET /version`` of ``podman system service`` 4.3.1 (trimmed)."""
DOCKER_VERSION: dict[str, Any] = {
    "Platform": {"Name": ""},
    "Components": [
        {"Name": "Engine", "Version": "20.10.24+dfsg1", "Details": {"ApiVersion": "1.41"}},
        {"Name": "containerd", "Version": "1.6.20~ds1"},
        {"Name": "runc", "Version": "1.1.5+ds1"},
        {"Name": "docker-init", "Version": "0.19.0"},
    ],
    "Version": "20.10.24+dfsg1",
    "ApiVersion": "1.41",
}
"""``GET /version`` of CI's Docker 20.10 (trimmed)."""
PODMAN_TMPFS = {
    "/run": "rw,rprivate,nosuid,nodev,tmpcopyup",
    "/tmp": "rw,noexec,nosuid,nodev,size=64m,nr_inodes=16384,rprivate,tmpcopyup",
    "/dev/shm": "rw,noexec,nosuid,nodev,size=64m,nr_inodes=16384,rprivate,tmpcopyup",
    "/var/tmp": "rw,rprivate,nosuid,nodev,tmpcopyup",
    "/workspace": "rw,noexec,nosuid,nodev,size=256m,nr_inodes=32784,uid=10001,gid=10001,mode=0700,rprivate,tmpcopyup",
}
"""``HostConfig.Tmpfs`` as Podman reports it for our two, plus the two it adds to a read-only root."""


PODMAN_INFO: dict[str, Any] = {**CI_INFO, "ServerVersion": "4.3.1"}
"""``GET /info`` of the same (trimmed): it says it applies every limit, as CI's Docker does."""
DOCKER_INFO = CI_INFO


def test_podman_is_refused_by_name_and_docker_is_not() -> None:
    problem = engine_problem(PODMAN_VERSION, PODMAN_INFO)
    assert problem is not None
    assert "Podman 4.3.1" in problem
    assert "seccomp profile" in problem and "/run, /var/tmp" in problem
    assert engine_problem(DOCKER_VERSION, DOCKER_INFO) is None


def test_a_tmpfs_tooltree_did_not_ask_for_is_refused() -> None:
    inspect = compliant_inspect()
    inspect["HostConfig"]["Tmpfs"] = PODMAN_TMPFS
    violations = check_hardening(inspect, CONFIG)
    assert [v for v in violations if "tmpfs is mounted" in v] == [
        "a tmpfs is mounted at '/run' that tooltree did not ask for (writable past the read-only root)",
        "a tmpfs is mounted at '/var/tmp' that tooltree did not ask for (writable past the read-only root)",
    ]
    assert check_hardening(compliant_inspect(), CONFIG) == []


@pytest.fixture
def podman(podman_engine: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[DockerEngine]:
    """tooltree's engine, pointed at the Podman service as a user would (``DOCKER_HOST``)."""
    monkeypatch.setenv("DOCKER_HOST", podman_engine)
    engine = DockerEngine()
    yield engine
    engine.close()


@pytest.mark.podman
def test_a_sandbox_on_podman_is_refused_before_anything_is_made(
    podman: DockerEngine, podman_engine: str, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    (tree / "servers").mkdir(parents=True)
    backend = DockerBackend(CONFIG, tree=tree, docker=podman)
    with pytest.raises(EngineError) as refused:
        backend.prepare()
    message = str(refused.value)
    assert message.startswith(f"the engine at {podman_engine} cannot run a sandbox: it is Podman ")
    assert "seccomp profile only as a file on its own host" in message and "(/run, /var/tmp)" in message
    assert podman.container_entries() == [] and podman.volumes(f"tooltree.owner={TEST_OWNER}") == []


def _scratch_image(engine: DockerEngine, folder: Path) -> str:
    """An image of one file, imported (the test's Podman has no images and no registry): enough to create from."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"1\n"))
    tarball = folder / "scratch.tar"
    tarball.write_bytes(data.getvalue())
    engine.import_image(tarball, "tooltree-test-scratch", changes=[])  # Podman 4.3 would drop a tag: ``latest``
    return "tooltree-test-scratch:latest"


@pytest.mark.podman
def test_podman_takes_our_settings_only_in_part_and_its_own_tmpfs_fails_the_check(
    podman: DockerEngine, tmp_path: Path
) -> None:
    """Why the refusal is by name: tooltree's settings cannot all be given to it, and it adds mounts of its own."""
    spec = container_spec(CONFIG, name=f"tooltree-{uuid.uuid4().hex[:16]}", session_id="s1",
                          image=_scratch_image(podman, tmp_path))  # fmt: skip
    with pytest.raises(EngineError, match="file name too long"):  # the profile's text taken as a path on its host
        podman.create_container(spec)
    host_config = spec["host_config"]
    profile = tmp_path / "seccomp.json"
    profile.write_text(json.dumps(build_profile()), encoding="utf-8")
    host_config["SecurityOpt"] = ["no-new-privileges", f"seccomp={profile}"]
    with pytest.raises(EngineError, match=r'unknown mount option "(nr_inodes|uid|gid)='):
        podman.create_container(spec)
    for path, options in host_config["Tmpfs"].items():
        host_config["Tmpfs"][path] = ",".join(
            o for o in options.split(",") if o.split("=")[0] not in ("nr_inodes", "uid", "gid")
        )

    container = podman.create_container(spec)  # taken, less the entry caps and the workspace's owner
    try:
        inspected = podman.inspect_container(container)
    finally:
        podman.remove_container(container)
    assert set(inspected["HostConfig"]["Tmpfs"]) == {"/tmp", "/dev/shm", "/workspace", "/run", "/var/tmp"}
    violations = check_hardening(inspected, CONFIG)
    for path in ("/run", "/var/tmp"):
        assert f"a tmpfs is mounted at {path!r} that tooltree did not ask for (writable past the read-only root)" in (
            violations
        )
    assert podman.container_entries() == []
