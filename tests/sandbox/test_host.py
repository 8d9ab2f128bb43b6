"""`Runtime`: a call it makes itself (a passthrough tool of `tooltree serve`, direct mode) goes through a bridge of
its own, so it never resets or spends the budgets of a script running in its sandbox at the same time.

`Runtime.stop_sandbox` stops the sandbox alone.

A real container and a real MCP server (tests/servers/raw_server.py, which counts the calls it receives).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox import SandboxConfig
from sandbox.host import Runtime
from sandbox.mcp_bridge import Budgets, McpBridge
from tests.docker_cli import EngineWithCLI
from tests.support import raw_server_tree

pytestmark = pytest.mark.docker

TOOLS = [{"name": "count", "inputSchema": {"type": "object"}}, {"name": "echo", "inputSchema": {"type": "object"}}]

# Makes 10 calls, waits until the host has called the server twice since, then calls until its budget is
# spent; prints its successful calls, the host's calls it saw, and the refusal's code. Before the fix, each
# call of the host reset the budget and was counted in it: the script got 1,999 calls after the host's last,
# however many it had made before.
SCRIPT = """\
from tool_tree.runtime import call_tool, ToolCallError
def served():
    return int(call_tool('raw', 'count', {}).text)  # the server's calls so far, this one included
mine = others = 0
try:
    for _ in range(10):
        tenth = served()
        mine += 1
    while others < 2:
        others = served() - tenth - (mine - 9)
        mine += 1
    while True:
        call_tool('raw', 'echo', {})
        mine += 1
except ToolCallError as e:
    print(mine, others, e.code)
"""


def test_a_call_of_the_runtime_during_a_script_neither_resets_nor_spends_its_budget(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI
) -> None:
    from tooltree_cli.common import load

    tree, _ = raw_server_tree(tmp_path, TOOLS)
    with Runtime(load(tmp_path / "tooltree.yaml"), tree, sandbox_config=test_config) as runtime:

        def served() -> int:
            return int(runtime.call_tool("raw", "count", {})["content"][0]["text"])

        sandbox = runtime.sandbox
        # The script's bridge allows 200 calls, not the default 2,000: a host call that reset or spent the budget did
        # so at any size, and 2,000 calls to a real server took 26 s of the script's 120 on a loaded machine.
        budget = Budgets(calls=200)
        assert isinstance(sandbox.bridge, McpBridge)
        sandbox.bridge.budgets = budget
        before = served()
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(sandbox.execute, SCRIPT, timeout=120)
            deadline = time.monotonic() + 60
            polls = 0
            while served() - before - (polls := polls + 1) < 10:  # until the script's 10 first calls are served
                assert time.monotonic() < deadline and not running.done(), "the script did not make its calls"
            served(), served()  # the calls the script waits for
            result = running.result(timeout=180)
        assert result.error is None, result.traceback
        calls, others, code = result.stdout.split()
        assert (int(calls), code) == (budget.calls, "budget_exhausted")
        assert int(others) >= 2
        assert served() - before == budget.calls + polls + 3  # the script's calls, and the host's own


def test_a_runtime_closed_while_its_sandbox_starts_leaves_no_container(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serve client that leaves while its first script's container starts: `close` finds no sandbox yet, so
    the thread starting it must stop it. Before, the container ran on with nobody to stop it."""
    from sandbox.errors import SandboxError
    from sandbox.session import Sandbox
    from tooltree_cli.common import load

    label = f"tooltree.test=host-close-{tmp_path.name}"
    settings = dataclasses.replace(test_config, labels={"tooltree.test": f"host-close-{tmp_path.name}"})
    entered, proceed = threading.Event(), threading.Event()
    start = Sandbox.start

    def held_start(self: Sandbox) -> None:
        entered.set()
        assert proceed.wait(60)
        start(self)

    monkeypatch.setattr(Sandbox, "start", held_start)
    tree, _ = raw_server_tree(tmp_path, TOOLS)
    runtime = Runtime(load(tmp_path / "tooltree.yaml"), tree, sandbox_config=settings).open()
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(lambda: runtime.sandbox)
        assert entered.wait(60)
        runtime.close()  # the sandbox is not there yet
        proceed.set()
        with pytest.raises(SandboxError, match="closed while its sandbox started"):
            starting.result(timeout=120)
    assert docker_engine.text(["ps", "--all", "--quiet", "--filter", f"label={label}"]).split() == []
    with pytest.raises(SandboxError, match="the runtime is closed"):
        _ = runtime.sandbox


def test_a_stopped_sandbox_saves_its_workspace_keeps_the_servers_and_the_next_use_starts_a_new_one(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI
) -> None:
    """`Runtime.stop_sandbox`, which `tooltree serve` uses for an idle session kept for the resources its client
    follows: the workspace is saved into its folder, the container removed, the servers kept; the next use of
    ``sandbox`` starts a new one, which restores the folder."""
    from tooltree_cli.common import load

    label = f"tooltree.test=host-stop-{tmp_path.name}"
    settings = dataclasses.replace(test_config, labels={"tooltree.test": f"host-stop-{tmp_path.name}"})
    tree, _ = raw_server_tree(tmp_path, TOOLS)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Runtime(load(tmp_path / "tooltree.yaml"), tree, sandbox_config=settings, workspace=workspace) as runtime:
        assert runtime.stop_sandbox() is False  # none started
        first = runtime.sandbox.execute("x = 1\nopen('/workspace/a.txt', 'w').write('a')")
        assert first.error is None, first
        pool = runtime.bridge.pool
        assert runtime.stop_sandbox() is True
        assert (workspace / "a.txt").read_text(encoding="utf-8") == "a"  # saved before the container went
        assert docker_engine.text(["ps", "--all", "--quiet", "--filter", f"label={label}"]).split() == []
        assert runtime.running_sandbox is None and not runtime.sandbox_started
        assert runtime.bridge.pool is pool  # the servers stayed
        second = runtime.sandbox.execute("print(open('/workspace/a.txt').read(), 'x' in globals())")
        assert second.stdout == "a False\n", second
        assert runtime.take_sandbox_note() == ""  # the caller says why it stopped it (serve: its session's note)
    assert runtime.stop_sandbox() is False  # closed
