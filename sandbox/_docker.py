"""A thin runner for the ``docker`` command line.

The CLI (not docker-py) is the one dependency: it honours ``DOCKER_HOST``, contexts and
Docker Desktop the way users expect, and it is already installed wherever an engine is.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO, Any

from sandbox.errors import EngineError, EngineUnavailableError

_UNREACHABLE_HINTS = ("cannot connect to the docker daemon", "is the docker daemon running", "error during connect")


class DockerCLI:
    """Runs ``docker`` subcommands and turns failures into `EngineError`."""

    def __init__(self, executable: str = "docker") -> None:
        self.executable = executable

    def _argv(self, args: Sequence[str]) -> list[str]:
        path = shutil.which(self.executable)
        if path is None:
            raise EngineUnavailableError(
                f"the `{self.executable}` command was not found: install Docker (Debian: apt-get install docker.io)"
            )
        return [path, *args]

    def run(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float = 120.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``docker ARGS`` and capture its output.

        Raises:
            EngineUnavailableError: the CLI is missing or no engine answers.
            EngineError: the command failed (with ``check``) or timed out.
        """
        argv = self._argv(args)
        try:
            proc = subprocess.run(
                argv, input=input, capture_output=True, timeout=timeout, check=False, env=dict(env) if env else None
            )
        except subprocess.TimeoutExpired:
            raise EngineError(
                f"`docker {' '.join(args[:3])}` did not finish within {timeout:g} s", command=list(args)
            ) from None
        if check and proc.returncode != 0:
            stderr = proc.stderr.decode("utf-8", errors="replace").strip()
            message = f"`docker {' '.join(args[:3])}` failed (exit {proc.returncode}): {stderr[-2000:]}"
            if any(h in stderr.lower() for h in _UNREACHABLE_HINTS):
                raise EngineUnavailableError(message, command=list(args), returncode=proc.returncode, stderr=stderr)
            stdout = proc.stdout.decode("utf-8", errors="replace").strip()
            raise EngineError(
                message, command=list(args), returncode=proc.returncode, stderr=stderr, output=f"{stdout}\n{stderr}"
            )
        return proc

    def text(self, args: Sequence[str], **kwargs: Any) -> str:
        """The command's stdout as stripped text.

        Raises:
            EngineUnavailableError: the CLI is missing or no engine answers.
            EngineError: the command failed.
        """
        return self.run(args, **kwargs).stdout.decode("utf-8", errors="replace").strip()

    def json(self, args: Sequence[str], **kwargs: Any) -> Any:
        """The command's stdout parsed as JSON.

        Raises:
            EngineUnavailableError: the CLI is missing or no engine answers.
            EngineError: the command failed or printed something that is not JSON.
        """
        out = self.run(args, **kwargs).stdout
        try:
            return json.loads(out)
        except ValueError:
            raise EngineError(f"`docker {' '.join(args[:2])}` printed something that is not JSON") from None

    def popen(
        self,
        args: Sequence[str],
        *,
        stdin: int | IO[bytes] | None,
        stdout: int | IO[bytes] | None,
        stderr: int | IO[bytes] | None,
    ) -> subprocess.Popen[bytes]:
        """Start ``docker ARGS`` with the given stdio.

        Raises:
            EngineUnavailableError: the CLI is missing.
        """
        return subprocess.Popen(self._argv(args), stdin=stdin, stdout=stdout, stderr=stderr, bufsize=0)

    def ping(self, timeout: float = 10.0) -> str:
        """The engine's server version.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        try:
            return self.text(["version", "--format", "{{.Server.Version}}"], timeout=timeout)
        except EngineUnavailableError:
            raise
        except EngineError as e:
            raise EngineUnavailableError(f"no Docker engine answers: {e}") from None

    def exists(self, kind: str, name: str) -> bool:
        """Whether an object (``image``, ``volume``, ``container``) of that name exists.

        Raises:
            EngineUnavailableError: no engine answers.
        """
        proc = self.run(
            [kind, "inspect", "--format", "{{.Name}}" if kind == "volume" else "{{.Id}}", name], check=False
        )
        if proc.returncode != 0 and any(h in proc.stderr.decode(errors="replace").lower() for h in _UNREACHABLE_HINTS):
            raise EngineUnavailableError(proc.stderr.decode(errors="replace").strip())
        return proc.returncode == 0
