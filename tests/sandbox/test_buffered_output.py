"""A script's stdout and stderr are block-buffered in the sandbox (`sandbox._supervisor.flushing`): under gVisor each
unbuffered write was a system call of 40–86 µs. What a script printed still reaches the user whole and in order
however it ends (normally, an uncaught exception, ``sys.exit``, ``os._exit``, a SIGKILL it sends itself, its
timeout), and before what it does next (a tool call, a child process, a fork), under runc and under gVisor (skipped
where the engine has no ``runsc``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_gvisor_limits import runsc  # noqa: F401  (a fixture)

pytestmark = pytest.mark.docker

LINES = 2000
PRINTED = "".join(f"line {i}\n" for i in range(LINES))
PRINT = f"for i in range({LINES}):\n    print(f'line {{i}}')\n"


class Tools:
    """Answers every call; remembers what the host had heard the script print when each call came."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.at_calls: list[str] = []
        self.lock = threading.Lock()

    def on_output(self, stream: str, data: bytes, skipped: int) -> None:
        with self.lock:
            self.heard.append(f"{stream}: {data.decode()}" if stream != "stdout" else data.decode())

    def __call__(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.at_calls.append("".join(self.heard))
        return {"content": [{"type": "text", "text": "ok"}]}


@pytest.fixture(scope="module", params=["runc", "runsc"])
def backend_of(
    request: pytest.FixtureRequest, docker_engine: EngineWithCLI, test_config: SandboxConfig
) -> DockerBackend:
    runtime = None
    if request.param == "runsc":
        request.getfixturevalue("runsc")  # skips where the engine has none
        runtime = "runsc"
    config = SandboxConfig(owner=test_config.owner, timeout=test_config.timeout, runtime=runtime)
    backend = DockerBackend(config, docker=docker_engine)
    backend.prepare()
    return backend


@pytest.fixture(scope="module")
def tools() -> Tools:
    return Tools()


@pytest.fixture(scope="module")
def sb(backend_of: DockerBackend, tools: Tools) -> Iterator[Sandbox]:
    with Sandbox(backend_of, tools=tools) as session:
        yield session


def test_what_a_script_printed_is_whole_and_in_order_at_its_end(sb: Sandbox) -> None:
    code = (
        PRINT
        + "import sys\nfor i in range(500):\n    sys.stderr.write(f'e{i}\\n')\nsys.stdout.buffer.write(b'raw\\n')\n"
    )
    result = sb.execute(code + "print('after raw')\n")
    assert result.ok
    assert result.stdout == PRINTED + "raw\nafter raw\n"
    assert result.stderr == "".join(f"e{i}\n" for i in range(500))


@pytest.mark.parametrize(
    ("end", "error"),
    [
        ("raise ValueError('boom')", "ValueError: boom"),
        ("import sys\nsys.exit(3)", "SystemExit: 3"),
        ("import sys\nsys.exit('bye')", "SystemExit: bye"),
        ("import os\nos._exit(5)", "the Python process exited with status 5"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "signal 9"),
    ],
    ids=["exception", "sys_exit", "sys_exit_text", "os_exit", "sigkill_itself"],
)
def test_what_a_script_printed_before_it_ended_badly_is_kept(sb: Sandbox, end: str, error: str) -> None:
    code = PRINT + "import sys\nprint('to stderr', file=sys.stderr)\n" + end + "\n"
    result = sb.execute(code)
    assert result.stdout == PRINTED
    assert result.stderr == "to stderr\n" + ("bye\n" if "bye" in end else "")
    assert result.error is not None and error in result.error
    if "ValueError" in end:
        assert result.traceback is not None and result.traceback.rstrip().endswith("ValueError: boom")


def test_what_a_script_printed_before_its_timeout_is_kept(sb: Sandbox) -> None:
    # Printed within a moment (also bytes to sys.stdout.buffer), then the interpreter busy (in Python) or asleep until
    # the kill.
    printed = PRINT + "print('last')\nimport sys\nsys.stdout.buffer.write(b'raw\\n')\n"
    for wait in ("while True:\n    pass\n", "import time\ntime.sleep(600)\n"):
        result = sb.execute(printed + wait, timeout=3)
        assert result.timed_out
        assert result.stdout == PRINTED + "last\nraw\n"


def test_a_line_printed_before_native_code_holds_the_interpreter_until_the_timeout_is_kept(sb: Sandbox) -> None:
    # The regex engine never lets go of the interpreter lock: nothing can write out what waits after the print.
    code = "import re\nprint('matching')\nre.match(r'(a*)*b', 'a' * 64)\n"
    result = sb.execute(code, timeout=3)
    assert result.timed_out
    assert result.stdout == "matching\n"


def test_output_comes_in_order_with_child_processes_and_forks(sb: Sandbox) -> None:
    code = (
        "import os, subprocess\n"
        "print('a')\n"
        "subprocess.run(['echo', 'child'])\n"
        "print('b')\n"
        "os.system('echo shell')\n"
        "print('c')\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    print('forked')\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('d')\n"
    )
    assert sb.execute(code).stdout == "a\nchild\nb\nshell\nc\nforked\nd\n"


def test_what_a_script_printed_before_a_tool_call_reaches_the_host_before_the_call(sb: Sandbox, tools: Tools) -> None:
    tools.heard.clear()
    tools.at_calls.clear()
    code = (
        "from tool_tree.runtime import call_tool\n"
        "print('first')\n"
        "print('second')\n"
        "call_tool('s', 't', {})\n"
        "print('third')\n"
        "call_tool('s', 't', {})\n"
    )
    result = sb.execute(code, on_output=tools.on_output)
    assert result.ok and result.stdout == "first\nsecond\nthird\n"
    assert tools.at_calls == ["first\nsecond\n", "first\nsecond\nthird\n"]


def test_what_a_waiting_script_printed_reaches_a_listener_while_it_waits(sb: Sandbox) -> None:
    heard = threading.Event()
    got: list[str] = []

    def listen(stream: str, data: bytes, skipped: int) -> None:
        got.append(data.decode())
        if "".join(got) == "one\ntwo\n":
            heard.set()

    done: list[Any] = []
    runner = threading.Thread(
        target=lambda: done.append(
            sb.execute("import time\nprint('one')\nprint('two')\ntime.sleep(600)", on_output=listen)
        )
    )
    runner.start()
    try:
        assert heard.wait(30), got
    finally:
        sb.cancel()
        runner.join(30)
    assert done and done[0].stdout == "one\ntwo\n"
