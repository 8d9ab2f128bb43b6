"""Oversized frames on the real Docker path: honest limits compose, and a hostile flood never holds the host.

Issue case: a 20 MB tool argument, or four ``show_image`` calls of 3 MiB (each within the per-image
limit) used to make a frame over the 16 MiB cap; the host then killed the container from its
reader thread while nothing drained the stream, and hung for 60 s; the workspace was lost.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SessionError
from sandbox._supervisor.limits import MAX_IMAGES_TOTAL_BYTES, MAX_READ_BYTES
from sandbox.channel import SupervisorChannel
from sandbox.docker_backend import DockerConnection
from tests.docker_cli import EngineWithCLI
from tests.image_samples import png_expression

pytestmark = pytest.mark.docker

PNG_3_MIB = png_expression(3 * 1024 * 1024 - 81)  # a whole PNG of 3 MiB


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((server, tool))
        return {"content": [{"type": "text", "text": "ok"}]}


def test_a_20_mb_argument_fails_that_call_in_the_script_and_the_session_and_workspace_live_on(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    tools = Recorder()
    with Sandbox(bare_backend, tools=tools, workspace=tmp_path) as sb:
        result = sb.execute(
            "from tool_tree.runtime import call_tool, ToolCallError\n"
            "try:\n    call_tool('crm', 'note', {'text': 'x' * 20_000_000})\n"
            "except ToolCallError as e:\n    print(e.code, e.message)\n"
            "open('kept.txt', 'w').write('kept')\n"
        )
        assert result.ok, result.error
        assert result.stdout.startswith("too_large the arguments are too large to send: a message of 200")
        assert "over the 16777216-byte frame cap" in result.stdout
        assert tools.calls == []
        assert sb.execute("print(2)").stdout == "2\n"
    assert (tmp_path / "kept.txt").read_text(encoding="utf-8") == "kept"


def test_images_past_the_execution_total_fail_in_the_script_and_those_within_it_arrive(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    with Sandbox(bare_backend, workspace=tmp_path) as sb:
        result = sb.execute(
            f"for i in range(4):\n    try:\n        show_image({PNG_3_MIB})\n"
            "    except ValueError as e:\n        print(i, e)\n"
            "open('kept.txt', 'w').write('kept')\n"
        )
        assert result.ok, result.error
        assert len(result.images) == 2 and all(len(image.data) == 3 << 20 for image in result.images)
        lines = result.stdout.splitlines()
        assert [line.split()[0] for line in lines] == ["2", "3"]
        assert f"the images of one execution may hold {MAX_IMAGES_TOTAL_BYTES:,} bytes together" in lines[0]
        assert sb.execute("print(3)").stdout == "3\n"
    assert (tmp_path / "kept.txt").read_text(encoding="utf-8") == "kept"


def test_reading_a_file_larger_than_a_frame_returns_its_start_and_the_session_lives_on(
    bare_backend: DockerBackend,
) -> None:
    with Sandbox(bare_backend) as sb:
        assert sb.execute("open('big.bin', 'wb').write(b'y' * (20 << 20))").ok
        data = sb.read_file("big.bin", max_bytes=32 << 20)
        assert len(data) == MAX_READ_BYTES and set(data) == {ord("y")}
        assert sb.execute("print(4)").stdout == "4\n"


FLOOD = (
    "import os, time\n"
    "os.write(1, b'\\xff\\xff\\xff\\xff')\n"  # a frame header far over the cap ...
    "chunk = b'z' * (1 << 20)\n"
    "for _ in range(256):\n    os.write(1, chunk)\n"  # ... then 256 MiB nobody will read
    "time.sleep(600)\n"
)


def test_a_container_flooding_an_oversized_frame_is_removed_without_waiting_for_its_stream(
    docker_engine: EngineWithCLI, bare_backend: DockerBackend
) -> None:
    """Not our supervisor: any process holding a container's stdout, as a compromised one would."""
    owner = bare_backend.config.owner
    spec = {
        "image": bare_backend.image,
        "command": ["python3", "-c", FLOOD],
        "name": f"tooltree-flood-{uuid.uuid4().hex[:12]}",
        "stdin_open": True,
        "labels": {"tooltree.owner": owner, "tooltree.session": "flood"},
        "host_config": {"NetworkMode": "none", "LogConfig": {"Type": "none", "Config": {}}, "AutoRemove": True},
        "use_config_proxy": False,
    }
    container = docker_engine.create_container(spec)
    attached = docker_engine.attach(container)
    connection = DockerConnection(docker_engine, container, spec["name"], attached)
    docker_engine.watch_death(container, connection.on_death)
    docker_engine.start(container)
    channel = SupervisorChannel(connection, "flood")
    failed = threading.Event()
    errors: list[str] = []

    def wait() -> None:
        try:
            channel.wait_ready(120)
        except SessionError as e:
            errors.append(str(e))
        failed.set()

    threading.Thread(target=wait, daemon=True).start()
    assert failed.wait(30), "the host is still busy with a container that flooded it"
    assert errors and "exceeds the 16777216-byte cap" in errors[0]
    # Removed before the waiter learned of it, as the command line sees it.
    assert docker_engine.text(["ps", "--all", "--quiet", "--filter", f"name={spec['name']}"]) == ""


def test_a_script_writing_its_supervisor_a_frame_of_too_many_values_restarts_only_its_interpreter(
    bare_backend: DockerBackend,
) -> None:
    # The worker refuses such a call itself (arguments_too_large); a script that writes the frame on the
    # worker's control pipe directly gets its interpreter replaced, unparsed, and the session goes on.
    tools = Recorder()
    forge = (
        "import json, os, struct, sys\n"
        "x = 1\n"
        "body = json.dumps({'type': 'call', 'id': 1, 'method': 'tool_call', 'params': {'server': 'crm', "
        "'tool': 'note', 'arguments': {'pad': [0] * 200_000}}}).encode()\n"
        "worker = sys.modules['tooltree_supervisor.worker']\n"
        "os.write(worker._connection._writer.fd, struct.pack('>I', len(body)) + body)\n"
        "import time\ntime.sleep(30)\n"
    )
    with Sandbox(bare_backend, tools=tools) as sb:
        result = sb.execute(forge)
        assert result.error is not None and result.state_reset
        assert result.error.startswith("the interpreter sent its supervisor a bad frame (a frame of more than 150,000")
        assert tools.calls == []
        assert sb.execute("print('x' in dir())").stdout == "False\n"


@pytest.mark.parametrize("call_id", ["'abc'", "[1]", "None"])
def test_a_script_writing_its_supervisor_a_call_whose_id_is_not_a_number_restarts_only_its_interpreter(
    bare_backend: DockerBackend, tmp_path: Path, call_id: str
) -> None:
    # Before: int() of the id raised in the supervisor's thread that watches the worker; the execution never ended,
    # the host destroyed the sandbox after 35 s ("did not report back"), its workspace unsaved and the session closed.
    tools = Recorder()
    forge = (
        "import json, os, struct, sys, time\n"
        "open('/workspace/kept.txt', 'w').write('kept')\n"
        f"body = json.dumps({{'type': 'call', 'id': {call_id}, 'method': 'tool_call', 'params': {{'server': 'crm', "
        "'tool': 'note', 'arguments': {}}}).encode()\n"
        "worker = sys.modules['tooltree_supervisor.worker']\n"
        "os.write(worker._connection._writer.fd, struct.pack('>I', len(body)) + body)\n"
        "time.sleep(30)\n"
    )
    with Sandbox(bare_backend, tools=tools, workspace=tmp_path) as sb:
        result = sb.execute(forge)
        assert result.error is not None and result.state_reset and not result.timed_out
        assert result.error.startswith(
            "the interpreter sent its supervisor a bad frame (a call's id must be an integer"
        )
        assert tools.calls == []
        assert sb.execute("print(2)").stdout == "2\n"
    assert (tmp_path / "kept.txt").read_text(encoding="utf-8") == "kept"
