"""A server that asks tooltree something during a call (sampling, elicitation, roots), which it does not offer: the
call ends at once, saying what the server asked and that tooltree does not offer it, and the server goes on.

Before: the SDK's words ("Sampling not supported"), and for a question inside an ``input required`` result (protocol
2026-07-28) a call failure that blamed the server: "server error -32600: Elicitation not supported; the server
answered the call with an error of the protocol", though the server had only asked. A server that kept answering
``input required`` ended with the SDK's advice to its programmer ("raise input_required_max_rounds on the Client").

Real processes: `tests/servers/asking_server.py` (the SDK's ``MCPServer``), through `ServerPool`, `Runtime` and, in
the sandbox, `tooltree exec`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool

REPO = Path(__file__).resolve().parents[2]
ASKING = REPO / "tests" / "servers" / "asking_server.py"
KINDS = {
    "sampling": "asked tooltree for an LLM completion (sampling/createMessage) to finish the call; tooltree does not "
    "offer sampling",
    "elicitation": "asked tooltree for an answer from the user (elicitation/create) to finish the call; tooltree "
    "does not offer elicitation",
    "roots": "asked tooltree for the client's root folders (roots/list) to finish the call; tooltree does not offer "
    "roots",
}
PROMPTLY = 20.0
"""Seconds a call that asks may take at most: it is refused at once (a start on a busy machine included)."""


def asking(marks: Path, protocol: str = "auto") -> ServerConfig:
    return ServerConfig(
        name="asking", command=sys.executable, args=(str(ASKING), str(marks)), timeout=60, protocol=protocol
    )


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_question_in_an_input_required_result_ends_the_call_saying_what_tooltree_does_not_offer(
    tmp_path: Path, kind: str
) -> None:
    async with ServerPool([asking(tmp_path)]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask_input", {"kind": kind})
        assert isinstance(result, CallFailure) and result.code == "server_error"
        assert text(result).startswith(f"server 'asking' {KINDS[kind]} (it declares no client capability)")
        assert "error of the protocol" not in result.message  # the server only asked
        assert text(await pool.call("asking", "wait", {"seconds": 0})) == "waited 0 s"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_a_question_on_the_wire_is_refused_in_words_that_reach_the_caller(tmp_path: Path, kind: str) -> None:
    # An older protocol: the server asks on the wire, and ends the call with the error tooltree answered.
    async with ServerPool([asking(tmp_path, "legacy")]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask", {"kind": kind})
        assert isinstance(result, CallFailure)
        assert f"not supported: tooltree does not offer {kind} (" in text(result)
        assert text(await pool.call("asking", "wait", {"seconds": 0})) == "waited 0 s"


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_the_refusal_declares_no_capability(tmp_path: Path, protocol: str) -> None:
    async with ServerPool([asking(tmp_path, protocol)]) as pool:
        declared = json.loads(text(await pool.call("asking", "capabilities", {})))
    assert declared == {}


@pytest.mark.anyio
async def test_a_server_that_answers_input_required_for_ever_is_given_up_on_in_tooltrees_words(
    tmp_path: Path,
) -> None:
    async with ServerPool([asking(tmp_path)]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "never_done", {})
        assert isinstance(result, CallFailure)
        assert text(result).startswith("server 'asking' answered the call with 'input required' more than 10 times")
        assert "input_required_max_rounds" not in result.message  # the SDK's advice to its own user


@pytest.mark.anyio
async def test_a_call_that_times_out_is_cancelled_on_the_server_which_goes_on(tmp_path: Path) -> None:
    async with ServerPool([asking(tmp_path)]) as pool:
        result = await pool.call("asking", "wait", {"seconds": 60}, timeout=1)
        assert isinstance(result, CallFailure) and result.code == "timeout"
        with anyio.fail_after(PROMPTLY):
            while not (tmp_path / "cancelled").exists():
                await anyio.sleep(0.05)  # a poll of the server's mark, bounded
        assert (tmp_path / "cancelled").read_text() == (tmp_path / "ran").read_text()
        assert text(await pool.call("asking", "wait", {"seconds": 0})) == "waited 0 s"


def test_the_python_api_says_what_the_server_asked(tmp_path: Path) -> None:
    from sandbox.bridge import ToolCallRefused
    from sandbox.host import Runtime
    from tool_tree.config import Config
    from tooltree_cli.main import main

    config = _config(tmp_path)
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    from tool_tree.config import load_config

    loaded: Config = load_config(config)
    with Runtime(loaded, tree) as runtime:
        with pytest.raises(ToolCallRefused) as refused:
            runtime.call_tool("asking", "ask_input", {"kind": "sampling"})
        assert f"server 'asking' {KINDS['sampling']}" in str(refused.value)
        assert runtime.call_tool("asking", "wait", {"seconds": 0})["content"][0]["text"] == "waited 0 s"


@pytest.mark.docker
@pytest.mark.usefixtures("sandbox_owner")
def test_a_script_in_the_sandbox_sees_what_the_server_asked(
    docker_engine: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooltree_cli.main import main

    config = _config(tmp_path)
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    capsys.readouterr()
    script = (
        "from servers.asking import ask_input, wait\nfrom tool_tree.runtime import ToolCallError\n"
        "try:\n    ask_input(kind='elicitation')\nexcept ToolCallError as e:\n    print(e)\nprint(wait(seconds=0))\n"
    )
    code = main(["exec", "-c", script, "--config", str(config), "--tree", str(tree), "--timeout", "120"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith(f"asking.ask_input: server 'asking' {KINDS['elicitation']}")
    assert out.endswith("waited 0 s\n")


def _config(folder: Path) -> Path:
    marks = folder / "marks"
    marks.mkdir()
    config = folder / "tooltree.yaml"
    config.write_text(
        f"servers:\n  asking:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(ASKING))}, {json.dumps(str(marks))}]\n    timeout: 60\n",
        encoding="utf-8",
    )
    return config
