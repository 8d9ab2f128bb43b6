"""A client's cancel of a passthrough call cancels the call upstream: the request ends, the upstream call is
cancelled (the audit log says so), and the session's next calls go on. Before: the call ran on to its end (a 30 s
call cancelled at once held a worker thread and the server's place for 30 s; the audit log said ``ok``).

End to end: a real serve process and the SDK client over stdio, the sample servers (media's ``slow_echo``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.serve.conftest import Serve, make_serve, marked_processes, serve_tree
from tests.support import wait_until

__all__ = ["make_serve", "serve_tree"]  # fixtures

WAIT = 60.0


def records(audit: Path) -> list[dict[str, Any]]:
    if not audit.exists():
        return []
    return [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_cancelled_passthrough_call_is_cancelled_upstream(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    audit = tmp_path / "audit.jsonl"
    serve = make_serve(extra=["--passthrough", "media.slow_echo", "--audit", str(audit)])
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:

        async def call() -> None:
            await client.call_tool("media__slow_echo", {"text": "late", "seconds": 30})

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            # The media server starts for this call: once it runs, the call is in flight.
            await anyio.to_thread.run_sync(wait_until, lambda: bool(marked_processes(serve.mark)), "the media server")
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the abandoned call
        await anyio.to_thread.run_sync(wait_until, lambda: bool(records(audit)), "the call's audit record")
        (record,) = records(audit)
        assert (record["tool"], record["outcome"]) == ("slow_echo", "cancelled")
        assert record["ms"] < 20_000
        again = await client.call_tool("media__slow_echo", {"text": "next", "seconds": 0})
        assert not again.is_error and again.content[0].text == "next"


def test_a_cancel_that_comes_before_the_call_was_handed_over_cancels_it_as_it_is() -> None:
    import concurrent.futures

    from sandbox.bridge import CallCancel

    early, late = CallCancel(), CallCancel()
    early.cancel()
    handed: concurrent.futures.Future[None] = concurrent.futures.Future()
    early.started(handed)
    assert handed.cancelled()
    running: concurrent.futures.Future[None] = concurrent.futures.Future()
    late.started(running)
    assert not running.cancelled()
    late.cancel()
    assert running.cancelled() and late.cancelled


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_long_passthrough_call_reports_progress_while_it_runs(make_serve: Callable[..., Serve]) -> None:
    # Before: none (only execute_python had them), so a client's own request timeout could end a call still working.
    import mcp

    serve = make_serve(extra=["--passthrough", "media.slow_echo"])  # progress_interval 0.2 s in these setups
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        result = await client.call_tool(
            "media__slow_echo", {"text": "done", "seconds": 1.5}, progress_callback=progress
        )
    assert not result.is_error and result.content[0].text == "done"  # type: ignore[union-attr]
    assert len(seen) >= 2, seen
    assert all(total is None and (message or "").startswith("running for ") for _, total, message in seen)
    assert [done for done, _, _ in seen] == sorted(done for done, _, _ in seen)
