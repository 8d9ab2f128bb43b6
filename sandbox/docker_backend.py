"""`DockerBackend`: sandboxes as hardened Docker containers, driven through the ``docker`` CLI.

Starting one sandbox::

    docker create --interactive --rm <hardening flags, see sandbox.hardening> IMAGE supervisor
    docker inspect → check_hardening → refuse (and remove) unless every setting is in effect
    docker start --attach --interactive ID   ← its stdin/stdout are the channel
    supervisor's ready report → check_process_status

Nothing on the host is mounted. The tree goes in through a named volume
``tooltree-tree-<content hash>``, filled once per distinct tree by a throwaway container that
reads a tar from stdin, and mounted read-only; the workspace travels over the channel. So
the same code works with a local engine, Docker Desktop or a remote ``DOCKER_HOST``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import subprocess
import tarfile
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from sandbox._docker import DockerCLI
from sandbox.backend import Connection, SandboxBackend
from sandbox.config import SandboxConfig
from sandbox.errors import EngineError, HardeningError, ImageError, SandboxError
from sandbox.hardening import OWNER_LABEL, check_hardening, check_process_status, create_args
from sandbox.image import build_derived_image, build_image, derived_image_name, image_name

TREE_VOLUME_PREFIX = "tooltree-tree-"
MAX_TREE_BYTES = 256 << 20
_SKIP_DIRS = frozenset({"__pycache__", ".git"})


def pack_tree(tree: Path, *, max_bytes: int = MAX_TREE_BYTES) -> bytes:
    """A deterministic tar of the tree's directories and regular files (no links, no caches).

    Raises:
        SandboxError: the tree is missing or larger than ``max_bytes``.
    """
    if not tree.is_dir():
        raise SandboxError(f"{tree}: no tree here; run `tooltree generate-tree` first")
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(tree, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not Path(dirpath, d).is_symlink())
            rel_dir = os.path.relpath(dirpath, tree)
            if rel_dir != ".":
                info = tarfile.TarInfo(rel_dir)
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            for name in sorted(filenames):
                path = Path(dirpath, name)
                st = path.lstat()
                if not stat.S_ISREG(st.st_mode):
                    continue
                total += st.st_size
                if total > max_bytes:
                    raise SandboxError(f"{tree}: the tree is larger than {max_bytes} bytes")
                info = tarfile.TarInfo(os.path.normpath(os.path.join(rel_dir, name)))
                info.size, info.mode, info.mtime = st.st_size, 0o644, 0
                with path.open("rb") as f:
                    tar.addfile(info, f)
    return buf.getvalue()


class DockerConnection:
    """A started container: the ``docker start --attach`` process's pipes are the channel."""

    def __init__(self, docker: DockerCLI, container_id: str, name: str) -> None:
        self.docker = docker
        self.container_id = container_id
        self.name = name
        self.process = docker.popen(
            ["start", "--attach", "--interactive", container_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdin and self.process.stdout and self.process.stderr
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout
        self.stderr: IO[bytes] | None = self.process.stderr
        self._removed = threading.Event()

    def _remove(self) -> None:
        if self._removed.is_set():
            return
        self._removed.set()
        with contextlib.suppress(EngineError):
            self.docker.run(["rm", "--force", "--volumes", self.container_id], check=False, timeout=60)

    def close(self, timeout: float = 5.0) -> None:
        """Close the supervisor's stdin (it exits, and the container with it), then make sure."""
        with contextlib.suppress(OSError):
            self.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._remove()

    def kill(self) -> None:
        """Remove the container at once."""
        self._remove()
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class DockerBackend(SandboxBackend):
    """Runs each sandbox session in its own hardened container.

    Args:
        config: limits and settings; defaults are the safe ones.
        tree: the generated tree to mount read-only at ``/workspace/servers``; None for none.
        docker: the CLI runner (to use another executable).
        build: build the image (and the derived image with ``config.pip_packages``) when it is
            missing, instead of failing.
    """

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        tree: Path | str | None = None,
        docker: DockerCLI | None = None,
        build: bool = False,
    ) -> None:
        self.config = config or SandboxConfig()
        self.tree = Path(tree) if tree is not None else None
        self.docker = docker or DockerCLI()
        self.build = build
        self.image = self.config.image or image_name()
        self.tree_volume: str | None = None
        self._prepared = False
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Check the engine, the image and the tree volume (once).

        Raises:
            EngineUnavailableError: no engine answers.
            ImageError: the image is missing (build it: ``python -m sandbox.image build``).
            SandboxError: the tree cannot be packed.
        """
        with self._lock:
            if self._prepared:
                return
            self.docker.ping()
            if not self.docker.exists("image", self.image):
                if self.build and self.config.image is None:
                    build_image(self.docker)
                else:
                    raise ImageError(
                        f"the sandbox image {self.image} is not built: run `tooltree image build` "
                        "(or python -m sandbox.image build)"
                    )
            if self.config.pip_packages:
                packages = list(self.config.pip_packages)
                derived = derived_image_name(self.image, packages)
                if self.build:
                    build_derived_image(self.docker, self.image, packages)
                elif not self.docker.exists("image", derived):
                    raise ImageError(
                        f"the sandbox image with {', '.join(packages)} is not built: run "
                        f"python -m sandbox.image build --pip {' '.join(packages)}"
                    )
                self.image = derived
            if self.tree is not None:
                self.tree_volume = self._ensure_tree_volume(self.tree)
            self._prepared = True

    def _ensure_tree_volume(self, tree: Path) -> str:
        data = pack_tree(tree)
        name = TREE_VOLUME_PREFIX + hashlib.sha256(data).hexdigest()[:20]
        self.docker.run(["volume", "create", "--label", f"{OWNER_LABEL}={self.config.owner}", name])
        try:
            self.docker.run(
                [
                    "run", "--rm", "--interactive", "--network", "none", "--read-only", "--user", "0:0",
                    "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--log-driver", "none",
                    "--label", f"{OWNER_LABEL}={self.config.owner}",
                    "--mount", f"type=volume,src={name},dst=/dst",
                    self.image, "python3", "-I", "-m", "tooltree_supervisor.populate", "/dst",
                ],
                input=data,
                timeout=300,
            )  # fmt: skip
        except EngineError as e:
            raise SandboxError(f"could not copy the tree into volume {name}: {e.stderr[-1000:] or e}") from None
        return name

    def launch(self, session_id: str) -> DockerConnection:
        """Create, verify and start one container.

        Raises:
            HardeningError: the created container lacks a required setting (it was removed).
            EngineError: docker failed.
        """
        self.prepare()
        name = f"tooltree-{uuid.uuid4().hex[:16]}"
        args = create_args(
            self.config, name=name, session_id=session_id, image=self.image, tree_volume=self.tree_volume
        )
        args.insert(1, "--rm")
        container_id = self.docker.text(args, timeout=60)
        try:
            inspected = self.docker.json(["inspect", "--type", "container", container_id])
            details = inspected[0] if isinstance(inspected, list) and inspected else {}
            violations = check_hardening(details, self.config, tree_volume=self.tree_volume)
            if violations:
                raise HardeningError(name, violations)
            return DockerConnection(self.docker, container_id, name)
        except BaseException:
            self.docker.run(["rm", "--force", container_id], check=False)
            raise

    def verify_ready(self, connection: Connection, status: Mapping[str, Any]) -> None:
        """Raises: HardeningError: the supervisor reports privileges it must not have."""
        violations = check_process_status(status, runtime=self.config.runtime)
        if violations:
            connection.kill()
            raise HardeningError(connection.name, violations)


def remove_containers(docker: DockerCLI | None = None, *, label: str = f"{OWNER_LABEL}=tooltree") -> int:
    """Remove every container carrying ``label`` (``key=value``); returns how many.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    docker = docker or DockerCLI()
    ids = docker.text(["ps", "--all", "--quiet", "--filter", f"label={label}"]).split()
    if ids:
        docker.run(["rm", "--force", *ids], check=False, timeout=120)
    return len(ids)


def remove_volumes(docker: DockerCLI | None = None, *, label: str = f"{OWNER_LABEL}=tooltree") -> int:
    """Remove every unused volume carrying ``label``; returns how many were listed.

    Raises:
        EngineUnavailableError: no engine answers.
    """
    docker = docker or DockerCLI()
    names = docker.text(["volume", "ls", "--quiet", "--filter", f"label={label}"]).split()
    if names:
        docker.run(["volume", "rm", "--force", *names], check=False, timeout=120)
    return len(names)
