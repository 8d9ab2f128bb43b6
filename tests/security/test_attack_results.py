"""The tool results one execution pulls stay within its result budget, however many calls are in flight (SECURITY.md,
"Host resources").

A script calls an honest tool from many threads at once, each result a listing of 340 KB, until the execution's
budget of result bytes is spent. Each result is read from its server, measured and checked, then encoded again for
the container: the budget bounds that relaying. Before, the budget was checked only as a call was admitted, so the
calls already in flight when it ran out were all relayed (60 threads' calls pulled 468 MB for a budget of 256 MiB);
now a result that comes once the budget is spent is not handed on, and the script is told its call ran anyway.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.mcp_bridge import Budgets, McpBridge
from tests.docker_cli import EngineWithCLI
from tests.support import SAMPLE_SERVERS, sample_config_yaml
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool
from tooltree_cli.main import main

pytestmark = pytest.mark.docker

BUDGET = 2_000_000
"""A small budget of result bytes (an execution's is 256 MiB), so that the test is short: about six results."""
THREADS = 24

PULL = f"""
import json, threading
from servers.crm import list_leads
late, spent, errors = [], [0], []
def pull():
    while True:
        try:
            list_leads(limit=1000)
        except Exception as e:
            if "came after" in str(e):
                late.append(str(e))
            elif "budget exhausted" in str(e):  # refused as it was made: nothing more to pull
                spent[0] += 1
                return
            else:
                errors.append(str(e))
                return
threads = [threading.Thread(target=pull) for _ in range({THREADS})]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({{"late": late, "spent": spent[0], "errors": errors}}))
"""


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, docker_engine: EngineWithCLI
) -> Iterator[tuple[Path, BackgroundPool]]:
    tmp = tmp_path_factory.mktemp("results")
    config = tmp / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    crm = ServerConfig(name="crm", command=sys.executable, args=(str(SAMPLE_SERVERS / "crm.py"),))
    with BackgroundPool([crm]) as pool:
        yield tree, pool


def test_results_of_calls_in_flight_past_the_budget_are_not_relayed(
    served: tuple[Path, BackgroundPool], test_config: SandboxConfig
) -> None:
    tree, pool = served
    bridge = McpBridge(tree, pool.pool, budgets=Budgets(result_bytes=BUDGET))
    with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=pool.loop) as sb:
        result = sb.execute(PULL, timeout=120)
    assert result.error is None, result.traceback or result.error
    said = json.loads(result.stdout)
    assert said["errors"] == [] and said["spent"] == THREADS
    relayed = [c.response_bytes for c in result.tool_calls if c.ok]
    # Every call made before the budget was spent was served (no honest call refused early), and what reached the
    # script is under the budget plus the one result that crossed it. Before: every call in flight when it ran out
    # was relayed too, about 20 results (7 MB) past it.
    assert BUDGET <= sum(relayed) < BUDGET + max(relayed), (len(relayed), sum(relayed))
    # The calls that came after are said to have run on the server, with their size.
    assert said["late"], "no call was in flight when the budget ran out"
    assert all("did run on the server" in m and "bytes) came after" in m for m in said["late"])
    late = [c for c in result.tool_calls if not c.ok and "came after" in (c.error or "")]
    assert len(late) == len(said["late"]) and all(c.response_bytes == 0 for c in late)
