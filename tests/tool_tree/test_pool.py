"""`ServerPool` against real server processes: the sample servers and a raw scriptable one."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import stat
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support import alive
from tool_tree.config import Config, ServerConfig
from tool_tree.pool import CallFailure, ServerPool, ServerUnavailable, UnknownServerError
from tool_tree.stderr_log import StderrLog

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "tests" / "servers" / "raw_server.py"
README = (REPO / "README.md").read_text(encoding="utf-8")


def sample(name: str, **kw: Any) -> ServerConfig:
    return ServerConfig(
        name=name, command=sys.executable, args=(str(REPO / "examples/sample_servers" / f"{name}.py"),), **kw
    )


def raw(tmp_path: Path, name: str = "raw", **spec: Any) -> ServerConfig:
    path = tmp_path / f"{name}.json"
    path.write_text(
        json.dumps({"pages": [[{"name": "pid", "inputSchema": {"type": "object"}}]], **spec}), encoding="utf-8"
    )
    return ServerConfig(name=name, command=sys.executable, args=(str(RAW), str(path)), timeout=10)


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


async def test_one_session_serves_many_calls_and_keeps_server_state() -> None:
    async with ServerPool([sample("crm")]) as pool:
        await pool.call(
            "crm",
            "update_record",
            {
                "object_type": "opportunity",
                "record_id": "0065e000009Q3PR",
                "fields": {"description": "set by the pool test"},
            },
        )
        record = await pool.call("crm", "get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})
        assert "set by the pool test" in json.dumps(record)
        assert pool.restarts("crm") == 0


async def test_images_and_structured_content_come_back_in_wire_format() -> None:
    async with ServerPool([sample("media")]) as pool:
        chart = await pool.call("media", "render_chart", {"title": "Q3", "values": [1, 2, 3], "kind": "bar"})
        image = next(b for b in chart["content"] if b["type"] == "image")
        assert image["mimeType"] == "image/png" and image["data"].startswith("iVBORw0KGgo")
        info = await pool.call(
            "media", "get_image_info", {"source": {"kind": "gallery", "image_id": "img_q3_forecast"}}
        )
        assert info["structuredContent"]["mime_type"] == "image/png"


async def test_tool_errors_and_protocol_errors_are_error_results_not_exceptions() -> None:
    async with ServerPool([sample("media")]) as pool:
        failed = await pool.call("media", "fail", {"message": "quota exceeded"})
        assert failed["isError"] is True and "quota exceeded" in text(failed)
        protocol = await pool.call("media", "fail", {"message": "bad thing", "kind": "protocol_error"})
        assert protocol["isError"] is True and "bad thing" in text(protocol)


async def test_calls_to_one_server_run_concurrently() -> None:
    async with ServerPool([sample("media")]) as pool:
        results: list[dict[str, Any]] = []

        async def one() -> None:
            results.append(await pool.call("media", "rendezvous", {"group": "g", "parties": 5, "timeout": 20}))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(one)
        assert [r.get("isError", False) for r in results] == [False] * 5


async def test_a_slow_call_times_out_as_an_error_result_and_the_session_stays_usable() -> None:
    async with ServerPool([sample("media")]) as pool:
        slow = await pool.call("media", "slow_echo", {"text": "x", "seconds": 30}, timeout=0.5)
        assert slow["isError"] is True and "timed out after 0.5 s" in text(slow)
        fast = await pool.call("media", "slow_echo", {"text": "still here", "seconds": 0})
        assert text(fast) == "still here"


async def test_a_crashed_server_is_restarted_on_the_next_call(tmp_path: Path) -> None:
    async with ServerPool([raw(tmp_path)]) as pool:
        first_pid = text(await pool.call("raw", "pid", {}))
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("raw", "crash", {})
        assert "died before answering the call" in str(info.value)
        assert "crashing on purpose" in info.value.stderr_tail
        second_pid = text(await pool.call("raw", "pid", {}))
        assert second_pid != first_pid
        assert pool.restarts("raw") == 1


@pytest.mark.parametrize(
    ("crash", "said"),
    [({}, "it exited with status 9"), ({"signal": signal.SIGKILL}, "it was killed by signal 9 (SIGKILL)")],
)
async def test_a_server_that_dies_during_a_call_is_said_how_it_ended(
    tmp_path: Path, crash: dict[str, Any], said: str
) -> None:
    # Before: "the server died during the call (Connection closed)", whatever its exit status or signal.
    async with ServerPool([raw(tmp_path)]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("raw", "crash", crash)
        assert info.value.reason == f"the server died before answering the call (Connection closed): {said}"
        assert "crashing on purpose" in info.value.stderr_tail


async def test_a_server_killed_between_calls_is_restarted_before_the_next_call_which_goes_through(
    tmp_path: Path,
) -> None:
    # Before: the next call failed, "the server died during the call (Connection closed)", though it was never
    # sent (the session knew the connection had closed); only the call after that restarted the server.
    async with ServerPool([raw(tmp_path)]) as pool:
        first_pid = int(text(await pool.call("raw", "pid", {})))
        os.kill(first_pid, signal.SIGKILL)
        with anyio.move_on_after(30):  # until the session has read the end of its stdout (old code: never says so)
            while pool.state("raw") != "stopped":
                await anyio.sleep(0.02)
        second_pid = int(text(await pool.call("raw", "pid", {})))
        assert second_pid != first_pid
        assert text(await pool.call("raw", "count", {})) == "2"  # the new process got the call once
        assert pool.restarts("raw") == 1 and pool.state("raw") == "running"


async def test_a_server_killed_just_before_a_call_is_not_said_to_have_died_during_it(tmp_path: Path) -> None:
    # The call is sent before the session has read the end of the killed server's stdout. Before: "the server died
    # during the call", though it was killed between calls; now what is true either way.
    async with ServerPool([raw(tmp_path)]) as pool:
        os.kill(int(text(await pool.call("raw", "pid", {}))), signal.SIGKILL)
        try:
            said = text(await pool.call("raw", "pid", {}))  # the session read the end first: sent to a new process
        except ServerUnavailable as e:
            said = e.reason
        assert said.isdigit() or said == (
            "the server died before answering the call (Connection closed): it was killed by signal 9 (SIGKILL)"
        )


@pytest.mark.parametrize("message", ["Connection closed", "the upstream connection was closed"])
async def test_an_error_in_the_words_of_a_lost_connection_from_a_live_server_is_its_error(
    tmp_path: Path, message: str
) -> None:
    # Before: read as the connection lost, so the pool killed the live server (losing its state) and its other
    # calls in flight failed "the server died during the call".
    async with ServerPool([raw(tmp_path)]) as pool:
        pid = text(await pool.call("raw", "pid", {}))
        failure = await pool.call("raw", "fail", {"code": -32000, "message": message})
        assert isinstance(failure, CallFailure) and failure.code == "server_error"
        assert failure.message.startswith(f"server error -32000: {message}")
        assert text(await pool.call("raw", "pid", {})) == pid and pool.restarts("raw") == 0
        assert text(await pool.call("raw", "count", {})) == "4"  # the same process took every call


async def test_a_servers_huge_error_is_quoted_in_part(tmp_path: Path) -> None:
    # Before: whole, 8 MB for an error of 2,000,000 emoji, into the script's exception at each call.
    async with ServerPool([raw(tmp_path)]) as pool:
        failure = await pool.call("raw", "fail", {"code": -32603, "message": "🙂" * 2_000_000})
    assert isinstance(failure, CallFailure) and failure.code == "server_error"
    assert failure.message.startswith("server error -32603: 🙂🙂") and len(failure.message) < 2_300
    assert "… (1,998,000 characters more)" in failure.message


@pytest.mark.parametrize("how", ["child", "setsid", "daemon"])
async def test_a_process_the_server_left_running_is_ended_with_it(tmp_path: Path, how: str) -> None:
    # Before: the SDK ended the server's process group only when the server outlived its grace period; a server
    # that exited in time (its stdin closed) left its child running after tooltree ended. Then a process that had
    # left the group (`setsid`, or a daemon's double fork, whose parent is no longer the server) still did.
    async with ServerPool([raw(tmp_path)]) as pool:
        server = int(text(await pool.call("raw", "pid", {})))
        child = int(text(await pool.call("raw", "spawn", {"how": how})))
        assert alive(child) and (os.getpgid(child) == os.getpgid(server)) == (how == "child")
    assert not alive(server) and not alive(child)


async def test_a_server_that_dies_during_a_call_leaving_a_process_on_its_stdout_is_said_to_have_died(
    tmp_path: Path,
) -> None:
    # Before: the reader waited for the end of a stdout the server's helper still held open, and the call ran to
    # the server's timeout: "the call timed out after 10 s", the server "stopped answering (hung)", its stderr unshown.
    async with ServerPool([replace(raw(tmp_path), timeout=60)]) as pool:
        with pytest.raises(ServerUnavailable, match="died before answering the call") as info:
            await pool.call("raw", "crash", {"leave": True})
        assert "crashing on purpose" in info.value.stderr_tail
        assert text(await pool.call("raw", "count", {})) == "1"  # the next call starts it again


async def test_a_server_whose_launcher_exited_before_it_spoke_serves_on(tmp_path: Path) -> None:
    # A launcher that starts the server and exits: its stdout stays open and the server serves on it; a wait for
    # more of an exited server's stdout must not end this session (a call of 1 s would be said to have died).
    server = raw(tmp_path)
    launcher = "import subprocess, sys\nsubprocess.Popen(sys.argv[1:])"
    launched = replace(server, args=("-c", launcher, sys.executable, *server.args))
    async with ServerPool([launched]) as pool:
        assert text(await pool.call("raw", "sleep", {"seconds": 1})) == "14"  # the size of its arguments
        assert text(await pool.call("raw", "count", {})) == "2"


async def test_a_call_the_server_died_during_is_not_sent_again(tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    async with ServerPool([raw(tmp_path, log_file=str(log))]) as pool:
        with pytest.raises(ServerUnavailable, match="died before answering the call"):
            await pool.call("raw", "crash", {})  # it may have acted: neither resent nor followed by a restart
        assert log.read_text(encoding="utf-8").count("start") == 1
        assert text(await pool.call("raw", "count", {})) == "1"
        assert log.read_text(encoding="utf-8").count("start") == 2


MALFORMED = {
    "an error with no content": ({"isError": True}, "content: Field required"),
    "structured content not an object": (
        {"content": [], "structuredContent": [1]},
        "structuredContent: Input should be a valid dictionary",
    ),
    "an unknown content type": (
        {"content": [{"type": "video", "data": "xx"}]},
        "content.0: none of the shapes the protocol allows there (type 'video')",
    ),
}


@pytest.mark.parametrize(("result", "found"), MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_result_the_protocol_does_not_allow_is_an_invalid_result_the_tool_ran(
    tmp_path: Path, result: dict[str, Any], found: str
) -> None:
    # Before: the SDK's ValidationError escaped the pool, and the script saw "the tool call failed on the host"
    # (`internal`), a client of serve's passthrough "Invalid request parameters", as if its arguments were wrong.
    async with ServerPool([raw(tmp_path)]) as pool:
        failure = await pool.call("raw", "answer", {"result": result})
        assert isinstance(failure, CallFailure) and failure.code == "invalid_result"
        assert failure.message == f"invalid result from the server: {found}; the tool ran"
        assert text(await pool.call("raw", "count", {})) == "2"  # the session goes on


@pytest.mark.parametrize("given", ["config", "list_and_source"])
async def test_a_call_out_of_its_servers_timeout_names_the_setting_and_the_config_file(
    tmp_path: Path, given: str
) -> None:
    # Before: "the call timed out after 1 s", read as the tool's own failure, though a longer execution
    # timeout (`serve --timeout 120`) was in force: the server's `timeout` had cut it short.
    server, source = replace(raw(tmp_path), timeout=1), str(tmp_path / "tooltree.yaml")
    pool = ServerPool(Config(servers=(server,), source=source)) if given == "config" else None
    async with pool or ServerPool([server], source=source) as pool:
        hung = await pool.call("raw", "hang", {})
        assert text(hung) == f"the call timed out after 1 s (servers.raw.timeout in {source}, default 30)"
        assert hung["isError"] is True


async def test_a_timed_out_call_answers_at_its_timeout_and_its_hung_server_is_ended_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the call's caller waited for the question whether the server still answers (up to 5 s more) and for
    # the hung server's end (about 2 s): a call of a 3 s timeout answered after 8 s, of the default 30 s after 37 s.
    import tool_tree.pool_forward as forward_module  # where the question is asked

    asked, answer = anyio.Event(), anyio.Event()
    ping = forward_module._answers_ping

    async def held_ping(client: Any, timeout: float) -> bool:
        asked.set()
        await answer.wait()  # the question is held until the call has answered
        return await ping(client, timeout)

    ended, discard = anyio.Event(), ServerPool._discard

    async def seen_discard(self: ServerPool, *args: Any, **kwargs: Any) -> bool:
        try:
            return await discard(self, *args, **kwargs)
        finally:
            ended.set()

    monkeypatch.setattr(forward_module, "_answers_ping", held_ping)
    monkeypatch.setattr(ServerPool, "_discard", seen_discard)
    async with ServerPool([replace(raw(tmp_path), timeout=1)]) as pool:
        pid = int(text(await pool.call("raw", "pid", {})))
        with anyio.fail_after(20):  # before: held with the question, for ever
            hung = await pool.call("raw", "hang", {})
        assert text(hung).startswith("the call timed out after 1 s") and hung["isError"] is True
        with anyio.fail_after(20):
            await asked.wait()
        answer.set()
        with anyio.fail_after(20):  # the server asked does not answer: it is ended, and the next call starts it
            await ended.wait()
        assert pool.restarts("raw") == 1
        assert int(text(await pool.call("raw", "pid", {}))) != pid
        assert not alive(pid)


async def test_a_server_hung_in_a_call_its_caller_gave_up_on_is_restarted_at_the_next_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: with the defaults the execution (sandbox.timeout, 30 s) ends before the call's own timeout (the
    # server's, 30 s), which is what asks a server whether it hung; so the hung server was never restarted, and each
    # later script calling it waited its whole time again ("the execution ended before the server answered").
    monkeypatch.setattr("tool_tree.pool_forward.PING_TIMEOUT", 0.5)  # read where calls are forwarded
    async with ServerPool([replace(raw(tmp_path), timeout=60)]) as pool:
        first = text(await pool.call("raw", "pid", {}))
        with anyio.move_on_after(1.0) as gave_up:  # as the end of an execution cancels its calls
            await pool.call("raw", "hang", {})
        assert gave_up.cancelled_caught
        with anyio.fail_after(20):  # not the server's 60 s
            again = await pool.call("raw", "pid", {})
        assert not again.get("isError"), text(again)
        assert text(again) != first and pool.restarts("raw") == 1
        with anyio.move_on_after(0.2):  # given up on sooner than the ping's time: nothing is asked after it
            await pool.call("raw", "sleep", {"seconds": 0.5})
        assert text(await pool.call("raw", "pid", {})) == text(again)


async def test_a_call_given_a_longer_timeout_than_its_servers_is_not_cut_short_by_it(tmp_path: Path) -> None:
    # Before: the SDK's read timeout (the server's) ended it: "server error -32001: Request 'tools/call' timed out".
    async with ServerPool([replace(raw(tmp_path), timeout=1)]) as pool:
        slow = await pool.call("raw", "sleep", {"seconds": 1.5}, timeout=20)
        assert not slow.get("isError"), text(slow)


async def test_a_server_that_cannot_start_reports_its_stderr(tmp_path: Path) -> None:
    async with ServerPool([raw(tmp_path, behavior="exit_at_start", stderr="missing API key")]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("raw", "pid", {})
        assert "missing API key" in info.value.stderr_tail


async def test_a_server_that_names_its_env_secret_while_failing_to_start_reports_its_stderr_redacted() -> None:
    secret = "sk-live-pool-7f3a9c2e41"
    code = "import os, sys\nsys.stderr.write('401 for API key ' + os.environ['LEAKY_API_KEY'] + '\\n')\nsys.exit(1)"
    leaky = ServerConfig(name="leaky", command=sys.executable, args=("-c", code), env={"LEAKY_API_KEY": secret})
    async with ServerPool([leaky]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("leaky", "anything", {})
    assert info.value.stderr_tail == "401 for API key [redacted LEAKY_API_KEY]"
    assert secret not in str(info.value)


async def test_a_server_that_dies_during_a_call_reports_its_stderr_redacted(tmp_path: Path) -> None:
    secret = "sk-live-pool-5b8d0e6f93"
    server = replace(raw(tmp_path, stderr=f"using key {secret}"), env={"RAW_KEY": secret})
    async with ServerPool([server]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("raw", "crash", {})
    assert "using key [redacted RAW_KEY]" in info.value.stderr_tail
    assert "crashing on purpose" in info.value.stderr_tail
    assert secret not in info.value.stderr_tail


async def test_streamable_http_servers_are_pooled_too(sample_http_server: Callable[[str], str]) -> None:
    url = sample_http_server("crm")
    async with ServerPool([ServerConfig(name="crm", url=url)]) as pool:
        found = await pool.call("crm", "search_records", {"object_type": "account", "query": "Northwind"})
        assert "Northwind" in text(found)
        assert not found.get("isError")


async def test_unknown_server_is_refused() -> None:
    async with ServerPool([]) as pool:
        with pytest.raises(UnknownServerError):
            await pool.call("nope", "x", {})


async def test_closing_the_pool_stops_every_server_process(tmp_path: Path) -> None:
    servers = [raw(tmp_path, f"s{i}") for i in range(3)]
    async with ServerPool(servers) as pool:
        pids = [int(text(await pool.call(s.name, "pid", {}))) for s in servers]
        assert all(alive(p) for p in pids)
    assert not any(alive(p) for p in pids)


def test_closing_while_a_server_is_still_starting_stops_it_and_fails_the_call(tmp_path: Path) -> None:
    import concurrent.futures
    import time

    from tool_tree.pool import BackgroundPool, PoolError

    pid_file = tmp_path / "pid"
    server = raw(tmp_path, start_delay=1.0, pid_file=str(pid_file))
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        bg = BackgroundPool([server]).__enter__()
        future = ex.submit(bg.call, "raw", "pid", {})
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text(encoding="utf-8"):
            assert time.monotonic() < deadline, "the server never started"
            time.sleep(0.02)
        bg.__exit__(None, None, None)  # while the server is still in its start delay
        with pytest.raises(PoolError):
            future.result(timeout=30)
    assert not alive(int(pid_file.read_text(encoding="utf-8")))


async def test_a_pool_closes_at_once_while_a_server_is_still_in_its_start_up(tmp_path: Path) -> None:
    # Before: the close waited for the start-up to end or reach the server's timeout (120 s here): `tooltree exec`
    # whose script timed out on a call of a slow-starting server took 30 s more to return.
    pid_file = tmp_path / "pid"
    # A timeout of 120 s and a bound of 60 s: the bound holds the server process's own start on a loaded machine too.
    server = replace(raw(tmp_path, start_delay=240.0, pid_file=str(pid_file)), timeout=120.0)
    with anyio.fail_after(60):  # well under the server's 120 s
        async with ServerPool([server]) as pool:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pool.call, "raw", "pid", {})
                while not pid_file.exists() or not pid_file.read_text(encoding="utf-8"):
                    await anyio.sleep(0.02)  # the server process is up, in its start delay
                assert pool.state("raw") == "starting"
                tg.cancel_scope.cancel()  # the call is given up (a script's end cancels its calls so)
            assert pool.state("raw") == "starting"  # the start-up goes on for the pool's other callers
    assert not alive(int(pid_file.read_text(encoding="utf-8")))


async def test_a_server_start_that_times_out_is_said_at_its_timeout_and_the_server_ended_after(tmp_path: Path) -> None:
    # Before: the error waited for the server's end (its stdin closed, 2 s for it to exit, then a signal), 2-3 s late.
    pid_file = tmp_path / "pid"
    server = replace(raw(tmp_path, start_delay=3600.0, pid_file=str(pid_file)), timeout=3.0)
    async with ServerPool([server]) as pool:
        with pytest.raises(ServerUnavailable, match="timed out after 3 s while starting"):
            await pool.start("raw")
        pid = int(pid_file.read_text(encoding="utf-8"))
        assert alive(pid)  # said before the server's end, which goes on in the background
        assert pool.state("raw") == "stopped"
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped (no zombie) by the pool's close


async def test_servers_start_at_most_start_jobs_at_once_and_a_queued_one_never_times_out(tmp_path: Path) -> None:
    hung = replace(raw(tmp_path, "hung", behavior="hang_on_list"), timeout=1.0)
    fine = replace(raw(tmp_path, "fine"), timeout=1.0)
    outcomes: dict[str, Any] = {}

    async def call(name: str) -> None:
        try:
            outcomes[name] = await pool.call(name, "pid", {})
        except ServerUnavailable as e:
            outcomes[name] = e

    async with ServerPool([hung, fine], start_jobs=1) as pool, anyio.create_task_group() as tg:
        assert pool.start_jobs == 1 and pool.state("fine") == "stopped"
        tg.start_soon(call, "hung")
        await anyio.wait_all_tasks_blocked()
        assert pool.state("hung") == "starting"
        tg.start_soon(call, "fine")
        await anyio.wait_all_tasks_blocked()
        assert pool.state("fine") == "queued"  # behind the hung one, for longer than its own 1 s timeout
    assert isinstance(outcomes["hung"], ServerUnavailable)
    assert outcomes["hung"].reason.startswith(  # how long and which key, as generate-tree says it
        "timed out after 1 s while starting (its own start-up, not the wait for its turn; servers.hung.timeout"
    )
    assert text(outcomes["fine"]).isdigit()  # its pid: started after its turn came, and answered


async def test_a_running_server_does_not_hold_a_start_slot(tmp_path: Path) -> None:
    servers = [raw(tmp_path, f"s{i}") for i in range(3)]
    async with ServerPool(servers, start_jobs=1) as pool:
        for s in servers:  # each stays running; the next still starts
            assert text(await pool.call(s.name, "pid", {})).isdigit()
        assert [pool.state(s.name) for s in servers] == ["running"] * 3


async def test_a_server_flooding_stderr_costs_no_disk_and_its_last_words_are_reported() -> None:
    # Before: stderr went to an unlinked temporary file that grew as long as the server wrote (a server
    # logging each call's arguments wrote to the host's disk as much as the calls a script made).
    secret = "sk-live-flood-0b1c2d3e4f"
    code = (
        "import os, sys\nline = 'debug ' * 100 + '\\n'\nfor _ in range(100_000):\n    sys.stderr.write(line)\n"
        "sys.stderr.write('key ' + os.environ['FLOOD_KEY'] + ' refused\\n')\nsys.exit(1)"
    )  # 60 MB, then the reason
    flood = ServerConfig(name="flood", command=sys.executable, args=("-c", code), env={"FLOOD_KEY": secret}, timeout=60)
    async with ServerPool([flood]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("flood", "anything", {})
        log = pool._slots["flood"].stderr
        assert log is not None and log._file is None and len(log._kept) <= 2 * StderrLog.KEEP_BYTES
    assert info.value.stderr_tail.endswith("key [redacted FLOOD_KEY] refused")
    assert secret not in str(info.value)


async def test_with_the_sdks_own_transport_a_stderr_flood_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's transport (used when an SDK release moves the helpers tooltree's reuses) takes a file for the
    # server's stderr. Before: an unlinked temporary file that grew as long as the server wrote. Now: a pipe
    # whose other end feeds the same bounded tail.
    monkeypatch.setattr("tool_tree.connect.LINEAR", False)
    monkeypatch.setattr("tool_tree.stdio.LINEAR", False)
    code = (
        "import sys\nline = 'debug ' * 100 + '\\n'\nfor _ in range(20_000):\n    sys.stderr.write(line)\n"
        "sys.stderr.write('the last words\\n')\nsys.exit(1)"
    )  # 12 MB, then the reason
    flood = ServerConfig(name="flood", command=sys.executable, args=("-c", code), timeout=60)
    async with ServerPool([flood]) as pool:
        with pytest.raises(ServerUnavailable) as info:
            await pool.call("flood", "anything", {})
        log = pool._slots["flood"].stderr
        assert log is not None and log._file is not None
        assert stat.S_ISFIFO(os.fstat(log._file.fileno()).st_mode)
        assert len(log._kept) <= 2 * StderrLog.KEEP_BYTES and log._cut
    assert info.value.stderr_tail.endswith("debug \nthe last words")


def test_the_stderr_log_keeps_its_end_and_never_shows_a_piece_of_a_secret_it_cut() -> None:
    server = ServerConfig(name="s", command="x", env={"KEY": "s3cr3t-value-123456"})
    log = StderrLog(server)
    log.feed(b"a" * (StderrLog.KEEP_BYTES * 2 - 5) + b"s3cr3t-value-123456 is the key\n")  # cut inside it
    log.feed(b"b" * 10)
    log.feed(b"\nlast line\n")
    assert len(log._kept) <= 2 * StderrLog.KEEP_BYTES
    tail = log.tail(lines=3, max_chars=20)  # read from inside the secret
    assert tail.endswith("last line") and "123456" not in tail and "s3cr3t" not in tail


# --- what the pools are given, and BackgroundPool's life ------------------------------------------------------------


def test_a_background_pool_is_used_inside_its_with_and_runs_once(tmp_path: Path) -> None:
    # Before: a call before `with` or after it was an AssertionError (an AttributeError under -O), and entering the
    # pool again raised "the server pool did not start: None" while a second pool started and ran on to exit.
    import threading

    from tool_tree.pool import BackgroundPool, PoolError

    before = set(threading.enumerate())
    bg = BackgroundPool([raw(tmp_path)])
    for use in (lambda: bg.call("raw", "pid", {}), lambda: bg.loop, lambda: bg.pool):
        with pytest.raises(PoolError) as info:
            use()
        assert str(info.value) == "the pool is not running: use it inside `with BackgroundPool(...) as pool:`"
    with bg:
        pid = int(text(bg.call("raw", "pid", {})))
        with pytest.raises(PoolError, match=r"^this BackgroundPool was already entered \(it is running\)"), bg:
            pass
        assert alive(pid)  # the failed enter left the running pool as it was
    with pytest.raises(PoolError, match=r"^the pool is not running \(its `with` block has ended\): use it inside"):
        bg.call("raw", "pid", {})
    with pytest.raises(PoolError) as again, bg:
        pass
    assert str(again.value) == (
        "this BackgroundPool was already entered (it has run): a pool runs once; make a new BackgroundPool(...) "
        "for another `with`"
    )
    assert not alive(pid)
    assert [t.name for t in set(threading.enumerate()) - before if t.is_alive()] == []


def test_a_task_started_on_a_background_pools_loop_as_it_ends_is_cancelled_and_run_to_its_end(tmp_path: Path) -> None:
    # Before: a task started while the loop ended (a script's tool call arriving as its session closed) was
    # destroyed pending, its coroutine closed unrun or with GeneratorExit ("Task was destroyed but it is
    # pending!", which failed an unrelated test's setup).
    import asyncio

    from tool_tree.pool import BackgroundPool

    seen: list[type[BaseException]] = []
    held: list[asyncio.Task[None]] = []

    async def waits_for_ever() -> None:
        try:
            await asyncio.Event().wait()
        except BaseException as e:
            seen.append(type(e))
            raise

    async def starts_one_as_it_ends() -> None:
        try:
            await asyncio.Event().wait()
        finally:  # cancelled as the loop ends: hand the loop another task, as another thread would
            loop = asyncio.get_running_loop()
            loop.call_soon(lambda: held.append(loop.create_task(waits_for_ever())))

    async def start() -> None:
        held.append(asyncio.get_running_loop().create_task(starts_one_as_it_ends()))

    with BackgroundPool([raw(tmp_path)]) as bg:
        asyncio.run_coroutine_threadsafe(start(), bg.loop).result(timeout=10)
    assert len(held) == 2 and seen == [asyncio.CancelledError]
    assert all(task.done() for task in held)


def test_no_worker_thread_of_a_background_pools_loop_outlives_its_with(tmp_path: Path) -> None:
    # Before: AnyIO's worker threads (`anyio.to_thread`, as the output check uses) were told to stop as the loop
    # ended and left a moment later: one still busy, or not yet woken, outlived the `with` (CI saw an idle
    # "AnyIO worker thread" after it). Here one is held busy past the loop's end, released by a timer.
    import asyncio
    import threading

    import anyio

    from tool_tree.pool import BackgroundPool

    gate = threading.Event()
    started = threading.Event()

    def busy() -> None:
        started.set()
        gate.wait(timeout=30)

    async def start() -> None:
        asyncio.get_running_loop().create_task(anyio.to_thread.run_sync(busy, abandon_on_cancel=True))

    before = set(threading.enumerate())
    with BackgroundPool([raw(tmp_path)]) as bg:
        asyncio.run_coroutine_threadsafe(start(), bg.loop).result(timeout=10)
        assert started.wait(timeout=10)
        timer = threading.Timer(0.5, gate.set)  # the worker is still busy as the loop ends
        timer.start()
    assert [t.name for t in set(threading.enumerate()) - before - {timer} if t.is_alive()] == []
    assert gate.is_set()


def test_a_pool_is_given_a_config_or_its_servers_and_a_concurrency_of_at_least_one(tmp_path: Path) -> None:
    # Before: BackgroundPool(config) was "TypeError: 'Config' object is not iterable"; concurrency=0 was taken,
    # and every call then waited for ever, whatever its timeout.
    from tool_tree.config import parse_config
    from tool_tree.pool import BackgroundPool

    server = raw(tmp_path)
    text_ = f"servers:\n  raw: {{command: {json.dumps(server.command)}, args: {json.dumps(list(server.args))}}}\n"
    text_ += "  spare: {command: x, enabled: false}\npool: {start_jobs: 2}\n"
    config = parse_config(text_, environ={})
    with BackgroundPool(config) as bg:
        assert bg.pool.names == ["raw"] and bg.pool.start_jobs == 2  # the enabled servers; `pool:` applies
        assert text(bg.call("raw", "pid", {})).isdigit()
    assert ServerPool(config, start_jobs=3).start_jobs == 3  # an argument wins over the section
    for wrong, message in [
        (["raw"], "servers: expected a Config or a list of ServerConfig (config.servers), got a list holding str"),
        ("raw", "servers: expected a Config or a list of ServerConfig (config.servers), got str"),
    ]:
        with pytest.raises(TypeError, match=re.escape(message)):
            BackgroundPool(wrong)  # type: ignore[arg-type]
    for kwargs, message in [
        ({"concurrency": 0}, "concurrency: expected at least 1, got 0"),
        ({"start_jobs": 0}, "start_jobs: expected at least 1, got 0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            BackgroundPool([server], **kwargs)
        with pytest.raises(ValueError, match=re.escape(message)):
            ServerPool([server], **kwargs)
    with pytest.raises(TypeError, match=r"^concurrency: expected a whole number, at least 1, got 2\.5$"):
        BackgroundPool([server], concurrency=2.5)  # type: ignore[arg-type]


def test_arguments_that_are_not_a_dict_are_a_type_error_naming_them(tmp_path: Path) -> None:
    # Before: a pydantic ValidationError from deep in the SDK, 11 frames down.
    from tool_tree.pool import BackgroundPool

    with BackgroundPool([raw(tmp_path)]) as bg:
        with pytest.raises(TypeError) as info:
            bg.call("raw", "pid", [1])  # type: ignore[arg-type]
        assert str(info.value) == (
            "arguments: expected a dict of the tool's arguments by name (e.g. {'limit': 3}; {} for none), got list [1]"
        )
        with pytest.raises(TypeError, match=r"^tool: expected the tool's name as a string, got int 5"):
            bg.call("raw", 5, {})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^timeout: expected a positive number of seconds \(or None\), got 0"):
            bg.call("raw", "pid", {}, timeout=0)
        assert text(bg.call("raw", "pid", {})).isdigit()  # nothing was sent, the pool goes on


async def test_a_call_waiting_for_its_turn_times_out_within_its_own_timeout() -> None:
    # Before: the timeout ran only once the call had its turn, so behind a slow call it waited as long as that.
    async with ServerPool([sample("media")], concurrency=1) as pool:
        await pool.start("media")
        slow = functools.partial(pool.call, "media", "slow_echo", {"text": "x", "seconds": 60}, timeout=60)
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            await anyio.wait_all_tasks_blocked()  # it holds the server's one call slot
            with anyio.fail_after(20):
                waited = await pool.call("media", "slow_echo", {"text": "y", "seconds": 0}, timeout=0.5)
            tg.cancel_scope.cancel()
        assert waited["isError"] is True
        assert text(waited) == "the call timed out after 0.5 s waiting for its turn (1 call(s) in flight to 'media')"
        after = await pool.call("media", "slow_echo", {"text": "free", "seconds": 0}, timeout=10)
        assert text(after) == "free"  # the cancelled call gave its slot back


_ENV_SERVER = '''
import json, os
from mcp.server.mcpserver import MCPServer

server = MCPServer("env", log_level="WARNING")


@server.tool(structured_output=False)
def environment() -> str:
    """The names of the variables this server was started with."""
    return json.dumps(sorted(os.environ))


server.run()
'''


async def test_a_stdio_server_gets_its_env_on_top_of_the_few_variables_the_readme_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, the README did not say it: a user's shell variables (a token a server reads) were taken to reach it.
    said = re.search(r"starts with its\s+`env` on top of only (.*?) from tooltree's environment", README, re.S)
    assert said is not None, "the README says which of tooltree's variables a stdio server gets"
    named = set(re.findall(r"`([A-Z_]+)`", said.group(1)))
    script = tmp_path / "env_server.py"
    script.write_text(_ENV_SERVER, encoding="utf-8")
    for variable in (*named, "GITHUB_TOKEN"):
        monkeypatch.setenv(variable, "set")
    server = ServerConfig(name="env", command=sys.executable, args=(str(script),), env={"API_KEY": "given"})
    async with ServerPool([server]) as pool:
        names = set(json.loads(text(await pool.call("env", "environment", {}))))
    # Beside them: its `env`, tooltree's marks, and what Python sets in its own process (its locale coercion).
    assert names - {"API_KEY", "TOOLTREE_UPSTREAM", "TOOLTREE_SERVER_MARK", "LC_CTYPE"} == named, names
