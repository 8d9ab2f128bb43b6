"""Fixtures for `tooltree serve` tests: a tree of the sample servers, configs, and real serve processes.

Every serve process gets its own sandbox owner label and its own mark in the environment of the
upstream servers it starts, so a test can count exactly its containers and its server processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, SAMPLE_SERVERS, ServeProcess, alive, run_owner

SERVERS = ("docs", "crm", "media")
MARK_ENV = "TOOLTREE_SERVE_TEST_MARK"
TOKEN = "test-token-0123456789"
START_WAIT = 120.0


def write_config(folder: Path, mark: str, *, serve: dict[str, Any] | None = None, timeout: float = 60) -> Path:
    """A tooltree.yaml for the three sample servers (their env carries ``mark``), with a ``serve:`` section."""
    lines = ["servers:"]
    for name in SERVERS:
        script = SAMPLE_SERVERS / f"{name}.py"
        lines += [
            f"  {name}:",
            f"    command: {json.dumps(sys.executable)}",
            f"    args: [{json.dumps(str(script))}]",
            f"    env: {{{MARK_ENV}: {json.dumps(mark)}}}",
        ]
    lines += ["sandbox:", f"  timeout: {timeout}"]
    settings = {"progress_interval": 0.2, "warm": 1, **(serve or {})}
    lines += ["serve:"] + [f"  {k}: {json.dumps(v)}" for k, v in settings.items()]
    path = folder / f"tooltree-{mark}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def marked_processes(mark: str) -> list[int]:
    """Pids of live processes whose environment carries ``mark`` (the upstream servers of one serve process)."""
    return processes_with(MARK_ENV, mark)


def processes_with(variable: str, value: str) -> list[int]:
    """Pids of live processes whose environment sets ``variable`` to ``value``."""
    needle = f"{variable}={value}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0") and alive(int(environ.parent.name)):
                pids.append(int(environ.parent.name))
        except (OSError, ValueError):
            continue
    return pids


def containers(owner: str, *, running: bool = False) -> list[str]:
    """Ids of the containers (running or not; ``running``: only those running) labelled with ``owner``."""
    out = subprocess.run(
        ["docker", "ps", "-q" if running else "-aq", "--filter", f"label=tooltree.owner={owner}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return out.stdout.split()


@dataclass
class Serve:
    """One `tooltree serve` setup: its config, owner label and mark (and, over HTTP, its process)."""

    config: Path
    tree: Path
    owner: str
    mark: str
    extra: list[str] = field(default_factory=list)
    process: ServeProcess | None = None
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    environ: dict[str, str] = field(default_factory=dict)
    """More environment for the serve process (e.g. ``DOCKER_HOST``)."""

    def argv(self, *more: str) -> list[str]:
        base = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(self.config)]
        return [*base, "--tree", str(self.tree), "--no-regenerate", *self.extra, *more]

    def env(self) -> dict[str, str]:
        return {**os.environ, "TOOLTREE_SANDBOX_OWNER": self.owner, "TOOLTREE_SERVE_TOKEN": TOKEN, **self.environ}

    def stdio_params(self) -> Any:
        from mcp import StdioServerParameters

        argv = self.argv()
        return StdioServerParameters(command=argv[0], args=argv[1:], env=self.env(), cwd=str(REPO))

    def start_http(self) -> str:
        """Start the server over HTTP on a free port; returns its URL once it listens."""
        self.process = ServeProcess(self.argv("--http", "--port", "0"), self.env())
        self.proc = self.process.proc
        self.url = self.process.url
        return self.url

    def stop(self) -> int | None:
        """Stop the HTTP server, if one was started; its exit status."""
        return self.process.stop() if self.process is not None else None


@pytest.fixture(scope="session")
def serve_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree of the three sample servers, generated once."""
    from generator.generate import generate
    from tooltree_cli.common import load

    folder = tmp_path_factory.mktemp("serve-tree")
    config = load(write_config(folder, "generate"))
    out = folder / "tree"
    result = generate(config, out, embeddings="off")
    assert not result.failed, [s.error for s in result.failed]
    return out


def new_serve(folder: Path, tree: Path, *, serve: dict[str, Any] | None = None, extra: list[str] | None = None,
              timeout: float = 60, env: dict[str, str] | None = None) -> Serve:  # fmt: skip
    """A serve setup in ``folder`` with its own owner label and mark (``env``: more environment for it)."""
    mark = uuid.uuid4().hex[:12]
    config = write_config(folder, mark, serve=serve, timeout=timeout)
    return Serve(config, tree, run_owner(f"serve-{mark}"), mark, list(extra or []), environ=dict(env or {}))


def clean_up(serve: Serve, docker: Any) -> None:
    """Stop its process (if any) and remove its containers; fail if a container of it was still there."""
    from sandbox.prune import remove_containers

    serve.stop()
    remove_containers(docker, label=f"tooltree.owner={serve.owner}")


@pytest.fixture
def make_serve(serve_tree: Path, tmp_path: Path, docker_engine: Any) -> Iterator[Callable[..., Serve]]:
    """``make_serve(serve={...}, extra=[...], env={...})``: a serve setup with its own owner and mark; cleaned up."""
    made: list[Serve] = []

    def make(**kwargs: Any) -> Serve:
        made.append(new_serve(tmp_path, serve_tree, **kwargs))
        return made[-1]

    yield make
    for s in made:
        clean_up(s, docker_engine)


def result_text(result: Any) -> str:
    """The text of an SDK ``CallToolResult``: its blocks' texts, a line apart."""
    return "\n".join(block.text for block in result.content)


@asynccontextmanager
async def http_client(url: str, token: str | None = TOKEN, **kwargs: Any) -> AsyncIterator[Any]:
    """An SDK client (``mcp.Client``, entered) for ``url`` that sends ``token`` (None: no Authorization header)."""
    import httpx2
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        mcp.Client(streamable_http_client(url, http_client=http), **kwargs) as client,
    ):
        yield client


RAW_HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
RAW_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def raw_session(http: Any, url: str, token: str = TOKEN) -> dict[str, str]:
    """A raw client's handshake (``http``: an ``httpx2.AsyncClient``) with ``token``: the headers of its session (which
    it never ends)."""
    headers = {**RAW_HEADERS, "Authorization": f"Bearer {token}"}
    init = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": RAW_HANDSHAKE},
                           headers=headers)  # fmt: skip
    assert init.status_code == 200, init.text
    session = {**headers, "Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    assert done.status_code == 202
    return session
