"""Ctrl-C while a reply's tool calls run: every ``tool_use`` gets its answer, and the conversation can go on.

Before: the calls were left unanswered, so a run going on from the interrupted one told the model that none of
them had run ("not run: the reply ended before the call was made"), though a script may have done its work (sent
the mail, written the file) until Ctrl-C; a script's output until then was lost; and with calls running at the
same time, Ctrl-C waited for the slowest of them, up to its timeout.

The real SDK against the fake API, a real stdio server (`tests/servers/raw_server.py`), a real SIGINT sent once
the server has taken the call (read from its log, a bounded wait); code mode with a real sandbox.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, ToolFinished, read_transcript
from agent.calls import NOT_RUN_STOPPED, STOPPED_WHILE_RUNNING, STOPPED_WITH_OUTPUT
from agent.errors import interrupted_result
from agent.summary import RunResult
from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.toolsets import batch
from agent.toolsets.batch import STOPPED_INVOCATION
from sandbox.config import SandboxConfig
from sandbox.host import Runtime
from tests.agent.conftest import record_pools
from tests.support import TEST_OWNER, raw_server_tree
from tool_tree.config import load_config

SCHEMA = {"type": "object", "properties": {"seconds": {"type": "number"}}}
TOOLS = [{"name": "sleep", "inputSchema": SCHEMA}, {"name": "echo", "inputSchema": {"type": "object"}}]


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[tuple[Path, Path, Runtime]]:
    """The raw server's tree, the log it writes each call it takes to, and a runtime on them."""
    tree, _ = raw_server_tree(tmp_path, TOOLS)
    log = tmp_path / "calls.log"
    spec = tmp_path / "raw.json"
    spec.write_text(json.dumps({"pages": [TOOLS], "log_file": str(log)}), encoding="utf-8")
    config = load_config(tmp_path / "tooltree.yaml")
    with Runtime(config, tree, sandbox_config=SandboxConfig(owner=TEST_OWNER)) as runtime:  # the test label
        yield tree, log, runtime


def interrupt_when_called(
    log: Path, tool: str, also: Callable[[], bool] = lambda: True, sent: list[float] | None = None
) -> threading.Thread:
    """A thread sending SIGINT to this (main) thread once the server has logged taking a call of ``tool`` (and
    ``also()`` holds); ``sent`` is given the moment it did (`time.monotonic`)."""
    main = threading.get_ident()

    def watch() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if log.exists() and f"called:{tool} " in log.read_text(encoding="utf-8") and also():
                if sent is not None:
                    sent.append(time.monotonic())
                signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def interrupted(agent: Agent, task: str) -> RunResult:
    with pytest.raises(KeyboardInterrupt) as caught:
        agent.run(task)
    result = interrupted_result(caught.value)
    assert result is not None and result.stop_reason == "interrupted"
    return result


def texts(block: dict[str, Any]) -> list[str]:
    return [b["text"] for b in block["content"] if b["type"] == "text"]


def test_calls_running_together_are_answered_at_once_and_the_conversation_goes_on(
    raw: tuple[Path, Path, Runtime], tmp_path: Path
) -> None:
    tree, log, runtime = raw
    config = load_config(tmp_path / "tooltree.yaml")
    transcript = tmp_path / "run.jsonl"
    first = reply(
        tool_use("raw__sleep", {"seconds": 30}, id="toolu_sleep"), tool_use("raw__echo", {"a": 1}, id="toolu_echo")
    )
    with FakeMessagesAPI([first, reply("Stopped; the sleep may have run.")]) as api:
        agent = Agent(config, tree=tree, mode="direct", client=api.client(timeout=5.0), runtime=runtime,
                      transcript=transcript)  # fmt: skip
        sent: list[float] = []
        watcher = interrupt_when_called(log, "sleep", sent=sent)
        result = interrupted(agent, "Sleep and echo")
        # Counted from the Ctrl-C, not from the run's start: the server's start-up, which a loaded machine stretches,
        # is no part of it. Not the rest of the sleep's 30 s (the pool waited for it).
        assert time.monotonic() - sent[0] < 20
        watcher.join()
        last = result.messages[-1]
        assert last["role"] == "user" and [b["tool_use_id"] for b in last["content"]] == ["toolu_sleep", "toolu_echo"]
        assert [texts(b) for b in last["content"]] == [[STOPPED_WHILE_RUNNING], [STOPPED_WHILE_RUNNING]]
        assert all(b["is_error"] for b in last["content"])
        records = read_transcript(transcript)
        assert [r["type"] for r in records][-2:] == ["tools_interrupted", "run_end"]
        assert records[-2]["results"] == last["content"]
        # Going on from it: the results, then the new task (the API takes the two user turns as one).
        again = agent.run("What happened?", history=result.messages)
        assert again.answer == "Stopped; the sleep may have run."
        sent = api.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "user"]
    assert [b["tool_use_id"] for b in sent[-2]["content"]] == ["toolu_sleep", "toolu_echo"]
    assert [b["text"] for b in sent[-1]["content"]] == ["What happened?"]


@pytest.mark.docker
def test_a_script_stopped_by_ctrl_c_is_answered_with_its_output_and_the_calls_after_it_as_not_run(
    raw: tuple[Path, Path, Runtime], tmp_path: Path, docker_engine: object
) -> None:
    tree, log, runtime = raw
    config = load_config(tmp_path / "tooltree.yaml")
    script = (
        "from servers.raw import sleep\nprint('sent the first mail', flush=True)\nsleep(seconds=30)\nprint('never')"
    )
    first = reply(
        tool_use("execute_python", {"code": script}, id="toolu_script"),
        tool_use("execute_python", {"code": "print('second')"}, id="toolu_next"),
    )
    with FakeMessagesAPI([first]) as api:
        agent = Agent(config, tree=tree, mode="code", client=api.client(timeout=5.0), runtime=runtime,
                      transcript=tmp_path / "run.jsonl")  # fmt: skip
        watcher = interrupt_when_called(log, "sleep")
        started = time.monotonic()
        result = interrupted(agent, "Send the mails")
        took = time.monotonic() - started
        watcher.join()
    stopped, after = result.messages[-1]["content"]
    assert stopped["tool_use_id"] == "toolu_script" and stopped["is_error"]
    shown = "\n".join(texts(stopped))
    assert "sent the first mail" in shown and "never" not in shown and texts(stopped)[-1] == STOPPED_WITH_OUTPUT
    assert after["tool_use_id"] == "toolu_next" and texts(after) == [NOT_RUN_STOPPED]
    assert result.summary.tool_calls == 1  # the script that ran in part; the one after it never started
    (record,) = [r for r in read_transcript(tmp_path / "run.jsonl") if r["type"] == "tool"]
    assert 0 < record["seconds"] <= took  # how long it ran until Ctrl-C (before: 0.0)


def test_ctrl_c_during_a_batch_answers_at_once_keeping_the_invocations_that_ended(
    raw: tuple[Path, Path, Runtime], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the batch's pool waited for its slowest invocation (the sleep's 30 s), and the whole batch was then
    # answered "may have run", the result of the invocation that had ended lost.
    futures = record_pools(monkeypatch, batch)
    tree, log, runtime = raw
    invocations = [{"name": "raw__sleep", "arguments": {"seconds": 30}}, {"name": "raw__nope", "arguments": {}}]
    first = reply(tool_use("batch_tool", {"invocations": invocations}, id="toolu_batch"))
    with FakeMessagesAPI([first]) as api:
        agent = Agent(load_config(tmp_path / "tooltree.yaml"), tree=tree, mode="direct",
                      client=api.client(timeout=5.0), runtime=runtime)  # fmt: skip
        sent: list[float] = []
        ended = lambda: len(futures) == 2 and futures[1].done()  # noqa: E731
        watcher = interrupt_when_called(log, "sleep", also=ended, sent=sent)
        result = interrupted(agent, "Sleep, and call a tool that does not exist")
        assert time.monotonic() - sent[0] < 20  # from the Ctrl-C (not the server's start-up): not the sleep's 30 s
        watcher.join()
    (answer,) = result.messages[-1]["content"]
    assert answer["tool_use_id"] == "toolu_batch" and answer["is_error"]
    assert texts(answer) == [
        "[1] raw__sleep: error",
        STOPPED_INVOCATION,
        "[2] raw__nope: error",
        "unknown tool 'raw__nope'",
        STOPPED_WITH_OUTPUT,
    ]


def test_calls_running_together_that_ended_before_ctrl_c_keep_their_results(tmp_path: Path) -> None:
    # Before: with the slow call first in the reply, a call after it that had ended was answered "may have run",
    # its result dropped (the results were taken in order).
    from agent.budget import ContentBudget
    from agent.calls import FINISHED_CALLS, _stopped
    from agent.summary import RunSummary
    from agent.toolsets.base import ToolOutcome, Toolset
    from agent.transcript import Transcript

    class Together(Toolset):
        def tools(self) -> list[dict[str, Any]]:
            return []

        def system_prompt(self) -> str:
            return ""

        def call(self, name: str, arguments: Any, runtime: Any) -> ToolOutcome:
            raise AssertionError("not called")

        def concurrent(self, name: str) -> bool:
            return True

    blocks = [tool_use(n, {}, id=f"toolu_{n}") for n in ("slow", "fast", "late")]
    interrupt = KeyboardInterrupt()
    setattr(interrupt, FINISHED_CALLS, {1: (ToolOutcome([{"type": "text", "text": "record 42 made"}]), 0.2)})
    summary, log = RunSummary(mode="direct", model="m"), Transcript(tmp_path / "t.jsonl")
    toolset = Together(raw_server_tree(tmp_path, TOOLS)[0])
    answers = _stopped(toolset, blocks, blocks, [], interrupt, ContentBudget(), 1, summary, log, lambda _: None)
    log.close()
    assert [(a["tool_use_id"], texts(a)) for a in answers] == [
        ("toolu_slow", [STOPPED_WHILE_RUNNING]),
        ("toolu_fast", ["record 42 made"]),
        ("toolu_late", [STOPPED_WHILE_RUNNING]),
    ]
    assert "is_error" not in answers[1] and summary.tool_calls == 1


@pytest.mark.docker
def test_a_script_whose_result_never_comes_is_answered_with_what_it_printed_and_the_calls_it_made(
    raw: tuple[Path, Path, Runtime], tmp_path: Path, docker_engine: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The script ignores its KeyboardInterrupt; Ctrl-C again, once the sandbox took the first, leaves before its result
    # comes. Before: "stopped ... before its result came" only; what it printed and the calls it made were lost.
    from sandbox.session import Sandbox

    tree, log, runtime = raw
    config = load_config(tmp_path / "tooltree.yaml")
    script = (
        "import time\nfrom servers.raw import echo, sleep\nprint('sent the first mail', flush=True)\necho(a=1)\n"
        "while True:\n    try:\n        sleep(seconds=30)\n    except KeyboardInterrupt:\n        pass\n"
    )
    stopping = threading.Event()
    real = Sandbox._interrupted

    def interrupted_once_taken(channel: Any) -> None:  # the sandbox has taken the first Ctrl-C's cancel
        real(channel)
        stopping.set()

    monkeypatch.setattr(Sandbox, "_interrupted", staticmethod(interrupted_once_taken))
    main = threading.get_ident()
    again = threading.Thread(target=lambda: stopping.wait(60) and signal.pthread_kill(main, signal.SIGINT))
    again.start()
    with FakeMessagesAPI([reply(tool_use("execute_python", {"code": script}, id="toolu_script"))]) as api:
        agent = Agent(config, tree=tree, mode="code", client=api.client(timeout=5.0), runtime=runtime,
                      transcript=tmp_path / "run.jsonl")  # fmt: skip
        first = interrupt_when_called(log, "sleep")
        result = interrupted(agent, "Send the mails")
        first.join()
        again.join()
    (stopped,) = result.messages[-1]["content"]
    assert stopped["tool_use_id"] == "toolu_script" and stopped["is_error"]
    shown = "\n".join(texts(stopped))
    assert "[what the script printed before the interrupt; its last moment may be missing]" in shown
    assert "sent the first mail" in shown and "raw.echo" in shown, shown
    assert texts(stopped)[-1] == STOPPED_WITH_OUTPUT
    assert result.summary.tool_calls == 1


def test_ctrl_c_stays_a_ctrl_c_when_on_event_raises_on_the_calls_it_stopped(
    raw: tuple[Path, Path, Runtime], tmp_path: Path
) -> None:
    # Before: the callback's error on the stopped calls' events replaced the KeyboardInterrupt (an EventHandlerError,
    # stop reason on_event_error: a caller's `except KeyboardInterrupt` missed it), and their answers were lost.
    tree, log, runtime = raw
    config = load_config(tmp_path / "tooltree.yaml")
    seen: list[object] = []

    def dashboard(event: object) -> None:
        seen.append(event)
        if isinstance(event, ToolFinished):
            raise RuntimeError("dashboard down")

    first = reply(
        tool_use("raw__sleep", {"seconds": 30}, id="toolu_sleep"), tool_use("raw__echo", {"a": 1}, id="toolu_echo")
    )
    with FakeMessagesAPI([first]) as api:
        agent = Agent(config, tree=tree, mode="direct", client=api.client(timeout=5.0), runtime=runtime,
                      on_event=dashboard)  # fmt: skip
        watcher = interrupt_when_called(log, "sleep")
        result = interrupted(agent, "Sleep and echo")
        watcher.join()
    last = result.messages[-1]
    assert [b["tool_use_id"] for b in last["content"]] == ["toolu_sleep", "toolu_echo"]
    assert len([e for e in seen if isinstance(e, ToolFinished)]) == 1  # none after it raised
