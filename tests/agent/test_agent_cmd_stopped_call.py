"""`tooltree agent` stopped by Ctrl-C while a tool call runs: the call counts in the run summary as one that was made
and failed, and the summary and the transcript say Ctrl-C stopped it, in every mode.

Before: in ``--mode direct`` a native call stopped so counted 0 tool calls (no ``tool`` record, no live-view line),
while a stopped ``execute_python`` in code mode counted one. The model is told the call "may have run in part or in
whole": it was sent (or about to be) and may have acted (sent the mail, written the record), so a summary saying
no call was made misled the user reading it. Now every call under way at Ctrl-C counts in ``tool_calls`` and
``tool_errors`` and in ``interrupted_tool_calls``, and its ``tool`` record says ``interrupted``; a call of a reply
that ran at the same time as others but was still queued (past `agent.calls.MAX_CONCURRENT_TOOLS`) never started:
it is answered as not run, and not counted.

The real CLI in a subprocess with a real SIGINT (sent once the server has logged taking the call, a bounded wait),
and `Agent` in-process; a real stdio server (`tests/servers/raw_server.py`), the real SDK against the fake API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client.stdio import PROCESS_TERMINATION_TIMEOUT

from agent import Agent, read_transcript
from agent.calls import MAX_CONCURRENT_TOOLS, NOT_RUN_STOPPED, STOPPED_WHILE_RUNNING, STOPPED_WITH_OUTPUT
from agent.testing import FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import record_pools
from tests.agent.test_agent_cmd_stopped import CLI
from tests.agent.test_loop_interrupted_calls import interrupt_when_called, interrupted, texts
from tests.support import raw_server_tree
from tool_tree.config import load_config

TOOLS = [{"name": "sleep", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}}]
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
WAIT = 60.0


@pytest.fixture
def raw(tmp_path: Path) -> tuple[Path, Path]:
    """The raw server's tree (its config beside it, ``tooltree.yaml``) and the log it writes each call it takes to."""
    tree, _ = raw_server_tree(tmp_path, TOOLS)
    log = tmp_path / "calls.log"
    spec = {"pages": [TOOLS], "log_file": str(log), "log_signals": True}
    (tmp_path / "raw.json").write_text(json.dumps(spec), encoding="utf-8")
    return tree, log


def taken(log: Path) -> bool:
    return log.exists() and "called:sleep " in log.read_text(encoding="utf-8")


def signalled(log: Path) -> float:
    """When the server logged its SIGTERM (`time.monotonic`)."""
    (line,) = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("sigterm ")]
    return float(line.split()[1])


def test_ctrl_c_during_a_native_call_counts_it_as_made_and_interrupted(
    raw: tuple[Path, Path], api: FakeMessagesAPI, tmp_path: Path
) -> None:
    # Before: "tool_calls": 0, "tool_errors": 0, no tool record, though the server had taken the call.
    tree, log = raw
    transcript = tmp_path / "run.jsonl"
    # A sleep of 120 s, the exit awaited 60 s at most: from the Ctrl-C to its exit the CLI ends the server and the run
    # (4.5 s on a loaded machine while the server got the SDK's 2 s of grace to leave; before: 20 s for a 30 s sleep).
    api.add(reply(tool_use("raw__sleep", {"seconds": 120}, id="toolu_sleep"), usage=USAGE))
    argv = ["agent", "Sleep", "--config", str(tmp_path / "tooltree.yaml"), "--tree", str(tree), "--mode", "direct",
            "--json", "--quiet", "--transcript", str(transcript)]  # fmt: skip
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.base_url}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        deadline = time.monotonic() + WAIT
        while not taken(log) and proc.poll() is None:
            assert time.monotonic() < deadline, "the server never took the call"
            time.sleep(0.02)
        started = time.monotonic()  # the clock the server logs by: system-wide
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=WAIT)
        took = time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err) == (130, "tooltree: interrupted\n")
    summary = json.loads(out)
    assert (summary["stop_reason"], summary["turns"]) == ("interrupted", 1)
    assert (summary["tool_calls"], summary["tool_errors"], summary["interrupted_tool_calls"]) == (1, 1, 1)
    records = read_transcript(transcript)
    (record,) = [r for r in records if r["type"] == "tool"]
    assert (record["name"], record["is_error"], record["interrupted"]) == ("raw__sleep", True, True)
    assert record["seconds"] > 0 and took < WAIT  # how long it ran until Ctrl-C; not the sleep's 120 s
    # The server, still at the call Ctrl-C stopped, got SIGTERM as its stdin closed, before the SDK's grace (2 s from
    # that close, so from the Ctrl-C too) could end: before, only after it.
    assert signalled(log) - started < PROCESS_TERMINATION_TIMEOUT
    (answer,) = records[-2]["results"]  # tools_interrupted: the model is told as before
    assert answer["tool_use_id"] == "toolu_sleep" and texts(answer) == [STOPPED_WHILE_RUNNING]
    assert records[-1]["summary"] == {k: v for k, v in summary.items() if k != "transcript"}


@pytest.fixture
def runtime_on(raw: tuple[Path, Path], tmp_path: Path) -> Iterator[Any]:
    from sandbox.host import Runtime

    with Runtime(load_config(tmp_path / "tooltree.yaml"), raw[0]) as runtime:
        yield runtime


def test_calls_running_together_count_each_one_started_and_answer_one_still_queued_as_not_run(
    raw: tuple[Path, Path], runtime_on: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: none of them counted, and the call still queued behind the pool's workers (it never started) was told
    # it "may have run in part or in whole".
    from agent import calls

    futures = record_pools(monkeypatch, calls)
    tree, log = raw
    count = MAX_CONCURRENT_TOOLS + 1
    blocks = [tool_use("raw__sleep", {"seconds": 30}, id=f"toolu_{n}") for n in range(count)]
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([reply(*blocks)]) as api:
        agent = Agent(load_config(tmp_path / "tooltree.yaml"), tree=tree, mode="direct",
                      client=api.client(timeout=5.0), runtime=runtime_on, transcript=transcript)  # fmt: skip
        all_started = lambda: sum(f.running() for f in futures) == MAX_CONCURRENT_TOOLS  # noqa: E731
        watcher = interrupt_when_called(log, "sleep", also=all_started)
        result = interrupted(agent, "Sleep a lot")
        watcher.join()
    answers = result.messages[-1]["content"]
    assert [texts(a) for a in answers] == [[STOPPED_WHILE_RUNNING]] * MAX_CONCURRENT_TOOLS + [[NOT_RUN_STOPPED]]
    s = result.summary
    assert (s.tool_calls, s.tool_errors, s.interrupted_tool_calls) == (MAX_CONCURRENT_TOOLS,) * 3
    records = [r for r in read_transcript(transcript) if r["type"] == "tool"]
    assert len(records) == MAX_CONCURRENT_TOOLS and all(r["interrupted"] for r in records)


@pytest.mark.docker
def test_a_script_stopped_by_ctrl_c_counts_as_interrupted_too(
    raw: tuple[Path, Path], tmp_path: Path, docker_engine: object
) -> None:
    # Code mode counted the stopped script already; it now says it was stopped, as direct mode's call does.
    from sandbox import SandboxConfig
    from sandbox.host import Runtime
    from tests.support import TEST_OWNER

    tree, log = raw
    config = load_config(tmp_path / "tooltree.yaml")
    script = "from servers.raw import sleep\nprint('started', flush=True)\nsleep(seconds=30)"
    transcript = tmp_path / "run.jsonl"
    settings = SandboxConfig(owner=TEST_OWNER, timeout=60.0)
    with (
        Runtime(config, tree, sandbox_config=settings) as runtime,
        FakeMessagesAPI([reply(tool_use("execute_python", {"code": script}, id="toolu_script"))]) as api,
    ):
        agent = Agent(config, tree=tree, mode="code", client=api.client(timeout=5.0), runtime=runtime,
                      transcript=transcript)  # fmt: skip
        watcher = interrupt_when_called(log, "sleep")
        result = interrupted(agent, "Sleep in a script")
        watcher.join()
    (answer,) = result.messages[-1]["content"]
    assert texts(answer)[-1] == STOPPED_WITH_OUTPUT
    s = result.summary
    assert (s.tool_calls, s.tool_errors, s.interrupted_tool_calls) == (1, 1, 1)
    (record,) = [r for r in read_transcript(transcript) if r["type"] == "tool"]
    assert record["interrupted"] is True and record["name"] == "execute_python"
