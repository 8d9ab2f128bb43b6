"""`tooltree agent` stopped by Ctrl-C before its run's first request: ``--json`` still prints the run (its stop reason
``interrupted``, no turns, no tokens) and the exit status is 130, as for a Ctrl-C later in the run
(`tests.agent.test_agent_cmd_stopped`). The real CLI in a subprocess with a real SIGINT while it waits on an engine
socket the test holds, and ``main`` in-process; the real ``anthropic`` SDK against the fake API."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from agent.defaults import DEFAULT_MODEL
from agent.testing import FakeMessagesAPI
from tests.agent.conftest import Project
from tests.agent.test_agent_cmd_stopped import CLI
from tooltree_cli.main import main

TASK = "Read the Northwind deal"
WAIT = 60.0


class SilentEngine:
    """A unix socket standing in for the Docker engine: it takes each connection and never answers, so a process
    given ``DOCKER_HOST=`` `address` waits there (checking its sandbox) for as long as the test wants. `asked` is set
    once a connection came. The socket's folder is short: a unix socket's path must stay under 108 bytes."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="tt-engine-"))
        self.address = f"unix://{self.folder}/docker.sock"
        self.asked = threading.Event()
        self._held: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_UNIX)
        self._listener.bind(str(self.folder / "docker.sock"))
        self._listener.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self._held.append(connection)
            self.asked.set()

    def __enter__(self) -> SilentEngine:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._listener.close()
        for connection in self._held:
            connection.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def ctrl_c_while_the_sandbox_is_checked(api: FakeMessagesAPI, argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in a subprocess whose engine never answers; a real SIGINT once it asked the engine (its sandbox
    checked, before any request); its exit status, stdout and stderr."""
    with SilentEngine() as engine:
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.base_url,
               "DOCKER_HOST": engine.address}  # fmt: skip
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
        )
        try:
            assert engine.asked.wait(WAIT), "the CLI never asked the engine"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=WAIT)
        finally:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def assert_stopped_before_any_request(run: dict[str, Any], mode: str) -> None:
    assert (run["mode"], run["stop_reason"], run["answer"], run["turns"]) == (mode, "interrupted", "", 0)
    assert (run["usage"]["total"], run["spent"], run["tool_calls"], run["transcript"]) == (0, 0, 0, None)


def test_ctrl_c_while_the_sandbox_is_checked_prints_the_stopped_run_as_json_and_exits_130(
    project: Project, api: FakeMessagesAPI, tmp_path: Path
) -> None:
    # Before: stdout was empty (only `tooltree: interrupted` on stderr): a caller of --json had nothing to parse.
    transcript = tmp_path / "run.jsonl"
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--mode", "code",
            "--json", "--quiet", "--transcript", str(transcript)]  # fmt: skip
    code, out, err = ctrl_c_while_the_sandbox_is_checked(api, argv)
    assert (code, err) == (130, "tooltree: interrupted\n")
    assert_stopped_before_any_request(json.loads(out), "code")
    assert api.requests == [] and not transcript.exists()  # nothing sent, no transcript begun (hence null)


def test_ctrl_c_before_any_mode_of_compare_ran_prints_the_stopped_mode_and_its_summary_line(
    project: Project, api: FakeMessagesAPI
) -> None:
    # Before: stdout was empty, and stderr said only `tooltree: interrupted`.
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--compare",
            "code,direct", "--json"]  # fmt: skip
    code, out, err = ctrl_c_while_the_sandbox_is_checked(api, argv)
    assert code == 130
    (run,) = json.loads(out)["runs"]  # the mode it stopped; direct never began
    assert_stopped_before_any_request(run, "code")
    last = err.splitlines()[-2:]
    assert last[0].startswith("tooltree: interrupted after 0 turn(s) · 0 tokens sent, 0 received · 0 tool call(s)")
    assert last[1] == "tooltree: interrupted"
    assert api.requests == []


def interrupt(*args: object, **kwargs: object) -> Any:
    """Ctrl-C where it is called. Raised, not signalled: a test run in a background job ignores SIGINT, and the
    steps stopped here read local files or import the SDK, with nothing for a test to wait on before signalling."""
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("where", "mode", "extra"),
    [
        ("agent.loop.make_toolset", "filtered", []),  # the agent being made: the tree's tools, the pre-filter's catalog
        ("agent.loop.default_client", "direct", ["--model", "claude-test-1"]),  # Agent.run making its client (SDK)
    ],
)
def test_ctrl_c_while_a_run_is_set_up_prints_it_as_json_with_its_mode_and_model(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    where: str,
    mode: str,
    extra: list[str],
) -> None:
    # Before: exit 130 and nothing on stdout.
    config = tmp_path / "tooltree.yaml"  # the mode left out: the config's
    config.write_text(project.config_path.read_text(encoding="utf-8") + f"agent:\n  mode: {mode}\n", encoding="utf-8")
    monkeypatch.setattr(where, interrupt)
    argv = ["agent", TASK, "--config", str(config), "--tree", str(project.tree), "--json", "--quiet", *extra]
    assert main(argv) == 130
    out, err = capsys.readouterr()
    assert err == "tooltree: interrupted\n"
    run = json.loads(out)
    assert_stopped_before_any_request(run, mode)
    assert run["model"] == (extra[1] if extra else DEFAULT_MODEL)
    assert api.requests == []


@pytest.fixture
def filtered_config(project: Project, tmp_path: Path) -> Path:
    """The project's config, its agent's mode filtered."""
    config = tmp_path / "tooltree.yaml"
    config.write_text(project.config_path.read_text(encoding="utf-8") + "agent:\n  mode: filtered\n", encoding="utf-8")
    return config


def test_ctrl_c_before_the_config_is_read_prints_the_run_the_config_would_have_made(
    project: Project,
    api: FakeMessagesAPI,
    filtered_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: exit 130 and nothing on stdout (a stop while the task was read, or as the command began).
    monkeypatch.setattr("tooltree_cli.agent_cmd._read_task", interrupt)
    argv = ["agent", TASK, "--config", str(filtered_config), "--tree", str(project.tree), "--json"]
    assert main(argv) == 130
    out, err = capsys.readouterr()
    assert err == "tooltree: interrupted\n"
    run = json.loads(out)
    assert_stopped_before_any_request(run, "filtered")  # the config's mode: read for the record
    assert run["model"] == DEFAULT_MODEL


def test_sigterm_while_the_config_is_read_prints_the_runs_once(
    project: Project,
    api: FakeMessagesAPI,
    filtered_config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: exit 143, `tooltree: terminated`, and nothing on stdout.
    from tooltree_cli import agent_cmd
    from tooltree_cli.signals import stop

    read = agent_cmd.load_optional_config
    calls = []

    def terminated_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 1:
            raise stop(signal.SIGTERM)
        return read(*args, **kwargs)

    monkeypatch.setattr(agent_cmd, "load_optional_config", terminated_once)
    argv = ["agent", TASK, "--config", str(filtered_config), "--tree", str(project.tree), "--json", "--quiet",
            "--compare", "code,direct"]  # fmt: skip
    assert main(argv) == 143
    out, err = capsys.readouterr()
    assert err == "tooltree: terminated\n"
    runs = json.loads(out)["runs"]  # one object
    for run, mode in zip(runs, ["code", "direct"], strict=True):
        assert_stopped_before_any_request(run, mode)
