"""`tooltree serve` driven by MCP clients that no one here wrote: the MCP Inspector CLI and Claude Code.

Both are npm packages pinned in tests/real_servers/clients/ and installed by `make real-servers` into
``$TOOLTREE_REAL_SERVERS/clients``; without them these tests skip (``REQUIRE_REAL_SERVERS=1`` fails
them). Claude Code runs headless (``claude -p``) against the project's fake Messages API, whose
scripted model calls ``search_tools``, ``read_file`` and ``execute_python`` (running
``examples/top_leads.py``) through Claude Code.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import TOKEN, Serve, clean_up, new_serve
from tests.support import REPO, alive, hung_server_yaml, require_install, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.real_servers]

RUN_WAIT = 300
INSTALL_HINT = "run `make real-servers` (scripts/install-real-clients.sh) to install the MCP clients"
LEADS_SCRIPT = (REPO / "examples" / "top_leads.py").read_text(encoding="utf-8")
TASK = "Which five of our leads have the highest estimated value? Name their companies."
USED = ("search_tools", "read_file", "execute_python")
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


@pytest.fixture(scope="session")
def clients() -> Path:
    """``$TOOLTREE_REAL_SERVERS/clients`` with both clients installed; skips (or fails) without them."""
    root = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers")
    folder = root.resolve() / "clients"
    require_install(folder / ".stamp", "the MCP clients", INSTALL_HINT)
    return folder


def inspector(clients: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [str(clients / "node_modules" / ".bin" / "mcp-inspector"), "--cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=RUN_WAIT, env=env, check=False)


def claude(clients: Path) -> str:
    (binary,) = (clients / "node_modules" / "@anthropic-ai").glob("claude-code-*/claude")
    return str(binary)


CALLS: list[tuple[str, list[str], Callable[[dict[str, Any]], bool]]] = [
    ("list_files", ["path=servers"], lambda r: "crm/" in r["content"][0]["text"]),
    ("read_file", ["path=servers/crm/list_leads.py"], lambda r: "def list_leads(" in r["content"][0]["text"]),
    ("search_tools", ["query=render a chart"], lambda r: "media.render_chart" in r["content"][0]["text"]),
    (
        "execute_python",
        ["code=from servers.media import render_chart\nshow_image(render_chart(title='t', values=[1, 2]).images[0])"],
        lambda r: r["content"][1]["type"] == "image" and base64.b64decode(r["content"][1]["data"])[:4] == b"\x89PNG",
    ),
]


def check_inspector_session(clients: Path, target: list[str], env: dict[str, str] | None = None) -> None:
    """tools/list, then each tool once; ``target`` is a URL (first) or ``-- command...`` (last)."""
    first, last = ([], target) if target[-1:] and "--" in target else (target, [])

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return inspector(clients, *first, *args, *last, env=env)

    listed = call("--method", "tools/list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert names == ["list_files", "read_file", "search_tools", "execute_python"]
    for tool, arguments, ok in CALLS:
        args = [a for pair in arguments for a in ("--tool-arg", pair)]
        done = call("--method", "tools/call", "--tool-name", tool, *args)
        assert done.returncode == 0, (tool, done.stderr[-2000:])
        result = json.loads(done.stdout)
        assert result["isError"] is False and ok(result), (tool, done.stdout[:2000])


def test_the_inspector_cli_lists_and_calls_each_tool_over_stdio(
    clients: Path, make_serve: Callable[..., Serve]
) -> None:
    serve = make_serve()
    argv = serve.argv()
    check_inspector_session(clients, ["-e", f"TOOLTREE_SANDBOX_OWNER={serve.owner}", "--", *argv])


@pytest.fixture(scope="module")
def http_serve(serve_tree: Path, tmp_path_factory: pytest.TempPathFactory, docker_engine: Any) -> Iterator[Serve]:
    serve = new_serve(tmp_path_factory.mktemp("clients-http"), serve_tree)
    serve.start_http()
    yield serve
    clean_up(serve, docker_engine)


def test_the_inspector_cli_lists_and_calls_each_tool_over_http_with_the_token(clients: Path, http_serve: Serve) -> None:
    check_inspector_session(clients, [http_serve.url, "--header", f"Authorization: Bearer {TOKEN}"])


def test_the_inspector_cli_without_the_token_is_refused(clients: Path, http_serve: Serve) -> None:
    for header in ([], ["--header", "Authorization: Bearer wrong"]):
        refused = inspector(clients, http_serve.url, *header, "--method", "tools/list")
        assert refused.returncode != 0
        assert "auth" in (refused.stdout + refused.stderr).lower()
        assert '"tools"' not in refused.stdout


def claude_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, **QUIET, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"), **extra}


async def claude_headless(
    clients: Path, tmp_path: Path, entry: dict[str, Any], tools: Sequence[str], prompt: str, model: Any, replies: int
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """``claude -p prompt`` with tooltree as its one MCP server (``entry`` of its MCP config), its ``tools`` allowed,
    against the fake Messages API answering with ``model`` (at most ``replies`` times): the run, and the requests
    the model got."""
    from agent.testing import FakeMessagesAPI

    mcp_config = tmp_path / "mcp.json"
    mcp_config.write_text(json.dumps({"mcpServers": {"tooltree": entry}}), encoding="utf-8")
    allowed = ",".join(["ToolSearch", *(f"mcp__tooltree__{name}" for name in tools)])
    with FakeMessagesAPI([model] * replies) as api:
        env = claude_env(tmp_path / "home", ANTHROPIC_BASE_URL=api.base_url, ANTHROPIC_API_KEY="sk-fake")
        argv = [claude(clients), "-p", prompt, "--mcp-config", str(mcp_config), "--strict-mcp-config",
                "--allowedTools", allowed]  # fmt: skip

        def headless() -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=RUN_WAIT, check=False
            )

        run = await anyio.to_thread.run_sync(headless)
        return run, list(api.requests)


def claude_mcp_add_and_list(clients: Path, serve: Serve, argv: list[str], env: dict[str, str]) -> str:
    """``claude mcp add tooltree -- argv``, then ``claude mcp list``; tooltree's line of that list."""
    cwd = Path(env["HOME"]).parent
    added = subprocess.run(
        [claude(clients), "mcp", "add", "tooltree", "-e", f"TOOLTREE_SANDBOX_OWNER={serve.owner}", "--", *argv],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=RUN_WAIT, check=False,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = subprocess.run([claude(clients), "mcp", "list"], capture_output=True, text=True, env=env, cwd=cwd,
                            timeout=RUN_WAIT, check=False)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    return next(line for line in listed.stdout.splitlines() if line.startswith("tooltree:"))


def test_claude_code_adds_tooltree_and_lists_it_connected(
    clients: Path, make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    serve = make_serve()
    line = claude_mcp_add_and_list(
        clients, serve, serve.argv(), claude_env(tmp_path / "home", ANTHROPIC_API_KEY="sk-fake")
    )
    assert "Connected" in line and "serve" in line


def test_claude_code_connects_while_a_server_of_the_config_is_still_being_listed(
    clients: Path, make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    # A server that never answers tools/list stands for a config too big to list within Claude Code's
    # handshake timeout (here cut to 10 s): the tree is served at once and refreshed in the background.
    hung_entry, pid_file = hung_server_yaml(tmp_path, timeout=120)
    serve = make_serve()
    text = serve.config.read_text(encoding="utf-8")
    serve.config.write_text(text.replace("servers:\n", "servers:\n" + hung_entry, 1), encoding="utf-8")  # listed first
    argv = [a for a in serve.argv() if a != "--no-regenerate"]
    env = claude_env(tmp_path / "home", ANTHROPIC_API_KEY="sk-fake", MCP_TIMEOUT="10000")
    line = claude_mcp_add_and_list(clients, serve, argv, env)
    assert "Connected" in line, line
    assert pid_file.exists()  # the refresh was listing the hung server meanwhile
    wait_until(lambda: not alive(int(pid_file.read_text(encoding="utf-8"))), "the hung server to be closed")


def tool_results(body: dict[str, Any]) -> list[str]:
    """The text of every tool result in a request, in order."""
    texts = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content")
                parts = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
                texts.append("".join(p.get("text", "") for p in parts if isinstance(p, dict)))
    return texts


def scripted_model(body: dict[str, Any]) -> dict[str, Any]:
    """What a model would do in Claude Code with tooltree: load the deferred tooltree tools with Claude Code's
    ToolSearch, search the tree, read the stub, run a script, answer."""
    from agent.testing import reply, tool_use

    if not body.get("tools"):  # a side request (no tools): nothing to do with the task
        return reply("ok")
    done = tool_results(body)
    steps = [
        ("ToolSearch", {"query": "select:" + ",".join(f"mcp__tooltree__{n}" for n in USED)}),
        ("mcp__tooltree__search_tools", {"query": "export leads"}),
        ("mcp__tooltree__read_file", {"path": "servers/crm/list_leads.py"}),
        ("mcp__tooltree__execute_python", {"code": LEADS_SCRIPT}),
    ]
    if len(done) < len(steps):
        return reply(tool_use(*steps[len(done)]))
    # examples/top_leads.py prints "N leads; the five biggest:", then "  <value>  <company> (<status>, <owner>)".
    rows = [line.strip().split("  ", 1) for line in done[-1].splitlines()[1:6]]
    lines = "\n".join(f"{n}. {rest.rsplit(' (', 1)[0]} — ${value}" for n, (value, rest) in enumerate(rows, 1))
    return reply(f"The five leads worth most:\n{lines}")


async def expected_top_five() -> list[str]:
    """The answer, straight from the CRM sample server (not through tooltree)."""
    import mcp
    from mcp import StdioServerParameters

    from tests.support import SAMPLE_SERVERS

    async with mcp.Client(StdioServerParameters(command=sys.executable, args=[str(SAMPLE_SERVERS / "crm.py")])) as c:
        result = await c.call_tool("list_leads", {})
    rows = json.loads(result.content[0].text)["leads"]  # type: ignore[union-attr]
    rows.sort(key=lambda r: r["estimated_value"], reverse=True)
    return [r["company"] for r in rows[:5]]


@pytest.mark.anyio
async def test_claude_code_completes_the_top_leads_task_through_tooltree(
    clients: Path, make_serve: Callable[..., Serve], tmp_path: Path
) -> None:

    serve = make_serve()
    argv = serve.argv()
    entry = {"command": argv[0], "args": argv[1:], "env": {"TOOLTREE_SANDBOX_OWNER": serve.owner}}
    run, requests = await claude_headless(clients, tmp_path, entry, USED, TASK, scripted_model, 40)
    assert run.returncode == 0, run.stderr[-3000:]
    expected = await expected_top_five()
    answer = run.stdout
    assert all(company in answer for company in expected), (expected, answer)
    # Claude Code offered tooltree's tools to the model (deferred behind its ToolSearch, which loaded three),
    # and put tooltree's instructions in its system prompt.
    offered = {t["name"]: t for r in requests for t in r.get("tools", []) if t.get("name", "").startswith("mcp__")}
    assert set(offered) == {f"mcp__tooltree__{name}" for name in USED}
    assert "Run Python in the sandbox" in offered["mcp__tooltree__execute_python"]["description"]
    assert "from servers.<server> import <tool>" in json.dumps(requests[-1])
    # The tool results Claude Code sent back came from tooltree: the search hit, the stub, the script's output.
    blocks = [b for m in requests[-1]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    results = [b["content"] for b in blocks if b.get("type") == "tool_result" and isinstance(b["content"], list)]
    references = [c["tool_name"] for content in results for c in content if c.get("type") == "tool_reference"]
    assert references == [f"mcp__tooltree__{name}" for name in USED]
    _, searched, stub, printed = tool_results(requests[-1])
    assert "crm.list_leads" in searched
    assert "def list_leads(" in stub
    assert printed.startswith("10000 leads; the five biggest:") and expected[0] in printed
    assert "crm.list_leads ok" in printed
