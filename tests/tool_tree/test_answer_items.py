"""A server's answer keeps at most `MAX_ANSWER_ITEMS` content blocks (contents, messages), cut as it arrives, before
the SDK validates it (`tool_tree.answer_items`), over stdio and Streamable HTTP; what counts the items a server sent
still counts them all (the pool's count in the result's ``_meta``), and a server cannot forge that count.

Before, every block was validated by the SDK (twice, and dumped) and then by the pool: 140,000 annotated text blocks
took 5.9 s of the host's CPU to reach the caller (`bench/answer_items.py`).

In process: `trim` and `total` alone; then a `ServerPool` in front of tests/servers/blocks_server.py, and of the minimal
Streamable HTTP server of tests/tool_tree/test_http_client.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.client import streamable_http

from agent.content import MAX_BLOCKS, mcp_result_blocks
from agent.serve.bounded_result import capped
from tests.support import REPO
from tests.tool_tree.test_http_client import Replies, http_server
from tool_tree.answer_items import LEFT_OUT, MAX_ANSWER_ITEMS, cut_answer, left_out, total, trim
from tool_tree.config import ServerConfig
from tool_tree.http_client import _Events
from tool_tree.ledgers import Outstanding
from tool_tree.pool import ServerPool

pytestmark = pytest.mark.anyio

__all__ = ["http_server"]  # the fixture of tests/tool_tree/test_http_client.py, used here

BLOCK = {"type": "text", "text": "x", "annotations": {"audience": ["user"], "priority": 0.5}}
SENT = 30_000
NOTE = (
    f"[tooltree: {SENT - MAX_ANSWER_ITEMS:,} more content blocks of this result were left out: a result keeps at most "
    f"{MAX_ANSWER_ITEMS:,}. Ask the tool for less: a filter, a page, fewer fields.]"
)
BLOCKS_SERVER = REPO / "tests" / "servers" / "blocks_server.py"


def test_each_list_is_cut_to_the_cap_its_count_kept_and_a_tools_content_told() -> None:
    result: dict[str, Any] = {
        "content": [BLOCK] * (MAX_ANSWER_ITEMS + 5),
        "contents": [{"uri": "a:", "text": ""}] * (MAX_ANSWER_ITEMS + 1),
        "messages": [{}] * MAX_ANSWER_ITEMS,
        "_meta": {"mine": 1, LEFT_OUT: {"content": 10**30}},  # the server's claim: removed
    }
    trim(result)
    assert len(result["content"]) == MAX_ANSWER_ITEMS + 1
    assert result["content"][-1]["text"].startswith("[tooltree: 5 more content blocks")
    assert len(result["contents"]) == MAX_ANSWER_ITEMS and len(result["messages"]) == MAX_ANSWER_ITEMS
    assert result["_meta"] == {"mine": 1, LEFT_OUT: {"content": 5, "contents": 1}}
    counted = [total(result, key) for key in ("content", "contents", "messages")]
    assert counted == [MAX_ANSWER_ITEMS + 5, MAX_ANSWER_ITEMS + 1, MAX_ANSWER_ITEMS]

    claimed: dict[str, Any] = {"content": [BLOCK], "_meta": {LEFT_OUT: {"content": 10**30}}}
    trim(claimed)  # nothing cut: the claim goes all the same
    assert claimed == {"content": [BLOCK], "_meta": {}} and total(claimed, "content") == 1
    for odd in ({"content": "5"}, {"content": True}, {"content": -3}, ["content"], "x"):
        assert left_out({"_meta": {LEFT_OUT: odd}}, "content") == 0
    no_meta: dict[str, Any] = {"content": [BLOCK] * (MAX_ANSWER_ITEMS + 1)}
    trim(no_meta)
    assert no_meta["_meta"] == {LEFT_OUT: {"content": 1}}
    odd_meta: dict[str, Any] = {"content": [BLOCK] * (MAX_ANSWER_ITEMS + 1), "_meta": "not an object"}
    trim(odd_meta)  # the SDK refuses it for its _meta: left as it is but for the cut
    assert odd_meta["_meta"] == "not an object" and len(odd_meta["content"]) == MAX_ANSWER_ITEMS + 1


def told(result: dict[str, Any]) -> None:
    """What a caller gets of an answer of `SENT` blocks: the cap and a note, and every block counted."""
    content = result["content"]
    assert len(content) == MAX_ANSWER_ITEMS + 1 and content[:-1] == [BLOCK] * MAX_ANSWER_ITEMS
    assert content[-1] == {"type": "text", "text": NOTE}
    assert total(result, "content") == SENT
    said = f"{SENT - MAX_BLOCKS:,} content blocks past the first {MAX_BLOCKS:,}"
    assert said in mcp_result_blocks(result)[-1]["text"]  # the agent's tool result
    passed_on = capped(result, 100_000)  # `tooltree serve`'s passthrough result
    assert passed_on is not None and said in passed_on["content"][-1]["text"]
    assert LEFT_OUT not in passed_on.get("_meta", {})


async def test_over_stdio_an_answer_of_thousands_of_blocks_reaches_the_caller_cut_and_counted(tmp_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"content": [BLOCK] * SENT, "_meta": {"mine": 1, LEFT_OUT: {"content": 7}}}))
    config = ServerConfig(name="blocks", command=sys.executable, args=(str(BLOCKS_SERVER), str(answer)), timeout=60)
    async with ServerPool([config]) as pool:
        result = await pool.call("blocks", "blocks", {})
    told(result)
    assert result["_meta"] == {"mine": 1, LEFT_OUT: {"content": SENT - MAX_ANSWER_ITEMS}}  # the server's claim gone


@pytest.mark.parametrize("keys", ["plain", "escaped"])
@pytest.mark.parametrize("form", ["json", "sse"])
async def test_over_http_an_answer_of_thousands_of_blocks_reaches_the_caller_cut_and_counted(
    http_server: tuple[ServerConfig, type[Replies]], form: str, keys: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Escaped: its keys written as `"\u0074ype"`, which a count of `"type"` misses (before: parsed whole by the SDK,
    # then cut).
    config, handler = http_server
    handler.answers.set()
    parsed: list[int] = []  # the length of each message the SDK parsed
    adapter = streamable_http.jsonrpc_message_adapter

    class Recording:
        def validate_json(self, data: str | bytes, **kwargs: Any) -> Any:
            parsed.append(len(data))
            return adapter.validate_json(data, **kwargs)

    monkeypatch.setattr(streamable_http, "jsonrpc_message_adapter", Recording())
    async with ServerPool([config]) as pool:
        result = await pool.call("big", "flood", {"blocks": SENT, "form": form, "escaped": keys == "escaped"})
    # Cut before the SDK parsed it: 10,000 blocks of 26 bytes (36 escaped), not 30,000 (before: 780 KB).
    assert max(parsed) < MAX_ANSWER_ITEMS * 40
    plain = {**result, "content": [b if b["type"] != "text" or b["text"] != "x" else BLOCK for b in result["content"]]}
    told(plain)


def test_an_answer_cut_before_it_is_parsed_keeps_every_value_it_keeps_and_an_events_other_lines() -> None:
    values = {"n": 12345678901234567890123, "f": 0.1, "e": 1e-300, "s": 'é\u2028😀"\\', "none": None, "list": [1, [2]]}
    answer = {"jsonrpc": "2.0", "id": "a-1", "result": {"content": [BLOCK] * (MAX_ANSWER_ITEMS + 3), **values}}
    text = json.dumps(answer).encode()
    done = cut_answer(text)
    assert done is not None
    cut_text, request_id, left = done
    assert request_id == "a-1" and left == {"content": 3}
    again = json.loads(cut_text)
    assert again["result"] == {"content": [BLOCK] * MAX_ANSWER_ITEMS, **values} and again["id"] == "a-1"
    assert cut_answer(json.dumps({**answer, "result": {"content": [BLOCK]}}).encode()) is None  # nothing to cut
    assert cut_answer(text.replace(b'"f": 0.1', b'"f": NaN')) is None  # not JSON once written: left to the SDK
    assert cut_answer(b'{"jsonrpc": "2.0", "method": "x", "params": {"content": []}}') is None  # not an answer
    assert cut_answer(b"{not json") is None

    ledger = Outstanding("big")
    events = _Events(10**7, 10**8, "big", None, True, None, ledger)
    event = b"id: 42\r\nevent: message\r\ndata: " + text + b"\r\n\r\n"
    (out,) = events.feed(event)
    lines = out.split(b"\n")
    assert lines[:2] == [b"id: 42", b"event: message"] and lines[-2:] == [b"", b""]
    assert json.loads(lines[2].removeprefix(b"data: "))["result"]["content"] == [BLOCK] * MAX_ANSWER_ITEMS
    assert ledger.cut_from("a-1") == {"content": 3} and ledger.cut_from("a-1") is None
