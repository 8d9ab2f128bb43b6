"""Fixtures for sandbox tests.

The engine fixture (``docker_engine``) and the sessions' ``test_config`` live in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox import DockerBackend, SandboxConfig
from tests.docker_cli import EngineWithCLI

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
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sample_tree(tmp_path_factory.mktemp("tree"))


@pytest.fixture(scope="session")
def backend(docker_engine: EngineWithCLI, test_config: SandboxConfig, sample_tree: Path) -> DockerBackend:
    """A prepared Docker backend with the sample tree mounted."""
    b = DockerBackend(test_config, tree=sample_tree, docker=docker_engine)
    b.prepare()
    return b
