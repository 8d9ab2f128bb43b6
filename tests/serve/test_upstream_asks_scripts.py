"""With ``serve: asks_from_scripts: true``, the elicitations a server asks during a script's calls reach `tooltree
serve`'s client (said as the server's, one at a time, three a script), and nothing else does: a sampling request from
a script is refused (the client's model is never spent unseen). Without the setting, a script's questions are refused
as before ("no one to ask"), and never reach the client.

A real `tooltree serve` over stdio (``warm: 0``), the official SDK client with an elicitation callback, a real
sandbox running the script, and tests/servers/asking_server.py behind it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp.types as mt
import pytest

from tests.support import REPO
from tooltree_cli.main import main as cli

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

ASKING = REPO / "tests" / "servers" / "asking_server.py"
WAIT = 240.0
SERVERS = (
    f"servers:\n  asking:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(ASKING))}]\n"
    "    protocol: legacy\n    client_capabilities: [elicitation, sampling]\n"
)
SCRIPT = (
    "from servers.asking import ask_times\n"
    "print(ask_times(kind='elicitation', times=4))\n"
    "print(ask_times(kind='sampling', times=1))\n"
)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("script-asks")
    config = folder / "tooltree.yaml"
    config.write_text(SERVERS, encoding="utf-8")
    out = folder / "tree"
    assert cli(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    return out


async def run_script(tree: Path, folder: Path, owner: str, *, asks_from_scripts: bool) -> tuple[str, list[str]]:
    """The script's output through serve, and the messages the client was asked."""
    config = folder / "tooltree.yaml"
    setting = "true" if asks_from_scripts else "false"
    config.write_text(f"{SERVERS}serve:\n  warm: 0\n  asks_from_scripts: {setting}\n", encoding="utf-8")
    asked: list[str] = []

    async def user(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params.message)
        return mt.ElicitResult(action="accept", content={"name": f"Ana {len(asked)}"})

    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--no-regenerate"]
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    params = mcp.StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO), env=env)
    async with mcp.Client(params, read_timeout_seconds=WAIT, elicitation_callback=user) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("execute_python", {"code": SCRIPT})
    return "\n".join(b.text for b in result.content if isinstance(b, mt.TextContent)), asked


async def test_a_scripts_elicitations_reach_the_client_three_a_script_and_sampling_never(
    tree: Path, tmp_path: Path, owner: str
) -> None:
    out, asked = await run_script(tree, tmp_path, owner, asks_from_scripts=True)
    assert asked == ["[asking] Question 1?", "[asking] Question 2?", "[asking] Question 3?"]
    assert '{"action":"accept","content":{"name":"Ana 3"}}' in out, out
    assert "; the server asked more than 3 questions in one script" in out
    assert "; tooltree passes only elicitation on from a script" in out  # the sampling request


async def test_without_the_setting_a_scripts_questions_are_refused_and_never_reach_the_client(
    tree: Path, tmp_path: Path, owner: str
) -> None:
    out, asked = await run_script(tree, tmp_path, owner, asks_from_scripts=False)
    assert asked == []
    assert out.count("no one to ask: tooltree passes elicitation on only during a call of a passthrough tool") == 4, out
