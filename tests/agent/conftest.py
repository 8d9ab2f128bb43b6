"""Fixtures for agent tests: the sample servers' tree, and live runtimes shared per module.

Runs use the real ``anthropic`` SDK against `agent.testing.FakeMessagesAPI`, the real sample
servers over stdio, and (in code mode) a real sandbox container.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agent.testing import FakeMessagesAPI
from sandbox.host import Runtime
from tests.support import TEST_OWNER, sample_config_yaml
from tool_tree.config import Config, load_config
from tooltree_cli.main import main


@dataclass(frozen=True)
class Project:
    config_path: Path
    config: Config
    tree: Path


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A tree generated from the three sample servers (docs, crm, media)."""
    tmp = tmp_path_factory.mktemp("agent-project")
    config_path = tmp / "tooltree.yaml"
    config_path.write_text(sample_config_yaml("docs", "crm", "media") + "sandbox:\n  timeout: 20\n", encoding="utf-8")
    tree = tmp / "tree"
    assert main(["generate-tree", "--config", str(config_path), "--out", str(tree)]) == 0
    return Project(config_path, load_config(config_path), tree)


@pytest.fixture(scope="module")
def live(project: Project) -> Iterator[Runtime]:
    """Live sample servers (no sandbox), shared by the tests of a module."""
    with Runtime(project.config, project.tree) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def sandboxed(project: Project, docker_engine: object) -> Iterator[Runtime]:
    """Live sample servers and one sandbox session, shared by the tests of a module."""
    from sandbox import SandboxConfig

    settings = SandboxConfig(owner=TEST_OWNER, timeout=20.0)
    with Runtime(project.config, project.tree, sandbox_config=settings) as runtime:
        yield runtime


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    """A fake Messages API that `tooltree agent` (the CLI, reading the environment) talks to."""
    with FakeMessagesAPI() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        yield fake


def record_pools(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[Future[Any]]:
    """The futures of every task submitted to a ``ThreadPoolExecutor`` that ``module`` makes from now on, in order
    (a test waits on them: a call started, an invocation ended)."""
    futures: list[Future[Any]] = []

    class Recorded(ThreadPoolExecutor):
        def submit(self, *args: Any, **kwargs: Any) -> Future[Any]:
            future = super().submit(*args, **kwargs)
            futures.append(future)
            return future

    monkeypatch.setattr(module, "ThreadPoolExecutor", Recorded)
    return futures
