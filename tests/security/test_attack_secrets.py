"""Secrets stay on the host: nothing of the host's environment, a server's env or its HTTP headers
is visible to a script — not in its environment, not in ``/proc/1/environ``, not anywhere in the
container's files — nor in the container's ``docker inspect`` or the image's history.

The servers here get secrets the way users give them (``env:`` and ``headers:`` in tooltree.yaml);
a script then calls tools on both, so the secrets are in use on the host while it looks for them.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.mcp_bridge import McpBridge
from tests.docker_cli import EngineWithCLI
from tests.support import SAMPLE_SERVERS
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool
from tooltree_cli.main import main

pytestmark = pytest.mark.docker

HOST_SECRET = f"host-secret-{uuid.uuid4().hex}"
ENV_SECRET = f"env-secret-{uuid.uuid4().hex}"
HEADER_SECRET = f"header-secret-{uuid.uuid4().hex}"
SECRETS = (HOST_SECRET, ENV_SECRET, HEADER_SECRET)

SEARCH = """\
import os
secrets = {secrets!r}
found = []
for name, value in os.environ.items():
    if any(s in value or s in name for s in secrets):
        found.append('os.environ')
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    for what in ('environ', 'cmdline'):
        try:
            data = open(f'/proc/{{pid}}/{{what}}', 'rb').read().decode(errors='replace')
        except OSError:
            continue
        if any(s in data for s in secrets):
            found.append(f'/proc/{{pid}}/{{what}}')
for top in ('/workspace', '/tmp', '/dev/shm', '/opt/tooltree', '/etc', '/home', '/root', '/run', '/var'):
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                with open(path, 'rb') as f:
                    data = f.read(1 << 20).decode(errors='replace')
            except OSError:
                continue
            if any(s in data for s in secrets):
                found.append(path)
print(found)
"""


@pytest.fixture(scope="module")
def secret_servers(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: EngineWithCLI
) -> Iterator[tuple[Path, BackgroundPool]]:
    """A tree and a live pool of two servers holding secrets: media over stdio (env), crm over HTTP (headers)."""
    import socket
    import subprocess
    import time

    tmp = tmp_path_factory.mktemp("secrets")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = subprocess.Popen(
        [sys.executable, str(SAMPLE_SERVERS / "crm.py"), "--http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:  # bounded wait until the port accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline and http.poll() is None, "the crm HTTP server did not start"
                time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        config = tmp / "tooltree.yaml"
        config.write_text(
            "servers:\n"
            f"  media:\n    command: {json.dumps(sys.executable)}\n"
            f"    args: [{json.dumps(str(SAMPLE_SERVERS / 'media.py'))}]\n"
            f"    env: {{MEDIA_API_TOKEN: {ENV_SECRET}}}\n"
            f"  crm:\n    url: {url}\n    headers: {{Authorization: 'Bearer {HEADER_SECRET}'}}\n",
            encoding="utf-8",
        )
        tree = tmp / "tree"
        assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
        servers = [
            ServerConfig(
                name="media",
                command=sys.executable,
                args=(str(SAMPLE_SERVERS / "media.py"),),
                env={"MEDIA_API_TOKEN": ENV_SECRET},
            ),
            ServerConfig(name="crm", url=url, headers={"Authorization": f"Bearer {HEADER_SECRET}"}),
        ]
        with BackgroundPool(servers) as pool:
            yield tree, pool
    finally:
        http.terminate()
        http.wait(timeout=10)


@pytest.fixture(scope="module")
def secret_session(
    secret_servers: tuple[Path, BackgroundPool], test_config: SandboxConfig, request: pytest.FixtureRequest
) -> Iterator[Sandbox]:
    tree, pool = secret_servers
    mp = pytest.MonkeyPatch()
    mp.setenv("TOOLTREE_HOST_SECRET", HOST_SECRET)  # in the environment of every docker command
    try:
        with Sandbox(config=test_config, tree=tree, tools=McpBridge(tree, pool.pool), tool_loop=pool.loop) as sb:
            result = sb.execute(
                "from servers.crm import list_leads\nfrom servers.media import slow_echo\n"
                "print(len(list_leads(limit=2).json()['leads']), slow_echo(text='hi', seconds=0).text)\n"
            )
            assert result.error is None and result.stdout == "2 hi\n", result.traceback
            yield sb
    finally:
        mp.undo()


def test_no_secret_is_anywhere_a_script_can_look(secret_session: Sandbox) -> None:
    result = secret_session.execute(SEARCH.format(secrets=SECRETS), timeout=60)
    assert result.error is None, result.traceback
    assert result.stdout == "[]\n"


def test_the_script_environment_is_exactly_the_supervisors_short_list(secret_session: Sandbox) -> None:
    result = secret_session.execute("import os\nprint(sorted(os.environ))")
    assert result.stdout == (
        "['HOME', 'LANG', 'MPLBACKEND', 'PATH', 'PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED', 'TMPDIR']\n"
    )


def test_the_supervisors_environment_is_closed_to_the_script(secret_session: Sandbox) -> None:
    result = secret_session.execute("open('/proc/1/environ', 'rb')")
    assert result.error == "PermissionError: [Errno 13] Permission denied: '/proc/1/environ'"


def test_the_container_inspect_and_the_tree_hold_no_secret(
    docker_engine: EngineWithCLI, secret_session: Sandbox, secret_servers: tuple[Path, BackgroundPool]
) -> None:
    inspected = docker_engine.text(["inspect", secret_session.name])
    assert not [s for s in SECRETS if s in inspected]
    env = json.loads(inspected)[0]["Config"]["Env"]
    names = sorted(e.split("=", 1)[0] for e in env)  # the image's own, nothing added at create time
    assert names == ["HOME", "LANG", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"]
    tree, _ = secret_servers
    for path in tree.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode(errors="replace")
            assert not [s for s in SECRETS if s in text], path


def test_the_image_history_and_config_hold_no_host_secret(
    docker_engine: EngineWithCLI, secret_session: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = secret_session.backend.image  # type: ignore[attr-defined]
    history = docker_engine.text(["history", "--no-trunc", "--format", "{{.CreatedBy}}", image])
    config = docker_engine.text(["image", "inspect", image])
    import os

    host_values = [
        v
        for k, v in os.environ.items()
        if len(v) >= 8 and any(w in k.upper() for w in ("TOKEN", "SECRET", "PASSWORD", "KEY", "AUTH", "CRED"))
    ]
    for text in (history, config):
        assert not [s for s in (*SECRETS, *host_values) if s in text]
    assert "--build-arg" not in history and "ARG " not in history.upper().replace("|", "")
