"""A script's tool call is measured once on the host: by its session on the channel's reader (`sandbox.calls`), which
hands the size to `McpBridge` with the call (`sandbox.call_limits.MEASURED`). Before, the bridge measured the arguments
again, and encoded them a third time for the digest of its audit line."""

from __future__ import annotations

import hashlib
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import call_limits
from sandbox.calls import CallServer
from sandbox.mcp_bridge import AuditLog, McpBridge
from tests.support import sample_project, sample_server_configs
from tool_tree.pool import BackgroundPool

OVER = "the arguments are over 8,388,608 bytes as JSON; send less per call"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_project(tmp_path_factory.mktemp("measured"), "media")[1]


@pytest.fixture(scope="module")
def pool() -> Iterator[BackgroundPool]:
    with BackgroundPool(sample_server_configs("media")) as bg:
        yield bg


class Answers:
    def __init__(self) -> None:
        self.answers: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {}
        self._cond = threading.Condition()

    def respond(
        self, call_id: str, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        with self._cond:
            self.answers[call_id] = (result, error)
            self._cond.notify_all()

    def wait(self, call_id: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        with self._cond:
            assert self._cond.wait_for(lambda: call_id in self.answers, timeout=30), f"no answer to {call_id}"
            return self.answers[call_id]


def counting_encodings(monkeypatch: pytest.MonkeyPatch, arguments: dict[str, Any]) -> list[int]:
    """The sizes `sandbox.call_limits.measure` finds for ``arguments``, one per encoding of them (not of the result,
    which is measured too, to know where to encode the answer)."""
    encoded: list[int] = []
    real = call_limits._encoded

    def spy(value: dict[str, Any]) -> tuple[int, bool, str]:
        out = real(value)
        if value is arguments:
            encoded.append(out[0])
        return out

    monkeypatch.setattr(call_limits, "_encoded", spy)
    return encoded


@pytest.mark.parametrize("text", ["small", "y" * 300_000], ids=["on_the_loop", "on_a_thread"])
def test_a_scripts_call_is_encoded_once_on_the_host_and_audited_with_the_digest_of_that_encoding(
    tree: Path, pool: BackgroundPool, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    stream = io.StringIO()
    bridge = McpBridge(tree, pool.pool, audit=AuditLog(stream))
    calls, channel = CallServer(bridge, pool.loop), Answers()
    arguments = {"text": text, "seconds": 0}
    encoded = counting_encodings(monkeypatch, arguments)
    calls.begin()
    calls.on_request(channel, "c1", "tool_call", {"server": "media", "tool": "slow_echo", "arguments": arguments})
    result, error = channel.wait("c1")
    calls.end()
    calls.close()
    assert error is None and result is not None and result["content"][0]["text"] == text
    as_json = json.dumps(arguments, sort_keys=True, ensure_ascii=False).encode()
    assert encoded == [len(as_json)]  # before: [n, n] (and [n, n, n] for a small one: the bridge's is_small too)
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert line["outcome"] == "ok" and line["args_sha256"] == hashlib.sha256(as_json).hexdigest()[:16]


def test_arguments_over_the_limit_are_refused_in_the_same_words_from_a_script_and_from_a_host_caller(
    tree: Path, pool: BackgroundPool
) -> None:
    import asyncio

    from sandbox.bridge import ToolCallRefused

    bridge = McpBridge(tree, pool.pool)
    calls, channel = CallServer(bridge, pool.loop), Answers()
    big = {"text": "y" * (8 * 1024 * 1024), "seconds": 0}
    calls.begin()
    calls.on_request(channel, "c1", "tool_call", {"server": "media", "tool": "slow_echo", "arguments": big})
    assert channel.wait("c1") == (None, {"code": "arguments_too_large", "message": OVER})
    calls.end()
    calls.close()
    with pytest.raises(ToolCallRefused) as info:
        asyncio.run_coroutine_threadsafe(bridge.call_tool("media", "slow_echo", big), pool.loop).result(30)
    assert (info.value.code, info.value.message) == ("arguments_too_large", OVER)


def test_the_pool_checks_what_any_caller_sends_and_has_no_keyword_to_skip_it(pool: BackgroundPool) -> None:
    import asyncio

    with pytest.raises(TypeError, match="sendable"):
        asyncio.run_coroutine_threadsafe(
            pool.pool.call("media", "slow_echo", {"text": "x", "seconds": 0}, sendable=True),  # type: ignore[call-arg]
            pool.loop,
        ).result(30)
    with pytest.raises(ValueError, match="holds nan"):
        pool.call("media", "slow_echo", {"text": "x", "seconds": float("nan")})
