"""`tooltree serve` spoken to line by line over stdio, to control exactly when stdin closes."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO

WAIT = 90.0


class RawStdio:
    """`tooltree serve` spoken to line by line, to control exactly when stdin closes."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        long_script: str = "import time\ntime.sleep(600)",
        *,
        cwd: str | Path = REPO,
    ) -> None:
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.long_script = long_script
        self.messages: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self.changed = threading.Condition()
        self._threads = [threading.Thread(target=self._read, daemon=True), threading.Thread(target=self._drain)]
        for t in self._threads:
            t.start()

    def __enter__(self) -> RawStdio:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """End as a client that leaves (stdin closed, the process waited for up to `WAIT` seconds, which raises if it
        runs on), then `close`."""
        try:
            self.close_stdin()
        finally:
            self.close()

    def close_stdin(self) -> int:
        """Close the client's side of stdin, as a client that leaves does; the exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=WAIT)

    def close(self) -> int:
        """Kill the process if it still runs; its exit status. Its pipes are closed."""
        if self.proc.poll() is None:
            self.proc.kill()
        code = self.proc.wait(timeout=WAIT)
        for t in self._threads:
            t.join(timeout=WAIT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        return code

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.messages.append(json.loads(line))
                self.changed.notify_all()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.changed:
                self.stderr.append(line)
                self.changed.notify_all()

    def wait_for_stderr(self, text: str) -> None:
        """Wait until a line of stderr contains ``text``."""
        with self.changed:
            found = self.changed.wait_for(lambda: any(text in line for line in self.stderr), WAIT)
        if not found:
            pytest.fail(f"no {text!r} on tooltree serve's stderr; got {''.join(self.stderr)}")

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def wait_for(self, test: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        with self.changed:
            found = self.changed.wait_for(lambda: next((m for m in self.messages if test(m)), None), WAIT)
        if not found:
            pytest.fail(f"no {what} from tooltree serve; got {self.messages}")
        return found

    def initialize(self) -> dict[str, Any]:
        """The MCP handshake (request id 1); the initialize result."""
        version = "2025-11-25"
        client = {"name": "raw-test", "version": "0"}
        self.send({"id": 1, "method": "initialize",
                   "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": client}})  # fmt: skip
        answer = self.wait_for(lambda m: m.get("id") == 1, "initialize result")
        self.send({"method": "notifications/initialized"})
        return answer

    def start_long_execution(self) -> None:
        self.initialize()
        params = {"name": "execute_python", "arguments": {"code": self.long_script}, "_meta": {"progressToken": "p"}}
        self.send({"id": 2, "method": "tools/call", "params": params})
        self.wait_for(lambda m: m.get("method") == "notifications/progress", "progress notification")
