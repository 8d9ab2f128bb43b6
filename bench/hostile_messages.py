"""How a hostile MCP server's flood of messages slows an honest server's calls on the shared server pool.

Each mode runs in a fresh child process holding a real `BackgroundPool` of two servers: ``hostile``
(`bench/servers/hostile_messages_server.py MODE`: over stdio, or over Streamable HTTP for the ``get_*`` modes,
started by the parent on a free port) and ``honest`` (``tests/servers/raw_server.py``, tool ``pid``). The child
calls the honest server's tool in a loop (one call, then 20 ms of rest) for ``--before`` seconds, calls the hostile
server's ``start`` (its flood begins), and goes on for ``--during`` seconds. For each phase: the honest calls'
latency, the CPU of the pool's event-loop thread (% of a core) and of the whole process, the loop's worst delay (a
10 ms sleep on the loop, how late it woke), and the child's RSS (start, peak, end; the peak is reset at the start
of the phase). After the flood: whether the pool had ended the hostile server (its connection closed; over stdio,
its process gone too), and tooltree's warnings with when they came. A limit of tooltree's can end the hostile
server before its ``start`` is answered (its flood comes first): the call's error is kept as its outcome, and the
mode goes on. For the ``get_*`` modes, the GETs the hostile server received: before ``start``, and after it (each
with its seconds since ``start``). A child still running ``--deadline`` seconds after it started is killed.

Run:  .venv/bin/python bench/hostile_messages.py [--before 8] [--during 20] [--modes notif_plain,get_reconnect,…]
      (writes bench/out/hostile_messages.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "servers"))

from _common import ROOT, print_table, proc_status, write_json
from hostile_messages_server import HTTP_MODES, STDIO_MODES

SERVER = Path(__file__).resolve().parent / "servers" / "hostile_messages_server.py"
HONEST = ROOT / "tests" / "servers" / "raw_server.py"
REST_S = 0.02
"""The pause between two honest calls."""


class Warnings(logging.Handler):
    """tooltree's warnings, each with its time relative to `begin` (called when the flood begins)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.wall_start = time.time()
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        self.records.append({"at_s": round(record.created - self.wall_start, 2), "logger": record.name, "text": text})

    def begin(self) -> None:
        self.wall_start = time.time()
        self.records.clear()


async def _native_id() -> int:
    return threading.get_native_id()


async def _lag_probe(worst: list[float]) -> None:
    """Keeps in ``worst[0]`` how late a 10 ms sleep on the loop woke, at worst."""
    while True:
        before = time.monotonic()
        await asyncio.sleep(0.01)
        worst[0] = max(worst[0], time.monotonic() - before - 0.01)


def _thread_cpu(tid: int) -> float:
    fields = Path(f"/proc/self/task/{tid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _mib(n: int) -> float:
    return round(n / 2**20, 1)


def measure(bg: Any, seconds: float, loop_tid: int, worst: list[float]) -> dict[str, Any]:
    """Calls the honest server's ``pid`` in a loop for ``seconds``; latency, CPU, loop delay, RSS."""
    from tool_tree.pool import PoolError

    latencies: list[float] = []
    errors: list[str] = []
    Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # the peak RSS from now on
    rss_start, worst[0] = proc_status("VmRSS"), 0.0
    loop0, cpu0, t0 = _thread_cpu(loop_tid), _process_cpu(), time.monotonic()
    while time.monotonic() - t0 < seconds:
        began = time.monotonic()
        try:
            result = bg.call("honest", "pid", {}, timeout=30)
            if result.get("isError"):
                errors.append(str(result.get("content"))[:200])
        except PoolError as e:
            errors.append(f"{type(e).__name__}: {str(e)[:200]}")
        latencies.append((time.monotonic() - began) * 1000)
        time.sleep(REST_S)
    wall = time.monotonic() - t0
    ordered = sorted(latencies)
    return {
        "seconds": round(wall, 2),
        "calls": len(latencies),
        "errors": len(errors),
        "first_errors": errors[:3],
        "p50_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))], 2),
        "max_ms": round(ordered[-1], 2),
        "loop_cpu_pct": round((_thread_cpu(loop_tid) - loop0) / wall * 100, 1),
        "process_cpu_pct": round((_process_cpu() - cpu0) / wall * 100, 1),
        "loop_delay_max_ms": round(worst[0] * 1000, 1),
        "rss_start_mib": _mib(rss_start),
        "rss_max_mib": _mib(proc_status("VmHWM")),
        "rss_end_mib": _mib(proc_status("VmRSS")),
    }


def child(mode: str, before_s: float, during_s: float, url: str | None) -> dict[str, Any]:
    """One mode, measured in this process."""
    from tool_tree.config import ServerConfig
    from tool_tree.pool import BackgroundPool, PoolError

    log = Warnings()
    logging.getLogger("tool_tree").addHandler(log)
    out: dict[str, Any] = {"mode": mode, "transport": "http" if url else "stdio"}
    with tempfile.TemporaryDirectory(prefix="tooltree-hostile-messages-") as tmp:
        spec = Path(tmp) / "honest.json"
        spec.write_text(json.dumps({"pages": [[{"name": "pid", "inputSchema": {"type": "object"}}]]}), encoding="utf-8")
        honest = ServerConfig(name="honest", command=sys.executable, args=(str(HONEST), str(spec)), timeout=30)
        if url:
            hostile = ServerConfig(name="hostile", url=url, timeout=30)
        else:
            hostile = ServerConfig(name="hostile", command=sys.executable, args=(str(SERVER), mode), timeout=30)
        with BackgroundPool([hostile, honest]) as bg:
            loop_tid = asyncio.run_coroutine_threadsafe(_native_id(), bg.loop).result()
            worst = [0.0]
            probe = asyncio.run_coroutine_threadsafe(_lag_probe(worst), bg.loop)
            for name in ("honest", "hostile"):
                asyncio.run_coroutine_threadsafe(bg.pool.start(name), bg.loop).result()
            out["before"] = measure(bg, before_s, loop_tid, worst)
            log.begin()
            try:
                started = bg.call("hostile", "start", {}, timeout=30)
            except PoolError as e:  # ended by a limit of tooltree's before its answer was read
                started, out["start_failed"] = {}, True
                out["start"] = f"{type(e).__name__}: {str(e)[:200]}"
            else:
                out["start"] = str(started.get("content"))[:120]
            out["during"] = measure(bg, during_s, loop_tid, worst)

            async def state() -> tuple[str, int]:
                return bg.pool.state("hostile"), bg.pool.restarts("hostile")

            out["hostile_state"], out["hostile_restarts"] = asyncio.run_coroutine_threadsafe(state(), bg.loop).result()
            pid = (started.get("content") or [{}])[0].get("text", "")
            if not url and pid.isdigit():  # before the pool's end ends it anyway
                out["hostile_process_alive"] = _alive(int(pid))
            probe.cancel()
    out["ended"] = out["hostile_state"] == "stopped" and not out.get("hostile_process_alive", False)
    out["warnings"] = [r | {"text": r["text"][:300]} for r in log.records[:10]]
    return out


def _alive(pid: int) -> bool:
    """Whether ``pid`` is running (not gone, not a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def _what_bit(warnings: list[dict[str, Any]]) -> str:
    """tooltree's warnings in a few words each, with when they came (seconds after the flood began)."""
    gists = (
        ("answers to requests tooltree did not make", "stray answers"),
        ("requests to tooltree without taking", "unanswered requests"),
        ("of the host's CPU", "reader's CPU budget"),
        ("notifications at once", "notification budget"),
        ("JSON values", "values per message"),
        ("longer than", "message length"),
    )
    said = [f"{gist} {w['at_s']:g} s" for w in warnings for phrase, gist in gists if phrase in w["text"]]
    return ", ".join(said) or "-"


def run_mode(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """One mode in a child process (and, for an HTTP mode, its hostile server in another)."""
    argv = [sys.executable, __file__, "--child", mode, "--before", str(args.before), "--during", str(args.during)]
    server: subprocess.Popen[str] | None = None
    counter: threading.Thread | None = None
    gets: dict[str, Any] = {"waiting": 0, "flooding": 0, "flooding_at_s": []}
    if mode in HTTP_MODES:
        server = subprocess.Popen([sys.executable, str(SERVER), mode], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert server.stdout is not None
        first = server.stdout.readline().split()
        if first[:1] != ["listening"]:
            server.kill()
            server.wait()
            sys.exit(f"the hostile HTTP server did not start: {first!r}")
        argv += ["--url", f"http://127.0.0.1:{first[1]}/mcp"]
        counter = threading.Thread(target=_count_gets, args=(server.stdout, gets), daemon=True)
        counter.start()
    result: dict[str, Any]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=args.deadline, check=False)
    except subprocess.TimeoutExpired:
        result = {"mode": mode, "killed_after_s": args.deadline}
    else:
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        crashed = proc.returncode != 0 or not lines
        result = {"mode": mode, "crashed": proc.stderr[-2000:]} if crashed else json.loads(lines[-1])
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
    if counter is not None:
        counter.join(timeout=10)  # its stdout has ended: every GET is counted
        result["gets"] = gets
    return result


def _count_gets(stream: Any, gets: dict[str, Any]) -> None:
    """Counts the hostile server's ``GET <n> waiting`` and ``GET <n> flooding <s>`` lines."""
    for line in stream:
        parts = line.split()
        if parts[:1] != ["GET"] or len(parts) < 3:
            continue
        if parts[2] == "waiting":
            gets["waiting"] += 1
        elif parts[2] == "flooding":
            gets["flooding"] += 1
            gets["flooding_at_s"].append(float(parts[3]))


def row(r: dict[str, Any]) -> list[Any]:
    gets = f"{r['gets']['waiting']} + {r['gets']['flooding']} GETs" if "gets" in r else ""
    if "during" not in r:
        return [r["mode"], *["-"] * 7, gets or "-", "killed" if "killed_after_s" in r else "crashed"]
    b, d = r["before"], r["during"]
    ended = ", ".join(filter(None, ["yes" if r["ended"] else "no", gets]))
    return [
        r["mode"],
        f"{b['p50_ms']:.1f} / {b['loop_cpu_pct']:.0f}%",
        f"{d['calls']} ({d['errors']})",
        f"{d['p50_ms']:.1f} / {d['p90_ms']:.1f} / {d['max_ms']:.0f}",
        f"{d['loop_cpu_pct']:.0f}%",
        f"{d['process_cpu_pct']:.0f}%",
        f"{d['loop_delay_max_ms']:.0f}",
        f"{d['rss_max_mib']:.0f} / {d['rss_end_mib']:.0f}",
        ended,
        _what_bit(r["warnings"]) + ("; its start unanswered" if r.get("start_failed") else ""),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=float, default=8.0, help="seconds of honest calls before the flood")
    parser.add_argument("--during", type=float, default=20.0, help="seconds of honest calls during the flood")
    parser.add_argument("--modes", default=",".join(STDIO_MODES + HTTP_MODES), help="modes, comma-separated")
    parser.add_argument("--deadline", type=float, default=0.0, help="seconds before a mode's child is killed")
    parser.add_argument("--child", metavar="MODE", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.before, args.during, args.url)), flush=True)
        return 0
    modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in modes if m not in STDIO_MODES + HTTP_MODES]
    if unknown:
        parser.error(f"unknown modes {', '.join(unknown)}: choose from {', '.join(STDIO_MODES + HTTP_MODES)}")
    args.deadline = args.deadline or args.before + args.during + 60
    report: dict[str, Any] = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
        "command": " ".join([".venv/bin/python", "bench/hostile_messages.py", *sys.argv[1:]]),
        "cores": os.cpu_count(),
        "load_avg_1m_start": round(os.getloadavg()[0], 2),
        "before_s": args.before,
        "during_s": args.during,
        "modes": [],
    }
    for mode in modes:
        result = run_mode(mode, args) | {"load_avg_1m": round(os.getloadavg()[0], 2)}
        report["modes"].append(result)
        print(f"{mode}: {json.dumps(row(result))}", flush=True)
    report["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    header = ["mode", "quiet p50 ms / loop", "calls (err)", "p50 / p90 / max ms", "loop CPU", "process CPU"]
    header += ["loop delay max ms", "RSS max / end MiB", "hostile ended", "tooltree's warnings (s after start)"]
    title = (
        f"Honest calls during {args.during:g} s of each flood (after {args.before:g} s quiet); "
        f"load average {report['load_avg_1m_start']} -> {report['load_avg_1m_end']} on {os.cpu_count()} cores"
    )
    print_table(title, header, [row(r) for r in report["modes"]])
    write_json("hostile_messages.json", report)
    return 0 if all("during" in r for r in report["modes"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
