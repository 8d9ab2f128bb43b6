"""What a script prints on stdout and stderr reaches a listener (`tooltree exec`'s live output) in the order the
sandbox read it: the supervisor's ``output`` notification says how the two heads' new bytes interleave
(`sandbox._supervisor.stream`), the host tells its listener in that order (`sandbox.streamed`), and the heads' last
bytes go before the result. Before, each notification gave stdout's bytes, then stderr's, and the end stdout's rest,
then stderr's: ``print('a', end='', flush=True)``, a warning on stderr and ``print(' done')`` showed "a done", then
the warning.

Real parts: the streamer's bookkeeping on real captures; a real sandbox whose script waits until its pipe is read.
"""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox._supervisor.capture import OutputCapture
from sandbox._supervisor.stream import ORDER_RUNS, OutputStreamer
from sandbox.errors import ProtocolError
from sandbox.streamed import StreamedOutput


def _read(captures: dict[str, OutputCapture], streamer: OutputStreamer, name: str, data: bytes) -> None:
    """As the supervisor's pump reads a pipe: into the capture, and its place among the other stream's bytes."""
    capture = captures[name]
    capture.feed(data)
    streamer.read(name, capture.total - len(data), capture.total)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def test_a_notification_says_how_the_two_streams_new_bytes_interleave(tmp_path: Path) -> None:
    captures = {name: OutputCapture(str(tmp_path / f"{name}.txt")) for name in ("stdout", "stderr")}
    streamer = OutputStreamer(max_chars=100)
    _read(captures, streamer, "stdout", b"a")
    params = streamer.take(captures, at=0.0)
    assert params is not None and "order" not in params  # one stream: nothing to order
    for name, data in (("stderr", b"W\n"), ("stdout", b" done\n"), ("stdout", b"more\n"), ("stderr", b"end\n")):
        _read(captures, streamer, name, data)
    params = streamer.take(captures, at=1.0)
    assert params is not None
    assert params["order"] == [["stderr", 2], ["stdout", 11], ["stderr", 4]]
    assert streamer.runs == []  # every byte read was sent


def test_past_the_runs_it_keeps_a_streams_bytes_join_its_last_run(tmp_path: Path) -> None:
    captures = {name: OutputCapture(str(tmp_path / f"{name}.txt")) for name in ("stdout", "stderr")}
    streamer = OutputStreamer(max_chars=10_000)
    for _ in range(ORDER_RUNS // 2 + 5):
        _read(captures, streamer, "stdout", b"o")
        _read(captures, streamer, "stderr", b"e")
    assert len(streamer.runs) == ORDER_RUNS
    params = streamer.take(captures, at=0.0)
    assert params is not None
    order = params["order"]
    assert sum(n for name, n in order if name == "stdout") == captures["stdout"].total
    assert sum(n for name, n in order if name == "stderr") == captures["stderr"].total


def test_the_host_tells_its_listener_the_pieces_in_the_order_given() -> None:
    heard: list[tuple[str, bytes, int]] = []
    printed = StreamedOutput(max_chars=100, listener=lambda *piece: heard.append(piece))
    printed.feed({"stdout": _b64(b"a")})
    printed.feed({"stdout": _b64(b" done\n"), "stderr": _b64(b"W\n"), "order": [["stderr", 2], ["stdout", 6]]})
    assert heard == [("stdout", b"a", 0), ("stderr", b"W\n", 0), ("stdout", b" done\n", 0)]
    assert printed.last_line() == "a done" and printed.text("stdout") == "a done\n"  # the streams stay apart


@pytest.mark.parametrize(
    "order",
    [
        "stdout",
        [["stdin", 2]],
        [["stdout", 0]],
        [["stdout", True]],
        [["stdout"]],
        [["stdout", 1]] * 5000,
    ],
)
def test_a_malformed_order_is_a_protocol_violation(order: Any) -> None:
    with pytest.raises(ProtocolError, match="order"):
        StreamedOutput(max_chars=100).feed({"stdout": _b64(b"x"), "order": order})


WAIT_READ = """
import fcntl, struct, sys, termios, time

def read_by_the_sandbox(fd):
    # Waits until the supervisor has read what this process wrote to the pipe ``fd`` (bounded).
    deadline = time.monotonic() + 30
    while struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\\0" * 4))[0] and time.monotonic() < deadline:
        time.sleep(0.001)
"""


@pytest.mark.docker
def test_a_listener_hears_stdout_and_stderr_in_the_order_the_script_printed_them(backend: DockerBackend) -> None:
    heard: list[tuple[str, bytes]] = []
    code = WAIT_READ + (
        "print('a', end='', flush=True)\nread_by_the_sandbox(1)\n"
        "print('W', file=sys.stderr, flush=True)\nread_by_the_sandbox(2)\n"
        "print(' done', flush=True)\n"
    )
    with Sandbox(backend) as sb:
        result = sb.execute(code, timeout=60, on_output=lambda name, data, skipped: heard.append((name, data)))
    assert result.ok, result.error
    assert (result.stdout, result.stderr) == ("a done\n", "W\n")
    joined = [(name, b"".join(data for _, data in run)) for name, run in itertools.groupby(heard, lambda p: p[0])]
    assert joined == [("stdout", b"a"), ("stderr", b"W\n"), ("stdout", b" done\n")]  # before: "a done\n", then "W\n"
