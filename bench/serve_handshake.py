"""How long an MCP client waits for `tooltree serve`'s handshake when the config has many servers.

    TOOLTREE_CORPORA=../shared/corpora python bench/serve_handshake.py [--servers 120] [--runs 2]

One config of ``--servers`` catalog servers (`_catalog`, as `start_servers.py`), its tree generated
once. Then `tooltree serve --warm 0` is started over stdio, ``--runs`` times in each mode, alternately:
the default (an existing tree is served at once and refreshed in the background) and
``--regenerate-first`` (the tree is brought up to date before the handshake is answered). Timed
from the process's start to the ``initialize`` result and to the first ``list_files`` result;
then stdin is closed and the time until the process has exited (its refresh cancelled, its
servers closed) is timed too. A client gives up on a handshake after its own timeout (Claude
Code: 30 s, ``MCP_TIMEOUT``). Embeddings are off throughout (``TOOLTREE_SEARCH_EMBEDDINGS=0``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _catalog import write_config
from _common import ROOT, positive_int, print_table, summary, write_json

CLIENT_TIMEOUT = 30.0


def _rpc(proc: subprocess.Popen[str], lines: list[dict[str, Any]], changed: threading.Condition,
         message: dict[str, Any], wait: float) -> tuple[dict[str, Any] | None, float]:  # fmt: skip
    """Send ``message`` (with an ``id``); its answer and when it came (monotonic), or None after ``wait`` s."""
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    proc.stdin.flush()
    with changed:
        found = changed.wait_for(lambda: next((m for m in lines if m.get("id") == message["id"]), None), wait)
    return found, time.monotonic()


def run_once(config: Path, tree: Path, first: bool, env: dict[str, str]) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "tooltree_cli.main",
        "serve",
        "--config",
        str(config),
        "--tree",
        str(tree),
        "--warm",
        "0",
    ]
    if first:
        argv.append("--regenerate-first")
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    lines: list[dict[str, Any]] = []
    changed = threading.Condition()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with changed:
                lines.append(json.loads(line))
                changed.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
    init, at_init = _rpc(proc, lines, changed, {"id": 1, "method": "initialize", "params": params}, 600)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    call = {"id": 2, "method": "tools/call", "params": {"name": "list_files", "arguments": {"path": "servers"}}}
    listed, at_list = _rpc(proc, lines, changed, call, 600)
    closing = time.monotonic()
    proc.stdin.close()
    code = proc.wait(timeout=600)
    ended = time.monotonic()
    reader.join(timeout=60)
    return {
        "mode": "--regenerate-first" if first else "default (background refresh)",
        "handshake_s": round(at_init - start, 2) if init else None,
        "first_call_s": round(at_list - start, 2) if listed else None,
        "within_client_timeout": bool(init) and at_init - start <= CLIENT_TIMEOUT,
        "exit_after_close_s": round(ended - closing, 2),
        "exit_code": code,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=120)
    parser.add_argument("--runs", type=positive_int, default=2)
    args = parser.parse_args()
    env = {**os.environ, "TOOLTREE_SEARCH_EMBEDDINGS": "0", "TOOLTREE_SANDBOX_OWNER": "tooltree-bench-handshake"}
    results = []
    with tempfile.TemporaryDirectory(prefix="tooltree-handshake-") as tmp:
        config = write_config(Path(tmp), args.servers)[0]
        tree = Path(tmp) / "tree"
        gen = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--config", str(config), "--out", str(tree)]
        t = time.monotonic()
        subprocess.run(gen, env=env, cwd=ROOT, check=True, capture_output=True, timeout=1800)
        print(f"tree of {args.servers} servers generated in {time.monotonic() - t:.1f} s", file=sys.stderr)
        for _ in range(args.runs):
            for first in (False, True):
                results.append(run_once(config, tree, first, env))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    rows = []
    for mode in ("default (background refresh)", "--regenerate-first"):
        mine = [r for r in results if r["mode"] == mode]
        rows.append([
            mode,
            round(summary([r["handshake_s"] for r in mine if r["handshake_s"] is not None])["median"], 2),
            round(summary([r["first_call_s"] for r in mine if r["first_call_s"] is not None])["median"], 2),
            f"{sum(r['within_client_timeout'] for r in mine)}/{len(mine)}",
            round(summary([r["exit_after_close_s"] for r in mine])["median"], 2),
        ])  # fmt: skip
    print_table(
        f"tooltree serve over stdio, {args.servers} servers, tree already generated (median of {args.runs})",
        ["mode", "handshake s", "first list_files s", f"handshake ≤ {CLIENT_TIMEOUT:g} s", "exit after stdin closes s"],
        rows,
    )
    write_json("serve_handshake.json", {"servers": args.servers, "runs": results})


if __name__ == "__main__":
    main()
