"""`discover_all`: servers start a bounded number at a time, each timed from its own start (real processes)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from generator.discover import Discovery, discover_all
from tests.support import REPO, alive
from tool_tree.config import ServerConfig

pytestmark = pytest.mark.anyio
RAW = REPO / "tests" / "servers" / "raw_server.py"


def raw(tmp_path: Path, name: str, timeout: float, **spec: Any) -> ServerConfig:
    path = tmp_path / f"{name}.json"
    tools = [{"name": f"{name}_tool", "inputSchema": {"type": "object"}}]
    path.write_text(json.dumps({"pages": [tools], **spec}), encoding="utf-8")
    return ServerConfig(name=name, command=sys.executable, args=(str(RAW), str(path)), timeout=timeout)


def overlap(logs: list[Path]) -> int:
    """The most servers that were between their start and their listing at one moment (from their own logs)."""
    events: list[tuple[float, int]] = []
    for log in logs:
        for line in log.read_text(encoding="utf-8").splitlines():
            event, at = line.split()
            events.append((float(at), 1 if event == "start" else -1))
    most = now = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        now += step
        most = max(most, now)
    return most


async def test_at_most_jobs_servers_start_at_once_and_the_others_wait_in_order(tmp_path: Path) -> None:
    logs = [tmp_path / f"s{i}.log" for i in range(6)]
    servers = [raw(tmp_path, f"s{i}", 20, start_delay=0.3, log_file=str(logs[i])) for i in range(6)]
    order: list[str] = []
    results = await discover_all(servers, jobs=2, on_start=lambda s: order.append(s.name))
    assert [r.error for r in results] == [None] * 6
    assert [r.tools[0]["name"] for r in results] == [f"s{i}_tool" for i in range(6)]
    assert overlap(logs) == 2
    assert order == [s.name for s in servers]
    assert results[-1].queued_seconds > 0.3  # it waited for others to start before it


async def test_a_servers_timeout_runs_from_its_own_start_not_from_its_place_in_the_queue(tmp_path: Path) -> None:
    # One at a time, seven servers of 0.5 s each take over 3.5 s, longer than each one's timeout.
    servers = [raw(tmp_path, f"s{i}", 3, start_delay=0.5) for i in range(7)]
    results = await discover_all(servers, jobs=1)
    assert [r.error for r in results] == [None] * 7
    assert results[-1].queued_seconds > 3  # queued longer than its timeout, and still listed


async def test_a_server_queued_behind_a_hung_one_is_listed_and_only_the_hung_one_times_out(tmp_path: Path) -> None:
    pid_file = tmp_path / "hung.pid"
    hung = raw(tmp_path, "hung", 1, behavior="hang_on_list", pid_file=str(pid_file))
    fine = raw(tmp_path, "fine", 1)
    results = await discover_all([hung, fine], jobs=1)
    assert results[0].error == "timed out after 1 s listing its tools (servers.hung.timeout)"
    assert results[1].error is None and results[1].queued_seconds >= 1  # waited its own timeout, not timed out
    assert not alive(int(pid_file.read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    ("spec", "doing"),
    [({"behavior": "hang_on_list"}, "listing its tools"), ({"start_delay": 3600}, "starting up")],
    ids=["hung listing", "hung start-up"],
)
async def test_a_server_out_of_time_gives_its_start_slot_back_before_it_is_stopped(
    tmp_path: Path, spec: dict[str, Any], doing: str
) -> None:
    # Before: the slot was held while the SDK stopped the server (it waits ~2 s for an exit the hung server never
    # makes, then ends it), so the next server started after it was gone, and its seconds read 3.0 for a 1 s timeout.
    pid_file = tmp_path / "hung.pid"
    hung = raw(tmp_path, "hung", 1, pid_file=str(pid_file), **spec)
    hung_alive_when_next_started: list[bool] = []

    def started(server: ServerConfig) -> None:
        if server.name == "fine":
            hung_alive_when_next_started.append(alive(int(pid_file.read_text(encoding="utf-8"))))

    results = await discover_all([hung, raw(tmp_path, "fine", 10)], jobs=1, on_start=started)
    assert hung_alive_when_next_started == [True]  # given back at its timeout, its stop still running
    assert [r.error for r in results] == [f"timed out after 1 s {doing} (servers.hung.timeout)", None]
    assert not alive(int(pid_file.read_text(encoding="utf-8")))  # stopped all the same, before discover_all returned


@pytest.mark.parametrize(
    ("spec", "doing"),
    [({"behavior": "hang_on_list"}, "listing its tools"), ({"start_delay": 3600}, "starting up")],
    ids=["hung listing", "hung start-up"],
)
async def test_a_server_out_of_time_is_reported_at_its_timeout_and_stopped_and_reaped_after(
    tmp_path: Path, spec: dict[str, Any], doing: str
) -> None:
    # Before: the report waited for the server's end (its stdin closed, ~2 s for an exit the hung server never makes,
    # then a signal), so generate-tree said it late.
    pid_file = tmp_path / "hung.pid"
    hung = raw(tmp_path, "hung", 1, pid_file=str(pid_file), **spec)
    alive_when_reported: list[bool] = []

    def done(result: Discovery) -> None:
        alive_when_reported.append(alive(int(pid_file.read_text(encoding="utf-8"))))

    (result,) = await discover_all([hung], on_done=done)
    assert result.error == f"timed out after 1 s {doing} (servers.hung.timeout)"
    assert alive_when_reported == [True]  # reported at its timeout, its stop still running
    assert not Path(f"/proc/{pid_file.read_text(encoding='utf-8')}").exists()  # ended and reaped (no zombie)


async def test_a_timeout_names_the_config_file_holding_its_setting_when_given(tmp_path: Path) -> None:
    hung = raw(tmp_path, "hung", 1, behavior="hang_on_list")
    (result,) = await discover_all([hung], source=str(tmp_path / "tooltree.yaml"))
    assert result.error == f"timed out after 1 s listing its tools (servers.hung.timeout in {tmp_path}/tooltree.yaml)"


async def test_the_start_slot_is_given_back_when_a_server_fails_to_start(tmp_path: Path) -> None:
    servers = [raw(tmp_path, f"bad{i}", 10, behavior="exit_at_start") for i in range(3)]
    servers.append(raw(tmp_path, "good", 10))
    results = await discover_all(servers, jobs=1)
    assert [r.error for r in results] == ["the server exited during start-up, with exit status 3"] * 3 + [None]


async def test_the_stderr_of_a_server_that_failed_comes_back_without_its_env_secret(tmp_path: Path) -> None:
    secret = "sk-live-discover-4c1e8a"
    bad = replace(raw(tmp_path, "bad", 10, behavior="exit_at_start", stderr=f"bad key {secret}"), env={"KEY": secret})
    (result,) = await discover_all([bad], jobs=1)
    assert result.stderr_tail == "bad key [redacted KEY]"  # what generate-tree and serve's refresh show


REFUSER = """\
import json, os, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("id") is not None:
        error = {"code": -32001, "message": "invalid API key " + os.environ["API_KEY"]}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": error}), flush=True)
"""


async def test_a_server_refusing_initialize_with_its_key_is_reported_without_the_key(tmp_path: Path) -> None:
    # Before: "MCPError: invalid API key sk-crm-…" in generate-tree's progress line and table, and in serve's.
    secret = "sk-crm-91b2c3d4e5f6"
    script = tmp_path / "refuser.py"
    script.write_text(REFUSER, encoding="utf-8")
    server = ServerConfig(name="crm", command=sys.executable, args=(str(script),), env={"API_KEY": secret}, timeout=10)
    (result,) = await discover_all([server], jobs=1)
    assert result.error == "MCPError: invalid API key [redacted API_KEY]"


async def test_a_header_httpx_cannot_send_is_reported_without_its_value(tmp_path: Path) -> None:
    # A token read from a file with a Windows line end: httpx quotes the whole value in its error, as bytes.
    from tests.tool_tree.test_connect import serving

    secret = "sk-live-5f3a9c1e7d2b4a68"
    with serving(200, "application/json", b"{}") as url:
        server = ServerConfig(name="drive", url=url, headers={"Authorization": f"Bearer {secret}\r"}, timeout=10)
        (result,) = await discover_all([server], jobs=1)
    assert result.error is not None and "Illegal header value" in result.error
    assert secret not in result.error and "[redacted header Authorization]" in result.error


async def test_an_http_server_that_cannot_be_reached_names_the_url_setting_as_a_call_to_it_does() -> None:
    # Before: "cannot connect to 127.0.0.1:PORT: Connection refused", the setting to check named in exec and serve
    # (`tool_tree.pool`) but not here.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    (result,) = await discover_all([ServerConfig(name="remote", url=f"http://127.0.0.1:{port}/mcp")], source="t.yaml")
    assert result.error == (
        f"cannot connect to 127.0.0.1:{port}: Connection refused; check that the server is running and listening "
        "there, and its URL (servers.remote.url in t.yaml)"
    )
