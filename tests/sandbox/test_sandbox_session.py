"""Sandbox sessions end to end, in real containers."""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError, ToolBridge, ToolCallRefused
from tests.image_samples import png_expression
from tests.servers.content_server import png
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


PNG = tiny_png()


EXOTIC = 'quote " backslash \\ newline \n tab \t é 😀 \u2028 {"id":"c1","result":{}}'


class RecordingTools(ToolBridge):
    """A bridge that records calls and how many were in flight at once."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls.append((server, tool, arguments))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if tool == "slow":
                time.sleep(0.2)  # a tool that takes 200 ms
            if tool == "fail":
                return {"content": [{"type": "text", "text": "no such lead"}], "isError": True}
            if tool == "refuse":
                raise ToolCallRefused("crm.refuse is not in the allowlist", "not_allowed")
            if tool == "exotic":
                return {
                    "content": [{"type": "text", "text": EXOTIC}],
                    "structuredContent": {"n": [1.5, None, {"": EXOTIC}]},
                }
            if tool == "image":
                return {"content": [{"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}]}
            return {"content": [{"type": "text", "text": f"{tool} {arguments}"}]}
        finally:
            with self._lock:
                self.in_flight -= 1

    def search_tools(self, query: str, *, detail: str = "summary", limit: int = 5, regex: bool = False) -> str:
        return f"crm.list_leads ({detail}, {limit}, {regex}) for {query!r}: servers/crm/list_leads.py"


@pytest.fixture(scope="module")
def tools() -> RecordingTools:
    return RecordingTools()


@pytest.fixture(scope="module")
def shared(backend: DockerBackend, tools: RecordingTools) -> Iterator[Sandbox]:
    """One session for tests that neither depend on nor leave interpreter state."""
    with Sandbox(backend, tools=tools) as sb:
        yield sb


def test_hello_world_runs_as_the_sandbox_user_in_the_workspace(shared: Sandbox) -> None:
    result = shared.execute("import os\nprint('hello')\nprint(os.getuid(), os.getcwd())")
    assert result.ok
    assert result.stdout == "hello\n10001 /workspace\n"
    assert result.exit_status == 0 and result.error is None and result.duration > 0


def test_stdout_and_stderr_are_captured_apart_and_cleaned(shared: Sandbox) -> None:
    code = (
        "import sys\n"
        "print('\\x1b[31mred\\x1b[0m')\n"
        "print('oops', file=sys.stderr)\n"
        "sys.stdout.flush()\n"
        "sys.stdout.buffer.write(b'\\xff\\xfe bytes\\n')\n"
    )
    result = shared.execute(code)
    assert result.stdout == "red\n\ufffd\ufffd bytes\n"
    assert result.stderr == "oops\n"


def test_output_of_subprocesses_is_captured_too(shared: Sandbox) -> None:
    result = shared.execute("import subprocess\nsubprocess.run(['echo', 'from a child'])")
    assert result.stdout == "from a child\n"


def test_a_script_writing_frames_to_its_stdout_cannot_touch_the_channel(shared: Sandbox) -> None:
    code = (
        "import os, json\n"
        "body = json.dumps({'id': 1, 'result': {}}).encode()\n"
        "os.write(1, len(body).to_bytes(4, 'big') + body)\n"
    )
    result = shared.execute(code)
    assert result.ok and '"result"' in result.stdout
    assert shared.execute("print('still fine')").stdout == "still fine\n"


def test_long_output_is_capped_with_head_tail_and_the_full_text_in_a_file(docker_engine: Any) -> None:
    backend = DockerBackend(SandboxConfig(owner=TEST_OWNER, output_chars=1000), docker=docker_engine)
    with Sandbox(backend) as sb:
        result = sb.execute("for i in range(2000):\n    print(f'line {i}')")
        assert result.stdout_truncated and result.stdout_path is not None
        assert result.stdout.startswith("line 0\nline 1\n") and result.stdout.endswith("line 1999\n")
        assert len(result.stdout) < 1300 and result.stdout_path in result.stdout
        full = sb.read_file(result.stdout_path).decode()
        assert full == "".join(f"line {i}\n" for i in range(2000))
        listed = sb.execute(f"print(open({result.stdout_path!r}).read().count('line'))")
        assert listed.stdout == "2000\n"


def test_state_persists_across_executions_until_reset(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        assert sb.execute("import json\ncounter = 41\nopen('kept.txt', 'w').write('file')").ok
        assert sb.execute("counter += 1\nprint(counter, json.dumps([1]))").stdout == "42 [1]\n"
        sb.reset()
        after = sb.execute("print(open('kept.txt').read())\nprint(counter)")
        assert after.stdout == "file\n"
        assert after.error == "NameError: name 'counter' is not defined"
        sb.reset(workspace=True)
        assert sb.execute("import os\nprint(sorted(os.listdir('.')))").stdout == "['servers', 'skills']\n"


def test_a_timeout_kills_the_run_and_the_session_stays_usable(backend: DockerBackend) -> None:
    with Sandbox(backend) as sb:
        sb.execute("x = 1")
        code = (
            "import subprocess, time\n"
            "subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
            "print('started')\n"
            "time.sleep(300)\n"
        )
        result = sb.execute(code, timeout=1)
        assert result.timed_out and result.state_reset
        assert result.error == "timed out after 1 s"
        assert result.stdout == "started\n"
        after = sb.execute(
            "import os\n"
            "cmds = [open(f'/proc/{p}/cmdline').read() for p in os.listdir('/proc') if p.isdigit()]\n"
            "print([c for c in cmds if c.startswith('sleep')])\n"
            "print(x)\n"
        )
        assert after.stdout == "[]\n"
        assert after.error == "NameError: name 'x' is not defined"


def test_a_crashed_interpreter_is_reported_and_replaced(shared: Sandbox) -> None:
    result = shared.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert result.exit_status == -9 and result.state_reset
    assert result.error is not None and "signal 9" in result.error
    assert shared.execute("print(2)").stdout == "2\n"


def test_an_interpreter_that_crashes_is_not_said_to_be_out_of_memory(shared: Sandbox) -> None:
    # Before: "the Python process was killed by signal 11 (out of memory?)", though the kernel counted no kill for the
    # memory limit: a crash in native code sent the user after memory.
    result = shared.execute("import ctypes\nctypes.string_at(0)")
    assert result.exit_status == -11 and result.state_reset
    assert result.error == "the Python process was killed by signal 11 (SIGSEGV); variables and imports are gone"
    assert shared.execute("print(2)").stdout == "2\n"


CTL_IN, CTL_OUT = (f"int(sys.orig_argv[sys.orig_argv.index('--ctl-{end}') + 1])" for end in ("in", "out"))
"""The descriptor of the interpreter's way in (out) of its control channel, as a script finds it: on the worker's
command line (`sys.orig_argv`; its ``sys.argv`` is the script's name alone)."""

CHANNEL_CLOSED = (
    "a script of this session closed the interpreter's control channel to its supervisor, so the interpreter was "
    "ended and restarted; variables and imports are gone"
)


def test_a_script_that_closes_its_control_channel_is_told_so_not_that_it_ran_out_of_memory(shared: Sandbox) -> None:
    # Before: "the Python process was killed by signal 9 (SIGKILL: out of memory?)": the supervisor's own kill, once
    # the pipe closed, taken for the kernel's.
    code = f"import os, sys, threading\nos.close({CTL_OUT})\nthreading.Event().wait()"
    result = shared.execute(code)
    assert result.state_reset and result.exit_status == -9
    assert result.error == CHANNEL_CLOSED
    assert shared.execute("print(2)").stdout == "2\n"


def test_a_script_that_closes_its_control_channel_and_ends_at_once_is_told_so_not_that_it_exited_1(
    shared: Sandbox,
) -> None:
    # Before: "the Python process exited with status 1": its report of the end, sent on the closed descriptor, failed.
    result = shared.execute(f"import os, sys\nos.close({CTL_OUT})\nprint(1)")
    assert (result.error, result.state_reset, result.stdout) == (CHANNEL_CLOSED, True, "1\n")
    assert shared.execute("print(2)").stdout == "2\n"


def test_a_script_that_closes_its_interpreters_way_in_is_said_to_have_closed_it_not_to_have_exited_0(
    backend: DockerBackend,
) -> None:
    # Before: that script, or the next one (whichever ran when the interpreter next read its way in), failed with "the
    # Python process exited with status 0", which neither asked for. (A fresh interpreter: one whose earlier scripts
    # left files to open could give the closed descriptor's number to another.)
    with Sandbox(backend) as sb:
        closed = sb.execute(f"import os, sys\nos.close({CTL_IN})\nprint(1)")
        after = sb.execute("print(2)")
        failed, ran = (closed, after) if closed.error is not None else (after, closed)
        assert (failed.error, failed.state_reset) == (CHANNEL_CLOSED, True)
        assert ran.error is None and ran.stdout in ("1\n", "2\n")
        assert sb.execute("print(3)").stdout == "3\n"


@pytest.mark.parametrize("path", ["/dev/null", "/tmp/frames"])
def test_a_script_that_puts_another_file_at_its_interpreters_way_in_is_said_to_have_closed_it(
    shared: Sandbox, path: str
) -> None:
    # Before: the file that took the closed descriptor's number was read as the channel, and the next script failed
    # with "the Python process exited with status 0". (A file of frames: none of them is run.)
    frame = json.dumps({"type": "exec", "exec": 99, "code": "print('from the file')"}).encode()
    code = (
        "import os, sys\n"
        f"open('/tmp/frames', 'wb').write({struct.pack('>I', len(frame)) + frame!r})\n"
        f"fd = os.open({path!r}, os.O_RDONLY)\n"
        f"os.dup2(fd, {CTL_IN})\n"
        "print(1)"
    )
    closed = shared.execute(code)
    after = shared.execute("print(2)")
    failed, ran = (closed, after) if closed.error is not None else (after, closed)
    assert (failed.error, failed.state_reset) == (CHANNEL_CLOSED, True)
    assert ran.error is None and ran.stdout in ("1\n", "2\n")
    assert shared.execute("print(3)").stdout == "3\n"


def test_an_interpreter_that_dies_while_a_process_it_started_runs_is_said_to_have_died_not_to_have_timed_out(
    shared: Sandbox,
) -> None:
    # Before: the child (a fork, or a program run with close_fds=False) held the control channel open, so the death
    # was found at the timeout (20 s here): "timed out after 20 s".
    for start in ("if os.fork() == 0:\n    time.sleep(60)", "subprocess.Popen(['sleep', '60'], close_fds=False)"):
        result = shared.execute(f"import os, subprocess, time\n{start}\nos._exit(3)")
        said = (result.error, result.timed_out, result.state_reset)
        assert said == ("the Python process exited with status 3", False, True)
        assert shared.execute("print(2)").stdout == "2\n"


def test_a_tool_call_from_a_process_the_script_forked_fails_saying_where_calls_work(shared: Sandbox) -> None:
    # Before: the answer went to the interpreter, not to the process that asked: the call waited to the timeout.
    code = (
        "import multiprocessing\n"
        "def search(query):\n"
        "    try:\n"
        "        return search_tools(query)\n"
        "    except RuntimeError as e:\n"
        "        return str(e)\n"
        "with multiprocessing.Pool(1) as pool:\n"
        "    print(pool.map(search, ['x'])[0])\n"
        # A fork of a fork keeps the files its parent opened at the channel's numbers.
        "import os, sys\n"
        f"n = {CTL_IN}\n"
        "if (child := os.fork()) == 0:\n"
        "    os.dup2(os.open('/dev/null', os.O_RDONLY), n)\n"
        "    if (grandchild := os.fork()) == 0:\n"
        "        os._exit(0 if os.path.exists(f'/proc/self/fd/{n}') else 1)\n"
        "    os._exit(os.waitstatus_to_exitcode(os.waitpid(grandchild, 0)[1]))\n"
        "print('kept' if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0 else 'closed')"
    )
    result = shared.execute(code)
    assert (result.error, result.timed_out) == (None, False)
    assert result.stdout == (
        "tool calls, search_tools and show_image work in the script's own process, not in one it forked (os.fork, "
        "multiprocessing): make them there, or from threads (tool_tree.runtime.parallel runs calls at once)\nkept\n"
    )


RUNNING = (
    "import os\n"
    "stats = [open(f'/proc/{p}/stat').read() for p in os.listdir('/proc') if p.isdigit()]\n"
    "states = [stat.rsplit(')', 1)[1].split()[0] for stat in stats]\n"
    "print(len([s for s in states if s != 'Z']))"
)
"""A cell that prints how many processes run in the sandbox (not counting those ended and not yet waited for)."""


def test_a_process_the_script_forks_and_leaves_to_run_on_ends_at_the_cells_end_as_at_a_scripts_end(
    shared: Sandbox,
) -> None:
    # Before: it ran on to the cell's end and then waited for ever, for a cell that never came (one more process
    # running for each such cell, counted against pids_limit).
    running = shared.execute(RUNNING).stdout
    for child, stdout, stderr_end in (
        ("print('child', flush=True)", "child\nparent 0\n", ""),
        ("raise ValueError('in the child')", "parent 1\n", "ValueError: in the child\n"),
    ):
        code = (
            "import os\n"
            "if (pid := os.fork()) == 0:\n"
            f"    {child}\n"
            "else:\n"
            "    print('parent', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))"
        )
        result = shared.execute(code)
        assert (result.error, result.stdout) == (None, stdout)
        assert result.stderr.endswith(stderr_end)
    assert shared.execute(RUNNING).stdout == running


def test_running_out_of_memory_kills_the_interpreter_not_the_session(docker_engine: Any) -> None:
    backend = DockerBackend(SandboxConfig(owner=TEST_OWNER, memory="128m"), docker=docker_engine)
    with Sandbox(backend) as sb:
        result = sb.execute("kept = 1\nblob = b'x' * (512 << 20)")
        assert result.state_reset and result.exit_status == -9
        assert result.error == "memory limit exceeded: the interpreter was killed (variables and imports are gone)"
        assert sb.execute("print('alive')").stdout == "alive\n"


def test_sys_exit_reports_its_status(shared: Sandbox) -> None:
    result = shared.execute("import sys\nsys.exit(3)")
    assert result.exit_status == 3 and result.error == "SystemExit: 3" and not result.state_reset
    assert shared.execute("raise SystemExit(0)").ok


def test_a_traceback_shows_only_the_users_frames(shared: Sandbox) -> None:
    code = "def load(path):\n    raise ValueError(f'bad file {path}')\n\ndef main():\n    load('x.csv')\n\nmain()\n"
    result = shared.execute(code)
    assert result.exit_status == 1 and result.error == "ValueError: bad file x.csv"
    assert result.traceback is not None
    assert "tooltree_supervisor" not in result.traceback and "worker" not in result.traceback
    assert result.traceback.startswith("Traceback (most recent call last):\n")
    frames = [line.strip() for line in result.traceback.splitlines() if line.strip().startswith("File ")]
    assert len(frames) == 3 and all(f.startswith('File "<cell-') for f in frames)
    assert [f.rsplit(" in ", 1)[1] for f in frames] == ["<module>", "main", "load"]
    assert "raise ValueError(f'bad file {path}')" in result.traceback


def test_an_error_of_several_lines_is_the_whole_message_as_the_traceback_ends(shared: Sandbox) -> None:
    # The README said the error was one line; the model reads it, and every line of the message is kept.
    result = shared.execute("raise ValueError('a\\nb\\n\\nc')")
    assert result.error == "ValueError: a\nb\n\nc"
    assert result.traceback is not None and result.traceback.endswith("\nValueError: a\nb\n\nc\n")


def test_a_traceback_of_a_long_message_keeps_its_start_and_end_and_says_what_was_cut(shared: Sandbox) -> None:
    # Before: only its last 20,000 characters, all of them the message's end: no error type, no file, no line, and no
    # word that anything was cut.
    from sandbox._supervisor.limits import MAX_TRACEBACK_CHARS

    code = "rows = [{'id': i, 'name': 'x' * 40} for i in range(2000)]\nraise ValueError(f'unexpected rows: {rows}')\n"
    result = shared.execute(code)
    tb = result.traceback
    assert tb is not None and result.error is not None and result.error.startswith("ValueError: unexpected rows: [")
    assert len(tb) <= MAX_TRACEBACK_CHARS
    assert tb.startswith('Traceback (most recent call last):\n  File "<cell-')
    assert "line 2, in <module>" in tb and "\nValueError: unexpected rows: [{'id': 0," in tb
    assert re.search(r"\n\[… [\d,]+ characters of the traceback cut; the whole traceback is in /workspace/\S+ …\]", tb)
    assert tb.rstrip().endswith("{'id': 1999, 'name': '" + "x" * 40 + "'}]")


def test_an_error_whose_message_holds_a_lone_surrogate_is_said_escaped_and_the_interpreter_runs_on(
    shared: Sandbox,
) -> None:
    # Before: the interpreter ended as it sent the result: "the Python process exited with status 1", variables gone.
    assert shared.execute("surrogate_kept = 7").ok
    result = shared.execute("raise ValueError('bad \\udc80 byte')")
    assert result.error == "ValueError: bad \\udc80 byte" and not result.state_reset
    assert result.traceback is not None and result.traceback.endswith("ValueError: bad \\udc80 byte\n")
    assert shared.execute("print(surrogate_kept)").stdout == "7\n"


def test_a_traceback_names_the_code_by_the_filename_given_and_still_shows_only_the_users_frames(
    shared: Sandbox,
) -> None:
    # Before: the filename was not sent, and every frame said File "<cell-N>".
    shared.execute("def parse(text):\n    import json\n    return json.loads(text)\n", filename="lib/parse.py")
    code = "def main():\n    parse('{')\n\nmain()\n"
    result = shared.execute(code, filename="jobs/run job.py")
    assert result.traceback is not None and result.error is not None and "JSONDecodeError" in result.error
    assert "tooltree_supervisor" not in result.traceback
    frames = [line.strip() for line in result.traceback.splitlines() if line.strip().startswith("File ")]
    assert frames[:3] == [
        'File "jobs/run job.py", line 4, in <module>',
        'File "jobs/run job.py", line 2, in main',
        'File "lib/parse.py", line 3, in parse',
    ]
    assert len(frames) == 4 and "json" in frames[3]  # where it was raised, in the library
    assert "    parse('{')\n" in result.traceback and "    return json.loads(text)\n" in result.traceback


@pytest.mark.parametrize(
    "name",
    [
        'bad.py", line 1, in <module>\n  File "evil.py',
        "x" * 10_000,
        "a\x1b[31mred.py",
        "a\x00b.py",
        "a\rb.py",
        'a".py',
        "",
        " padded.py ",
        "/opt/tooltree/lib/tooltree_supervisor/worker.py",
    ],
)
def test_a_filename_that_is_not_one_plain_line_falls_back_to_the_cell_name(shared: Sandbox, name: str) -> None:
    result = shared.execute("def f():\n    return 1/0\nf()\n", filename=name)
    assert result.traceback is not None and result.error == "ZeroDivisionError: division by zero"
    frames = [line.strip() for line in result.traceback.splitlines() if line.strip().startswith("File ")]
    assert len(frames) == 2 and all(f.startswith('File "<cell-') for f in frames), result.traceback
    assert "    return 1/0\n" in result.traceback
    assert not any(bit in result.traceback for bit in ("evil", "xxxx", "red.py", "padded", "tooltree_supervisor"))


def test_a_syntax_error_points_at_the_line(shared: Sandbox) -> None:
    result = shared.execute("x = (1,\nprint(x")
    assert result.error == "SyntaxError: '(' was never closed (line 2)"
    assert result.traceback is not None and "<cell-" in result.traceback


def test_top_level_await_runs(shared: Sandbox) -> None:
    assert shared.execute("import asyncio\nawait asyncio.sleep(0)\nprint('awaited')").stdout == "awaited\n"


def test_a_stub_call_is_relayed_to_the_host_and_ledgered(shared: Sandbox, tools: RecordingTools) -> None:
    result = shared.execute("from servers.crm import list_leads\nprint(list_leads(status='won').text)")
    assert result.stdout == "list_leads {'status': 'won'}\n"
    assert ("crm", "list_leads", {"status": "won"}) in tools.calls
    assert [(c.server, c.tool, c.ok) for c in result.tool_calls] == [("crm", "list_leads", True)]
    assert result.tool_calls[0].response_bytes > 0


def test_a_result_reaches_the_script_exactly_as_the_bridge_gave_it(shared: Sandbox) -> None:
    # The supervisor hands the host's answer on to the worker without parsing or re-encoding it.
    code = (
        "import json\nfrom tool_tree.runtime import call_tool\nr = call_tool('crm', 'exotic', {})\n"
        "print(json.dumps([r.text, r.structured_content], ensure_ascii=True))\n"
    )
    result = shared.execute(code)
    assert result.error is None, result.traceback
    assert json.loads(result.stdout) == [EXOTIC, {"n": [1.5, None, {"": EXOTIC}]}]


def test_ten_slow_calls_run_concurrently(shared: Sandbox, tools: RecordingTools) -> None:
    tools.max_in_flight = 0
    code = (
        "from tool_tree.runtime import call_tool, parallel\n"
        "results = parallel(*[lambda i=i: call_tool('crm', 'slow', {'i': i}) for i in range(10)])\n"
        "print(len(results))\n"
    )
    result = shared.execute(code)
    assert result.stdout == "10\n"
    assert len(result.tool_calls) == 10 and all(c.ok for c in result.tool_calls)
    assert tools.max_in_flight >= 2


def test_tool_errors_and_refusals_reach_the_script_as_exceptions(shared: Sandbox) -> None:
    code = (
        "from tool_tree.runtime import ToolCallError, ToolError, call_tool\n"
        "try:\n    call_tool('crm', 'fail', {})\nexcept ToolError as e:\n    print('tool error:', e.message)\n"
        "try:\n    call_tool('crm', 'refuse', {})\n"
        "except ToolCallError as e:\n    print('refused:', e.code, e.message)\n"
        "call_tool('crm', 'fail', {})\n"
    )
    result = shared.execute(code)
    assert result.stdout == "tool error: no such lead\nrefused: not_allowed crm.refuse is not in the allowlist\n"
    assert result.error == "tool_tree.runtime.ToolError: crm.fail: no such lead"
    assert [c.ok for c in result.tool_calls] == [False, False, False]
    assert result.tool_calls[1].error == "crm.refuse is not in the allowlist"


def test_search_tools_is_routed_to_the_host(shared: Sandbox) -> None:
    result = shared.execute("print(search_tools('leads', limit=3))\nprint(search_tools('x', detail='full'))")
    assert result.stdout.splitlines() == [
        "crm.list_leads (summary, 3, False) for 'leads': servers/crm/list_leads.py",
        "crm.list_leads (full, 5, False) for 'x': servers/crm/list_leads.py",
    ]


def test_search_tools_sends_its_arguments_as_given_and_the_host_says_which_is_wrong(shared: Sandbox) -> None:
    # Before, the script's search_tools converted each first: regex="false" ran a regex search, a list was searched
    # for as its text, a limit of 2.9 was 2, and the host's checks never saw what the script wrote.
    code = (
        "for kwargs in ({'regex': 'false'}, {'query': ['leads']}, {'limit': 2.9}):\n"
        "    try:\n"
        "        print(search_tools(**{'query': 'leads', **kwargs}))\n"
        "    except RuntimeError as e:\n"
        "        print(str(e).split(': search_tools(query')[0])\n"
        "print(search_tools('leads', limit=2))\n"
    )
    assert shared.execute(code).stdout.splitlines() == [
        "search_tools: regex must be True or False, got str 'false'",
        "search_tools: query must be a str, got list ['leads']",
        "search_tools: limit must be an int, got float 2.9",
        "crm.list_leads (summary, 2, False) for 'leads': servers/crm/list_leads.py",
    ]


def test_shown_images_reach_the_result(shared: Sandbox) -> None:
    code = (
        f"png = {PNG!r}\n"
        "open('chart.png', 'wb').write(png)\n"
        "show_image(png)\n"
        "show_image('chart.png')\n"
        "from tool_tree.runtime import call_tool\n"
        "show_image(call_tool('crm', 'image', {}).images[0])\n"
    )
    result = shared.execute(code)
    assert result.ok, result.traceback
    assert [(i.mime_type, i.data) for i in result.images] == [("image/png", PNG)] * 3


def test_show_image_refuses_what_is_not_an_image(shared: Sandbox) -> None:
    result = shared.execute("show_image(b'<svg></svg>')")
    assert result.error == "ValueError: show_image(): the data is not a PNG, JPEG, GIF or WebP image"
    assert result.images == []


def test_show_image_refuses_an_image_the_api_would_refuse_for_its_size(shared: Sandbox) -> None:
    # The API's 5 MB per image is counted on the base64: a PNG of 4 MiB passed show_image and was then left out
    # on the host with a note, where the script could no longer make it smaller.
    code = "show_image(b'\\x89PNG\\r\\n\\x1a\\n' + bytes({n}))"
    refused = shared.execute(code.format(n=4 * 1024 * 1024))
    assert refused.error == (
        "ValueError: show_image(): the image is 4,194,312 bytes, over the 3,932,160 bytes one image may have: show it "
        "smaller (fewer pixels, or as JPEG)"
    )
    assert refused.images == []
    taken = shared.execute(f"show_image({png_expression(3 * 1024 * 1024)})")  # a whole PNG of 3 MiB
    assert taken.error is None and len(taken.images) == 1


def test_show_image_refuses_an_image_over_the_apis_pixels_a_side_and_the_script_can_act_on_it(shared: Sandbox) -> None:
    # Before: a PNG of 1 × 100,000 pixels was shown, and the host left it out with a note the script never saw.
    code = (
        "import base64\n"
        f"tall = base64.b64decode({png(1, 100_000)!r})\n"
        "try:\n"
        "    show_image(tall)\n"
        "except ValueError as e:\n"
        "    print(e)\n"
        f"show_image(base64.b64decode({png(1, 8_000)!r}))\n"
    )
    result = shared.execute(code)
    assert result.error is None, result.traceback
    assert result.stdout == (
        "show_image(): the image is 1×100,000 pixels, over the 8,000 pixels a side the Messages API takes: show it "
        "smaller (fewer pixels, or cut into parts)\n"
    )
    assert [i.data for i in result.images] == [base64.b64decode(png(1, 8_000))] and result.image_notes == []


def test_the_network_is_unreachable(shared: Sandbox) -> None:
    # Interfaces are checked first: the connection attempts run only when loopback is all there is.
    code = (
        "import os, socket\n"
        "ifaces = sorted(os.listdir('/sys/class/net'))\n"
        "print(ifaces)\n"
        "assert ifaces == ['lo']\n"
        "for target in [('192.0.2.1', 80), ('172.17.0.1', 80)]:\n"
        "    try:\n"
        "        socket.create_connection(target, timeout=3)\n"
        "        print('connected', target)\n"
        "    except OSError as e:\n"
        "        print('refused', target[0], e.errno)\n"
        "try:\n"
        "    socket.getaddrinfo('pypi.org', 443)\n"
        "    print('resolved')\n"
        "except OSError:\n"
        "    print('no dns')\n"
    )
    result = shared.execute(code)
    assert result.stdout == "['lo']\nrefused 192.0.2.1 101\nrefused 172.17.0.1 101\nno dns\n"


def test_the_tree_root_and_tmp_are_not_writable_or_executable(shared: Sandbox) -> None:
    code = (
        "import os, subprocess\n"
        "for path in ['servers/crm/evil.py', '/etc/evil', '/usr/bin/evil']:\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "        print('wrote', path)\n"
        "    except OSError as e:\n"
        "        print('denied', path)\n"
        "open('/tmp/run.sh', 'w').write('#!/bin/sh\\necho ran\\n')\n"
        "os.chmod('/tmp/run.sh', 0o755)\n"
        "try:\n"
        "    subprocess.run(['/tmp/run.sh'])\n"
        "except PermissionError:\n"
        "    print('noexec')\n"
    )
    result = shared.execute(code)
    assert result.stdout == ("denied servers/crm/evil.py\ndenied /etc/evil\ndenied /usr/bin/evil\nnoexec\n"), (
        result.traceback
    )


def test_the_script_can_neither_reach_the_channel_through_proc_nor_kill_the_supervisor(shared: Sandbox) -> None:
    code = (
        "import os, signal\n"
        "for path in ['/proc/1/fd/1', '/proc/1/fd/0', '/proc/1/mem']:\n"
        "    try:\n"
        "        os.open(path, os.O_WRONLY)\n"
        "        print('opened', path)\n"
        "    except OSError as e:\n"
        "        print('denied', path, e.errno)\n"
        "os.kill(1, signal.SIGKILL)\n"
        "os.kill(1, signal.SIGTERM)\n"
        "print('signalled')\n"
    )
    result = shared.execute(code)
    assert result.stdout == "denied /proc/1/fd/1 13\ndenied /proc/1/fd/0 13\ndenied /proc/1/mem 13\nsignalled\n"
    assert shared.execute("print('still here')").stdout == "still here\n"


def test_orphaned_processes_are_reaped(shared: Sandbox) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    if os.fork() == 0:\n"
        "        os._exit(0)\n"  # the grandchild exits as an orphan of pid 1
        "    time.sleep(0.2)\n"
        "    os._exit(0)\n"
        "os.wait()\n"
    )
    assert shared.execute(code).ok
    zombies = (
        "import os, time\n"
        "def zombies():\n"
        "    out = []\n"
        "    for p in os.listdir('/proc'):\n"
        "        if p.isdigit():\n"
        "            try:\n"  # a process may end between the listing and the read
        "                stat = open(f'/proc/{p}/stat').read()\n"
        "            except FileNotFoundError:\n"
        "                continue\n"
        "            if stat[stat.rfind(')') + 2] == 'Z':\n"
        "                out.append(p)\n"
        "    return out\n"
        "deadline = time.monotonic() + 10\n"
        "while zombies() and time.monotonic() < deadline:\n"
        "    time.sleep(0.1)\n"
        "print(zombies())\n"
    )
    result = shared.execute(zombies)
    assert result.stdout == "[]\n", result.traceback or result.error


def test_files_are_read_out_without_following_symlinks(shared: Sandbox) -> None:
    shared.execute("import os\nopen('plain.txt', 'w').write('abc')\nos.symlink('/etc/passwd', 'link.txt')")
    assert shared.read_file("plain.txt") == b"abc"
    assert shared.read_file("/workspace/plain.txt", max_bytes=2) == b"ab"
    with pytest.raises(SessionError):
        shared.read_file("link.txt")
    with pytest.raises(SessionError):
        shared.read_file("../etc/passwd")
    names = {e["name"]: e["type"] for e in shared.list_files("")}
    assert names["plain.txt"] == "file" and names["link.txt"] == "symlink" and names["servers"] == "symlink"


def test_the_workspace_persists_across_sessions(backend: DockerBackend, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    with Sandbox(backend, workspace=workspace) as sb:
        code = "import os\nos.makedirs('notes')\nopen('notes/a.txt', 'w').write('remember')\n"
        code += "os.symlink('/etc/passwd', 'link')\n"
        assert sb.execute(code).ok
    assert (workspace / "notes" / "a.txt").read_text(encoding="utf-8") == "remember"
    assert not (workspace / "link").exists() and not (workspace / "servers").exists()
    with Sandbox(backend, workspace=workspace) as sb:
        result = sb.execute("print(open('notes/a.txt').read())\nopen('notes/b.txt', 'w').write('more')")
        assert result.stdout == "remember\n"
    assert sorted(p.name for p in (workspace / "notes").iterdir()) == ["a.txt", "b.txt"]


def test_saved_skills_are_importable_in_a_later_session_of_the_same_workspace(
    backend: DockerBackend, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    with Sandbox(backend, workspace=workspace) as sb:
        first = sb.execute("print(open('skills/SKILL.md').read().splitlines()[0])")
        assert first.stdout == "# Skills\n"
        code = "open('skills/double.py', 'w').write('def double(x):\\n    \"Twice x.\"\\n    return 2 * x\\n')\n"
        code += "open('skills/SKILL.md', 'a').write('- double(x) — twice x (skills/double.py)\\n')\n"
        assert sb.execute(code).ok
    assert (workspace / "skills" / "double.py").is_file()
    with Sandbox(backend, workspace=workspace) as sb:
        result = sb.execute(
            "from skills.double import double\nprint(double(21))\nprint(open('skills/SKILL.md').read())"
        )
        assert result.stdout.startswith("42\n# Skills") and "- double(x) — twice x" in result.stdout


def test_a_closed_session_refuses_work(backend: DockerBackend) -> None:
    sb = Sandbox(backend)
    with pytest.raises(SessionError, match="not started"):
        sb.execute("print(1)")
    with sb:
        pass
    with pytest.raises(SessionError):
        sb.execute("print(1)")
