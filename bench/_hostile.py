"""Host cost of one execution of a hostile script: peak host RSS and host CPU, per case.

Each case runs in a fresh host process (``python bench/_hostile.py CASE CONFIG TREE``), so "first"
means first, the peak resident set is the case's own (``/proc/self/clear_refs`` resets it after a
warm-up execution), and a case that never ends can be killed at a deadline by the parent without
taking the benchmark with it. The child prints one JSON line: wall time, host CPU (user + system of
the host process, all threads), peak host RSS above the warm baseline, the servers' CPU, and what
the script saw.

The cases are the host-side attacks of SECURITY.md ("Host resources"); they are written to run on
any version of the code and report whatever it costs, whether the host refuses them or not.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import ROOT, proc_status, sandbox_owner

sys.path.insert(0, str(ROOT))

SOAK_OWNER = "tooltree-soak"
"""The owner label of the soak's sandboxes (``bench/soak.py`` and its cases) when ``$TOOLTREE_SANDBOX_OWNER`` is not
set (`soak_owner`)."""


def soak_owner() -> str:
    """The owner label of the soak's sandboxes: the one the soak removes by after each part."""
    return sandbox_owner(SOAK_OWNER)


TRY = """\
from tool_tree.runtime import call_tool, ToolCallError
def attempt(server, arguments):
    try:
        return 'ok ' + str(len(call_tool(server, 'echo', arguments).text))
    except ToolCallError as e:
        return e.code
"""


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    script: str
    workspace: bool = False
    reopen: bool = False
    """Close the session (saving the workspace) and time a new one restoring it and running ``print(1)``."""


CASES = [
    Case(
        "regex_search",
        "search_tools('.*.*.*.*§', regex=True) over the tree",
        "print(len(search_tools('.*.*.*.*§', regex=True, detail='name')))",
    ),
    Case(
        "first_searches",
        "32 threads' first search_tools('is it going to rain tomorrow') at once",
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(32) as ex:\n"
        "    hits = list(ex.map(lambda _: len(search_tools('is it going to rain tomorrow')), range(32)))\n"
        "print(min(hits), max(hits))",
    ),
    Case(
        "inflated_argument",
        "one call whose arguments are a 16 MiB frame of [{}, {}, …]",
        TRY + "print(attempt(SERVER, {'i': 1, 'pad': [{}] * ((16 * 1024 * 1024 - 200) // 3)}))",
    ),
    Case(
        "inflated_in_flight",
        "16 calls at once, 4 MiB of [{}, {}, …] each",
        TRY + "from concurrent.futures import ThreadPoolExecutor\n"
        "pad = [{}] * ((4 * 1024 * 1024 - 100) // 3)\n"
        "with ThreadPoolExecutor(16) as ex:\n"
        "    print(sorted(ex.map(lambda i: attempt(SERVER, {'i': i, 'pad': pad}), range(16))))",
    ),
    Case(
        "refused_call_flood",
        "calls refused on the host (nested too deep), one after another for 25 s",
        "import time\nfrom tool_tree.runtime import call_tool, ToolCallError\ndeep = 1\nfor _ in range(25):\n"
        "    deep = [deep]\nend, n = time.monotonic() + 25, 0\nwhile time.monotonic() < end:\n"
        "    try:\n        call_tool(SERVER, 'echo', {'i': 1, 'pad': deep})\n    except ToolCallError as e:\n"
        "        n += 1\n        code = e.code\nprint(n, code)",
    ),
    Case(
        "parsed_then_refused_flood",
        "calls of 120,000 values (within a frame's budget, over a call's), from 4 threads for 25 s",
        TRY + "import time\nfrom concurrent.futures import ThreadPoolExecutor\npad = [{}] * 120_000\n"
        "def flood(_):\n    end, n = time.monotonic() + 25, 0\n    while time.monotonic() < end:\n"
        "        code = attempt(SERVER, {'i': 1, 'pad': pad})\n        n += 1\n    return n, code\n"
        "with ThreadPoolExecutor(4) as ex:\n    print(list(ex.map(flood, range(4))))",
    ),
    Case(
        "budget_exhausted_flood",
        "valid calls past the execution's call budget, one after another for 25 s",
        TRY + "import time\nend, n, codes = time.monotonic() + 25, 0, set()\nwhile time.monotonic() < end:\n"
        "    codes.add(attempt(SERVER, {'i': n})[:20])\n    n += 1\nprint(n, sorted(codes))",
    ),
    Case(
        "many_directories",
        "200,000 empty directories in a saved workspace, then a session restoring it",
        "import os\nfor i in range(200_000):\n    os.mkdir(f'/workspace/d{i}')\nprint('made')",
        workspace=True,
        reopen=True,
    ),
    Case(
        "many_folders_save",
        "1,500 folders of one file each, saved",
        "import os\nfor i in range(1500):\n    os.mkdir(f'/workspace/f{i}')\n"
        "    open(f'/workspace/f{i}/data.txt', 'w').write('x' * 100)\nprint('made')",
        workspace=True,
        reopen=True,
    ),
    Case(
        "oversized_argument",
        "one call with a 20 MB string (a frame over the cap)",
        TRY + "print(attempt(SERVER, {'i': 1, 'text': 'x' * 20_000_000}))",
    ),
    Case(
        "oversized_images",
        "four show_image() of 3 MiB each (each under the per-image limit)",
        "import os, zlib\n"
        "def chunk(kind, data):\n"
        "    return len(data).to_bytes(4, 'big') + kind + data + zlib.crc32(kind + data).to_bytes(4, 'big')\n"
        "png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', bytes.fromhex('00000001000000010802000000'))\n"
        "    + chunk(b'tEXt', b'pad\\x00' + os.urandom(3 * 1024 * 1024)) + chunk(b'IDAT', zlib.compress(b''))\n"
        "    + chunk(b'IEND', b''))  # a whole PNG: the host leaves out one that only starts as a PNG\n"
        "for _ in range(4):\n    show_image(png)\nprint('shown')",
    ),
]


HOST_PEAK_BOUND_MIB = 256
"""What one execution may add to the host's peak resident memory, whatever its script does (SECURITY.md)."""
HOST_CPU_BOUND_S = 5.0
"""Host CPU one execution may cost beyond the tools' own work (the servers' CPU is not counted in it)."""
TIMEOUT_S = 30.0
WALL_GRACE_S = 15.0
"""An execution, with its save and the next session where a case has them, ends within its timeout plus this."""


def within_bounds(result: dict[str, Any]) -> str:
    """``yes``, or ``no:`` and which bounds one case's measurement broke."""
    if "killed_after_s" in result or "crashed" in result:
        return "no: " + ("killed" if "killed_after_s" in result else "crashed")
    broken = [
        name
        for name, over in (
            ("memory", result["host_peak_above_base_mib"] > HOST_PEAK_BOUND_MIB),
            ("CPU", result["host_cpu_s"] > HOST_CPU_BOUND_S),
            ("wall", result["wall_s"] > TIMEOUT_S + WALL_GRACE_S),
        )
        if over
    ]
    return "no: " + ", ".join(broken) if broken else "yes"


def _proc_cpu(pid: str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _servers() -> list[str]:
    """The pids of this process's MCP servers (children running the catalog server)."""
    me, found = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
            if fields[1] == me and b"catalog_server" in (stat.parent / "cmdline").read_bytes():
                found.append(stat.parent.name)
        except OSError:
            continue
    return found


def _servers_cpu() -> float:
    return sum(_proc_cpu(pid) for pid in _servers())


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_case(case: Case, config_path: Path, tree: Path) -> dict[str, Any]:
    """Run one case in this process and measure it (the child's side)."""
    from sandbox import Sandbox, SandboxConfig
    from sandbox.errors import SandboxError
    from sandbox.mcp_bridge import McpBridge
    from tool_tree.pool import BackgroundPool
    from tooltree_cli.common import load

    config = load(config_path)
    server = config.servers[0].name
    script = f"SERVER = {server!r}\n" + case.script
    settings = SandboxConfig(owner=soak_owner(), timeout=TIMEOUT_S)
    out: dict[str, Any] = {"case": case.name, "what": case.what}
    with tempfile.TemporaryDirectory(prefix="tooltree-hostile-") as tmp, BackgroundPool(config.servers) as pool:
        workspace = Path(tmp) / "ws" if case.workspace else None
        if workspace is not None:
            workspace.mkdir()

        def session() -> Sandbox:
            return Sandbox(
                config=settings, tree=tree, tools=McpBridge(tree, pool.pool), tool_loop=pool.loop, workspace=workspace
            )

        sb = session().start()
        warm = sb.execute(TRY + f"print(attempt({server!r}, {{'i': 0}}))")  # starts the server too
        out["warm_up"] = warm.stdout.strip() or warm.error
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")  # reset the peak RSS to now
        base_rss, cpu0, servers0 = proc_status("VmRSS"), _cpu(), _servers_cpu()
        started = time.perf_counter()
        try:
            result = sb.execute(script)
            out["saw"] = (result.stdout.strip()[:300] or None, (result.error or "")[:300] or None)
        except SandboxError as e:
            out["saw"] = (None, f"{type(e).__name__}: {str(e)[:300]}")
        out["execution_s"] = round(time.perf_counter() - started, 2)
        if case.reopen:
            try:
                sb.close()
            except SandboxError as e:  # a save refused: the previous copy stays, the next session must still work
                out["save_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            assert workspace is not None
            out["files_saved"] = sum(1 for p in workspace.rglob("*") if p.is_file())
            out["dirs_saved"] = sum(1 for p in workspace.rglob("*") if p.is_dir())
            saved = f"{out['files_saved']} files, {out['dirs_saved']} folders saved"
            out["saw"] = (saved, out.get("save_error") or out["saw"][1])
            try:
                reopened = time.perf_counter()
                with session() as again:
                    out["next_print_1"] = again.execute("print(1)").stdout.strip()
                out["next_session_s"] = round(time.perf_counter() - reopened, 2)
            except SandboxError as e:
                out["next_session_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        else:
            sb.close()
        out["wall_s"] = round(time.perf_counter() - started, 2)
        out["host_cpu_s"] = round(_cpu() - cpu0, 2)
        out["servers_cpu_s"] = round(_servers_cpu() - servers0, 2)
        out["host_peak_rss_mib"] = round(proc_status("VmHWM") / 2**20, 1)
        out["host_peak_above_base_mib"] = round((proc_status("VmHWM") - base_rss) / 2**20, 1)
        out["server_peak_rss_mib"] = _server_peak()
    return out


def _server_peak() -> float:
    return round(max((proc_status("VmHWM", pid) for pid in _servers()), default=0) / 2**20, 1)


def run_all(config: Path, tree: Path, *, deadline: float, only: set[str], log: Callable[[str], None]) -> list[Any]:
    """Each case in its own process, killed at ``deadline`` seconds; what each measured."""
    import subprocess

    import _forged

    results: list[Any] = []
    for case in [*CASES, *_forged.CASES]:
        if only and case.name not in only:
            continue
        argv = [sys.executable, str(Path(__file__)), case.name, str(config), str(tree)]
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        peak = {"rss": 0, "cpu": 0.0}
        watcher = threading.Thread(target=_watch_peak, args=(proc, peak), daemon=True)
        watcher.start()
        try:
            stdout, stderr = proc.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            result: dict[str, Any] = {"case": case.name, "what": case.what, "killed_after_s": deadline}
            result["host_peak_rss_mib"] = round(peak["rss"] / 2**20, 1)
            result["host_cpu_s"] = f">{peak['cpu']:.1f}"  # the whole process, start-up included
            results.append(result)
            log(json.dumps(result))
            continue
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            results.append({"case": case.name, "what": case.what, "crashed": stderr[-1500:]})
        else:
            results.append(json.loads(lines[-1]) | {"process_s": round(time.perf_counter() - started, 1)})
        log(json.dumps(results[-1]))
    return results


def _watch_peak(proc: Any, peak: dict[str, float]) -> None:
    """The child's resident set and CPU, sampled (for a child killed before it could report its own)."""
    while proc.poll() is None:
        try:
            peak["rss"] = max(peak["rss"], proc_status("VmRSS", str(proc.pid)))
            peak["cpu"] = _proc_cpu(str(proc.pid))
        except (OSError, ValueError, IndexError):
            return
        time.sleep(0.2)


if __name__ == "__main__":
    import _forged

    forged = next((c for c in _forged.CASES if c.name == sys.argv[1]), None)
    if forged is not None:
        print(json.dumps(_forged.run_case(forged)), flush=True)
    else:
        chosen = next(c for c in CASES if c.name == sys.argv[1])
        print(json.dumps(run_case(chosen, Path(sys.argv[2]), Path(sys.argv[3]))), flush=True)
