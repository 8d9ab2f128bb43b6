"""The engine as tests use it: the sandbox's own `DockerEngine`, plus the ``docker`` command line.

The sandbox talks to the engine only through its API. Tests also look at what the engine holds
from outside, the way a user would (``docker ps``, ``docker inspect``, ``docker kill``): an
observer independent of the code under test.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from sandbox._docker import DockerEngine


class EngineWithCLI(DockerEngine):
    """A `DockerEngine` that can also run ``docker`` commands."""

    def run(
        self, args: Sequence[str], *, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``docker ARGS``; with ``check``, fail the test on a non-zero exit."""
        path = shutil.which("docker")
        if path is None:
            raise AssertionError("the `docker` command is not installed (Debian: apt-get install docker.io)")
        proc = subprocess.run([path, *args], capture_output=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args[:3])} failed: {proc.stderr.decode(errors='replace')[-2000:]}")
        return proc

    def text(self, args: Sequence[str], **kwargs: Any) -> str:
        """The stripped stdout of ``docker ARGS``."""
        return self.run(args, **kwargs).stdout.decode("utf-8", errors="replace").strip()

    def json(self, args: Sequence[str], **kwargs: Any) -> Any:
        """The stdout of ``docker ARGS`` parsed as JSON."""
        return json.loads(self.run(args, **kwargs).stdout)

    def owned(self, owner: str) -> list[str]:
        """The ids of the containers (running or not) labelled with ``owner`` (the ``owner`` fixture)."""
        return self.text(["ps", "--all", "--quiet", "--filter", f"label=tooltree.owner={owner}"]).split()
