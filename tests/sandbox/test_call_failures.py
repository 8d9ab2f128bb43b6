"""A call that gets no usable answer from the tool (it times out, the server answers a protocol error) fails as the
call it is — ``ToolCallError`` with its code in a script, `ToolCallRefused` from `Runtime.call_tool` — saying whether
the tool may have run, and the ledger names the failure; the tool's own error stays a ``ToolError``.

Before, each came back as a result with ``isError``: the script saw ``ToolError`` (code None, "the tool ran and
reported an error"), the ledger said "the tool reported an error", and nothing said the tool may still have run.

The server is `tests/servers/slow_server.py` (the SDK's ``MCPServer``), its ``timeout`` 5 s (it also bounds its
start); its ``wait`` tool marks in a folder that it ran, so a test can tell a call that ran from one never sent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from sandbox.mcp_bridge import McpBridge
from tests.docker_cli import EngineWithCLI
from tests.support import REPO, in_thread, wait_until
from tool_tree.config import ServerConfig, load_config
from tool_tree.pool import BackgroundPool, PoolError
from tooltree_cli.main import main

SLOW_SERVER = REPO / "tests" / "servers" / "slow_server.py"
TIMEOUT = 5.0

SCRIPT = """\
from servers.slow import {tool}
from tool_tree.runtime import ToolCallError, ToolError
try:
    print({tool}({arguments}).text)
except ToolCallError as e:
    print("ToolCallError", e.code, e.message, sep=" | ")
except ToolError as e:
    print("ToolError", e.code if hasattr(e, "code") else "-", e.message, sep=" | ")
"""


def script(tool: str, arguments: str) -> str:
    return SCRIPT.format(tool=tool, arguments=arguments)


# The scripts' own timeout, which no test here is about: a script waits out the server's start (lazy, on its first
# call) and a call's 5 s timeout, 8.5 s of the config's 20 s on a loaded machine.
SCRIPT_TIMEOUT = 120


class Setup:
    """A tree generated from the slow server, the config file that starts it (``timeout: 5``), and its mark folder."""

    def __init__(self, root: Path) -> None:
        self.marks = root / "marks"
        self.marks.mkdir()
        self.config = root / "tooltree.yaml"
        self.config.write_text(
            f"servers:\n  slow:\n    command: {json.dumps(sys.executable)}\n"
            f"    args: [{json.dumps(str(SLOW_SERVER))}, {json.dumps(str(self.marks))}]\n    timeout: {TIMEOUT:g}\n",
            encoding="utf-8",
        )
        self.tree = root / "tree"
        assert main(["generate-tree", "--config", str(self.config), "--out", str(self.tree)]) == 0
        self.server = ServerConfig(
            name="slow", command=sys.executable, args=(str(SLOW_SERVER), str(self.marks)), timeout=TIMEOUT
        )

    def timed_out(self) -> str:
        return f"the call timed out after {TIMEOUT:g} s (servers.slow.timeout in {self.config}, default 30)"

    def ran(self, mark: str) -> bool:
        return (self.marks / mark).exists()


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_runtime_call_tool_fails_a_timed_out_call_as_refused_with_code_timeout_and_the_tool_may_have_run(
    setup: Setup,
) -> None:
    with Runtime(load_config(setup.config), setup.tree, audit=setup.config.parent / "audit.jsonl") as runtime:
        with pytest.raises(ToolCallRefused) as info:
            runtime.call_tool("slow", "wait", {"seconds": 60, "mark": "timed"})
        assert info.value.code == "timeout"
        assert info.value.message == f"{setup.timed_out()}; it was sent: the tool may have run, or be running still"
        assert setup.ran("timed")  # it did
        with pytest.raises(ToolCallRefused) as info:
            runtime.call_tool("slow", "protocol_error", {"message": "no such thing"})
        assert info.value.code == "server_error"
        assert info.value.message == (
            "server error -32000: no such thing; "
            "the server answered the call with an error of the protocol, not a result of the tool"
        )
        own = runtime.call_tool("slow", "fail", {"message": "mine"})  # the tool's own error: a result, as before
        assert own["isError"] is True and own["content"][0]["text"].endswith("mine")
        assert runtime.call_tool("slow", "wait", {"seconds": 0})["content"][0]["text"] == "waited 0 s"
    audit = [
        json.loads(line) for line in (setup.config.parent / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [(a["tool"], a["outcome"], a.get("code")) for a in audit] == [
        ("wait", "refused", "timeout"),
        ("protocol_error", "refused", "server_error"),
        ("fail", "error", None),
        ("wait", "ok", None),
    ]


@pytest.mark.docker
def test_a_script_catches_a_timed_out_call_as_tool_call_error_and_the_ledger_names_the_timeout(
    setup: Setup, docker_engine: EngineWithCLI, test_config: SandboxConfig
) -> None:
    with Runtime(load_config(setup.config), setup.tree, sandbox_config=test_config) as runtime:
        result = runtime.sandbox.execute(script("wait", "seconds=60, mark='timed'"), timeout=SCRIPT_TIMEOUT)
    assert result.error is None, result.traceback
    said = f"{setup.timed_out()}; it was sent: the tool may have run, or be running still"
    assert result.stdout == f"ToolCallError | timeout | {said}\n"
    assert setup.ran("timed")
    (call,) = result.tool_calls
    assert (call.server, call.tool, call.ok, call.error) == ("slow", "wait", False, said)
    assert result.ledger().startswith(f"slow.wait error: {setup.timed_out()}; it was sent")


@pytest.mark.docker
def test_a_protocol_error_is_a_tool_call_error_and_the_tools_own_error_stays_a_tool_error(
    setup: Setup, docker_engine: EngineWithCLI, test_config: SandboxConfig
) -> None:
    with Runtime(load_config(setup.config), setup.tree, sandbox_config=test_config) as runtime:
        refused = runtime.sandbox.execute(script("protocol_error", "message='no such thing'"), timeout=SCRIPT_TIMEOUT)
        own = runtime.sandbox.execute(script("fail", "message='mine'"), timeout=SCRIPT_TIMEOUT)
    assert refused.error is None and own.error is None, (refused.traceback, own.traceback)
    said = (
        "server error -32000: no such thing; "
        "the server answered the call with an error of the protocol, not a result of the tool"
    )
    assert refused.stdout == f"ToolCallError | server_error | {said}\n"
    assert [(c.ok, c.error) for c in refused.tool_calls] == [(False, said)]
    assert own.stdout.startswith("ToolError | - | ") and own.stdout.rstrip().endswith("mine")
    assert [(c.ok, c.error) for c in own.tool_calls] == [(False, "the tool reported an error")]


def _mcp_bridge(setup: Setup, pool: BackgroundPool) -> Any:
    return McpBridge(setup.tree, pool.pool)


def _function(setup: Setup, pool: BackgroundPool) -> Any:
    return lambda server, tool, arguments: pool.call(server, tool, arguments)


@pytest.mark.docker
@pytest.mark.parametrize("bridge", [_mcp_bridge, _function], ids=["McpBridge", "function_over_BackgroundPool_call"])
def test_a_call_that_timed_out_waiting_for_its_turn_says_it_was_not_sent(
    setup: Setup,
    docker_engine: EngineWithCLI,
    test_config: SandboxConfig,
    bridge: Callable[[Setup, BackgroundPool], Any],
) -> None:
    with BackgroundPool([setup.server], concurrency=1, source=str(setup.config)) as pool:
        # Another call holds the server's one call slot (until the pool closes under it).
        held, errors = in_thread(lambda: pool.call("slow", "wait", {"seconds": 60, "mark": "holder"}, timeout=60))
        wait_until(lambda: setup.ran("holder"), "the holding call to run", timeout=30)
        with Sandbox(config=test_config, tree=setup.tree, tools=bridge(setup, pool), tool_loop=pool.loop) as sandbox:
            result = sandbox.execute(script("wait", "seconds=0, mark='queued'"), timeout=SCRIPT_TIMEOUT)
    assert held.wait(30) and len(errors) == 1 and isinstance(errors[0], PoolError)  # closed during the call
    assert result.error is None, result.traceback
    said = (
        f"the call timed out after {TIMEOUT:g} s waiting for its turn (1 call(s) in flight to 'slow'; "
        f"servers.slow.timeout in {setup.config}, default 30); it was not sent: the tool did not run"
    )
    assert result.stdout == f"ToolCallError | timeout | {said}\n"
    assert not setup.ran("queued")
    assert [(c.ok, c.error) for c in result.tool_calls] == [(False, said)]
