"""A tool's structured result checked against its output schema with the host's bounded validator, off the loop.

Before: the SDK checked it on the event loop every server's calls share, with Python's backtracking ``re``: a
30-byte result against ``"pattern": "^(a+)+$"`` froze the whole process (every server's calls, every `serve`
client) about 25 s, each character more doubling it, and no timeout could end it; ``uniqueItems`` over 3,000
objects 14 s; a refused result was repeated whole in the error (3 MB in, an 11 MB message).

Real server processes (`tests/servers/raw_server.py`, whose ``answer`` tool answers the result it is given),
through `ServerPool` and the SDK.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from tool_tree.config import ServerConfig
from tool_tree.output_check import OutputCheck
from tool_tree.pool import CallFailure, ServerPool

pytestmark = pytest.mark.anyio
RAW = Path(__file__).resolve().parents[2] / "tests" / "servers" / "raw_server.py"


def server(tmp_path: Path, name: str, output_schema: dict[str, Any]) -> ServerConfig:
    """A raw server whose ``answer`` tool declares ``output_schema``."""
    tools = [
        {"name": "answer", "inputSchema": {"type": "object"}, "outputSchema": output_schema},
        {"name": "count", "inputSchema": {"type": "object"}},
    ]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"pages": [tools]}), encoding="utf-8")
    return ServerConfig(name=name, command=sys.executable, args=(str(RAW), str(path)), timeout=10)


def structured(value: Any) -> dict[str, Any]:
    return {"result": {"content": [{"type": "text", "text": "see structuredContent"}], "structuredContent": value}}


REDOS = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}


async def test_a_runaway_pattern_in_an_output_schema_neither_freezes_the_process_nor_passes(tmp_path: Path) -> None:
    hostile, honest = server(tmp_path, "hostile", REDOS), server(tmp_path, "honest", {"type": "object"})
    async with ServerPool([hostile, honest]) as pool:
        await pool.call("honest", "count", {})  # both started
        took: dict[str, float] = {}

        async def timed(name: str, *call: Any) -> Any:
            started = time.monotonic()
            outcome = await pool.call(*call)
            took[name] = time.monotonic() - started
            return outcome

        results: dict[str, Any] = {}
        async with anyio.create_task_group() as tasks:
            for _ in range(3):

                async def one() -> None:
                    results["hostile"] = await timed("hostile", "hostile", "answer", structured({"s": "a" * 30 + "!"}))

                tasks.start_soon(one)

            async def other() -> None:
                results["honest"] = await timed("honest", "honest", "count", {})

            tasks.start_soon(other)
    failure = results["hostile"]
    assert isinstance(failure, CallFailure) and failure.code == "invalid_result"
    assert failure.message == (
        "invalid result from the server: structured content that tool answer's output schema refuses: "
        "s: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' does not match '^(a+)+$'; the tool ran"
    )
    assert took["hostile"] < 5 and took["honest"] < 5  # before: about 25 s each, per call, on this machine


async def test_a_refused_result_is_named_in_a_line_not_repeated_whole(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "integer"}}}}
    async with ServerPool([server(tmp_path, "raw", schema)]) as pool:
        failure = await pool.call("raw", "answer", structured({"rows": [1, 2, "x" * 3_000_000]}))
    assert isinstance(failure, CallFailure) and failure.code == "invalid_result"
    assert failure.message.startswith(
        "invalid result from the server: structured content that tool answer's output schema refuses: rows[2]: 'xxx"
    )
    assert "is not of type 'integer'" in failure.message and len(failure.message) < 700


async def test_results_the_schema_allows_pass_and_a_missing_structured_content_is_refused(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"ids": {"type": "array", "uniqueItems": True}}}
    many = [{"id": i, "tags": ["a", "b"]} for i in range(3000)]  # jsonschema compared them pairwise: 14 s
    async with ServerPool([server(tmp_path, "raw", schema)]) as pool:
        started = time.monotonic()
        result = await pool.call("raw", "answer", structured({"ids": many}))
        assert time.monotonic() - started < 5
        assert result["structuredContent"] == {"ids": many}
        failure = await pool.call("raw", "answer", {"result": {"content": [{"type": "text", "text": "no data"}]}})
        assert isinstance(failure, CallFailure) and failure.code == "invalid_result"
        assert "tool answer has an output schema but returned no structured content" in failure.message
        duplicated = await pool.call("raw", "answer", structured({"ids": [many[0], many[0]]}))
        assert isinstance(duplicated, CallFailure) and "has non-unique elements" in duplicated.message


async def test_a_result_too_costly_to_check_is_passed_on_unchecked_and_that_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    item = {"type": "object", "properties": {"b": {"$ref": "#/$defs/n"}}}
    numbers = {"n": {"type": "integer"}}
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": item}}, "$defs": numbers}
    value = {"a": [{"b": i} for i in range(200_000)]}
    caplog.set_level(logging.WARNING, logger="tool_tree.output_check")
    async with ServerPool([server(tmp_path, "raw", schema)]) as pool:
        for _ in range(2):
            result = await pool.call("raw", "answer", structured(value))
            assert result["structuredContent"] == value
    warned = [r.getMessage() for r in caplog.records if r.name == "tool_tree.output_check"]
    assert warned == [
        "not checking some results of raw.answer against its output schema: results that take over 0.25 s of host "
        "CPU to check"
    ]


async def test_the_budget_of_a_sessions_checks_is_spent_then_results_pass_unchecked() -> None:
    check = OutputCheck("raw", [{"name": "t", "outputSchema": {"type": "object", "required": ["x"]}}])
    assert "'x' is a required property" in check._check("t", {})
    check._budget.charge(10.0)  # as if the session's checks had taken 10 s of CPU
    assert check._check("t", {}) == ""  # unchecked: the server's own word stands


async def test_a_refusal_names_the_tool_escaped_not_cleaned() -> None:
    # Before: "tool get_item has an output schema …" for get\u200b_item, another tool's name.
    check = OutputCheck("svc", [{"name": "get\u200b_item", "outputSchema": {"type": "object"}}])
    with pytest.raises(RuntimeError) as info:
        await check.validate("get\u200b_item", mt.CallToolResult(content=[]))
    assert str(info.value) == "tool get\\u200b_item has an output schema but returned no structured content"
