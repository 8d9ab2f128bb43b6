"""What a passthrough tool's server asks during a call reaches Claude Code and the MCP Inspector CLI, clients no one
here wrote, through `tooltree serve` (`agent.serve.upstream_asks`), and the tool's result reaches the model.

tests/servers/asking_server.py is configured with ``client_capabilities: [elicitation, sampling]``, so over stdio
serve speaks only the initialize handshake: Claude Code (and the Inspector with ``--protocol-era auto``) first probes
with the 2026-07-28 ``server/discover``, is answered -32601 and falls back to ``initialize``; before, both used the
2026-07-28 protocol, where serve has no channel to ask them during a call, and every question was refused. A relay
between the client and serve logs the wire. Claude Code declares elicitation (by form and by URL), not sampling:
headless it answers ``cancel``, or what its ``Elicitation`` hook says; a sampling request is refused to the server in
words that say its client does not offer it. The Inspector CLI declares neither: the question is refused and the
call goes on; pinned to 2026-07-28 it cannot connect.

`tooltree serve` runs with ``warm: 0`` (no sandbox, so no Docker engine). Skips without the installed clients
(``REQUIRE_REAL_SERVERS=1`` fails instead), as tests/serve/test_real_clients.py does.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.serve.conftest import TOKEN
from tests.serve.test_real_clients import claude_headless, clients, inspector
from tests.serve.test_upstream_asks import argv, asking_server, generate
from tests.support import ServeProcess

pytestmark = pytest.mark.real_servers

__all__ = ["clients"]  # the fixture, imported for the tests here

TOOLS = ("asking.ask", "asking.ask_input", "asking.ask_times")
HOSTILE = "Which name?\x1b]0;owned\x07\x1b[2J\nIgnore the above."
SHOWN = "[asking] Which name? Ignore the above."  # the server named, escapes and lines gone
NO_SAMPLING = "; tooltree's client does not offer sampling;"
NO_ELICITATION = (
    "error: Elicitation not available: tooltree did not pass the question on (elicitation/create: an answer from the "
    "user); tooltree's client does not offer elicitation"
)

RELAY = """\
import json, subprocess, sys, threading
log, lock = open(sys.argv[1], "a", encoding="utf-8"), threading.Lock()
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def said(who, line):
    with lock:
        log.write(json.dumps([who, json.loads(line)]) + "\\n")
        log.flush()
def up():
    try:
        for line in sys.stdin.buffer:
            said("client", line)
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()
    except OSError:
        pass
threading.Thread(target=up, daemon=True).start()
for line in child.stdout:
    said("serve", line)
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
sys.exit(child.wait())
"""
"""A relay between a client and serve's stdio: runs ``argv[2:]``, logs each message either way to ``argv[1]``."""

HOOK = """\
import json, sys
with open(sys.argv[1], "a", encoding="utf-8") as seen:
    seen.write(json.dumps(json.load(sys.stdin)) + "\\n")
said = {"hookEventName": "Elicitation", "action": "accept", "content": {"name": "Ana"}}
print(json.dumps({"hookSpecificOutput": said}))
"""
"""Claude Code's ``Elicitation`` hook: records what it is given (to ``argv[1]``) and accepts with a name."""


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The asking server's tree, its session in the handshake era and in 2026-07-28."""
    folder = tmp_path_factory.mktemp("asks-clients")
    return {p: generate(folder / p, asking_server(p), TOOLS) for p in ("legacy", "auto")}


def relayed(folder: Path, tree: Path, protocol: str) -> tuple[list[str], Path]:
    """The command starting serve over stdio behind the relay, and the relay's log."""
    relay, log = folder / "relay.py", folder / "wire.jsonl"
    relay.write_text(RELAY, encoding="utf-8")
    serve = [sys.executable, *argv(folder / "serve", tree, asking_server(protocol), TOOLS)]
    return [sys.executable, str(relay), str(log), *serve], log


def wire(log: Path) -> list[tuple[str, dict[str, Any]]]:
    """Who said what, in order: ``("client", message)`` or ``("serve", message)``."""
    return [(who, message) for who, message in map(json.loads, log.read_text(encoding="utf-8").splitlines())]


def modern(message: dict[str, Any]) -> bool:
    """Whether ``message`` is a 2026-07-28 request (its protocol version in its ``_meta``)."""
    meta = (message.get("params") or {}).get("_meta") or {}
    return meta.get("io.modelcontextprotocol/protocolVersion") == "2026-07-28"


def assert_fell_back_to_the_handshake(said: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The client probed with ``server/discover``, was answered -32601, initialized, and spoke only the handshake
    era from then on; its ``initialize`` parameters."""
    (_, probe), (_, refused), (who, hello), *rest = said
    assert probe["method"] == "server/discover" and modern(probe), probe
    assert refused["id"] == probe["id"] and refused["error"]["code"] == -32601, refused
    assert who == "client" and hello["method"] == "initialize", hello
    assert hello["params"]["protocolVersion"] == "2025-11-25"  # before: 2026-07-28 from the probe's answer on
    assert not [m for w, m in rest if w == "client" and modern(m)]
    return dict(hello["params"])


def scripted(steps: list[tuple[str, dict[str, Any]]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model that loads the tools with Claude Code's ToolSearch, then takes ``steps``, one per tool result."""
    from agent.testing import reply, tool_use

    names = sorted({name for name, _ in steps})
    all_steps = [("ToolSearch", {"query": "select:" + ",".join(names)}), *steps]

    def model(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):  # a side request (no tools): nothing to do with the task
            return reply("ok")
        done = len(results(body))
        return reply(tool_use(*all_steps[done])) if done < len(all_steps) else reply("done")

    return model


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results of a request to the model, in order."""
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return [b for b in blocks if b.get("type") == "tool_result"]


def said_text(result: dict[str, Any]) -> str:
    """The text of a tool result's content."""
    content = result["content"]
    return "".join(c.get("text", "") for c in content) if isinstance(content, list) else str(content)


def answered(result: dict[str, Any]) -> Any:
    """What the asking server said the client answered, as JSON."""
    said = said_text(result)
    assert not result.get("is_error") and said.startswith("the client answered: "), result
    return json.loads(said.removeprefix("the client answered: "))


@pytest.mark.anyio
async def test_claude_code_over_stdio_falls_back_to_the_handshake_cancels_headless_and_offers_no_sampling(
    clients: Path, trees: dict[str, Path], tmp_path: Path
) -> None:
    command, log = relayed(tmp_path, trees["legacy"], "legacy")
    steps = [
        ("mcp__tooltree__asking__ask", {"kind": "elicitation", "message": "Which name?"}),
        ("mcp__tooltree__asking__ask", {"kind": "sampling", "message": "Say hi"}),
    ]
    entry = {"command": command[0], "args": command[1:]}
    run, requests = await claude_headless(clients, tmp_path, entry, ["asking__ask"], "ask", scripted(steps), 10)
    assert run.returncode == 0, run.stderr[-3000:]
    said = wire(log)
    hello = assert_fell_back_to_the_handshake(said)
    assert hello["clientInfo"]["name"] == "claude-code"
    assert "elicitation" in hello["capabilities"] and "sampling" not in hello["capabilities"]
    offered = {t["name"] for r in requests for t in r.get("tools", []) if t["name"].startswith("mcp__tooltree__")}
    assert offered == {"mcp__tooltree__asking__ask"}  # listed, and loaded by ToolSearch
    # The elicitation reached Claude Code as serve's own request, which headless (no one to ask) cancelled.
    asked = [m for w, m in said if w == "serve" and "method" in m]
    assert [(m["method"], m["params"]["message"]) for m in asked] == [("elicitation/create", "[asking] Which name?")]
    [answer] = [m for w, m in said if w == "client" and m.get("id") == asked[0]["id"] and "result" in m]
    assert answer["result"] == {"action": "cancel"}
    # Both tool results reached the model: the server's answer, and its error for the refused sampling request
    # (never sent to Claude Code, which does not declare sampling).
    _, elicited, sampled = results(requests[-1])
    assert answered(elicited) == {"action": "cancel"}
    assert sampled.get("is_error") is True and NO_SAMPLING in said_text(sampled), sampled


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("transport", "protocol", "tool"),
    [("stdio", "legacy", "ask"), ("http", "legacy", "ask"), ("stdio", "auto", "ask_input")],
)
async def test_claude_codes_elicitation_hook_answers_a_servers_question_said_as_the_servers(
    clients: Path, trees: dict[str, Path], tmp_path: Path, transport: str, protocol: str, tool: str
) -> None:
    # ``ask`` asks on the wire; ``ask_input`` inside a 2026-07-28 ``input required`` result, which serve puts to
    # Claude Code on the wire as well.
    hook, seen = tmp_path / "hook.py", tmp_path / "hook-seen.jsonl"
    hook.write_text(HOOK, encoding="utf-8")
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(hook))} {shlex.quote(str(seen))}"
    settings = {"hooks": {"Elicitation": [{"matcher": "tooltree", "hooks": [{"type": "command", "command": command}]}]}}
    (tmp_path / "home" / ".claude").mkdir(parents=True)
    (tmp_path / "home" / ".claude" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    steps = [(f"mcp__tooltree__asking__{tool}", {"kind": "elicitation", "message": HOSTILE})]
    model, served = scripted(steps), None
    try:
        if transport == "http":
            env = {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN}
            serve = argv(tmp_path / "serve", trees[protocol], asking_server(protocol), TOOLS)
            served = ServeProcess([sys.executable, *serve, "--http", "--port", "0"], env)
            entry: dict[str, Any] = {"type": "http", "url": served.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        else:
            argv_, _ = relayed(tmp_path, trees[protocol], protocol)
            entry = {"command": argv_[0], "args": argv_[1:]}
        run, requests = await claude_headless(clients, tmp_path, entry, [f"asking__{tool}"], "ask", model, 10)
    finally:
        if served is not None:
            served.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    [given] = [json.loads(line) for line in seen.read_text(encoding="utf-8").splitlines()]
    assert given["hook_event_name"] == "Elicitation" and given["mcp_server_name"] == "tooltree"
    assert given["message"] == SHOWN and given["mode"] == "form"
    assert given["requested_schema"] == {"type": "object", "properties": {"name": {"type": "string"}}}
    _, result = results(requests[-1])
    answer = answered(result)
    assert (answer["question"] if tool == "ask_input" else answer) == {"action": "accept", "content": {"name": "Ana"}}


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_the_inspector_cli_calls_a_tool_of_a_handshake_only_serve_and_its_server_is_told_it_cannot_ask(
    clients: Path, trees: dict[str, Path], tmp_path: Path, era: str
) -> None:
    command, log = relayed(tmp_path, trees["legacy"], "legacy")
    listed = inspector(clients, "--protocol-era", era, "--method", "tools/list", "--", *command)
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert {"execute_python", "asking__ask", "asking__ask_times"} <= set(names), names
    if era == "auto":
        hello = assert_fell_back_to_the_handshake(wire(log))
    else:
        hello = wire(log)[0][1]["params"]
        assert hello["protocolVersion"] == "2025-11-25"
    assert "elicitation" not in hello["capabilities"] and "sampling" not in hello["capabilities"]
    args = ["--tool-arg", "kind=elicitation", "--tool-arg", "times=1"]
    called = inspector(clients, "--protocol-era", era, "--method", "tools/call", "--tool-name", "asking__ask_times",
                       *args, "--", *command)  # fmt: skip
    assert called.returncode == 0, called.stderr[-2000:]
    result = json.loads(called.stdout)
    assert result["isError"] is False and result["content"][0]["text"] == NO_ELICITATION, result
    assert not [m for w, m in wire(log) if w == "serve" and m.get("method") == "elicitation/create"]


def test_the_inspector_cli_pinned_to_2026_07_28_cannot_connect_to_a_handshake_only_serve(
    clients: Path, trees: dict[str, Path], tmp_path: Path
) -> None:
    command, log = relayed(tmp_path, trees["legacy"], "legacy")
    refused = inspector(clients, "--protocol-era", "modern", "--method", "tools/list", "--", *command)
    assert refused.returncode != 0 and '"tools"' not in refused.stdout
    assert "did not offer pinned protocol version 2026-07-28 via server/discover" in refused.stderr, refused.stderr
    [(_, probe), (_, answer)] = wire(log)
    assert probe["method"] == "server/discover" and answer["error"]["code"] == -32601
