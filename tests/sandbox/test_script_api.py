"""The API scripts use inside a real container: many calls at once from threads, results that are not JSON."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox._supervisor.limits import MAX_CALLS_IN_FLIGHT
from sandbox.mcp_bridge import McpBridge
from tests.support import sample_project, sample_server_configs
from tool_tree.pool import BackgroundPool

# The scripts' own timeout, which no test here is about: each starts the media server (on its first call) within
# it, and the hundred calls from threads took 4.8 s of the config's 20 on a loaded machine.
SCRIPT_TIMEOUT = 120


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_project(tmp_path_factory.mktemp("script_api"), "media")[1]


@pytest.fixture
def session(docker_engine: object, test_config: SandboxConfig, tree: Path) -> Iterator[Sandbox]:
    # Enough slots on the server that every call the host admits is in flight at once.
    with BackgroundPool(sample_server_configs("media"), concurrency=2 * MAX_CALLS_IN_FLIGHT) as servers:
        bridge = McpBridge(tree, servers.pool)
        with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=servers.loop) as sandbox:
            yield sandbox


@pytest.mark.docker
def test_a_hundred_calls_from_threads_at_once_all_return(session: Sandbox) -> None:
    # Before: the host refused every call past 64 in flight, so 36 of them raised ToolCallError("too_many_calls").
    result = session.execute(
        "import threading\n"
        "from servers.media import slow_echo\n"
        "from tool_tree.runtime import ToolCallError\n"
        "out, refused = [], []\n"
        "def one(i):\n"
        "    try:\n"
        "        out.append(slow_echo(text=str(i), seconds=1).text)\n"
        "    except ToolCallError as e:\n"
        "        refused.append(e.code)\n"
        "threads = [threading.Thread(target=one, args=(i,)) for i in range(100)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print(len(out), sorted(set(refused)), sorted(map(int, out)) == list(range(100)))\n",
        timeout=SCRIPT_TIMEOUT,
    )
    assert result.error is None, result.traceback
    assert result.stdout.strip() == "100 [] True"
    assert len(result.tool_calls) == 100 and all(call.ok for call in result.tool_calls)


@pytest.mark.docker
def test_json_of_a_plain_text_result_says_what_came_back(session: Sandbox) -> None:
    code = "from servers.media import slow_echo\nslow_echo(text='hello there', seconds=0).json()\n"
    result = session.execute(code, timeout=SCRIPT_TIMEOUT)
    assert result.error is not None and result.traceback is not None
    assert "ValueError" in result.error and "'hello there'" in result.error and ".text" in result.error
