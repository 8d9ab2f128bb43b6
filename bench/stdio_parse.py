"""Host CPU and memory to parse one stdio message of up to a million values: validated whole against parsed first.

``tool_tree.stdio_lines`` turns each stdout line of a stdio server into a message. The SDK's way validates the text
whole (``jsonrpc_message_adapter.validate_json``), which parses it again for each kind of message it tries; tooltree
now parses it once (``pydantic_core.from_json``: the same parser and limits) and validates the parsed values. Each
shape is a ``tools/call`` answer just within the value cap (`tool_tree.budget.MAX_MESSAGE_VALUES`); each way runs in
a fresh process: CPU seconds of the parse, then of the result's validation as a ``CallToolResult`` (what the
session does next, the same either way), and the process's peak resident set over its baseline. Median of
``--runs``.

Run:  .venv/bin/python bench/stdio_parse.py [--runs 3]   (writes bench/out/stdio_parse.json)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from typing import Any

from _common import ROOT, positive_int, print_table, write_json

SHAPES = {
    "1M empty objects (structured content)": {"content": [], "structuredContent": {"rows": [{}] * 999_990}},
    "200,000 annotated text blocks": {
        "content": [{"type": "text", "text": "x", "annotations": {"audience": ["user"], "priority": 0.5}}] * 199_990
    },
    "333,333 text blocks": {"content": [{"type": "text", "text": "row"}] * 333_330},
    "700,000 values of rows (8 MiB)": {
        "content": [],
        "structuredContent": {"rows": [{"id": i, "name": f"lead {i}", "ok": True} for i in range(175_000)]},
    },
}
CHILD = """
import json, sys, time
import mcp_types as types
from pydantic_core import from_json
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
line = sys.stdin.read()
base = hwm()
started = time.process_time()
if sys.argv[1] == "whole":
    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
else:
    message = types.jsonrpc_message_adapter.validate_python(from_json(line), by_name=False)
parsed = time.process_time()
types.CallToolResult.model_validate(message.result, by_name=False)
done = time.process_time()
print(json.dumps({"parse": parsed - started, "result": done - parsed, "mib": hwm() - base}))
"""


def run(way: str, line: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, way], input=line, capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=positive_int, default=3)
    args = parser.parse_args()
    rows, data = [], {}
    for name, result in SHAPES.items():
        line = json.dumps({"jsonrpc": "2.0", "id": 7, "result": result})
        runs: dict[str, list[dict[str, float]]] = {"whole": [], "parsed first": []}
        for _ in range(args.runs):
            for way in runs:
                runs[way].append(run("whole" if way == "whole" else "parsed", line))
        cells: list[Any] = [name, f"{len(line) / 2**20:.1f}"]
        data[name] = {"bytes": len(line)}
        for way, got in runs.items():
            med = {k: statistics.median(r[k] for r in got) for k in ("parse", "result", "mib")}
            cells += [f"{med['parse']:.2f}", f"{med['mib']:,.0f}"]
            data[name][way] = {**med, "runs": got}
        cells.append(f"{statistics.median(r['result'] for r in runs['whole']):.2f}")
        rows.append(cells)
    print_table(
        f"one stdio message parsed (CPU s, peak MiB over the baseline; median of {args.runs})",
        ["shape", "MiB", "whole: s", "whole: MiB", "parsed first: s", "parsed first: MiB", "then CallToolResult: s"],
        rows,
    )
    write_json("stdio_parse.json", data)


if __name__ == "__main__":
    main()
