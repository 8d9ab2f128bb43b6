"""A scriptable MCP server that speaks raw JSON-RPC over stdio (no SDK), for fault and edge-case tests.

    python raw_server.py SPEC.json

SPEC keys (all optional):
    pages:     list of lists of raw tool dicts; tools/list serves them with nextCursor "p1", "p2", …
    stderr:    text written to stderr at start
    banner:    lines ("banner 1", "banner 2", …) written to stdout at start, before anything is read
    tools/call: "pid" and "count" answer this process's pid and call count, "crash" exits with status 9 (with
               ``signal``, kills itself with it; with ``leave`` true, first starting a process that sleeps 600 s
               holding the server's stdout open), "hang" never answers, "sleep" waits ``seconds`` (one call at a
               time) and answers how many bytes its arguments were as JSON, "garbage" writes lines that are not
               JSON-RPC and never answers, "unreadable" answers a JSON-RPC error of id null (as a server that could
               not read the request does) with ``message`` (default "Parse error") and never answers the call,
               "half_then_exit" writes half an answer and exits, "answer" answers its ``result`` as the result,
               "big" answers a text of ``chars`` "x"s, "fail" answers a JSON-RPC error of ``code`` and
               ``message``, "spawn" starts a process that sleeps 600 s and answers its pid: ``how`` "child"
               (default) in the server's process group, "setsid" in a session of its own, "daemon" double-forked
               into a session of its own (its parent exits), "say" answers its ``text`` as it is (and
               ``structured`` as structured content), anything else echoes its arguments as JSON text
    behavior:  "ok" | "exit_at_start" | "garbage" | "hang_on_list" | "crash_on_list" | "loop_cursor"
               | "big_cursor" (a 100,000-character cursor)
    pid_file:  path to write this process's pid to
    log_file:  path to append "start <t>" (on start), "listed <t>" (on answering tools/list) and
               "called:<tool> <t>" (on taking a call) to, where <t> is the system-wide monotonic clock
    start_delay: seconds to sleep before answering anything
    list_gate: path of a file tools/list waits for (made by the test when the listing may go on)
    server_info: dict merged into serverInfo
    instructions: string
    ignore_unknown: true: a request of a method not named above gets no answer (an older server's way), logged
               "ignored:<method> <t>"
    log_signals: true: SIGTERM is logged "sigterm <t>" before the server exits (status 0)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

_SLEEP = "import os, sys, time; print(os.getpid(), flush=True); sys.stdout.close(); time.sleep(600)"
SPAWNED = {
    "child": _SLEEP,
    "setsid": _SLEEP,
    # Forks, leaves the server's session and exits: the daemon's parent is then init (or a subreaper), not the server.
    "daemon": "import os, sys\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n" + _SLEEP,
}


def send(msg: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def log(spec: dict[str, object], event: str) -> None:
    if spec.get("log_file"):
        with open(str(spec["log_file"]), "a", encoding="utf-8") as f:
            f.write(f"{event} {time.monotonic()}\n")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    log(spec, "start")
    if spec.get("log_signals"):
        signal.signal(signal.SIGTERM, lambda signum, frame: (log(spec, "sigterm"), os._exit(0)))
    if spec.get("pid_file"):
        with open(spec["pid_file"], "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
    if spec.get("stderr"):
        sys.stderr.write(spec["stderr"] + "\n")
        sys.stderr.flush()
    if spec.get("banner"):
        sys.stdout.write("".join(f"banner {i}\n" for i in range(1, int(spec["banner"]) + 1)))
        sys.stdout.flush()
    if spec.get("start_delay"):
        time.sleep(float(spec["start_delay"]))  # a server that is slow to start
    behavior = spec.get("behavior", "ok")
    if behavior == "exit_at_start":
        sys.exit(3)
    pages = spec.get("pages", [[]])
    calls = 0
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue  # a notification
        if behavior == "garbage":
            sys.stdout.write("this is not json\n{]\n")
            sys.stdout.flush()
            continue
        if method == "initialize":
            info = {"name": "raw", "version": "1.0", **spec.get("server_info", {})}
            result: dict[str, object] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": info,
            }
            if spec.get("instructions"):
                result["instructions"] = spec["instructions"]
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "tools/list":
            while spec.get("list_gate") and not os.path.exists(str(spec["list_gate"])):
                time.sleep(0.02)  # the test's gate: it decides when the listing answers
            if behavior == "hang_on_list":
                time.sleep(3600)
            if behavior == "crash_on_list":
                sys.stderr.write("fatal: tools database is corrupt\n")
                sys.stderr.flush()
                os._exit(7)
            cursor = (msg.get("params") or {}).get("cursor")
            index = int(cursor[1:].rstrip("x") or 0) if isinstance(cursor, str) else 0
            page: dict[str, object] = {"tools": pages[index]}
            if behavior == "loop_cursor":
                page["nextCursor"] = "p0"
            elif behavior == "big_cursor":
                page["nextCursor"] = "p1" + "x" * 100_000
            elif index + 1 < len(pages):
                page["nextCursor"] = f"p{index + 1}"
            log(spec, "listed")
            send({"jsonrpc": "2.0", "id": mid, "result": page})
        elif method == "tools/call":
            params = msg.get("params") or {}
            name, args = params.get("name"), params.get("arguments") or {}
            calls += 1
            log(spec, f"called:{name}")
            if name == "crash":
                if args.get("leave"):  # a helper that inherited the server's stdout, as a launcher's child does
                    subprocess.Popen([sys.executable, "-c", _SLEEP], stdin=subprocess.DEVNULL)
                sys.stderr.write("crashing on purpose\n")
                sys.stderr.flush()
                if args.get("signal"):
                    os.kill(os.getpid(), int(args["signal"]))
                os._exit(9)
            if name == "hang":
                time.sleep(3600)
            if name == "sleep":
                time.sleep(float(args.get("seconds", 0)))
                args = len(json.dumps(args))
            if name == "unreadable":
                error = {"code": -32700, "message": args.get("message", "Parse error")}
                send({"jsonrpc": "2.0", "id": None, "error": error})
                continue
            if name == "garbage":
                sys.stdout.write('this is not json\n{"jsonrpc": "2.0", "id": "nobody"}\n\x00\xff{]\n')
                sys.stdout.flush()
                continue
            if name == "spawn":  # a helper left behind: it outlives the server unless its group is ended
                child = subprocess.Popen(
                    [sys.executable, "-c", SPAWNED[args.get("how", "child")]],
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    start_new_session=args.get("how") == "setsid",
                )  # fmt: skip
                assert child.stdout is not None
                pid = child.stdout.readline().decode().strip()  # the daemon's, once it is one
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": pid}]}})
                continue
            if name == "fail":  # a JSON-RPC error, in the server's own words
                error = {"code": args.get("code", -32000), "message": str(args.get("message", ""))}
                send({"jsonrpc": "2.0", "id": mid, "error": error})
                continue
            if name == "answer":  # its ``result`` as the whole result, however malformed
                send({"jsonrpc": "2.0", "id": mid, "result": args.get("result")})
                continue
            if name == "half_then_exit":
                sys.stdout.write('{"jsonrpc": "2.0", "id": ' + json.dumps(mid) + ', "result": {"cont')
                sys.stdout.flush()
                os._exit(0)
            if name == "big":
                text = "x" * int(args.get("chars", 0))
            elif name == "say":
                text = str(args.get("text", ""))
            else:
                text = {"pid": str(os.getpid()), "count": str(calls)}.get(str(name), json.dumps(args))
            answer: dict[str, object] = {"content": [{"type": "text", "text": text}]}
            if name == "say" and "structured" in args:
                answer["structuredContent"] = args["structured"]
            send({"jsonrpc": "2.0", "id": mid, "result": answer})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": mid, "result": {}})
        elif spec.get("ignore_unknown"):
            log(spec, f"ignored:{method}")
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"method not found: {method}"}})


if __name__ == "__main__":
    main()
