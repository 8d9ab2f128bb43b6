"""Fixtures of the security suite: a prepared backend without a tree, and one shared session per module.

The engine fixture (``docker_engine``) and the sessions' ``test_config`` live in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from tests.docker_cli import EngineWithCLI


@pytest.fixture(scope="session")
def bare_backend(docker_engine: EngineWithCLI, test_config: SandboxConfig) -> DockerBackend:
    """A prepared Docker backend with the default limits and no tree."""
    b = DockerBackend(test_config, docker=docker_engine)
    b.prepare()
    return b


@pytest.fixture(scope="module")
def shared(bare_backend: DockerBackend) -> Iterator[Sandbox]:
    """One session for the probes of a module that neither depend on nor damage its state."""
    with Sandbox(bare_backend) as sb:
        yield sb
