"""`tooltree serve` over stdio, as a real subprocess: the official SDK client, cancellation, and what is left
behind (nothing) when the client closes stdin or the server gets SIGTERM in the middle of an execution, and a
message over the cap."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.serve.conftest import Serve, containers, marked_processes, result_text
from tests.serve.raw_stdio import RawStdio
from tests.support import alive, wait_until

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

WAIT = 90.0
RUNNING_SCRIPT = "from servers.docs import list_documents\ndocs = list_documents()\nimport time\ntime.sleep(600)\n"


async def test_the_sdk_client_runs_the_four_tools_and_variables_persist(make_serve: Callable[..., Serve]) -> None:
    import mcp

    serve = make_serve()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["list_files", "read_file", "search_tools", "execute_python"]
        instructions = client.session.discover_result or client.session.initialize_result
        assert instructions is not None and "servers/INDEX.md" in str(instructions.instructions)

        first = await client.call_tool("execute_python", {"code": "kept = 41\nprint('set')"})
        assert not first.is_error and result_text(first) == "set"
        second = await client.call_tool("execute_python", {"code": "print(kept + 1)"})
        assert result_text(second) == "42"

        stub = await client.call_tool("read_file", {"path": "servers/crm/get_record.py"})
        assert "def get_record(" in result_text(stub)
        found = await client.call_tool("search_tools", {"query": "export leads", "detail": "name"})
        assert "crm.list_leads" in result_text(found)
        await client.call_tool("execute_python", {"code": "open('notes.txt', 'w').write('hi')"})
        listing = await client.call_tool("list_files", {"path": "/workspace"})
        assert "notes.txt" in result_text(listing) and "servers/" in result_text(listing)

        failed = await client.call_tool("execute_python", {"code": "def f():\n    return 1 / 0\nf()"})
        assert failed.is_error
        text = result_text(failed)
        assert "ZeroDivisionError: division by zero" in text and 'File "<cell-' in text and "return 1 / 0" in text


async def test_execute_python_says_how_to_call_tools_what_persists_and_the_time_limit_given(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    # For clients that ignore the server's instructions: the description is all they read about the sandbox.
    serve = make_serve(serve={"warm": 0}, extra=["--timeout", "45"])
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        listed = await client.list_tools()
    (description,) = [t.description for t in listed.tools if t.name == "execute_python"]
    assert description is not None and description.startswith("Run Python in the sandbox")
    for said in ("`from servers.<server> import <tool>`", "keyword arguments", "search_tools", "Variables and files",
                 "/workspace persist between calls", "show_image(", "A run stops after 45 s."):  # fmt: skip
        assert said in description


async def test_a_cancelled_execution_stops_and_the_session_keeps_its_variables(
    make_serve: Callable[..., Serve],
) -> None:
    import mcp

    serve = make_serve()
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        await client.call_tool("execute_python", {"code": "kept = 'still here'"})
        running = anyio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            running.set()

        async def call() -> None:
            code = "import time\ntime.sleep(600)"
            await client.call_tool("execute_python", {"code": code}, progress_callback=progress)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            with anyio.fail_after(WAIT):
                await running.wait()
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned call
        after = await client.call_tool("execute_python", {"code": "print(kept)"})
        assert result_text(after) == "still here"
        # The cancelled script is no longer running: the next one did not wait 600 s for it.
        assert time.monotonic() - started < 300


def test_closing_stdin_mid_execution_stops_the_sandbox_and_the_upstream_servers(
    make_serve: Callable[..., Serve],
) -> None:
    serve = make_serve()
    with RawStdio(serve.argv(), serve.env(), RUNNING_SCRIPT) as raw:
        raw.start_long_execution()
        wait_until(lambda: bool(marked_processes(serve.mark)), "the docs server to start")
        assert containers(serve.owner)
        assert raw.close_stdin() == 0
    assert not any(m.get("id") == 2 and "result" in m for m in raw.messages)
    assert marked_processes(serve.mark) == []
    assert containers(serve.owner) == []


def test_closing_stdin_mid_execution_saves_the_workspace_and_says_on_stderr_why_serve_stops(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    # Claude Desktop quitting: stdin closes while a script runs. Before, serve ended without a word on stderr, the one
    # log such a client keeps of its server.
    workspace = tmp_path / "ws"
    serve = make_serve(extra=["--workspace", str(workspace)])
    script = "open('made.txt', 'w').write('kept')\nprint('wrote', flush=True)\n" + RUNNING_SCRIPT
    with RawStdio(serve.argv(), serve.env(), script) as raw:
        raw.start_long_execution()
        raw.wait_for(lambda m: "last printed: wrote" in str(m.get("params", {}).get("message")), "the script's line")
        assert raw.close_stdin() == 0
    assert (workspace / "made.txt").read_text(encoding="utf-8") == "kept"
    said = [line.rstrip("\n") for line in raw.stderr if line.startswith("tooltree serve: ")]
    assert said == [
        "tooltree serve: the client closed stdin: ending the client's session (a running script is stopped, the "
        f"workspace saved into {workspace}, the sandbox and the servers end)",
        "tooltree serve: stopped",
    ]
    assert marked_processes(serve.mark) == []
    assert containers(serve.owner) == []


def test_a_relative_workspace_is_named_on_stderr_by_its_absolute_path(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    # Whoever reads the log the client keeps does not know serve's working folder: before, "the workspace saved into
    # ws". No call is made, so no sandbox starts.
    serve = make_serve(extra=["--workspace", "ws", "--warm", "0"])
    with RawStdio(serve.argv(), serve.env(), cwd=tmp_path) as raw:
        raw.initialize()
        assert raw.close_stdin() == 0
    said = [line.rstrip("\n") for line in raw.stderr if line.startswith("tooltree serve: ")]
    assert said[0].endswith(f"(a running script is stopped, the workspace saved into {tmp_path / 'ws'}, the sandbox "
                            "and the servers end)"), said  # fmt: skip


def test_sigterm_mid_execution_stops_the_sandbox_and_the_upstream_servers(make_serve: Callable[..., Serve]) -> None:
    serve = make_serve()
    with RawStdio(serve.argv(), serve.env(), RUNNING_SCRIPT) as raw:
        raw.start_long_execution()
        wait_until(lambda: bool(marked_processes(serve.mark)), "the docs server to start")
        servers = marked_processes(serve.mark)
        raw.proc.send_signal(signal.SIGTERM)
        assert raw.proc.wait(timeout=WAIT) == 0
    assert any(line.startswith("tooltree serve: SIGTERM: ending the client's session") for line in raw.stderr)
    assert not any(alive(pid) for pid in servers)
    assert marked_processes(serve.mark) == []
    assert containers(serve.owner) == []


def test_an_idle_session_ends_and_the_next_call_says_it_starts_afresh(make_serve: Callable[..., Serve]) -> None:
    serve = make_serve(serve={"idle_timeout": 1})
    with RawStdio(serve.argv(), serve.env(), RUNNING_SCRIPT) as raw:
        raw.start_long_execution()  # runs past the idle timeout: a busy session never expires
        # Running: its call started the docs server (cancelled before it runs, it would start nothing).
        wait_until(lambda: bool(marked_processes(serve.mark)), "the docs server to start")
        params = {"name": "execute_python", "arguments": {"code": "x = 1"}}
        # Cancel the long run, then let the session go idle.
        raw.send({"method": "notifications/cancelled", "params": {"requestId": 2, "reason": "test"}})
        raw.send({"id": 3, "method": "tools/call", "params": params})
        raw.wait_for(lambda m: m.get("id") == 3, "result of x = 1")
        wait_until(lambda: marked_processes(serve.mark) == [], "the idle session's upstream servers to stop")
        raw.send({"id": 4, "method": "tools/call", "params": {"name": "execute_python", "arguments": {"code": "x"}}})
        answer = raw.wait_for(lambda m: m.get("id") == 4, "result after the idle timeout")
        text = answer["result"]["content"][0]["text"]
        assert answer["result"]["isError"] is True
        assert "a new sandbox session" in text and "NameError: name 'x' is not defined" in text


async def test_a_workspace_keeps_files_and_skills_from_one_client_session_to_the_next(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    workspace = tmp_path / "ws"
    serve = make_serve(extra=["--workspace", str(workspace)])
    skill = "def double(x):\n    return 2 * x\n"
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as first:
        saved = await first.call_tool("execute_python", {"code": f"open('skills/double.py', 'w').write({skill!r})"})
        assert not saved.is_error
    assert (workspace / "skills" / "double.py").read_text(encoding="utf-8") == skill
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as second:
        used = await second.call_tool("execute_python", {"code": "from skills.double import double\nprint(double(21))"})
    assert result_text(used) == "42"


def test_a_message_over_the_cap_is_answered_with_an_error_and_the_next_request_is_served(
    make_serve: Callable[..., Serve],
) -> None:
    serve = make_serve()
    with RawStdio(serve.argv(), serve.env()) as raw:
        raw.initialize()
        big = {"name": "execute_python", "arguments": {"code": "x = '" + "x" * (5 << 20) + "'"}}
        raw.send({"id": 2, "method": "tools/call", "params": big})  # 5 MiB: over the 4 MiB HTTP takes, too
        after = {"name": "execute_python", "arguments": {"code": "print('next')"}}
        raw.send({"id": 3, "method": "tools/call", "params": after})
        refused = raw.wait_for(lambda m: m.get("id") == 2, "an answer to the long message")
        answered = raw.wait_for(lambda m: m.get("id") == 3, "the answer to the request after it")
        raw.wait_for_stderr("bytes from the client was left out")
    assert refused["error"]["code"] == -32600 and "at most 4,194,304 bytes" in refused["error"]["message"]
    assert answered["result"]["content"][0]["text"] == "next"


def test_a_search_whose_query_holds_a_lone_surrogate_is_answered_with_an_error_and_the_next_is_served(
    make_serve: Callable[..., Serve],
) -> None:
    # `"\\ud800"` is valid JSON (a JavaScript client's JSON.stringify writes a lone surrogate so) but no text: the SDK's
    # reader dropped the line, and the client waited for an answer until its own timeout; then it was answered, but
    # "Invalid JSON: unexpected end of hex escape at line 1 column 118".
    serve = make_serve()
    with RawStdio(serve.argv(), serve.env()) as raw:
        raw.initialize()
        lone = {"name": "search_tools", "arguments": {"query": "\ud800 list leads"}}
        raw.send({"id": 2, "method": "tools/call", "params": lone})
        after = {"name": "search_tools", "arguments": {"query": "list leads \U0001f680", "detail": "name"}}  # a pair
        raw.send({"id": 3, "method": "tools/call", "params": after})
        refused = raw.wait_for(lambda m: m.get("id") == 2, "an answer to the request with a lone surrogate")
        answered = raw.wait_for(lambda m: m.get("id") == 3, "the answer to the request after it")
    assert refused["error"]["code"] == -32700 and "holds a lone surrogate" in refused["error"]["message"]
    assert "crm.list_leads" in answered["result"]["content"][0]["text"]


async def test_what_a_script_writes_in_the_workspace_is_in_its_host_folder_when_the_call_returns(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    # Before, the files came back only when the session ended: after the client (Claude Code, Claude Desktop) left.
    import mcp

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("the user's", encoding="utf-8")
    serve = make_serve(extra=["--workspace", str(workspace)])
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        wrote = await client.call_tool("execute_python", {"code": "open('report.csv', 'w').write('a,b\\n1,2\\n')"})
        assert not wrote.is_error and len(wrote.content) == 1  # nothing to say about the save
        assert (workspace / "report.csv").read_text(encoding="utf-8") == "a,b\n1,2\n"

        (workspace / "notes.md").write_text("the user's edit", encoding="utf-8")
        both = await client.call_tool("execute_python", {"code": "open('notes.md', 'w').write('the script')"})
        said = both.content[-1].text  # type: ignore[union-attr]
        assert said.startswith("[workspace: ") and "notes.md" in said and "both the host and the sandbox" in said
        assert (workspace / "notes.md").read_text(encoding="utf-8") == "the script"
        assert (workspace / "notes.md.host").read_text(encoding="utf-8") == "the user's edit"

        await client.call_tool("execute_python", {"code": "import os\nos.remove('report.csv')"})
        assert not (workspace / "report.csv").exists()


def test_a_request_the_parser_cannot_read_is_answered_naming_the_argument_and_the_next_is_served(
    make_serve: Callable[..., Serve],
) -> None:
    # Before: the SDK's stdio transport dropped a line its parser refused (a whole number of more than 4,300 digits,
    # nesting past 200 levels), and the client waited for its answer for ever.
    serve = make_serve(serve={"passthrough": ["media.slow_echo"], "warm": 0})
    with RawStdio(serve.argv(), serve.env()) as raw:
        raw.initialize()
        head = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "media__slow_echo", '
        lines = [
            head % 2 + '"arguments": {"text": "x", "extra": ' + "9" * 5000 + "}}}",
            head % 3 + '"arguments": {"text": "x", "extra": ' + "[" * 250 + "]" * 250 + "}}}",
            '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "media__slow_',  # cut off
        ]
        assert raw.proc.stdin is not None
        raw.proc.stdin.write("".join(line + "\n" for line in lines))
        raw.proc.stdin.flush()
        said = {i: raw.wait_for(lambda m, i=i: m.get("id") == i, f"the answer to request {i}") for i in (2, 3, 4)}
        assert [said[i]["error"]["code"] for i in (2, 3, 4)] == [-32700] * 3
        assert said[2]["error"]["message"] == (
            "tooltree serve could not read the request: argument 'extra' holds a whole number of more than 4,300 "
            "digits, more than a server's JSON parser reads (Python's, the MCP SDK's); send it as a string; it was not "
            "run"
        )
        assert said[3]["error"]["message"].startswith(
            "tooltree serve could not read the request: argument 'extra' nests more than 198 levels deep"
        )
        assert said[4]["error"]["message"].startswith("tooltree serve could not read the request: Invalid JSON: EOF")
        raw.send({"id": 5, "method": "tools/call", "params": {"name": "media__slow_echo", "arguments": {"text": "ok"}}})
        done = raw.wait_for(lambda m: m.get("id") == 5, "the answer to request 5")
        assert done["result"]["content"][0]["text"] == "ok"
