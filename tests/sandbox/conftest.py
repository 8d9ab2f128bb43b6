"""Fixtures for sandbox tests.

The engine fixture (``docker_engine``) and the sessions' ``test_config`` live in tests/conftest.py.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, ExecutionResult, Sandbox, SandboxConfig, SessionError, ToolBridge
from tests.docker_cli import EngineWithCLI

_STUB = '''\
"""crm.list_leads — generated, do not edit."""

from __future__ import annotations

from tool_tree.runtime import ToolResult, call_tool


def list_leads(*, status: str = "open") -> ToolResult:
    """List the leads with a status."""
    return call_tool("crm", "list_leads", {"status": status})
'''


def write_sample_tree(root: Path, *, unique: bool = False) -> Path:
    """A tiny tree with one server (``crm``) and one stub (``list_leads``).

    ``unique``: with a file of its own. A tree volume is named by its tree's content, so a test that must see the
    copy into a new volume happen needs this: a volume of the same content left complete by an earlier run (one
    killed before its cleanup) would be mounted instead.
    """
    pkg = root / "servers" / "crm"
    pkg.mkdir(parents=True)
    (root / "servers" / "__init__.py").write_text("", encoding="utf-8")
    (root / "servers" / "INDEX.md").write_text("crm — 1 tool — the sales CRM\n", encoding="utf-8")
    (pkg / "__init__.py").write_text("from servers.crm.list_leads import list_leads\n", encoding="utf-8")
    (pkg / "list_leads.py").write_text(_STUB, encoding="utf-8")
    (pkg / "README.md").write_text("list_leads — List the leads with a status.\n", encoding="utf-8")
    (root / "manifest.json").write_text('{"version": 1, "servers": [], "tools": []}\n', encoding="utf-8")
    if unique:
        (root / "run.txt").write_text(uuid.uuid4().hex, encoding="utf-8")
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


@contextmanager
def killed_in_a_call(docker: EngineWithCLI, backend: DockerBackend) -> Iterator[tuple[Sandbox, BaseException]]:
    """A session whose container was killed from outside (``docker kill``) while its script waited in a tool call:
    the session (closed after the block) and the `SessionError` its execution raised."""
    in_call = threading.Event()

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        in_call.set()
        return {"content": []}

    with Sandbox(backend, tools=tool) as sb:
        outcome: list[BaseException] = []
        ended = threading.Event()

        def run() -> None:
            try:
                sb.execute(
                    "from tool_tree.runtime import call_tool\ncall_tool('a', 'b', {})\nimport time\ntime.sleep(600)"
                )
            except SessionError as e:
                outcome.append(e)
            ended.set()

        threading.Thread(target=run, daemon=True).start()
        assert in_call.wait(60)
        docker.run(["kill", sb.name])
        assert ended.wait(60), "the execution did not end when its container died"
        assert outcome, "the execution ended without a SessionError"
        yield sb, outcome[0]


WAIT = 60.0
"""Seconds a `StartSignal` test waits for an event; its scripts sleep far longer."""


class StartSignal(ToolBridge):
    """A bridge whose ``started`` tool tells the test that the script is running; ``block`` does too, and returns only
    once ``release`` is set (or after `WAIT`)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool == "started":
            self.started.set()
        elif tool == "block":
            self.started.set()
            self.release.wait(WAIT)
        return {"content": [{"type": "text", "text": tool}]}


SIGNAL = "from tool_tree.runtime import call_tool\ncall_tool('t', 'started', {})\n"
"""Lines that tell a `StartSignal` bridge the script runs."""

TAKE_EVERY_PROCESS = """
import os, time
try:
    while True:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
except OSError as e:
    assert e.errno == 11, e
"""
"""Fork until refused, the children left running: the container's pids limit is then full."""


def run_and_cancel(sb: Sandbox, bridge: StartSignal, code: str) -> ExecutionResult:
    """Run ``code`` in ``sb`` and cancel it once it told ``bridge`` it started (the cancel must say it stopped a
    script); its result. A call to ``block`` is released after the cancel."""
    with ThreadPoolExecutor(1) as pool:
        future: Future[ExecutionResult] = pool.submit(sb.execute, code, timeout=120)
        try:
            assert bridge.started.wait(WAIT), "the script never started"
            assert sb.cancel(), "the cancel found no script running"
            return future.result(WAIT)
        finally:
            bridge.release.set()
