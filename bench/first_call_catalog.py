"""Benchmark the host CPU and peak memory of the first and the second call to a server of many tools.

    python bench/first_call_catalog.py [--runs 5] [--tools 2000 20000] [--src DIR ...]

Each case is one process that opens a `tool_tree.pool.BackgroundPool` of one stdio server listing ``--tools`` tools
(half with an output schema) and calls one tool twice: the first call starts the server and lists its tools, the
second is a call alone. Three servers: `tests/servers/raw_server.py` (the 2025 handshake) and
`bench/servers/catalog_server.py` (the official SDK's server: the 2026 protocol) over stdio, and the latter over
Streamable HTTP (started by the case's process, from this checkout whichever is measured). Reported per call: the host
process's CPU time (all its threads; the server's own not in it) and its peak resident memory during the call
(``VmHWM`` after resetting it through ``/proc/self/clear_refs``). Median of ``--runs``, the checkouts interleaved.

``--src DIR`` measures another checkout of tooltree too (``git worktree add /tmp/before <commit>``), with this one's
virtualenv (its code first on the path). Writes bench/out/first_call_catalog.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, checkouts, positive_int, print_table, run_in, write_json

SERVERS = {
    "2025 (raw_server)": "tests/servers/raw_server.py",
    "2026 (SDK server)": "bench/servers/catalog_server.py",
    "2026 over HTTP (SDK server)": "bench/servers/catalog_server.py",
}
HTTP = "2026 over HTTP (SDK server)"
RUN = """
import json, socket, subprocess, sys, time
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool

def status(key):
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(key + ":"))

if sys.argv[3:] == ["http"]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    web = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], "--http", str(port)])
    deadline = time.monotonic() + 120
    while True:  # until its port takes connections
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or web.poll() is not None:
                sys.exit("the HTTP catalog server did not start")
            time.sleep(0.1)
    server = ServerConfig(name="many", url=f"http://127.0.0.1:{port}/mcp", timeout=600)
else:
    web = None
    server = ServerConfig(name="many", command=sys.executable, args=(sys.argv[1], sys.argv[2]), timeout=600)
out = {}
with BackgroundPool([server]) as pool:
    for call in ("first", "second"):
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")  # the peak resident set starts again from the current one
        cpu = time.process_time()
        result = pool.call("many", "tool_1", {"a": "x"})
        assert not result.get("isError"), result
        out[call] = {"cpu_s": time.process_time() - cpu, "peak_mib": status("VmHWM"), "rss_mib": status("VmRSS")}
if web is not None:
    web.terminate()
    web.wait()
print(json.dumps(out))
"""


def catalog(folder: Path, tools: int) -> dict[str, Path]:
    """The spec files of both servers in ``folder``, listing ``tools`` tools (``tool_0`` …): by server."""
    listed = []
    for i in range(tools):
        tool: dict[str, Any] = {"name": f"tool_{i}", "description": f"Does thing {i}: " + "word " * 20,
                                "inputSchema": {"type": "object", "properties": {"a": {"type": "string"},
                                                "b": {"type": "integer"}}, "required": ["a"]}}  # fmt: skip
        if i % 2 == 0:
            tool["outputSchema"] = {"type": "object", "properties": {"x": {"type": "string"}}}
        listed.append(tool)
    raw, sdk = folder / f"raw_{tools}.json", folder / f"sdk_{tools}.json"
    raw.write_text(json.dumps({"pages": [listed]}), encoding="utf-8")
    sdk.write_text(json.dumps({"name": "many", "tools": listed}), encoding="utf-8")
    return dict(zip(SERVERS, (raw, sdk, sdk), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=5)
    parser.add_argument("--tools", type=positive_int, nargs="+", default=[2_000, 20_000])
    args, sources = checkouts(parser)
    cases = [(tools, server) for tools in args.tools for server in SERVERS]
    runs: dict[tuple[Path, int, str], list[dict[str, Any]]] = {(s, t, v): [] for s in sources for t, v in cases}
    with tempfile.TemporaryDirectory() as tmp:
        specs = {tools: catalog(Path(tmp), tools) for tools in args.tools}
        for _ in range(args.runs):
            for tools, server in cases:
                for src in sources:  # the checkouts interleaved, so one run's ratios compare like with like
                    script = (ROOT if server == HTTP else src) / SERVERS[server]
                    over = ["http"] if server == HTTP else []
                    printed = run_in(src, RUN, script, specs[tools][server], *over).splitlines()[-1]
                    runs[(src, tools, server)].append(json.loads(printed))
    rows, data = [], []
    for (src, tools, server), measured in runs.items():
        label = "this checkout" if src == ROOT else str(src)
        row: dict[str, Any] = {"checkout": label, "tools": tools, "server": server, "runs": measured}
        for call in ("first", "second"):
            for key in ("cpu_s", "peak_mib", "rss_mib"):
                row[f"{call}_{key}"] = statistics.median(r[call][key] for r in measured)
        data.append(row)
        rows.append([label, f"{tools:,}", server, f"{row['first_cpu_s']:.2f}", f"{row['first_peak_mib']:.0f}",
                     f"{row['first_rss_mib']:.0f}", f"{1000 * row['second_cpu_s']:.1f}",
                     f"{row['second_peak_mib']:.0f}"])  # fmt: skip
    print_table(
        f"the first and second call to a server of many tools, host process (median of {args.runs})",
        ["checkout", "tools", "server", "1st CPU s", "1st peak MiB", "RSS after MiB", "2nd CPU ms", "2nd peak MiB"],
        rows,
    )
    write_json("first_call_catalog.json", {"runs": args.runs, "cases": data})


if __name__ == "__main__":
    main()
