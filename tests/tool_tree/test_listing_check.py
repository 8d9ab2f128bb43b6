"""`tool_tree.listing_check` with real servers: malformed tools left out one by one, and the protocol probe.

A server listing some malformed tools: the others are listed, each one left out is named with why. Before: the
SDK validated ``tools/list`` whole, so one tool with ``annotations.readOnlyHint: "maybe"`` failed every tool of
its server ("ValidationError: 4 validation errors for ListToolsResult …" in generate-tree's table).

Each page of a listing is checked against the protocol's schema once: by `ListingCheck`, which hands its tools to
`tool_tree.connect.list_tools_raw` (before, the SDK checked every tool again and dumped a copy of the page to do so:
about half of the first call's host CPU for a server of 20,000 tools).

An older server that never answers ``server/discover``: ``protocol: legacy`` starts it without the SDK's 10 s
wait, and a warning names that setting when the wait happened.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import methods

from sandbox.bridge import ToolCallRefused
from sandbox.host import Runtime
from tests.support import RAW_SERVER, raw_server_config, raw_server_tree
from tool_tree import http_client
from tool_tree.config import ServerConfig, load_config
from tool_tree.listing_check import ListingCheck
from tool_tree.pool import ServerPool, ServerUnavailable
from tooltree_cli.main import main

SCHEMA = {"type": "object"}
GOOD = [{"name": "good", "inputSchema": SCHEMA}, {"name": "also_good", "inputSchema": SCHEMA}]
MALFORMED = [
    {"name": "vague", "inputSchema": SCHEMA, "annotations": {"readOnlyHint": "maybe"}},
    {"name": "schemaless", "description": "no input schema"},
    {"name": "odd_output", "inputSchema": SCHEMA, "outputSchema": {"type": "string"}},
    {"description": "no name", "inputSchema": SCHEMA},
    "not a tool at all",
]
LEFT_OUT = [
    "tool 'vague', malformed: annotations.readOnlyHint: Input should be a valid boolean, unable to interpret input",
    "tool 'schemaless', malformed: inputSchema: Field required",
    "tool 'odd_output', malformed: outputSchema.type: Input should be 'object'",
    "tool #5 (no name), malformed: name: Field required",
    "tool #6 (no name), malformed: Input should be a valid dictionary or instance of Tool",
]


def generate(folder: Path, pages: list[list[Any]], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    config = raw_server_config(folder, {"pages": pages})
    capsys.readouterr()
    code = main(["generate-tree", "--config", str(config), "--out", str(folder / "tree"), "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, report
    return report


def test_generate_tree_writes_the_well_formed_tools_and_names_each_malformed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = generate(tmp_path, [[GOOD[0], *MALFORMED, GOOD[1]]], capsys)
    assert [(s["name"], s["status"], s["tools"]) for s in report["servers"]] == [("raw", "ok", 2)]
    assert report["warnings"] == [f"raw: left out {line}" for line in LEFT_OUT]
    stubs = sorted(p.name for p in (tmp_path / "tree" / "servers" / "raw").glob("*.py"))
    assert stubs == ["__init__.py", "also_good.py", "good.py"]


def test_a_malformed_tool_on_a_later_page_leaves_the_pages_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = generate(tmp_path, [[GOOD[0]], [MALFORMED[0], GOOD[1]]], capsys)
    assert report["servers"][0]["tools"] == 2 and report["warnings"] == [f"raw: left out {LEFT_OUT[0]}"]


def test_a_call_of_a_tool_the_server_now_lists_malformed_says_why(tmp_path: Path) -> None:
    tree, _ = raw_server_tree(tmp_path, [GOOD[0], {**MALFORMED[0], "annotations": {"readOnlyHint": True}}])
    spec = tmp_path / "raw.json"
    spec.write_text(json.dumps({"pages": [[GOOD[0], MALFORMED[0]]]}), encoding="utf-8")  # the server changed
    with Runtime(load_config(tmp_path / "tooltree.yaml"), tree) as runtime:
        assert json.loads(runtime.call_tool("raw", "good", {"a": 1})["content"][0]["text"]) == {"a": 1}
        with pytest.raises(ToolCallRefused) as info:
            runtime.call_tool("raw", "vague", {})
    assert info.value.code == "tool_changed"
    assert info.value.message.startswith(
        "raw.vague is now listed by the server with a malformed definition (annotations.readOnlyHint: "
    )


class _Listing(BaseHTTPRequestHandler):
    """A Streamable HTTP server (JSON replies) whose ``tools/list`` holds `MALFORMED` between two good tools."""

    protocol_version = "HTTP/1.1"
    listed: ClassVar[list[Any]] = [GOOD[0], *MALFORMED, GOOD[1]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._reply(405, b"")

    def do_DELETE(self) -> None:
        self._reply(200, b"")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in message or "method" not in message:
            self._reply(202, b"")
            return
        result: dict[str, Any] = {}
        if message["method"] == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "listing", "version": "1"},
            }
        elif message["method"] == "tools/list":
            result = {"tools": self.listed}
        elif message["method"] == "tools/call":
            result = {"content": [{"type": "text", "text": message["params"]["name"]}]}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self._reply(200, body, "application/json")

    def _reply(self, status: int, body: bytes, content_type: str = "") -> None:
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def http_listing() -> Iterator[ServerConfig]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Listing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield ServerConfig(name="listing", url=f"http://127.0.0.1:{server.server_address[1]}/mcp", timeout=30)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.anyio
async def test_over_streamable_http_the_well_formed_tools_are_listed_and_called(http_listing: ServerConfig) -> None:
    async with ServerPool([http_listing]) as pool:
        tools = await pool.start("listing")
        assert [t["name"] for t in tools] == ["good", "also_good"]
        assert pool.malformed("listing", "vague") == LEFT_OUT[0].split(", malformed: ")[1]
        assert pool.malformed("listing", "good") is None
        result = await pool.call("listing", "also_good", {})
    assert result["content"] == [{"type": "text", "text": "also_good"}]


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_each_page_of_a_listing_is_checked_once_the_sdk_checking_none_of_its_tools_again(
    transport: str, tmp_path: Path, http_listing: ServerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[int] = []  # the tools of each tools/list result the SDK checked
    sdk_check = methods.validate_server_result

    def counted(method: str, version: str, data: Any, **kwargs: Any) -> None:
        if method == "tools/list":
            checked.append(len(data["tools"]))
        sdk_check(method, version, data, **kwargs)

    monkeypatch.setattr(methods, "validate_server_result", counted)
    server = http_listing
    if transport == "stdio":
        spec = tmp_path / "raw.json"
        spec.write_text(json.dumps({"pages": [[GOOD[0], *MALFORMED], [GOOD[1]]]}), encoding="utf-8")
        server = ServerConfig(name="listing", command=sys.executable, args=(str(RAW_SERVER), str(spec)))
    async with ServerPool([server]) as pool:
        assert [t["name"] for t in await pool.start("listing")] == ["good", "also_good"]
        assert pool.malformed("listing", "vague") == LEFT_OUT[0].split(", malformed: ")[1]
        assert (await pool.call("listing", "good", {}))["content"][0]["type"] == "text"
    assert checked == ([0, 0] if transport == "stdio" else [0])  # before: [1, 1] and [2], each tool checked again


LONG_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "null"}},
}


class _LongListing(_Listing):
    """`_Listing` listing 3,000 tools, whose schemas hold 12,000 ``"type"`` keys, more items than an answer keeps."""

    listed: ClassVar[list[Any]] = [{"name": f"tool_{i}", "inputSchema": LONG_SCHEMA} for i in range(3_000)]


@pytest.mark.anyio
async def test_a_long_listing_over_http_is_not_parsed_once_more_before_the_sdk_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its "type" keys made it look like an answer of more content blocks than an answer keeps, so tooltree's HTTP
    # client parsed it whole to cut them before the SDK parsed it: a listing has no such list (0.2 s at 20,000 tools).
    parsed: list[bytes] = []
    cut_answer = http_client.cut_answer
    monkeypatch.setattr(http_client, "cut_answer", lambda data: parsed.append(data) or cut_answer(data))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LongListing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        async with ServerPool([ServerConfig(name="long", url=url, timeout=30)]) as pool:
            assert len(await pool.start("long")) == 3_000
            assert (await pool.call("long", "tool_1", {}))["content"] == [{"type": "text", "text": "tool_1"}]
    finally:
        server.shutdown()
        server.server_close()
    assert parsed == []  # before: the listing's answer


def answer(check: ListingCheck, result: dict[str, Any], *, method: str = "tools/list") -> SessionMessage | Exception:
    check.sent(types.JSONRPCRequest(jsonrpc="2.0", id=7, method=method))
    return check.received(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=7, result=result)))


@pytest.mark.parametrize(
    "result",
    [
        {"tools": GOOD},  # well formed
        {"tools": [*GOOD, MALFORMED[0]], "nextCursor": 5},  # refused for its cursor too: the SDK says so
        {"tools": "not a list"},
    ],
)
def test_an_answer_refused_for_more_than_some_tools_or_not_at_all_is_handed_on_as_it_is(
    result: dict[str, Any],
) -> None:
    check = ListingCheck("raw")
    sent = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=7, result=result))
    check.sent(types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/list"))
    assert check.received(sent) is sent and check.left_out == []


def test_only_answers_to_tools_list_are_looked_at() -> None:
    check = ListingCheck("raw")
    item = answer(check, {"tools": [*GOOD, MALFORMED[0]]}, method="resources/list")
    assert isinstance(item, SessionMessage) and len(item.message.result["tools"]) == 3  # type: ignore[union-attr]
    assert check.left_out == []
    item = answer(check, {"tools": [*GOOD, MALFORMED[0]]})
    assert isinstance(item, SessionMessage) and item.message.result["tools"] == GOOD  # type: ignore[union-attr]
    assert [str(x) for x in check.left_out] == [LEFT_OUT[0]]


def older_server(folder: Path, **config: Any) -> ServerConfig:
    """A server that never answers a request it does not know (``server/discover`` among them)."""
    spec = folder / "older.json"
    spec.write_text(json.dumps({"ignore_unknown": True, "pages": [GOOD]}), encoding="utf-8")
    return ServerConfig(name="older", command=sys.executable, args=(str(RAW_SERVER), str(spec)), **config)


@pytest.mark.anyio
async def test_an_older_server_that_leaves_the_protocol_probe_unanswered_starts_with_protocol_legacy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The SDK's probe waits 10 s for an answer: under a 3 s start-up timeout the server never listed.
    async with ServerPool([older_server(tmp_path, timeout=3, protocol="legacy")]) as pool:
        assert [t["name"] for t in await pool.start("older")] == ["good", "also_good"]
    assert "server/discover" not in caplog.text
    with pytest.raises(ServerUnavailable, match="timed out after 3 s while starting"):
        async with ServerPool([older_server(tmp_path, timeout=3)]) as pool:
            await pool.start("older")
    assert (
        "server 'older' had not answered `server/discover` (the protocol's first question) when its start was "
        "stopped: if it is slow to start, raise its timeout (servers.older.timeout); if it is an older server that "
        "never answers a request it does not know, `protocol: legacy` skips that question (tooltree waits up to 10 s "
        "for the answer)"
    ) in caplog.messages


@pytest.mark.anyio
async def test_a_start_stopped_while_the_probe_waits_advises_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: every stop while the probe waited (a client leaving `tooltree serve`, which stops its refresh; Ctrl-C)
    # logged the advice to raise the server's timeout or set `protocol: legacy`.
    import anyio

    server = older_server(tmp_path, timeout=30)
    log = tmp_path / "older.log"
    spec = json.loads((tmp_path / "older.json").read_text(encoding="utf-8"))
    (tmp_path / "older.json").write_text(json.dumps({**spec, "log_file": str(log)}), encoding="utf-8")
    from generator.discover import discover_one

    async with anyio.create_task_group() as tasks:  # as `tooltree serve` stops its refresh when its client leaves

        async def stop_once_asked() -> None:
            with anyio.fail_after(20):
                while not (log.exists() and "ignored:server/discover" in log.read_text(encoding="utf-8")):
                    await anyio.sleep(0.02)
            tasks.cancel_scope.cancel()

        tasks.start_soon(stop_once_asked)
        await discover_one(server)
    assert "ignored:server/discover" in log.read_text(encoding="utf-8")
    assert not [m for m in caplog.messages if "server/discover" in m]


def test_generate_tree_says_which_server_made_it_wait_for_the_protocol_probe(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import anyio

    from generator.discover import discover_one

    result = anyio.run(discover_one, older_server(tmp_path))
    assert result.ok and [t["name"] for t in result.tools] == ["good", "also_good"]
    assert [m for m in caplog.messages if "server/discover" in m] == [
        "server 'older' did not answer `server/discover` (the protocol's first question) and was asked the older way "
        "after 10 s; `protocol: legacy` in its entry (servers.older) skips that question"
    ]


def test_each_listing_records_its_own_left_out_tools_at_most_max_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_tree import listing_check

    monkeypatch.setattr(listing_check, "MAX_LEFT_OUT", 2)
    check = ListingCheck("raw")
    bad = [{**MALFORMED[0], "name": f"vague_{i}"} for i in range(5)]
    answer(check, {"tools": [*GOOD, *bad]})
    assert [x.name for x in check.left_out] == ["vague_0", "vague_1"] and check.more_left_out == 3
    check.sent(types.JSONRPCRequest(jsonrpc="2.0", id=8, method="tools/list", params={"cursor": "p1"}))
    check.received(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=8, result={"tools": bad[:1]})))
    assert check.more_left_out == 4  # a later page of the same listing adds to it
    answer(check, {"tools": GOOD})  # a new listing (no cursor) starts over: a long session does not grow
    assert check.left_out == [] and check.more_left_out == 0
