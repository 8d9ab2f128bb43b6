"""Host cost of frames a compromised supervisor could send: what the host's channel pays to refuse them.

A script cannot put these frames on the channel — the supervisor holds it, and the script's own
worker refuses to send a call of too many values — so they are sent by a stand-in supervisor on
real pipes that drives a real `Sandbox` session (its channel, frame reader and request routing;
the tool bridge behind it is an in-process function). Each case runs in a fresh process, measured
like `_hostile`: peak host RSS above the baseline taken once the session is up, host CPU of the
whole process (the stand-in only writes frames built before the baseline), and what the stand-in
got back for each call.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import proc_status
from _hostile import TIMEOUT_S, soak_owner

MIB = 1024 * 1024


@dataclass(frozen=True)
class ForgedCase:
    name: str
    what: str
    calls: int
    frame_bytes: int


CASES = [
    ForgedCase("forged_inflated_frame", "a supervisor's tool call: one 16 MiB frame of [{}, {}, …]", 1, 16 * MIB),
    ForgedCase("forged_in_flight", "a supervisor's 16 tool calls of 4 MiB of [{}, {}, …] each, at once", 16, 4 * MIB),
]


def tool_call_frame(call_id: str, frame_bytes: int) -> bytes:
    """A tool-call frame of ``frame_bytes`` bytes whose arguments are ``{"pad": [{}, {}, …]}``."""
    head = b'{"id":"%s","method":"tool_call","params":{"server":"s","tool":"t","arguments":{"pad":[' % call_id.encode()
    tail = b"]}}}"
    count = (frame_bytes - len(head) - len(tail) + 1) // 3
    body = head + b",".join([b"{}"] * count) + tail
    return len(body).to_bytes(4, "big") + body


class _Peer:
    """The supervisor's side of two pipes, as a `Connection` for the host."""

    def __init__(self) -> None:
        from sandbox._supervisor.wire import FrameReader

        to_peer_r, to_peer_w = os.pipe()
        from_peer_r, self.out = os.pipe()
        self.name = "forged-supervisor"
        self.stdin = os.fdopen(to_peer_w, "wb", buffering=0)
        self.stdout = os.fdopen(from_peer_r, "rb")
        self.stderr = None
        self.reader = FrameReader(to_peer_r, strict=False)
        self.killed = threading.Event()

    def close(self, timeout: float = 5.0) -> None:
        self.stdin.close()

    def kill(self) -> None:
        self.killed.set()
        os.close(self.out)

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.out, view) :]


def run_case(case: ForgedCase) -> dict[str, Any]:
    """Run one case in this process and measure it."""
    from sandbox import Sandbox, SandboxConfig
    from sandbox._supervisor.wire import encode_frame
    from sandbox.backend import SandboxBackend
    from sandbox.bridge import FunctionBridge
    from sandbox.errors import SandboxError

    peer = _Peer()

    class Backend(SandboxBackend):
        config = SandboxConfig(owner=soak_owner(), timeout=TIMEOUT_S)

        def prepare(self) -> None:
            pass

        def launch(self, session_id: str) -> Any:
            peer.send(encode_frame({"method": "ready", "params": {"uid": 10001}}))
            return peer

        def verify_ready(self, connection: Any, status: Mapping[str, Any]) -> None:
            pass

    served: list[str] = []
    bridge = FunctionBridge(lambda s, t, a: served.append(t) or {"content": []})
    frames = [tool_call_frame(f"c{i}", case.frame_bytes) for i in range(case.calls)]
    answers: list[str] = []

    def play() -> None:
        request = peer.reader.read()
        assert request is not None and request["method"] == "execute"
        for frame in frames:
            peer.send(frame)
        while len(answers) < len(frames):
            reply = peer.reader.read()
            if reply is None:
                return
            if isinstance(reply.get("id"), str):
                error = reply.get("error")
                answers.append(str(error.get("code")) if isinstance(error, dict) else "ok")
        result = {"exit_status": 0, "error": None, "traceback": None, "stdout": {"head": "", "truncated": False}}
        peer.send(encode_frame({"id": request["id"], "result": result}))

    out: dict[str, Any] = {"case": case.name, "what": case.what}
    sb = Sandbox(Backend(), tools=bridge).start()
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # reset the peak RSS to now
    base_rss = proc_status("VmRSS")
    cpu0 = time.process_time()
    started = time.perf_counter()
    player = threading.Thread(target=play, daemon=True)
    player.start()
    try:
        sb.execute("forged")
        error = None
    except SandboxError as e:
        error = f"{type(e).__name__}: {str(e)[:200]}"
    player.join(60)
    out["wall_s"] = round(time.perf_counter() - started, 2)
    out["host_cpu_s"] = round(time.process_time() - cpu0, 2)
    out["host_peak_rss_mib"] = round(proc_status("VmHWM") / MIB, 1)
    out["host_peak_above_base_mib"] = round((proc_status("VmHWM") - base_rss) / MIB, 1)
    counts = {code: answers.count(code) for code in sorted(set(answers))}
    out["saw"] = (", ".join(f"{n} × {code}" for code, n in counts.items()) or None, error)
    out["session_killed"] = peer.killed.is_set()
    out["calls_served"] = len(served)
    if peer.killed.is_set():
        sb.kill()
    else:
        sb.close()
    return out
