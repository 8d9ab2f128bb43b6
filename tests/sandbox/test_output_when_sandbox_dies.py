"""What a script printed survives a sandbox that dies whole under it (its container killed: past its memory limit
under gVisor, ``docker kill``): the supervisor sends output as it comes (`sandbox._supervisor.stream`), the host
keeps it (`sandbox.streamed`), and `Sandbox.execute`'s `SessionError` carries it (``stdout``, ``stderr``), which
`tooltree exec` prints and the code toolset (agent, serve) gives the model. Before: lost with the sandbox.

Real parts: a real sandbox container killed through the engine; the stream's bookkeeping on real captures.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from agent.toolsets.code import printed_before_end
from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError
from sandbox._supervisor.capture import OutputCapture
from sandbox._supervisor.stream import GAP, TAIL_INTERVAL, OutputStreamer
from sandbox.errors import ProtocolError
from sandbox.streamed import StreamedOutput
from tests.docker_cli import EngineWithCLI
from tests.sandbox.test_gvisor_limits import runsc  # noqa: F401  (a fixture)
from tests.support import TEST_OWNER, exec_killed_after, sample_config_yaml
from tooltree_cli.main import main

WAIT = 60.0


def _captures(tmp_path: Path) -> dict[str, OutputCapture]:
    return {name: OutputCapture(str(tmp_path / f"{name}.txt")) for name in ("stdout", "stderr")}


def _decoded(params: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(params[key])


# ---- the supervisor's side: what is sent, and when --------------------------------------------------------


def test_new_output_goes_at_once_then_at_most_every_gap(tmp_path: Path) -> None:
    captures, streamer = _captures(tmp_path), OutputStreamer(max_chars=100)
    assert streamer.take(captures, at=10.0) is None  # nothing printed: nothing sent
    captures["stdout"].feed(b"first\n")
    params = streamer.take(captures, at=10.0)
    assert params is not None and _decoded(params, "stdout") == b"first\n" and "stderr" not in params
    assert (params["stdout_bytes"], params["stderr_bytes"]) == (6, 0)
    captures["stdout"].feed(b"second\n")
    captures["stderr"].feed(b"warning\n")
    assert streamer.due_in(captures, 10.0) == pytest.approx(GAP)
    assert streamer.take(captures, at=10.0 + GAP / 2) is None
    params = streamer.take(captures, at=10.0 + GAP)
    assert params is not None
    assert (_decoded(params, "stdout"), _decoded(params, "stderr")) == (b"second\n", b"warning\n")
    assert streamer.due_in(captures, 11.0) is None  # every byte was sent once


def test_at_a_tool_call_the_new_output_goes_whatever_the_gap(tmp_path: Path) -> None:
    captures, streamer = _captures(tmp_path), OutputStreamer(max_chars=100)
    captures["stdout"].feed(b"one\n")
    assert streamer.take(captures, at=5.0) is not None
    captures["stdout"].feed(b"two\n")
    assert streamer.take(captures, at=5.01) is None  # within the gap
    params = streamer.take(captures, at=5.01, now=True)  # the script makes a call: what it printed goes first
    assert params is not None and _decoded(params, "stdout") == b"two\n"
    assert streamer.take(captures, at=5.02, now=True) is None  # nothing new


def test_past_its_head_a_stream_sends_its_end_at_most_every_tail_interval(tmp_path: Path) -> None:
    captures, streamer = _captures(tmp_path), OutputStreamer(max_chars=100)  # head 400 bytes, end 200
    captures["stdout"].feed(b"h" * 400 + b"x" * 1000 + b"END-1")
    params = streamer.take(captures, at=0.0)
    assert params is not None
    assert _decoded(params, "stdout") == b"h" * 400  # the head once, no further
    assert _decoded(params, "stdout_tail") == (b"x" * 1000 + b"END-1")[-200:]
    assert params["stdout_bytes"] == 1405
    captures["stdout"].feed(b"END-2")
    assert streamer.due_in(captures, 0.0) == pytest.approx(TAIL_INTERVAL)
    assert streamer.take(captures, at=TAIL_INTERVAL - 0.01) is None
    params = streamer.take(captures, at=TAIL_INTERVAL)
    assert params is not None and "stdout" not in params
    assert _decoded(params, "stdout_tail").endswith(b"END-1END-2") and params["stdout_bytes"] == 1410


def test_the_end_of_a_stream_spilled_past_memory_is_its_last_bytes(tmp_path: Path) -> None:
    capture = OutputCapture(str(tmp_path / "out.txt"), memory_bytes=64)
    capture.feed(b"a" * 50)
    assert capture.last(10) == b"a" * 10
    capture.feed(b"b" * 30)  # spills: the head keeps 64, the tail the rest
    assert capture.last(20) == b"b" * 20 and capture.last(40) == b"a" * 10 + b"b" * 30
    capture.feed(b"c" * 200)  # the tail drops what is past memory
    assert capture.last(8) == b"c" * 8
    capture.close()


# ---- the host's side: what is kept, and how it is shown ---------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_the_host_shows_a_short_output_whole_and_a_long_one_as_head_and_end() -> None:
    printed = StreamedOutput(max_chars=100)
    assert printed.text("stdout") is None
    printed.receive("output", {"stdout": _b64(b"one\n"), "stdout_bytes": 4, "stderr_bytes": 0})
    printed.receive("output", {"stdout": _b64(b"two\n"), "stdout_bytes": 8, "stderr_bytes": 0})
    assert printed.text("stdout") == "one\ntwo\n" and printed.text("stderr") is None
    printed.receive(
        "output", {"stdout": _b64(b"h" * 400), "stdout_tail": _b64(b"t" * 190 + b"LAST"), "stdout_bytes": 10_000}
    )
    text = printed.text("stdout")
    assert text is not None and text.startswith("one\ntwo\n") and text.endswith("tLAST")
    assert "10,000 bytes in all" in text and "the sandbox ended before it reported it whole" in text


@pytest.mark.parametrize(
    ("params", "complaint"),
    [
        ({"stdout": 12}, "not text"),
        ({"stdout": "!!not base64!!"}, "not base64"),
        ({"stderr_tail": ["x"]}, "not text"),
        ({"stdout_bytes": -1}, "not a count"),
        ({"stdout_bytes": True}, "not a count"),
    ],
)
def test_a_malformed_output_notification_is_a_protocol_violation(params: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        StreamedOutput(max_chars=100).feed(params)


def test_only_output_notifications_reach_an_execution() -> None:
    with pytest.raises(ProtocolError, match=r"unexpected notification 'workspace\.entries'"):
        StreamedOutput(max_chars=100).receive("workspace.entries", {"entries": []})


def test_the_host_keeps_no_more_than_the_head_and_end_it_shows() -> None:
    printed = StreamedOutput(max_chars=100)
    printed.feed({"stdout": _b64(b"a" * 10_000), "stdout_tail": _b64(b"z" * 10_000), "stdout_bytes": 20_000})
    printed.feed({"stdout": _b64(b"b" * 10_000)})
    assert len(printed._head["stdout"]) == 400 and printed._head["stdout"] == b"a" * 400
    assert len(printed._tail["stdout"]) == 200


def test_a_listener_hears_each_new_piece_of_a_head_once_and_one_that_raises_is_dropped() -> None:
    heard: list[tuple[str, bytes, int]] = []
    printed = StreamedOutput(max_chars=2, listener=lambda *piece: heard.append(piece))  # heads: 8 bytes
    printed.feed({"stdout": _b64(b"abc"), "stderr": _b64(b"e")})
    printed.feed({"stdout": _b64(b"defghij")})  # past the head: the rest comes with the ends
    assert heard == [("stdout", b"abc", 0), ("stderr", b"e", 0), ("stdout", b"defgh", 0)]

    def broken(name: str, data: bytes, skipped: int) -> None:
        raise RuntimeError("the terminal went away")

    failing = StreamedOutput(max_chars=100, listener=broken)
    failing.feed({"stdout": _b64(b"one\n")})  # the channel's reader goes on
    failing.feed({"stdout": _b64(b"two\n")})
    assert failing.listener is None and failing.text("stdout") == "one\ntwo\n"


def test_past_its_head_a_listener_hears_what_each_end_adds_and_how_much_it_skipped() -> None:
    # Before: nothing past the head (4 x output_chars bytes), so `exec`'s live output froze there till the end.
    heard: list[tuple[str, bytes, int]] = []
    printed = StreamedOutput(max_chars=2, listener=lambda *piece: heard.append(piece))  # head 8, end 4 bytes
    printed.feed({"stdout": _b64(b"01234567"), "stdout_bytes": 8})
    printed.feed({"stdout_tail": _b64(b"789a"), "stdout_bytes": 11})  # overlaps what was heard: only the new
    printed.feed({"stdout_tail": _b64(b"klmn"), "stdout_bytes": 24})  # 9 bytes printed between two ends: skipped
    printed.feed({"stdout_tail": _b64(b"klmn"), "stdout_bytes": 24})  # no news: nothing heard
    printed.feed({"stdout_tail": _b64(b"zzzz"), "stdout_bytes": 3})  # a count going back (hostile): nothing heard
    assert heard == [("stdout", b"01234567", 0), ("stdout", b"89a", 0), ("stdout", b"klmn", 9)]


def test_the_last_line_is_of_the_stream_that_printed_last() -> None:
    printed = StreamedOutput(max_chars=100)
    assert printed.last_line() is None
    printed.feed({"stdout": _b64(b"loading rows\n")})
    assert printed.last_line() == "loading rows"
    printed.feed({"stderr": _b64(b"\r 10%|#\r 20%|##")})  # a progress bar on stderr, redrawn with CR
    assert printed.last_line() == "20%|##"
    printed.feed({"stdout": _b64(b"done\n   \n")})
    assert printed.last_line() == "done"


def test_the_model_is_told_what_came_before_the_end() -> None:
    assert printed_before_end(None, None) == ""
    text = printed_before_end("rows: 3\n", "warning: slow\n")
    assert text.splitlines()[0].startswith("[what the script printed before the sandbox ended")
    assert "rows: 3\n\n[stderr]\nwarning: slow" in text


# ---- a real sandbox killed under its script ----------------------------------------------------------------


def _killed_on_second_call(backend: DockerBackend, docker: EngineWithCLI, code: str) -> SessionError:
    """Run ``code`` (which calls tools ``a`` then ``b``) and kill its container once ``b`` is called. The output the
    script printed before ``a`` reached the host before ``b``'s request: the supervisor sends it in the same round
    as ``a``'s request, and ``b`` is written only after ``a``'s answer."""
    second = threading.Event()

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name == "b":
            second.set()
        return {"content": [{"type": "text", "text": "ok"}]}

    outcome: list[BaseException] = []
    ended = threading.Event()
    with Sandbox(backend, tools=tool) as sb:

        def run() -> None:
            try:
                sb.execute(code, timeout=120)
            except BaseException as e:  # the test reads it
                outcome.append(e)
            ended.set()

        threading.Thread(target=run, daemon=True).start()
        assert second.wait(WAIT), "the script did not reach its second call"
        docker.run(["kill", sb.name])
        assert ended.wait(WAIT), "the execution did not end when its container died"
    (error,) = outcome
    assert isinstance(error, SessionError) and "status 137" in str(error)
    return error


CALLS = "from tool_tree.runtime import call_tool\ncall_tool('s', 'a', {})\ncall_tool('s', 'b', {})\nimport time\n"
CALLS += "time.sleep(600)\n"


@pytest.mark.docker
def test_a_killed_sandbox_gives_what_its_script_printed(docker_engine: EngineWithCLI, backend: DockerBackend) -> None:
    code = "import sys\nprint('rows: 3')\nprint('total: 42')\nprint('careful', file=sys.stderr)\n" + CALLS
    error = _killed_on_second_call(backend, docker_engine, code)
    assert error.stdout == "rows: 3\ntotal: 42\n"
    assert error.stderr == "careful\n"


@pytest.mark.docker
def test_a_killed_sandbox_gives_the_head_and_the_end_of_a_long_output(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, sample_tree: Path
) -> None:
    config = SandboxConfig(owner=test_config.owner, timeout=120, output_chars=1000)
    backend = DockerBackend(config, tree=sample_tree, docker=docker_engine)
    backend.prepare()
    # The end is sent at most every TAIL_INTERVAL: the script waits past one before its calls.
    code = "for i in range(20000):\n    print(f'line {i}')\nprint('LAST LINE')\nimport time\n"
    code += f"time.sleep({TAIL_INTERVAL + 1})\n" + CALLS
    error = _killed_on_second_call(backend, docker_engine, code)
    assert error.stdout is not None and error.stderr is None
    assert error.stdout.startswith("line 0\nline 1\n")
    assert error.stdout.rstrip("\n").endswith("line 19999\nLAST LINE")
    printed = sum(len(f"line {i}\n") for i in range(20000)) + len("LAST LINE\n")
    assert f"{printed:,} bytes in all" in error.stdout
    assert "the sandbox ended before it reported it whole" in error.stdout


@pytest.mark.docker
def test_a_gvisor_sandbox_past_its_memory_limit_gives_what_its_script_printed(
    runsc: EngineWithCLI,  # noqa: F811
    test_config: SandboxConfig,
) -> None:
    """The case the stream is for: under gVisor the memory limit ends the whole sandbox. The call after the print
    makes the order certain: what was printed goes to the host before the call does."""
    config = SandboxConfig(owner=test_config.owner, runtime="runsc", memory="256m")
    code = "print('allocating')\nfrom tool_tree.runtime import call_tool\ncall_tool('s', 'a', {})\n"
    code += "chunks = [bytearray(1 << 20) for _ in range(1024)]\n"
    tool = lambda server, name, arguments: {"content": []}  # noqa: E731
    with Sandbox(DockerBackend(config, docker=runsc), tools=tool) as sb, pytest.raises(SessionError) as ended:
        sb.execute(code, timeout=20)
    assert "past its memory limit" in str(ended.value)
    assert (ended.value.stdout, ended.value.stderr) == ("allocating\n", None)


@pytest.mark.docker
def test_many_executions_that_print_end_normally(backend: DockerBackend) -> None:
    """Output notifications never follow their execution's result (the host would take a stray one for a protocol
    violation and kill the sandbox): a session of many short printing executions ends every one normally."""
    with Sandbox(backend) as sb:
        for n in range(40):
            result = sb.execute(f"for i in range(200):\n    print({n}, i)\n")
            assert result.ok and result.stdout.endswith(f"{n} 199\n")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)  # the container to kill is found by the test label
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("media") + "sandbox:\n  timeout: 120\n", encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    return config, tree


EXEC_SCRIPT = (
    "import sys\nprint('made the report')\nprint('half done', file=sys.stderr)\n"
    "from servers.media import list_gallery\nlist_gallery()\nlist_gallery()\n"
    "import threading\nthreading.Event().wait()  # until its container is killed\n"
)


@pytest.mark.docker
def test_exec_prints_what_the_script_printed_before_its_sandbox_was_killed(
    docker_engine: EngineWithCLI,
    project: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert exec_killed_after(docker_engine, project, tmp_path, EXEC_SCRIPT, 2) == 4
    out, err = capsys.readouterr()
    assert out == "made the report\n"
    assert err.startswith("half done\ntooltree: error: the sandbox failed: ")
    assert "the sandbox did not report the script's end (the output above is what it sent before)" in err


@pytest.mark.docker
def test_exec_json_holds_what_the_script_printed_before_its_sandbox_was_killed(
    docker_engine: EngineWithCLI,
    project: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert exec_killed_after(docker_engine, project, tmp_path, EXEC_SCRIPT, 2, "--json") == 4
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (report["stdout"], report["stderr"]) == ("made the report\n", "half done\n")
    assert report["exit_code"] is None and "status 137" in report["sandbox_error"]
    assert "(the JSON's stdout and stderr hold what it sent before)" in err
