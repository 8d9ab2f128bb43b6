"""What sending output while a script runs costs (`sandbox._supervisor.stream`): the same scripts on the image of
this tree and on an image built before the supervisor streamed (``--before``, e.g. the image of an earlier commit:
``git worktree add /tmp/before <commit> && (cd /tmp/before && python -m sandbox.image build)``), run in turns.

    python bench/output_stream.py --before tooltree-sandbox:<tag> [--runs 7]

Both run the host code of this tree (an earlier supervisor sends no ``output`` notifications; the host needs none),
each run in a session of its own (a session's request budget would slow the later runs of one).
Cases: ``print(1)`` (a warm execution), 50 MB printed, 500 tool calls each after a print (every call sends the output
before it), and 500 tool calls with nothing printed. Writes ``bench/out/output_stream.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from _common import ROOT, positive_int, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.prune import remove_containers

OWNER = f"tooltree-bench-{os.getpid()}"
CALLS = "from tool_tree.runtime import call_tool\nfor i in range(500):\n"
CASES = {
    "print(1)": "print(1)",
    "50 MB printed": "import sys\nline = 'x' * 999 + '\\n'\nfor _ in range(50_000):\n    sys.stdout.write(line)\n",
    "500 calls, a print before each": CALLS + "    print('row', i)\n    call_tool('s', 't', {})\n",
    "500 calls, nothing printed": CALLS + "    call_tool('s', 't', {})\n",
}
REPEAT = {"print(1)": 20}
"""Executions per run of a case (a run's time is their median)."""


def _tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "ok"}]}


def _run(sandbox: Sandbox, code: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = sandbox.execute(code, timeout=120)
        times.append(time.perf_counter() - started)
        if not result.ok:
            raise SystemExit(f"the script failed: {result.error}\n{result.traceback}")
    return summary(times)["median"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the image of a supervisor that does not stream output")
    parser.add_argument("--runs", type=positive_int, default=7)
    args = parser.parse_args()
    config = SandboxConfig(owner=OWNER, timeout=120)
    backends = {}
    for variant in ("before", "now"):
        backend = DockerBackend(config)
        backend.prepare()
        if variant == "before":
            backend.image = args.before
        backends[variant] = backend
    times: dict[str, dict[str, list[float]]] = {case: {"before": [], "now": []} for case in CASES}
    try:
        for n in range(args.runs):
            # A session per run and variant: each has its own request budget (`sandbox.request_budget`), which
            # a few thousand calls in one session spend, and the script after would wait for it.
            for variant in ("before", "now") if n % 2 == 0 else ("now", "before"):
                with Sandbox(backends[variant], tools=_tool) as sandbox:
                    for code in CASES.values():  # once each, unmeasured: imports, caches
                        _run(sandbox, code, 1)
                    for name, code in CASES.items():
                        times[name][variant].append(_run(sandbox, code, REPEAT.get(name, 1)))
    finally:
        remove_containers(backends["now"].docker, label=f"tooltree.owner={OWNER}")
    rows, report = [], {}
    for name in CASES:
        before, now = summary(times[name]["before"]), summary(times[name]["now"])
        report[name] = {"before": before, "now": now, "ratio": now["median"] / before["median"]}
        rows.append(
            [name, f"{before['median'] * 1000:.1f}", f"{now['median'] * 1000:.1f}", f"{report[name]['ratio']:.2f}"]
        )
    print_table(
        f"Output streamed while a script runs: median of {args.runs} runs, ms (before: {args.before})",
        ["script", "before", "now", "now / before"],
        rows,
    )
    write_json("output_stream.json", {"before_image": args.before, "runs": args.runs, "cases": report})
    return 0


if __name__ == "__main__":
    sys.exit(main())
