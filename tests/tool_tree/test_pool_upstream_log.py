"""A server that fails under the pool is said in the ``tool_tree.upstream`` log (which `tooltree serve` writes to its
stderr, the log an MCP client keeps): its start-up failure or its end, redacted, with its stderr's tail; and a
server's error message is redacted of its configuration's secrets before the caller sees it."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import RAW_SERVER
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool, ServerUnavailable
from tooltree_cli.logs import upstream_failures

SECRET = "sk-upstream-0123456789"


def raw(folder: Path, spec: dict[str, Any]) -> ServerConfig:
    path = folder / "raw.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return ServerConfig(
        name="raw", command=sys.executable, args=(str(RAW_SERVER), str(path)), env={"API_TOKEN": SECRET}, timeout=30
    )


def upstream(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "tool_tree.upstream"]


@pytest.mark.anyio
async def test_a_server_that_ends_under_a_call_is_logged_with_its_stderr_and_without_its_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: nothing was logged; only the caller (the model, in serve) saw it.
    caplog.set_level(logging.WARNING, logger="tool_tree.upstream")
    async with ServerPool([raw(tmp_path, {"stderr": f"token {SECRET} loaded\n"})]) as pool:
        with pytest.raises(ServerUnavailable):
            await pool.call("raw", "crash", {})
        (said,) = upstream(caplog)
        assert (
            said.startswith("server 'raw' ended: it died before answering a call")
            and "the next call starts it again" in said
        )
        assert "crashing on purpose" in said and "token [redacted API_TOKEN] loaded" in said and SECRET not in said
        await pool.call("raw", "pid", {})  # started again: nothing more to say
    assert len(upstream(caplog)) == 1


@pytest.mark.anyio
async def test_a_server_that_cannot_start_is_logged_once_per_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tool_tree.upstream")
    async with ServerPool([raw(tmp_path, {"behavior": "exit_at_start", "stderr": f"bad token {SECRET}\n"})]) as pool:
        with pytest.raises(ServerUnavailable):
            await pool.call("raw", "pid", {})
    (said,) = upstream(caplog)
    assert said.startswith("server 'raw' could not start: ") and "bad token [redacted API_TOKEN]" in said
    assert SECRET not in said


@pytest.mark.anyio
async def test_a_servers_error_message_is_redacted_of_its_secrets(tmp_path: Path) -> None:
    # Before: a server refusing its key quoted it, and the caller (the model) read it whole.
    async with ServerPool([raw(tmp_path, {})]) as pool:
        result = await pool.call("raw", "fail", {"code": -32000, "message": f"key {SECRET} refused"})
    text = result["content"][0]["text"]
    assert "key [redacted API_TOKEN] refused" in text and SECRET not in text


def test_exec_and_agent_leave_the_upstream_log_to_their_own_reports_and_serve_writes_it() -> None:
    log = logging.getLogger("tool_tree.upstream")
    try:
        upstream_failures(shown=False)
        assert not log.isEnabledFor(logging.WARNING)
        upstream_failures(shown=True)
        assert log.isEnabledFor(logging.WARNING)
    finally:
        log.setLevel(logging.NOTSET)
