"""A call refused for its arguments names each wrong argument, once, up to three: a model fixes them in one go.
Before: the best error alone, so ``search(query='x', limit='5')`` was refused for the query, then, fixed, for the
limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.bridge import ToolCallRefused
from sandbox.mcp_bridge import McpBridge
from tests.support import raw_server_tree
from tool_tree.pool import BackgroundPool

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 2},
        "limit": {"type": "integer"},
        "kind": {"enum": ["lead", "contact"]},
        "page": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["query"],
}


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, BackgroundPool]]:
    tree, server = raw_server_tree(tmp_path_factory.mktemp("said"), [{"name": "search", "inputSchema": SCHEMA}])
    with BackgroundPool([server]) as pool:
        yield tree, pool


def refusal(raw: tuple[Path, BackgroundPool], arguments: dict[str, Any]) -> str:
    tree, pool = raw
    bridge = McpBridge(tree, pool.pool)
    with pytest.raises(ToolCallRefused) as refused:
        asyncio.run_coroutine_threadsafe(bridge.call_tool("raw", "search", arguments), pool.loop).result(timeout=60)
    assert refused.value.code == "invalid_arguments"
    return refused.value.message


def test_each_wrong_argument_is_named_once(raw: tuple[Path, BackgroundPool]) -> None:
    said = refusal(raw, {"query": "x", "limit": "5", "tags": [1, 2, 3]})
    assert said.startswith("invalid arguments: ")
    parts = sorted(said.removeprefix("invalid arguments: ").split("; "))
    assert parts == [
        "limit: '5' is not of type 'integer'",
        "query: 'x' is too short",
        "tags[0]: 1 is not of type 'string'",
    ]


def test_a_missing_argument_and_a_wrong_one_are_both_said_and_at_most_three_are(
    raw: tuple[Path, BackgroundPool],
) -> None:
    said = refusal(raw, {"limit": "5"})
    assert sorted(said.removeprefix("invalid arguments: ").split("; ")) == [
        "arguments: 'query' is a required property",
        "limit: '5' is not of type 'integer'",
    ]
    many = refusal(raw, {"query": "x", "limit": "5", "kind": "bad", "page": "2", "tags": "none"})
    assert len(many.split("; ")) == 3


def sent(raw: tuple[Path, BackgroundPool], arguments: dict[str, Any]) -> Any:
    """The arguments the server received (it echoes them as JSON text)."""
    tree, pool = raw
    bridge = McpBridge(tree, pool.pool)
    result = asyncio.run_coroutine_threadsafe(bridge.call_tool("raw", "search", arguments), pool.loop).result(60)
    return json.loads(result["content"][0]["text"])


def test_a_whole_float_for_an_integer_is_sent_as_an_integer_and_a_fraction_is_refused_naming_it(
    raw: tuple[Path, BackgroundPool],
) -> None:
    # Before: 3.0 (a script's ``total / 2``) passed the host's check, an integer to JSON Schema, and went to the server
    # as 3.0, which a server reading integers strictly refuses ("invalid type: floating point `3.0`, expected i64").
    arguments = {"query": "xy", "limit": 3.0, "page": 1e20, "extra": 2.0}
    received = sent(raw, arguments)
    assert received == {"query": "xy", "limit": 3, "page": 10**20, "extra": 2.0}
    assert [type(received[key]) for key in ("limit", "page", "extra")] == [int, int, float]
    assert arguments["limit"] == 3.0 and isinstance(
        arguments["limit"], float
    )  # the caller's own dict is left as it was
    assert refusal(raw, {"query": "xy", "limit": 3.5}) == "invalid arguments: limit: 3.5 is not of type 'integer'"
