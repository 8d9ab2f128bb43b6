"""Soak one long-running ``tooltree serve --http``: many client sessions of mixed behaviour, its resources sampled.

    python bench/serve_soak.py [--sessions 300] [--every 25] [--concurrency 3] [--warmup 12] [--grace-wait 180]

Users run one ``tooltree serve --http`` for days while Claude Code and Claude Desktop connect, disconnect and
crash. This starts one on the bundled sample servers (``examples/sample_servers``, a tree generated without
embeddings) and drives it with the official ``mcp`` SDK client through ``--sessions`` client sessions, in rounds
of the kinds below (``--concurrency`` at a time), each checked for the outcome it should have:

- **normal**: initialize, list tools, three ``execute_python`` calls (a variable kept between them), ``DELETE``;
- **upstream**: a script that calls the ``crm`` and ``docs`` sample servers through their stubs, and the
  ``crm__get_record`` passthrough tool (the session's upstream servers start, and must stop at its end);
- **cancelled**: a script cancelled by the client once it runs (``notifications/cancelled``), then a call that
  finds the session's variable still there;
- **timeout**: a script that runs past the sandbox's ``timeout`` (``--script-timeout``), then a call that works;
- **abandoned**: a client process killed with SIGKILL (no ``DELETE``), half of them mid-execution and half idle;
  their sessions end `agent.serve.sessions.GONE_GRACE` seconds after their connection closed.

Beside them one **connected** client (Claude Desktop) stays for the whole run, idle: it sets a variable first and
must find it after the last round (the gate, when every place of ``serve.max_sessions`` is taken, must end a session
whose client left rather than this one).

Every ``--every`` sessions (once the round's sessions have ended) the serve process is sampled: resident set
(``VmRSS``), open file descriptors, threads, live child processes (its upstream servers) and zombies, and the
containers carrying its owner label (the connected client's among them), next to the sessions of killed clients
still within their grace. After the
last round it waits (at most ``--grace-wait`` s) for the containers to come back down to ``serve.warm``, samples
once more, then stops serve with SIGTERM and counts what it left. The first samples are the warm-up
(``--warmup`` sessions); growth is measured from the sample after it.

Needs a Docker engine and the sandbox image. Containers carry ``tooltree.owner=tooltree-serve-soak-<pid>``; any
left are removed at the end (after being counted). Writes bench/out/serve_soak.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from _common import ROOT, positive_int, print_table, proc_status, write_json

sys.path.insert(0, str(ROOT))

from tests.support import ServeProcess

TOKEN = "serve-soak-token-0123456789"
SERVERS = ("docs", "crm", "media")
WARM = 1
KINDS = ("normal", "upstream", "cancelled", "normal", "timeout", "abandoned")
START_WAIT = 180.0
CALL_WAIT = 120.0
GONE_GRACE = 60.0  # agent.serve.sessions.GONE_GRACE (not imported: the client processes stay light)
GONE_CHECK = 20.0  # how late after the grace the registry's check (every GONE_GRACE / 4 s) ends such a session
RECORD = "0015e000003NWTR"

UPSTREAM = f"""\
from servers.crm import get_record
from servers.docs import list_documents
record = get_record(object_type='account', record_id={RECORD!r})
docs = list_documents()
print('upstream ok', bool(record), bool(docs))
"""


# ---- the serve process and what it holds ------------------------------------------------------------


def write_config(folder: Path, script_timeout: float) -> Path:
    lines = ["servers:"]
    for name in SERVERS:
        script = ROOT / "examples" / "sample_servers" / f"{name}.py"
        lines += [f"  {name}:", f"    command: {json.dumps(sys.executable)}", f"    args: [{json.dumps(str(script))}]"]
    lines += ["sandbox:", f"  timeout: {script_timeout}"]
    lines += ["serve:", f"  warm: {WARM}", "  progress_interval: 0.2", '  passthrough: ["crm.get_record"]']
    path = folder / "tooltree.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def generate_tree(config: Path, out: Path) -> None:
    from generator.generate import generate
    from tooltree_cli.common import load

    result = generate(load(config), out, embeddings="off")
    if result.failed:
        sys.exit(f"generate failed: {[s.error for s in result.failed]}")


def start_serve(config: Path, tree: Path, owner: str) -> ServeProcess:
    """``tooltree serve --http --port 0`` on the sample project, as the tests start it."""
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree)]
    argv += ["--no-regenerate", "--http", "--port", "0"]
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner, "TOOLTREE_SERVE_TOKEN": TOKEN}
    try:
        return ServeProcess(argv, env, wait=START_WAIT)
    except RuntimeError as e:
        sys.exit(str(e))


def descendants(pid: int) -> tuple[list[int], int]:
    """Live descendants of ``pid`` and the number of its zombie children."""
    parents: dict[int, list[tuple[int, str]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append((int(stat.parent.name), fields[0]))
    live, zombies, todo = [], 0, [pid]
    while todo:
        for child, state in parents.get(todo.pop(), []):
            if state == "Z":
                zombies += 1
            else:
                live.append(child)
                todo.append(child)
    return live, zombies


def containers(owner: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=tooltree.owner={owner}"],
                         capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return out.stdout.split()


def sample(pid: int, owner: str, sessions: int, pending: int) -> dict[str, Any]:
    live, zombies = descendants(pid)
    return {
        "sessions": sessions,
        "rss_mib": round(proc_status("VmRSS", pid) / 2**20, 1),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "threads": len(os.listdir(f"/proc/{pid}/task")),
        "children": len(live),
        "zombies": zombies,
        "containers": len(containers(owner)),
        "abandoned_in_grace": pending,
        "at": round(time.monotonic(), 1),
    }


# ---- the clients ---------------------------------------------------------------------------------


class Unexpected(Exception):
    """A session's outcome was not the one its kind should have."""


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in leaves(e)]
    return [error]


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Any]:
    """An SDK client (``mcp.Client``, entered) of ``url``; leaving it sends ``DELETE``."""
    import httpx2
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=CALL_WAIT)) as http,
        mcp.Client(streamable_http_client(url, http_client=http), read_timeout_seconds=CALL_WAIT) as c,
    ):
        yield c


async def run_session(url: str, kind: str) -> None:
    """One in-process client session of ``kind`` (not ``abandoned``); raises Unexpected on a wrong outcome."""
    import anyio

    async with connect(url) as c:

        async def run(code: str, *, error: bool = False) -> str:
            result = await c.call_tool("execute_python", {"code": code})
            if bool(result.is_error) != error:
                raise Unexpected(f"{kind}: {code[:40]!r} gave is_error={result.is_error}: {text_of(result)[:300]}")
            return text_of(result)

        tools = await c.list_tools()
        if "execute_python" not in [t.name for t in tools.tools]:
            raise Unexpected(f"{kind}: no execute_python in {[t.name for t in tools.tools]}")
        await run("x = 41\nprint('set')")
        if kind == "normal":
            await run("import json\nprint(json.dumps({'y': x + 1}))")
        elif kind == "upstream":
            out = await run(UPSTREAM)
            if "upstream ok True True" not in out:
                raise Unexpected(f"upstream: {out[:300]}")
            passed = await c.call_tool("crm__get_record", {"object_type": "account", "record_id": RECORD})
            if passed.is_error:
                raise Unexpected(f"passthrough: {text_of(passed)[:300]}")
        elif kind == "cancelled":
            running = anyio.Event()

            async def progress(done: float, total: float | None, message: str | None) -> None:
                running.set()

            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await c.call_tool("execute_python", {"code": "import time\ntime.sleep(600)"},
                                      progress_callback=progress)  # fmt: skip

                tg.start_soon(call)
                with anyio.fail_after(CALL_WAIT):
                    await running.wait()
                tg.cancel_scope.cancel()
        elif kind == "timeout":
            out = await run("import time\ntime.sleep(600)", error=True)
            if "timed out" not in out.lower() and "timeout" not in out.lower():
                raise Unexpected(f"timeout: {out[:300]}")
        out = await run("print(41 + 1)" if kind == "timeout" else "print(x + 1)")  # a timeout restarts the sandbox
        if out.strip() != "42":
            raise Unexpected(f"{kind}: the last call said {out[:300]!r}")


async def abandoned_client(url: str, running: bool) -> None:
    """``--abandon``: a client that says ``ready`` on stdout once its script runs (or, idle, once its call is
    answered), then waits to be killed."""
    import anyio

    async with connect(url) as c:
        await c.call_tool("execute_python", {"code": "x = 41\nprint('set')"})

        async def progress(done: float, total: float | None, message: str | None) -> None:
            print("ready", flush=True)

        if running:
            await c.call_tool("execute_python", {"code": "import time\ntime.sleep(600)"}, progress_callback=progress)
        else:
            print("ready", flush=True)
        await anyio.sleep_forever()


def abandon(url: str, running: bool) -> None:
    """Start a client process, kill it (SIGKILL) once it is ready: no DELETE, its connections just close."""
    argv = [sys.executable, __file__, "--abandon", url] + (["--running"] if running else [])
    proc = subprocess.Popen(argv, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    ready = threading.Event()
    threading.Thread(target=lambda: (proc.stdout.readline() == "ready\n") and ready.set(), daemon=True).start()
    try:
        if not ready.wait(CALL_WAIT):
            proc.kill()
            raise Unexpected(f"abandoned client never got ready: {proc.communicate(timeout=30)[1][-500:]}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


# ---- the soak ------------------------------------------------------------------------------------


def soak(args: argparse.Namespace) -> dict[str, Any]:
    import anyio

    owner = f"tooltree-serve-soak-{os.getpid()}"
    kinds = [k for k in KINDS if k in args.kinds.split(",")]
    if not kinds:
        sys.exit(f"--kinds: none of {args.kinds!r} is one of {', '.join(dict.fromkeys(KINDS))}")
    done: Counter[str] = Counter()
    failures: list[str] = []
    killed: list[float] = []  # when each abandoned client was killed
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tooltree-serve-soak-") as tmp:
        config = write_config(Path(tmp), args.script_timeout)
        generate_tree(config, Path(tmp) / "tree")
        serve = start_serve(config, Path(tmp) / "tree", owner)
        pid = serve.proc.pid
        started = time.monotonic()
        n = 0

        def pending() -> int:
            return sum(1 for t in killed if time.monotonic() - t < GONE_GRACE + GONE_CHECK)

        async def one(i: int) -> None:
            kind = kinds[i % len(kinds)]
            try:
                if kind == "abandoned":
                    await anyio.to_thread.run_sync(abandon, serve.url, done["abandoned"] % 2 == 0)
                    killed.append(time.monotonic())
                else:
                    await run_session(serve.url, kind)
                done[kind] += 1
            except Exception as e:  # a failed session is counted and shown, the soak goes on
                why = "; ".join(f"{type(x).__name__}: {x}" for x in leaves(e))
                failures.append(f"session {i} ({kind}): {why}"[:400])

        resident: list[str] = []

        async def stay(ready: Any, finish: Any) -> None:
            """A connected client that sets a variable first and reads it after the last round (Claude Desktop)."""
            try:
                async with connect(serve.url) as c:
                    await c.call_tool("execute_python", {"code": "kept = 'resident'\nprint(kept)"})
                    ready.set()
                    await finish.wait()
                    resident.append(text_of(await c.call_tool("execute_python", {"code": "print(kept)"})).strip())
            except Exception as e:  # its session was ended under it
                resident.append("; ".join(f"{type(x).__name__}: {x}" for x in leaves(e))[:300])
            finally:
                ready.set()

        async def rounds() -> None:
            async with anyio.create_task_group() as tg:
                ready, finish = anyio.Event(), anyio.Event()
                tg.start_soon(stay, ready, finish)
                await ready.wait()
                try:
                    await all_rounds()
                finally:
                    finish.set()

        async def all_rounds() -> None:
            nonlocal n
            limit = anyio.Semaphore(args.concurrency)

            async def limited(i: int) -> None:
                async with limit:
                    await one(i)

            samples.append({"label": "start", **sample(pid, owner, 0, 0)})
            total = args.warmup + args.sessions
            while n < total:
                size = min(args.every, total - n) if n >= args.warmup else min(args.every, args.warmup - n)
                async with anyio.create_task_group() as tg:
                    for i in range(n, n + size):
                        tg.start_soon(limited, i)
                n += size
                label = "warm-up" if n <= args.warmup else f"{n - args.warmup}"
                samples.append({"label": label, **sample(pid, owner, n, pending())})
                s = samples[-1]
                line = f"{s['rss_mib']} MiB, {s['fds']} fds, {s['threads']} threads, {s['children']} children, "
                line += f"{s['containers']} containers ({s['abandoned_in_grace']} abandoned in grace)"
                print(f"  {label:>8}: {line}, {len(failures)} failures, {time.monotonic() - started:.0f} s", flush=True)

        try:
            anyio.run(rounds)
            deadline = time.monotonic() + args.grace_wait
            while len(containers(owner)) > WARM and time.monotonic() < deadline:
                time.sleep(1)
            samples.append({"label": "after grace", **sample(pid, owner, n, 0)})
        finally:
            code = serve.stop()
            left_containers = containers(owner)
            left_children = descendants(pid)[0]
            from sandbox._docker import DockerEngine
            from sandbox.prune import remove_containers

            remove_containers(DockerEngine(), label=f"tooltree.owner={owner}")
    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M"),
        "load_avg_1m": os.getloadavg()[0],
        "sessions": dict(done),
        "failures": failures,
        "wall_seconds": round(time.monotonic() - started, 1),
        "samples": samples,
        "resident_client": resident[0] if resident else "no answer",
        "serve_exit": code,
        "left_after_stop": {"containers": len(left_containers), "processes": len(left_children)},
        "serve_stderr_tail": serve.stderr_lines[-20:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=positive_int, default=300, help="client sessions after the warm-up")
    parser.add_argument("--every", type=positive_int, default=25, help="sessions between two samples")
    parser.add_argument("--concurrency", type=positive_int, default=3, help="client sessions at once")
    parser.add_argument("--warmup", type=positive_int, default=12, help="client sessions before the baseline")
    parser.add_argument("--script-timeout", type=positive_int, default=10, help="the sandbox's timeout (s)")
    parser.add_argument("--grace-wait", type=positive_int, default=180, help="most seconds to wait at the end "
                        "for the abandoned sessions to end")  # fmt: skip
    parser.add_argument("--kinds", default=",".join(dict.fromkeys(KINDS)), help="the kinds of session, in turn "
                        "(comma-separated; the default mix has twice as many normal ones)")  # fmt: skip
    parser.add_argument("--abandon", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--running", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.abandon:
        import anyio

        anyio.run(abandoned_client, args.abandon, args.running)
        return

    report = soak(args)
    samples = report["samples"]
    base = next((s for s in samples if s["label"] != "start" and s["label"] != "warm-up"), samples[-1])
    keys = ("rss_mib", "fds", "threads", "children", "zombies", "containers", "abandoned_in_grace")
    rows = [[s["label"], s["sessions"], *(s[k] for k in keys)] for s in samples]
    print_table("tooltree serve --http under many client sessions (samples after each round)",
                ["after", "sessions", "RSS MiB", "fds", "threads", "children", "zombies", "containers",
                 "abandoned in grace"], rows)  # fmt: skip
    last = samples[-1]
    growth = {k: round(last[k] - base[k], 1) for k in ("rss_mib", "fds", "threads", "children", "containers")}
    report["growth_after_warmup"] = growth
    print(f"\nsessions: {report['sessions']}; failures: {len(report['failures'])}; wall {report['wall_seconds']} s")
    print(f"growth from the first sample after the warm-up to the last: {growth}")
    print(f"serve exit status {report['serve_exit']}; left after stop: {report['left_after_stop']}")
    print(f"the connected client's variable after the last round: {report['resident_client']!r} (expected 'resident')")
    for line in report["failures"][:10]:
        print("  ", line)
    write_json("serve_soak.json", report)
    flat = growth["fds"] <= 2 and growth["threads"] <= 2 and growth["children"] <= 0 and last["containers"] <= WARM
    kept = report["resident_client"] == "resident"
    if report["failures"] or not flat or not kept or any(report["left_after_stop"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
