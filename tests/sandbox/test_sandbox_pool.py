"""A pool of warm sandboxes hands out fresh, isolated sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, SandboxConfig, SandboxPool, SessionError
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker

POOL_LABEL = "tooltree.test=pool"


def pool_containers(docker: EngineWithCLI) -> list[str]:
    return docker.text(["ps", "--all", "--quiet", "--filter", f"label={POOL_LABEL}"]).split()


@pytest.fixture
def pool_backend(docker_engine: EngineWithCLI, sample_tree: Path) -> DockerBackend:
    config = SandboxConfig(owner=TEST_OWNER, labels={"tooltree.test": "pool"})
    return DockerBackend(config, tree=sample_tree, docker=docker_engine)


def test_sessions_from_the_pool_work_and_share_nothing(pool_backend: DockerBackend, tmp_path: Path) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def handler(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append((server, tool, arguments))
        return {"content": [{"type": "text", "text": "3 leads"}]}

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "input.txt").write_text("restored", encoding="utf-8")
    with SandboxPool(pool_backend, size=2) as pool:
        pool.wait_ready()
        with pool.acquire(tools=handler, workspace=workspace) as first:
            result = first.execute(
                "from servers.crm import list_leads\nsecret = 1\nprint(list_leads().text, open('input.txt').read())"
            )
            assert result.stdout == "3 leads restored\n"
            assert calls == [("crm", "list_leads", {"status": "open"})]
            with pool.acquire() as second:
                assert second.name != first.name and second.session_id != first.session_id
                isolated = second.execute("import os\nprint(os.path.exists('input.txt'))\nprint(secret)")
                assert isolated.stdout == "False\n"
                assert isolated.error == "NameError: name 'secret' is not defined"
        pool.wait_ready()
        assert len(pool_containers(pool_backend.docker)) == 2
    assert pool_containers(pool_backend.docker) == []


def test_a_closed_pool_hands_out_nothing(pool_backend: DockerBackend) -> None:
    pool = SandboxPool(pool_backend, size=1)
    pool.close()
    with pytest.raises(SessionError, match="closed"):
        pool.acquire(timeout=1)
