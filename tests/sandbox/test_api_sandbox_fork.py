"""A `Sandbox` or a `SandboxPool` used in a fork of the process that started it: refused at once there, and the
parent's container left alone.

Before, the child sent its request on the connection it shared with the parent; the answer went to the parent's
reader, which took it for a protocol violation and destroyed the parent's container, and the child waited out its
timeout (20 s with a real container). A forked pool handed the child a warm container the parent still held.
Run against a `PipeSupervisor` (the supervisor's side played by the test), which sees every frame either sends.
"""

from __future__ import annotations

import base64
import os
import threading

from sandbox import Sandbox, SandboxPool
from sandbox.bridge import FunctionBridge
from sandbox.results import ExecutionResult
from tests.sandbox.test_api_sandbox_args import next_request, no_tools
from tests.security.test_bridge_input import CONFIG, EMPTY_RESULT, PipeBackend, PipeSupervisor
from tests.support import in_a_fork


def test_a_forked_child_cannot_use_or_destroy_its_parents_session() -> None:
    peer = PipeSupervisor()
    sb = Sandbox(PipeBackend(peer), tools=FunctionBridge(no_tools))
    sb.start()
    results: list[ExecutionResult] = []
    running = threading.Thread(target=lambda: results.append(sb.execute("print('done')")))
    running.start()  # the fork happens during an execution: the session's lock is held in the child too
    execute = peer.read()
    try:

        def child() -> str:
            try:
                sb.read_file("from-the-child")
            except BaseException as e:
                outcome = f"{type(e).__name__}: {e}"
            sb.close()  # leaves the parent's container alone
            sb.kill()
            return outcome + f" | cancel={sb.cancel()}"

        outcome = in_a_fork(child)
        assert outcome.startswith(f"SessionError: this sandbox session runs in process {os.getpid()}, not in this one")
        assert outcome.endswith("start a new Sandbox here | cancel=False")
        assert not peer.killed.is_set()
        peer.send({"id": execute["id"], "result": EMPTY_RESULT})
        running.join(30)
        assert results[0].stdout == "done\n"
        player, seen = next_request(peer, {"data": base64.b64encode(b"parent").decode(), "size": 6})
        assert sb.read_file("mine") == b"parent"
        player.join(30)
        assert [r["params"]["path"] for r in seen] == ["mine"]  # the first frame the container got is the parent's
    finally:
        sb.kill()


class Pipes(PipeBackend):
    """A fresh pipe supervisor for every launch."""

    def __init__(self) -> None:  # no peer until the first launch
        self.config = CONFIG
        self.peers: list[PipeSupervisor] = []

    def launch(self, session_id: str) -> PipeSupervisor:
        self.peer = PipeSupervisor()
        self.peers.append(self.peer)
        return super().launch(session_id)


def test_a_forked_child_cannot_take_its_parents_warm_sandboxes() -> None:
    backend = Pipes()
    with SandboxPool(backend, size=1) as pool:
        pool.wait_ready(timeout=30)
        peer = backend.peers[0]

        def child() -> str:
            sandbox = pool.acquire(tools=FunctionBridge(no_tools), timeout=5)
            return f"acquired {sandbox.name}"

        outcome = in_a_fork(child)
        assert outcome == (
            f"SessionError: this SandboxPool belongs to process {os.getpid()}, not to this one (a fork of it shares "
            "its warm sandboxes' connections): make a new SandboxPool here"
        )
        assert in_a_fork(lambda: str(pool.close()) + str(pool.closed)) == "NoneTrue"
        assert not pool.closed and not peer.killed.is_set()  # the child's close left the parent's pool as it was
        session = pool.acquire(tools=FunctionBridge(no_tools), timeout=30)
        session.kill()
