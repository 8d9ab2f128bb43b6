"""`tooltree serve` as a demanding MCP client uses it: parallel tool calls of one turn in one session, and what the
client learns of the tools from their definitions (their annotations, which decide whether Claude Code runs the calls
of a turn at once). The official SDK client over stdio and Claude Code headless (against the fake Messages API), each
with a real serve process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import Serve
from tests.serve.test_real_clients import claude_headless, clients

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

__all__ = ["clients"]  # the fixture, imported for the Claude Code test here

WAIT = 90.0

RELEASE = {"group": "held", "parties": 2, "timeout": WAIT}
"""The arguments of `media.rendezvous` that a script's call (`HELD`) and the test's passthrough call share: the script
goes on once the test has seen what must happen while it runs (before, it slept 3 s, a window a loaded machine could
miss)."""
HELD = f"from servers.media import rendezvous\nrendezvous(**{RELEASE!r})\n"


def printed(text: str) -> str:
    """What a script printed, of its result's text: without the summary of its tool calls that follows it."""
    return text.split("\n\ntool calls from the script: ")[0]


async def test_parallel_executions_of_one_session_run_in_order_and_the_waiting_ones_send_progress(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    folder = tmp_path / "workspace"
    folder.mkdir()
    serve = make_serve(extra=["--workspace", str(folder), "--passthrough", "media.rendezvous"])
    seen: dict[str, list[tuple[float, float | None, str | None]]] = {"a": [], "b": [], "c": []}
    running = anyio.Event()
    waiting = {"b": anyio.Event(), "c": anyio.Event()}
    results: dict[str, str] = {}
    scripts = {
        "a": "open('/workspace/a.txt', 'w').write('a')\norder = ['a']\n" + HELD + "print(order)",
        "b": "open('/workspace/b.txt', 'w').write('b')\norder.append('b')\nprint(order)",
        "c": "open('/workspace/c.txt', 'w').write('c')\norder.append('c')\nprint(order)",
    }
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:

        async def call(name: str) -> None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                seen[name].append((done, total, message))
                if name == "a":
                    running.set()
                elif (message or "").startswith("waiting "):
                    waiting[name].set()

            result = await client.call_tool("execute_python", {"code": scripts[name]}, progress_callback=progress)
            assert not result.is_error, result
            results[name] = printed(result.content[0].text)  # type: ignore[union-attr]

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a")
            with anyio.fail_after(WAIT):
                await running.wait()  # "a" runs: "b" and "c" come while it does, as a client's parallel calls
            tg.start_soon(call, "b")
            await anyio.sleep(0)
            tg.start_soon(call, "c")
            with anyio.fail_after(WAIT):  # "a" holds the session until both are told they wait, however slow serve is
                await waiting["b"].wait()
                await waiting["c"].wait()
            released = await client.call_tool("media__rendezvous", RELEASE)  # "a" goes on
            assert not released.is_error, released
    # One script at a time, in the order the calls came; no file of one lost to the save of another.
    assert results == {"a": "['a']", "b": "['a', 'b']", "c": "['a', 'b', 'c']"}
    assert {p.name: p.read_text() for p in folder.glob("*.txt")} == {"a.txt": "a", "b.txt": "b", "c.txt": "c"}
    # The waiting calls were told so meanwhile (before: nothing until their script began), their progress only grew.
    for name in ("b", "c"):
        messages = [m or "" for _, _, m in seen[name]]
        assert any(m.startswith("waiting ") and "running script" in m for m in messages), seen[name]
        done = [d for d, _, _ in seen[name]]
        assert done == sorted(done) and len(set(done)) == len(done), seen[name]


async def test_the_read_only_tools_and_passthrough_tools_carry_their_annotations(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    serve = make_serve(serve={"passthrough": ["crm.get_record", "crm.update_record"]})
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("list_files", "read_file", "search_tools"):
        hints = tools[name].annotations
        assert hints is not None and hints.read_only_hint is True and hints.open_world_hint is False, name
    assert tools["execute_python"].annotations is None  # a script may call any tool: MCP's defaults say so
    # The server's own hints (examples/sample_servers/crm.py), as it listed them.
    read, write = tools["crm__get_record"].annotations, tools["crm__update_record"].annotations
    assert read is not None and (read.read_only_hint, read.open_world_hint) == (True, False)
    assert write is not None and (write.read_only_hint, write.destructive_hint) == (False, False)


def test_a_servers_hints_are_cleaned_and_malformed_ones_left_out() -> None:
    from agent.serve.passthrough import _annotations, _title

    hints = _annotations({"readOnlyHint": "yes", "destructiveHint": True, "title": "Drop\x1b[2J it", "x": 1})
    assert hints is not None
    assert hints.model_dump(by_alias=True, exclude_none=True) == {"destructiveHint": True, "title": "Drop[2J it"}
    assert _annotations({"readOnlyHint": 1}) is None and _annotations(["readOnlyHint"]) is None
    assert _title("x" * 201) is None and _title(5) is None and _title(" A\n tool ") == "A tool"


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]


def _meeting_model(body: dict[str, Any]) -> dict[str, Any]:
    """Two calls of ``media.rendezvous`` in one turn: each returns only while the other is in progress too."""
    from agent.testing import reply, tool_use

    if not body.get("tools"):
        return reply("ok")
    done = sum(1 for b in _blocks(body) if b.get("type") == "tool_result")
    if done == 0:
        return reply(tool_use("ToolSearch", {"query": "select:mcp__tooltree__media__rendezvous"}))
    if done == 1:
        meet = {"group": "turn", "parties": 2, "timeout": 20}
        return reply(
            tool_use("mcp__tooltree__media__rendezvous", meet), tool_use("mcp__tooltree__media__rendezvous", meet)
        )
    return reply("met")


@pytest.mark.real_servers
async def test_claude_code_runs_the_read_only_calls_of_one_turn_at_once(
    clients: Path, make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    serve = make_serve(serve={"passthrough": ["media.rendezvous"]})
    argv = serve.argv()
    entry = {"command": argv[0], "args": argv[1:], "env": {"TOOLTREE_SANDBOX_OWNER": serve.owner}}
    run, requests = await claude_headless(clients, tmp_path, entry, ["media__rendezvous"], "meet", _meeting_model, 20)
    assert run.returncode == 0, run.stderr[-3000:]
    results = [b for b in _blocks(requests[-1]) if b.get("type") == "tool_result"][1:]  # after ToolSearch's
    # Made one after the other (before: no annotations, so Claude Code took the calls for ones that may write), the
    # first would have timed out waiting for the second.
    assert len(results) == 2 and all("2 parties met" in json.dumps(r["content"]) for r in results), results


async def test_a_waiting_execution_cancelled_by_its_client_never_runs_and_the_running_one_goes_on(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    serve = make_serve(extra=["--passthrough", "media.rendezvous"])
    running, waiting = anyio.Event(), anyio.Event()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:

        async def long() -> None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                running.set()

            code = HELD + "print('long done')"
            result = await client.call_tool("execute_python", {"code": code}, progress_callback=progress)
            assert printed(result.content[0].text) == "long done"  # type: ignore[union-attr]

        async def queued() -> None:
            async def progress(done: float, total: float | None, message: str | None) -> None:
                if (message or "").startswith("waiting "):
                    waiting.set()

            await client.call_tool("execute_python", {"code": "ran = True"}, progress_callback=progress)

        async with anyio.create_task_group() as tg:
            tg.start_soon(long)
            with anyio.fail_after(WAIT):
                await running.wait()
            async with anyio.create_task_group() as inner:
                inner.start_soon(queued)
                with anyio.fail_after(WAIT):
                    await waiting.wait()
                inner.cancel_scope.cancel()  # the SDK sends notifications/cancelled for it
            released = await client.call_tool("media__rendezvous", RELEASE)  # the long one goes on
            assert not released.is_error, released
        after = await client.call_tool("execute_python", {"code": "print('ran' in globals())"})
    assert after.content[0].text == "False"  # type: ignore[union-attr]
