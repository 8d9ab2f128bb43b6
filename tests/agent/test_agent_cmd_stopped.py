"""`tooltree agent` when a run does not finish: Ctrl-C (the real CLI in a subprocess, a real SIGINT) and a mode of
``--compare`` whose request the API refuses. The real ``anthropic`` SDK against the fake API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent import read_transcript
from agent.testing import ApiError, CutStream, FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tests.support import TEST_OWNER
from tooltree_cli.main import main

if TYPE_CHECKING:
    from tests.docker_cli import EngineWithCLI

TASK = "Read the Northwind deal"
GET = tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
# Python takes SIGINT as KeyboardInterrupt only where it was not ignored when the process started (a test run in a
# background job ignores it): the CLI as a user runs it in a terminal.
CLI = (
    "import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from tooltree_cli.main import main\nsys.exit(main(sys.argv[1:]))\n"
)


def ctrl_c_while_waiting_for_the_second_reply(api: FakeMessagesAPI, argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in a subprocess: its first reply calls a tool, then a real SIGINT arrives while it waits for the
    second (whose answer stalls); its exit status, stdout and stderr."""
    waiting = threading.Event()

    def second(body: dict[str, Any]) -> CutStream:
        waiting.set()
        return CutStream(reply("never read"), events=0, ending="stall")  # nothing of it read: its cost unknown

    api.add(reply(GET, usage=USAGE), second)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.base_url}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        assert waiting.wait(60), "the CLI never sent its second request"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out, err


def test_ctrl_c_under_json_prints_the_interrupted_runs_summary_and_exits_130(
    project: Project, api: FakeMessagesAPI, tmp_path: Path
) -> None:
    # Before: stdout was empty (only `tooltree: interrupted` on stderr); the summary was in the transcript alone.
    transcript = tmp_path / "run.jsonl"
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--mode", "direct",
            "--json", "--quiet", "--transcript", str(transcript)]  # fmt: skip
    code, out, err = ctrl_c_while_waiting_for_the_second_reply(api, argv)
    assert (code, err) == (130, "tooltree: interrupted\n")
    summary = json.loads(out)
    assert summary["stop_reason"] == "interrupted" and summary["mode"] == "direct"
    assert summary["turns"] == 2 and summary["tool_calls"] == 1 and summary["transcript"] == str(transcript)
    assert summary["usage"]["input_tokens"] == 1200 and summary["usage"]["output_tokens"] == 80
    assert read_transcript(transcript)[-1]["summary"] == {k: v for k, v in summary.items() if k != "transcript"}


def test_ctrl_c_prints_the_summary_line_before_it_says_interrupted(project: Project, api: FakeMessagesAPI) -> None:
    # Before: the live view's lines, then only `tooltree: interrupted`: what the run had spent was not said.
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--mode", "direct"]
    code, out, err = ctrl_c_while_waiting_for_the_second_reply(api, argv)
    assert (code, out) == (130, "")
    last = err.splitlines()[-2:]
    assert last[0].startswith("tooltree: interrupted after 2 turn(s) · 1,200 tokens sent, 80 received · 1 tool call")
    assert last[1] == "tooltree: interrupted"


@pytest.mark.docker
def test_ctrl_c_during_a_script_prints_the_summary_and_leaves_no_container(
    project: Project, api: FakeMessagesAPI, docker_engine: EngineWithCLI
) -> None:
    # The audit's case: code mode, a script that sleeps 30 s, Ctrl-C. Before: stdout empty.
    running = ["ps", "--quiet", "--no-trunc", "--filter", f"label=tooltree.owner={TEST_OWNER}", "--filter",
               "status=running"]  # fmt: skip
    before = set(docker_engine.text(running).split())  # other tests' sessions may be running
    # The script's `sleep` is what shows it runs: the container runs from before the first request.
    script = "import subprocess\nsubprocess.run(['sleep', '30'])"
    api.add(reply(tool_use("execute_python", {"code": script}), usage=USAGE))
    argv = ["agent", "x", "--config", str(project.config_path), "--tree", str(project.tree), "--mode", "code",
            "--json", "--quiet"]  # fmt: skip
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "ANTHROPIC_BASE_URL": api.base_url}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        deadline, ours = time.monotonic() + 60, ""
        while not ours and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)  # the script's `sleep` as `docker top` shows it, in a container started since
            for container in set(docker_engine.text(running).split()) - before:  # one may end meanwhile (a copy's)
                if b"sleep 30" in docker_engine.run(["top", container, "-o", "pid,args"], check=False).stdout:
                    ours = container
        assert ours, "the script never ran"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err) == (130, "tooltree: interrupted\n")
    summary = json.loads(out)
    assert summary["stop_reason"] == "interrupted" and summary["mode"] == "code" and summary["turns"] == 1
    assert summary["usage"]["input_tokens"] == 1200 and summary["usage"]["output_tokens"] == 80
    assert docker_engine.run(["inspect", ours], check=False).returncode != 0  # removed, not left


def compare(project: Project, *extra: str) -> list[str]:
    return ["agent", "what time", "--config", str(project.config_path), "--tree", str(project.tree),
            "--compare", "direct,tool-search,filtered", "--quiet", *extra]  # fmt: skip


def test_compare_goes_on_past_a_mode_the_api_refused_and_tabulates_it_as_a_row(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: one error line and exit 3: the modes after it never ran, the finished ones were not shown, no table.
    too_long = ApiError(400, "prompt is too long: 210000 tokens > 200000 maximum", type="invalid_request_error")
    api.add(reply(GET, usage=USAGE), too_long, reply("Noon (tool-search)."), reply("Noon (filtered)."))
    assert main(compare(project)) == 3
    out, err = capsys.readouterr()
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:5]}
    assert rows["direct"][1:3] == ["api_error", "2"] and rows["direct"][3] == "1,200"  # what it spent before
    assert rows["tool-search"][1:3] == ["end_turn", "1"] and rows["filtered"][1:3] == ["end_turn", "1"]
    assert "[direct] failed: the Messages API answered 400: prompt is too long: 210000 tokens" in out
    assert "[tool-search] Noon (tool-search)." in out and "[filtered] Noon (filtered)." in out
    assert err.splitlines() == [
        "tooltree: error: direct: the Messages API answered 400: prompt is too long: 210000 tokens > 200000 maximum",
        *[line for line in err.splitlines() if line.startswith("tooltree: what to do: ")],
        "tooltree: error: --compare: the Messages API failed in direct mode (see above); each mode ran",
    ]
    assert len(api.requests) == 4


def test_compare_under_json_keeps_every_mode_and_says_which_failed(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(reply("Noon (direct)."), ApiError(401, "invalid x-api-key"), ApiError(401, "invalid x-api-key"))
    assert main(compare(project, "--json")) == 3
    out, err = capsys.readouterr()
    runs = json.loads(out)["runs"]
    assert [(r["mode"], r["stop_reason"]) for r in runs] == [
        ("direct", "end_turn"), ("tool-search", "api_error"), ("filtered", "api_error")
    ]  # fmt: skip
    assert "error" not in runs[0] and runs[0]["answer"] == "Noon (direct)."
    assert [(r["error"], r["status_code"]) for r in runs[1:]] == [("the Messages API answered 401: invalid x-api-key",
                                                                    401)] * 2  # fmt: skip
    assert runs[1]["advice"].startswith("check ANTHROPIC_API_KEY") and runs[1]["turns"] == 1
    assert err.splitlines()[-1] == (
        "tooltree: error: --compare: the Messages API failed in tool-search, filtered modes (see above); each mode ran"
    )
