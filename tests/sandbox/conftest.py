"""Fixtures for sandbox tests.

Tests marked ``docker`` need a Docker engine. Without one they are skipped, unless
``REQUIRE_DOCKER=1`` (as on CI), which turns a missing engine into a failure. The session
fixture builds the sandbox image when it is missing and, at the end, removes every container
and volume carrying the test owner label.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import DockerBackend, SandboxConfig
from sandbox._docker import DockerCLI
from sandbox.docker_backend import remove_containers, remove_volumes
from sandbox.errors import EngineUnavailableError
from sandbox.image import build_image

TEST_OWNER = "tooltree-test"
TEST_LABEL = f"tooltree.owner={TEST_OWNER}"

_STUB = '''\
"""crm.list_leads — generated, do not edit."""

from __future__ import annotations

from tool_tree.runtime import ToolResult, call_tool


def list_leads(*, status: str = "open") -> ToolResult:
    """List the leads with a status."""
    return call_tool("crm", "list_leads", {"status": status})
'''


def write_sample_tree(root: Path) -> Path:
    """A tiny tree with one server (``crm``) and one stub (``list_leads``)."""
    pkg = root / "servers" / "crm"
    pkg.mkdir(parents=True)
    (root / "servers" / "__init__.py").write_text("", encoding="utf-8")
    (root / "servers" / "INDEX.md").write_text("crm — 1 tool — the sales CRM\n", encoding="utf-8")
    (pkg / "__init__.py").write_text("from servers.crm.list_leads import list_leads\n", encoding="utf-8")
    (pkg / "list_leads.py").write_text(_STUB, encoding="utf-8")
    (pkg / "README.md").write_text("list_leads — List the leads with a status.\n", encoding="utf-8")
    (root / "manifest.json").write_text('{"version": 1, "servers": [], "tools": []}\n', encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[DockerCLI]:
    """A reachable engine with the sandbox image built; cleans up labelled leftovers at the end."""
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
    return SandboxConfig(owner=TEST_OWNER, timeout=20.0)


@pytest.fixture(scope="session")
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sample_tree(tmp_path_factory.mktemp("tree"))


@pytest.fixture(scope="session")
def backend(docker_engine: DockerCLI, test_config: SandboxConfig, sample_tree: Path) -> DockerBackend:
    """A prepared Docker backend with the sample tree mounted."""
    b = DockerBackend(test_config, tree=sample_tree, docker=docker_engine)
    b.prepare()
    return b
