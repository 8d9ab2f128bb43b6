"""Benchmark the host's CPU for one tool answer of many content blocks, from the server's line to the caller's dict.

    python bench/answer_items.py [--runs 3] [--src DIR ...]

A server (tests/servers/blocks_server.py, over stdio and over Streamable HTTP with JSON replies) answers each call of
its tool ``blocks`` with the same result; a `tool_tree.background_pool.BackgroundPool` in a fresh process calls it
once to warm up, then ``--runs`` times. Reported: the CPU seconds of the calling process per call (the server is
another process: its own work is not in it) and the content blocks that reached the caller. Median of ``--runs``.

Shapes, each within the caps of one message (32 MiB, 1,000,000 JSON values):

- 140,000 text blocks with annotations (the costliest per block the SDK validates), and the same with their keys
  written as escapes (``"\\u0074ype"``), which a count of ``"type"`` misses;
- 330,000 plain text blocks;
- 1,000 annotated text blocks: what an honest server sends, for the cost of the rest;
- 990,000 empty objects of structured content (no content block): the shape the cut does not touch;
- 330,000 rows of structured content holding ``"caf\\u00e9"`` (as ``json.dumps`` writes non-ASCII text): an honest
  answer of escapes, which an HTTP answer's keys are looked for in.

``--src DIR`` measures another checkout of tooltree too (``git worktree add /tmp/before <commit>``), with this one's
virtualenv (its code first on the path), each shape run on every checkout in turn, so the ratios come from one run.
Writes bench/out/answer_items.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _common import ROOT, checkouts, positive_int, print_table, run_in, write_json

SERVER = ROOT / "tests" / "servers" / "blocks_server.py"

ANNOTATED = {"type": "text", "text": "x", "annotations": {"audience": ["user"], "priority": 0.5}}
ESCAPED = json.dumps(ANNOTATED).replace('"type"', '"\\u0074ype"').replace('"text"', '"\\u0074ext"')
SHAPES: dict[str, dict[str, Any] | str] = {
    "140,000 annotated text blocks": {"content": [ANNOTATED] * 140_000},
    "140,000 annotated text blocks, keys escaped": '{"content": [' + ", ".join([ESCAPED] * 140_000) + "]}",
    "330,000 text blocks": {"content": [{"type": "text", "text": "row"}] * 330_000},
    "1,000 annotated text blocks": {"content": [ANNOTATED] * 1_000},
    "990,000 values of structured content": {"content": [], "structuredContent": {"rows": [{}] * 989_990}},
    "660,000 values of structured content, text escaped": {
        "content": [],
        "structuredContent": {"rows": [{"n": "café"}] * 329_990},
    },
}
CALLER = """
import json, subprocess, sys, time
from tool_tree.background_pool import BackgroundPool
from tool_tree.config import ServerConfig
seconds, blocks, process = [], 0, None
if sys.argv[4] == "http":
    process = subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], "--http"], stdout=subprocess.PIPE, text=True)
    server = ServerConfig(name="b", url=process.stdout.readline().strip(), timeout=300)
else:
    server = ServerConfig(name="b", command=sys.executable, args=(sys.argv[1], sys.argv[2]), timeout=300)
try:
    with BackgroundPool([server]) as pool:
        pool.call("b", "blocks", {})
        for _ in range(int(sys.argv[3])):
            started = time.process_time()
            result = pool.call("b", "blocks", {})
            seconds.append(time.process_time() - started)
            blocks = len(result.get("content", []))
finally:
    if process is not None:
        process.kill()
print(json.dumps({"seconds": seconds, "blocks": blocks}))
"""


def run(server: Path, result: Path, runs: int, src: Path, transport: str) -> dict[str, Any]:
    out = run_in(src, CALLER, server, result, runs, transport, env={"OPENBLAS_NUM_THREADS": "1"})
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=3)
    args, sources = checkouts(parser)
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape in SHAPES.items():
            result = Path(tmp) / "result.json"
            result.write_text(shape if isinstance(shape, str) else json.dumps(shape), encoding="utf-8")
            for transport in ("stdio", "http"):
                for src in sources:  # the checkouts interleaved, so one run's ratios compare like with like
                    measured = run(SERVER, result, args.runs, src, transport)
                    cpu = statistics.median(measured["seconds"])
                    label = "this checkout" if src == ROOT else str(src)
                    rows.append([name, transport, label, f"{cpu:.2f}", f"{measured['blocks']:,}"])
                    data.setdefault(f"{name}, {transport}", {})[label] = {"cpu_seconds": cpu, **measured}
    print_table(
        f"the caller's CPU for one answer (median of {args.runs})",
        ["shape", "transport", "checkout", "CPU s", "blocks"],
        rows,
    )
    write_json("answer_items.json", {"runs": args.runs, "shapes": data})


if __name__ == "__main__":
    main()
