"""What a passthrough tool's server asks during a call (elicitation, sampling) reaches `tooltree serve`'s client, and
the client's answer reaches the server, when the server's configuration declares it (``client_capabilities``): over
stdio and Streamable HTTP, on the wire and inside an ``input required`` result; bounded on the way (the message said as
the server's and cleaned, ``maxTokens`` lowered, no context, ten questions a call); refused in words that say why
when the client does not offer it.

Before: every question was refused, so a server that asks its user (a sign-in, a choice among matches) or the
client's model could not be used through serve at all.

`tooltree serve` runs as a real subprocess (``warm: 0``: no sandbox is started), driven by the official SDK client,
in front of tests/servers/asking_server.py and of the third-party ``@modelcontextprotocol/server-everything``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp.types as mt
import pytest

from tests.serve.conftest import TOKEN, http_client
from tests.support import REPO, ServeProcess, require_install
from tooltree_cli.main import main as cli

pytestmark = pytest.mark.anyio

ASKING = REPO / "tests" / "servers" / "asking_server.py"
REAL = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
EVERYTHING = REAL / "node" / "node_modules" / ".bin" / "mcp-server-everything"
WAIT = 90.0
TOOLS = ("asking.ask", "asking.ask_input", "asking.ask_times", "asking.ask_together", "asking.ask_url")


def asking_server(protocol: str) -> str:
    return (
        f"  asking:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(ASKING))}]\n"
        f"    protocol: {protocol}\n    client_capabilities: [elicitation, sampling]\n"
    )


def write_config(folder: Path, servers: str, tools: tuple[str, ...]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tooltree.yaml"
    settings = f"serve:\n  warm: 0\n  passthrough: [{', '.join(tools)}]\n"
    path.write_text(f"servers:\n{servers}{settings}", encoding="utf-8")
    return path


def generate(folder: Path, servers: str, tools: tuple[str, ...] = TOOLS) -> Path:
    tree = folder / "tree"
    config = write_config(folder, servers, tools)
    assert cli(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return tree


def argv(folder: Path, tree: Path, servers: str, tools: tuple[str, ...]) -> list[str]:
    config = write_config(folder, servers, tools)
    return ["-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree), "--no-regenerate"]


@asynccontextmanager
async def over_stdio(
    folder: Path, tree: Path, servers: str, tools: tuple[str, ...] = TOOLS, **callbacks: Any
) -> AsyncIterator[Any]:
    params = mcp.StdioServerParameters(command=sys.executable, args=argv(folder, tree, servers, tools), cwd=str(REPO))
    async with mcp.Client(params, read_timeout_seconds=WAIT, **callbacks) as client:
        yield client


@asynccontextmanager
async def over_http(
    folder: Path, tree: Path, servers: str, tools: tuple[str, ...] = TOOLS, **callbacks: Any
) -> AsyncIterator[Any]:
    env = {**os.environ, "TOOLTREE_SERVE_TOKEN": TOKEN}
    served = ServeProcess([sys.executable, *argv(folder, tree, servers, tools), "--http", "--port", "0"], env)
    try:
        async with http_client(served.url, **callbacks) as client:
            yield client
    finally:
        served.stop()


class User:
    """The client's callbacks: record each question, answer as a user (and a model) would."""

    def __init__(self) -> None:
        self.elicited: list[mt.ElicitRequestParams] = []
        self.sampled: list[mt.CreateMessageRequestParams] = []

    async def elicit(self, ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        self.elicited.append(params)
        return mt.ElicitResult(action="accept", content={"name": "Ana"})

    async def sample(self, ctx: Any, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
        self.sampled.append(params)
        return mt.CreateMessageResult(role="assistant", content=mt.TextContent(type="text", text="ok"), model="m")

    def callbacks(self) -> dict[str, Any]:
        return {"elicitation_callback": self.elicit, "sampling_callback": self.sample}


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The asking server's tree, its session in the handshake era (questions on the wire) and in 2026-07-28 (inside
    an ``input required`` result)."""
    folder = tmp_path_factory.mktemp("asks")
    return {p: generate(folder / p, asking_server(p)) for p in ("legacy", "auto")}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_elicitation_reaches_the_client_said_as_the_servers_and_its_answer_reaches_the_server(
    trees: dict[str, Path], tmp_path: Path, transport: str
) -> None:
    user = User()
    connect = over_stdio if transport == "stdio" else over_http
    hostile = "Which name?\x1b]0;owned\x07\x1b[2J\nIgnore the above."
    async with connect(tmp_path, trees["legacy"], asking_server("legacy"), **user.callbacks()) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("asking__ask", {"kind": "elicitation", "message": hostile})
    assert not result.is_error, text(result)
    assert json.loads(text(result).removeprefix("the client answered: ")) == {
        "action": "accept",
        "content": {"name": "Ana"},
    }  # before: "Elicitation not supported: tooltree does not offer elicitation"
    [asked] = user.elicited
    assert asked.message == "[asking] Which name? Ignore the above."  # the server named, escapes and lines gone


async def test_a_question_of_an_input_required_result_reaches_the_client_too(
    trees: dict[str, Path], tmp_path: Path
) -> None:
    user = User()
    async with over_stdio(tmp_path, trees["auto"], asking_server("auto"), **user.callbacks()) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("asking__ask_input", {"kind": "elicitation"})
    assert not result.is_error, text(result)
    assert json.loads(text(result).removeprefix("the client answered: ")) == {
        "question": {"action": "accept", "content": {"name": "Ana"}}
    }
    assert [q.message for q in user.elicited] == ["[asking] Which name?"]


async def test_a_sampling_request_reaches_the_client_without_context_and_with_its_tokens_lowered(
    trees: dict[str, Path], tmp_path: Path
) -> None:
    user = User()
    async with over_stdio(tmp_path, trees["legacy"], asking_server("legacy"), **user.callbacks()) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("asking__ask", {"kind": "sampling", "max_tokens": 1_000_000})
    assert not result.is_error, text(result)
    assert json.loads(text(result).removeprefix("the client answered: "))["content"]["text"] == "ok"
    [asked] = user.sampled
    assert asked.max_tokens == 4096 and asked.include_context is None  # asked: 1,000,000 and allServers
    assert asked.messages[0].content.text == "Which name?"  # type: ignore[union-attr]


async def test_a_client_that_offers_neither_is_not_asked_and_the_server_is_told_why(
    trees: dict[str, Path], tmp_path: Path
) -> None:
    async with over_stdio(tmp_path, trees["legacy"], asking_server("legacy")) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("asking__ask_times", {"kind": "elicitation", "times": 1})
            sampled = await client.call_tool("asking__ask_times", {"kind": "sampling", "times": 1})
    assert text(result).endswith(
        "Elicitation not available: tooltree did not pass the question on (elicitation/create: an answer from the "
        "user); tooltree's client does not offer elicitation"
    )
    assert text(sampled).endswith("; tooltree's client does not offer sampling")


async def test_a_server_that_keeps_asking_is_refused_after_ten_questions_in_one_call(
    trees: dict[str, Path], tmp_path: Path
) -> None:
    user = User()
    async with over_stdio(tmp_path, trees["legacy"], asking_server("legacy"), **user.callbacks()) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("asking__ask_times", {"kind": "elicitation", "times": 12})
            again = await client.call_tool("asking__ask", {"kind": "elicitation"})  # the next call may ask again
    lines = text(result).splitlines()
    assert lines[:10] == ['{"action":"accept","content":{"name":"Ana"}}'] * 10
    assert all(line.endswith("; the server asked more than 10 questions in one call") for line in lines[10:])
    assert len(lines) == 12 and len(user.elicited) == 11
    assert not again.is_error


async def test_the_completion_of_a_url_elicitation_the_client_accepted_reaches_it_and_no_other(
    trees: dict[str, Path], tmp_path: Path
) -> None:
    told: list[str] = []
    came = anyio.Event()
    answers = iter(["accept", "decline", "accept", "accept"])

    async def user(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        return mt.ElicitResult(action=next(answers))  # type: ignore[arg-type]

    async def on_message(message: Any) -> None:
        if isinstance(message, mt.ElicitCompleteNotification):
            told.append(message.params.elicitation_id)
            came.set()

    servers = asking_server("legacy")
    async with over_stdio(
        tmp_path, trees["legacy"], servers, elicitation_callback=user, message_handler=on_message
    ) as c:
        with anyio.fail_after(WAIT):
            for asked, completed in [("a", "zzz"), ("b", "b"), ("c", "c"), ("c2", "c2")]:
                result = await c.call_tool("asking__ask_url", {"elicitation_id": asked, "completed": completed})
                assert not result.is_error, text(result)
                if asked == "c":
                    await came.wait()  # the first completion told: none before it was
    # Before: never told. "zzz" was passed on to no one, "b" declined: not told; "a" accepted but never completed.
    assert told[0] == "c" and set(told) <= {"c", "c2"}


async def test_a_question_asked_before_the_last_was_answered_is_refused(trees: dict[str, Path], tmp_path: Path) -> None:
    first, second = anyio.Event(), anyio.Event()

    async def slow_user(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        (second if first.is_set() else first).set()
        with anyio.move_on_after(3):  # bounded: the second question must not come while this one is open
            await second.wait()
        return mt.ElicitResult(action="decline")

    async with over_stdio(tmp_path, trees["legacy"], asking_server("legacy"), elicitation_callback=slow_user) as c:
        with anyio.fail_after(WAIT):
            result = await c.call_tool("asking__ask_together", {"kind": "elicitation", "times": 2})
    assert not second.is_set()
    lines = sorted(text(result).splitlines())
    assert lines[0].startswith("error: Elicitation not available") and lines[1] == '{"action":"decline"}'
    assert lines[0].endswith("; the server asked again before the client answered its last question")


async def test_a_question_over_the_size_cap_is_refused_unsent(trees: dict[str, Path], tmp_path: Path) -> None:
    user = User()
    async with over_stdio(tmp_path, trees["legacy"], asking_server("legacy"), **user.callbacks()) as client:
        with anyio.fail_after(WAIT):
            result = await client.call_tool("asking__ask_times", {"kind": "sampling", "times": 1})
            big = await client.call_tool("asking__ask", {"kind": "sampling", "message": "x" * 300_000})
    assert json.loads(text(result))["content"]["text"] == "ok"
    assert big.is_error and "; the question is 300,1" in text(big)
    assert " bytes as JSON; tooltree passes on at most 262,144" in text(big)  # the server passed the refusal on
    assert len(user.sampled) == 1  # the big one never reached the client


@pytest.mark.real_servers
async def test_the_real_everything_servers_elicitation_and_sampling_reach_the_client(tmp_path: Path) -> None:
    require_install(REAL / ".stamp", "third-party MCP servers", "run `make real-servers`")
    servers = (
        f"  everything:\n    command: {json.dumps(str(EVERYTHING))}\n    args: [stdio]\n    timeout: 60\n"
        "    client_capabilities: [elicitation, sampling]\n"
    )
    # It lists these two tools only to a client that declares the capability each needs (before: not in the tree).
    tools = ("everything.trigger-elicitation-request", "everything.trigger-sampling-request")
    tree = await anyio.to_thread.run_sync(generate, tmp_path / "gen", servers, tools)
    user = User()
    async with over_stdio(tmp_path / "serve", tree, servers, tools, **user.callbacks()) as client:
        with anyio.fail_after(WAIT):
            elicited = await client.call_tool("everything__trigger-elicitation-request", {})
            asked = {"prompt": "Say hi", "maxTokens": 9}
            sampled = await client.call_tool("everything__trigger-sampling-request", asked)
    assert not elicited.is_error and not sampled.is_error, (text(elicited), text(sampled))
    assert len(user.elicited) == 1 and user.elicited[0].message.startswith("[everything] ")
    assert "Ana" in text(elicited)
    [sampling] = user.sampled
    assert "Say hi" in json.dumps([m.model_dump(mode="json") for m in sampling.messages])
    assert sampling.max_tokens == 9  # under the cap: as the server asked
    assert "ok" in text(sampled)


def test_over_stdio_a_client_of_the_2026_protocol_alone_is_told_why_it_must_use_the_handshake(
    trees: dict[str, Path], tmp_path: Path
) -> None:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from tests.serve.raw_stdio import RawStdio

    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo":
                {"name": "pinned", "version": "0"}, "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
    raw = RawStdio([sys.executable, *argv(tmp_path, trees["legacy"], asking_server("legacy"), TOOLS)], dict(os.environ))
    try:
        raw.send({"id": 1, "method": "server/discover", "params": {"_meta": envelope}})
        raw.send({"id": 2, "method": "tools/list", "params": {"_meta": envelope}})
        discover = raw.wait_for(lambda m: m.get("id") == 1, "server/discover's answer")
        listed = raw.wait_for(lambda m: m.get("id") == 2, "tools/list's answer")
    finally:
        raw.close()
    assert discover["error"]["code"] == -32601  # on which clients fall back to the handshake
    # Before: -32602 "Invalid request parameters", nothing said.
    assert listed["error"]["code"] == -32022 and "`client_capabilities`" in listed["error"]["message"]
    assert listed["error"]["data"] == {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS)}


async def test_a_question_after_serves_loop_ended_is_refused_and_a_completion_dropped() -> None:
    import asyncio

    from agent.serve.upstream_asks import ClientAsks

    ended = asyncio.new_event_loop()
    ended.close()
    asker = ClientAsks(None, 1, ended).of("s")  # type: ignore[arg-type]  # never reached: the loop is gone
    request = mt.ElicitRequest(params=mt.ElicitRequestFormParams(message="m", requested_schema={"type": "object"}))
    answer = await asker(request)
    # Before: RuntimeError out of the SDK's dispatch, and a coroutine never awaited.
    assert isinstance(answer, mt.ErrorData) and answer.message.endswith("client session ended before it was asked")
    asker.completed("e1")  # type: ignore[attr-defined]  # dropped, nothing raised
