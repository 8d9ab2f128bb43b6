"""`Sandbox.cancel`: stopping a running execution from another thread while the session lives on."""

from __future__ import annotations

import _thread
import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from tests.docker_cli import EngineWithCLI
from tests.sandbox.conftest import SIGNAL, TAKE_EVERY_PROCESS, WAIT, StartSignal, run_and_cancel

pytestmark = pytest.mark.docker


@pytest.fixture
def bridge() -> StartSignal:
    return StartSignal()


@pytest.fixture
def sb(backend: DockerBackend, bridge: StartSignal) -> Iterator[Sandbox]:
    """A session whose scripts' tool calls go to ``bridge``."""
    with Sandbox(backend, tools=bridge) as session:
        yield session


def test_cancel_interrupts_the_running_script_and_keeps_its_variables(sb: Sandbox, bridge: StartSignal) -> None:
    sb.execute("kept = 41")
    result = run_and_cancel(sb, bridge, "import time\nkept += 1\n" + SIGNAL + "time.sleep(600)\n")
    assert result.cancelled and not result.ok and not result.timed_out and not result.state_reset
    assert result.error == "cancelled (KeyboardInterrupt)"
    assert result.traceback is not None and result.traceback.endswith("KeyboardInterrupt\n")
    assert sb.execute("print(kept)").stdout == "42\n"


def test_a_script_that_swallows_the_interrupt_is_killed_and_the_session_survives(
    sb: Sandbox, bridge: StartSignal
) -> None:
    code = (
        "import time\nfrom tool_tree.runtime import call_tool\nwhile True:\n    try:\n"
        "        call_tool('t', 'started', {})\n        time.sleep(600)\n"
        "    except KeyboardInterrupt:\n        pass\n"
    )
    result = run_and_cancel(sb, bridge, code)
    assert result.cancelled and result.state_reset and not result.timed_out
    assert result.error == "cancelled (the interpreter did not stop when interrupted and was restarted)"
    assert sb.execute("print('alive')").stdout == "alive\n"


def test_a_cancel_whose_first_interrupt_lands_before_a_blocking_call_still_interrupts_it(
    sb: Sandbox,
    bridge: StartSignal,
) -> None:
    # A SIGINT that arrives just before a blocking call (time.sleep, a read) sets Python's flag without waking the
    # call. Before, the cancel sent one and the script slept through it: killed, its variables gone (seen once in
    # 360 cancels on a busy machine). Here the script takes the first SIGINT itself, as that race loses it.
    sb.execute("kept = 41")
    code = (
        "import signal, time\nkept += 1\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
        + SIGNAL
        + "signal.sigwait({signal.SIGINT})\nsignal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n"
        "time.sleep(600)\n"
    )
    result = run_and_cancel(sb, bridge, code)
    assert result.cancelled and not result.state_reset
    assert result.error == "cancelled (KeyboardInterrupt)"
    assert sb.execute("print(kept)").stdout == "42\n"


def test_the_repeated_interrupts_of_a_cancel_do_not_cut_short_the_scripts_clean_up(
    sb: Sandbox, bridge: StartSignal
) -> None:
    code = (
        "import time\ntry:\n    "
        + SIGNAL.replace("\n", "\n    ")
        + "time.sleep(600)\nexcept KeyboardInterrupt:\n    started = time.monotonic()\n"
        "    time.sleep(1.0)\n    print('slept a whole second:', time.monotonic() - started >= 1.0)\n    raise\n"
    )
    result = run_and_cancel(sb, bridge, code)
    assert result.cancelled and not result.state_reset
    assert result.stdout == "slept a whole second: True\n"
    assert result.error == "cancelled (KeyboardInterrupt)"


def test_cancel_stops_a_script_waiting_on_a_tool_call(sb: Sandbox, bridge: StartSignal) -> None:
    code = "from tool_tree.runtime import call_tool\ncall_tool('t', 'block', {})\nprint('never')\n"
    result = run_and_cancel(sb, bridge, code)
    assert result.cancelled
    assert "never" not in result.stdout
    assert sb.execute("print(2)").stdout == "2\n"


def test_cancel_stops_a_script_waiting_in_parallel_on_tool_calls_at_once_keeping_its_variables(
    sb: Sandbox,
    bridge: StartSignal,
) -> None:
    # Before: `parallel` waited for its calls still running once interrupted, so the script did not stop, the sandbox
    # restarted its interpreter 3 s later ("cancelled (the interpreter did not stop when interrupted and was
    # restarted)"): its variables gone, and no traceback saying where it was.
    sb.execute("kept = 41")
    code = (
        "from tool_tree.runtime import call_tool, parallel\nkept += 1\n"
        "parallel(lambda: call_tool('t', 'block', {}), lambda: call_tool('t', 'block', {}))\nprint('never')\n"
    )
    result = run_and_cancel(sb, bridge, code)
    assert result.cancelled and not result.state_reset, result.error
    assert result.error == "cancelled (KeyboardInterrupt)" and "never" not in result.stdout
    assert result.traceback is not None and result.traceback.endswith("KeyboardInterrupt\n")
    assert "parallel(lambda: call_tool('t', 'block', {})" in result.traceback
    assert sb.execute("print(kept)").stdout == "42\n"


def test_cancel_with_nothing_running_does_nothing(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        assert sb.cancel() is False
        sb.execute("x = 1")
        assert sb.cancel() is False
        result = sb.execute("print(x)")
        assert result.stdout == "1\n" and not result.cancelled


def test_a_ctrl_c_that_lands_just_before_executes_wait_is_raised_at_once(
    sb: Sandbox, bridge: StartSignal, ctrl_c_raises: None
) -> None:
    # interrupt_main sets Python's flag as a signal does, without waking a blocking call: as a Ctrl-C (or the
    # SIGTERM of `tooltree exec`) landing just before the wait. Before, the wait ran on to the script's end (60 s).
    # `ctrl_c_raises`: in a suite run as a background job SIGINT is ignored, and interrupt_main did nothing.
    sent: list[float] = []

    def interrupt_when_started() -> None:
        if bridge.started.wait(WAIT):
            sent.append(time.monotonic())
            _thread.interrupt_main()

    threading.Thread(target=interrupt_when_started, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        sb.execute(SIGNAL + "import time\ntime.sleep(60)\n", timeout=90)
    # Counted from the Ctrl-C: the script's start before it, which a loaded machine stretches, is no part of it.
    assert sent and time.monotonic() - sent[0] < 30


def test_a_cancel_and_executions_after_a_fork_bomb_need_no_new_supervisor_thread_under_runc(
    docker_engine: EngineWithCLI, test_config: SandboxConfig
) -> None:
    # The pids cgroup counts the supervisor's threads. Before, the cancel started a thread, which the full limit
    # refused ("can't start new thread"), and the supervisor exited: the session ended. So did, about once in 60, an
    # execution after the fork bomb (its timeout's thread).
    bridge = StartSignal()
    config = dataclasses.replace(test_config, pids_limit=40)
    with Sandbox(DockerBackend(config, docker=docker_engine), tools=bridge) as sb:
        result = run_and_cancel(sb, bridge, TAKE_EVERY_PROCESS + SIGNAL + "time.sleep(600)\n")
        assert result.cancelled and result.error == "cancelled (KeyboardInterrupt)"
        assert [sb.execute(f"print({i})").stdout for i in range(100)] == [f"{i}\n" for i in range(100)]


def test_a_cancel_from_the_output_listener_stops_the_script_on_a_line_it_printed(backend: DockerBackend) -> None:
    # The listener runs on the thread that reads the sandbox's answers: before, its cancel waited for its own answer,
    # and the execution for the script's output, until the sandbox was destroyed as not answering (SessionError).
    said: list[bool] = []

    def on_output(stream: str, data: bytes, skipped: int) -> None:
        if b"STOP" in data and not said:
            said.append(sb.cancel())

    with Sandbox(backend) as sb:
        sb.execute("kept = 41")
        code = "import time\nkept += 1\nprint('STOP', flush=True)\ntime.sleep(600)\n"
        result = sb.execute(code, timeout=120, on_output=on_output)
        assert said == [True]
        assert result.cancelled and result.error == "cancelled (KeyboardInterrupt)" and result.stdout.rstrip() == "STOP"
        assert sb.execute("print(kept)").stdout == "42\n"
