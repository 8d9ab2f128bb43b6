"""Ctrl-C (a real SIGINT) while `Sandbox.execute` waits: the script is stopped too, and the session's next execution
runs with its variables. Before, the script ran on to its timeout and every execution meanwhile failed with "an
execution is already running" (through `Agent(runtime=...)`, the model's next script too)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest

from sandbox import DockerBackend, Sandbox, interrupted_execution, interrupted_unreported
from sandbox.errors import QuitNow

pytestmark = pytest.mark.docker

LONG = "import time\nkept = 'still here'\nfor _ in range(600):\n    time.sleep(0.05)\nprint('ran to its end')"


def ctrl_c_at_first_output(sent: list[float]) -> Callable[[str, bytes, int], None]:
    """An ``on_output`` listener sending SIGINT to this (main) thread when the script's first output reaches the host
    (once; ``sent`` is given the moment): the script is running then, however long a loaded machine took to start
    it. Before: a timer 1 to 1.5 s after `execute` was called, which could land before the script ran."""
    main = threading.get_ident()

    def on_output(name: str, data: bytes, skipped: int) -> None:
        if not sent:
            sent.append(time.monotonic())
            signal.pthread_kill(main, signal.SIGINT)

    return on_output


def test_ctrl_c_in_execute_stops_the_script_and_the_session_goes_on(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        assert sb.execute("before = 41").ok
        sent: list[float] = []
        with pytest.raises(KeyboardInterrupt):
            sb.execute(
                "kept = 'still here'\nprint('started', flush=True)\n" + LONG,
                timeout=60,
                on_output=ctrl_c_at_first_output(sent),
            )
        assert time.monotonic() - sent[0] < 15  # from the Ctrl-C: not the rest of the script's 30 s, nor its timeout
        after = sb.execute("print(before + 1, kept)")
        assert after.ok and after.stdout == "42 still here\n", after.error


def test_the_interrupt_carries_what_the_stopped_script_printed(backend: DockerBackend) -> None:
    # Before: the stopped script's result was dropped; a caller (the agent's transcript, the model) never saw it.
    with Sandbox(backend) as sb:
        assert sb.execute("pass").ok
        with pytest.raises(KeyboardInterrupt) as caught:
            # One write: the Ctrl-C at its first piece lands after the whole line (print writes its text, then its
            # newline: the interrupt could land between them, and the result held no newline).
            sb.execute(
                "import sys\nsys.stdout.write('sent the first mail\\n')\nsys.stdout.flush()\n" + LONG,
                timeout=60,
                on_output=ctrl_c_at_first_output([]),
            )
    stopped = interrupted_execution(caught.value)
    assert stopped is not None and stopped.cancelled and not stopped.ok
    assert stopped.stdout == "sent the first mail\n" and "KeyboardInterrupt" in (stopped.traceback or "")
    assert interrupted_execution(KeyboardInterrupt()) is None  # an interrupt from elsewhere carries nothing


def test_quit_now_goes_on_at_once_with_what_the_script_printed(backend: DockerBackend) -> None:
    # `tooltree exec`'s second Ctrl-C: the script was stopped already, so `execute` waits no more and what the script
    # printed goes on with the interrupt. Before: a Ctrl-C in `execute` waited up to 10 s for a result, which then
    # came too late to be shown, and nothing of what the script had printed went with the interrupt.
    main = threading.get_ident()
    quit_at: list[float] = []

    def quit_now(signum: int, frame: object) -> None:
        raise QuitNow

    def on_output(name: str, data: bytes, skipped: int) -> None:  # the first line is on the host: the user quits
        quit_at.append(time.monotonic())
        signal.pthread_kill(main, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, quit_now)
    try:
        with Sandbox(backend) as sb:
            assert sb.execute("pass").ok
            with pytest.raises(QuitNow) as caught:
                sb.execute(
                    "import signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                    "sys.stdout.write('sent the first mail\\n')\nsys.stdout.flush()\n" + LONG,  # one piece
                    timeout=60,
                    on_output=on_output,
                )
            # From the quit, not from the call: the script's start, which a loaded machine stretches, is no part of it.
            assert time.monotonic() - quit_at[0] < 10
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert interrupted_execution(caught.value) is None
    unreported = interrupted_unreported(caught.value)
    assert unreported is not None and unreported.stdout == "sent the first mail\n" and unreported.stderr is None
    assert unreported.tool_calls == () and interrupted_unreported(KeyboardInterrupt()) is None


def test_after_a_second_ctrl_c_the_next_execution_waits_for_the_left_one_and_says_the_interpreter_was_restarted(
    backend: DockerBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The script ignores its KeyboardInterrupt: the sandbox restarts its interpreter 3 s after the cancel. Ctrl-C
    # again leaves before that. Before: the next execution failed ("an execution is already running") and, once it
    # ran, a NameError for a variable set before, with no word why; the left execution's reply, coming later, was a
    # protocol violation when the first Ctrl-C's wait had run out.
    stopping = threading.Event()
    real = Sandbox._interrupted

    def interrupted_once_taken(channel: object) -> None:  # the sandbox has taken the first Ctrl-C's cancel
        real(channel)  # type: ignore[arg-type]
        stopping.set()

    monkeypatch.setattr(Sandbox, "_interrupted", staticmethod(interrupted_once_taken))
    main = threading.get_ident()
    stubborn = (  # its first output comes from within the try: the first Ctrl-C (sent then) is ignored
        "import time\nwhile True:\n    try:\n        print('waiting', flush=True)\n        time.sleep(100)\n"
        "    except KeyboardInterrupt:\n        pass\n"
    )
    with Sandbox(backend) as sb:
        assert sb.execute("kept = 41").ok
        again = threading.Thread(target=lambda: stopping.wait(60) and signal.pthread_kill(main, signal.SIGINT))
        again.start()
        with pytest.raises(KeyboardInterrupt) as caught:
            sb.execute(stubborn, timeout=60, on_output=ctrl_c_at_first_output([]))
        again.join()
        assert interrupted_execution(caught.value) is None  # left before its result
        after = sb.execute("print(kept + 1)")
        assert after.state_reset and after.error is not None and "NameError" in after.error, after
        assert sb.execute("print('still usable')").stdout == "still usable\n"
