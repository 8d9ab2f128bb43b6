"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # `import mcp` takes a second; only the tests that start servers pay for it.
    from mcp import StdioServerParameters

    from sandbox import SandboxConfig
    from sandbox._docker import DockerCLI

# Every container and volume a test creates carries this owner label; the engine fixture removes them.
TEST_OWNER = "tooltree-test"
TEST_LABEL = f"tooltree.owner={TEST_OWNER}"

SAMPLE_SERVERS = Path(__file__).resolve().parent / "sample_servers"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) and async fixtures of any scope run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def sample_server_params() -> Callable[[str], StdioServerParameters]:
    """Start parameters for one of our sample servers over stdio: ``sample_server_params("crm")``.

    The names are ``docs``, ``crm`` and ``media`` (see tests/sample_servers/README.md).
    """

    def params(name: str) -> StdioServerParameters:
        from mcp import StdioServerParameters

        script = SAMPLE_SERVERS / f"{name}.py"
        if not script.is_file():
            raise ValueError(f"no sample server named {name!r} in {SAMPLE_SERVERS}")
        return StdioServerParameters(command=sys.executable, args=[str(script)])

    return params


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerCLI]:
    """A reachable engine with the sandbox image built; cleans up labelled leftovers at the end.

    Without an engine, tests that use it are skipped, unless ``REQUIRE_DOCKER=1`` (as on CI),
    which turns a missing engine into a failure.
    """
    from sandbox._docker import DockerCLI
    from sandbox.docker_backend import remove_containers, remove_volumes
    from sandbox.errors import EngineUnavailableError
    from sandbox.image import build_image

    docker = DockerCLI()
    try:
        docker.ping()
    except EngineUnavailableError as e:
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail(f"REQUIRE_DOCKER=1 but no Docker engine answers: {e}")
        pytest.skip(f"no Docker engine: {e}")
    build_image(docker)
    yield docker
    remove_containers(docker, label=TEST_LABEL)
    remove_volumes(docker, label=TEST_LABEL)


@pytest.fixture(scope="session")
def test_config() -> SandboxConfig:
    from sandbox import SandboxConfig

    return SandboxConfig(owner=TEST_OWNER, timeout=20.0)
