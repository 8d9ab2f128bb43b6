"""What printing costs a script in the sandbox, under runc and under gVisor (``runsc``): this tree's image and,
with ``--before``, an earlier one (e.g. the image of an earlier commit: ``git worktree add /tmp/before <commit> &&
(cd /tmp/before && python -m sandbox.image build)``), run in turns.

    python bench/print_speed.py --before tooltree-sandbox:<tag> [--runtime runc --runtime runsc] [--runs 5]

Cases: 300,000 short lines (``print(i)``), one big print (20 MB in one ``print``), and 100,000 small writes to
stderr (``sys.stderr.write``). Each run is one execution in a warm session (the first, unmeasured, imports); a case's
time is the median of ``--runs``. The end of the output each run returns is checked. A runtime the
engine does not have is skipped with a note. Writes ``bench/out/print_speed.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _common import ROOT, positive_int, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from sandbox import DockerBackend, Sandbox, SandboxConfig
from sandbox.prune import remove_containers

OWNER = os.environ.get("TOOLTREE_SANDBOX_OWNER") or f"tooltree-bench-{os.getpid()}"
CASES = {
    "300,000 short lines": ("for i in range(300_000):\n    print(i)\n", "stdout", "299998\n299999"),
    "1 big print (20 MB)": ("print('x' * 20_000_000)\n", "stdout", "x" * 100),
    "100,000 small writes to stderr": (
        "import sys\nfor i in range(100_000):\n    sys.stderr.write('e\\n')\n",
        "stderr",
        "e\ne\ne",
    ),
}


def _run(sandbox: Sandbox, code: str, stream: str, end: str) -> float:
    started = time.perf_counter()
    result = sandbox.execute(code, timeout=600)
    elapsed = time.perf_counter() - started
    if not result.ok:
        raise SystemExit(f"the script failed: {result.error}\n{result.traceback}")
    got = (result.stdout if stream == "stdout" else result.stderr).rstrip("\n")
    if not got.endswith(end):
        raise SystemExit(f"{stream} ended {got[-80:]!r}, not {end[-80:]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="an earlier image to measure beside this tree's")
    parser.add_argument("--runtime", action="append", choices=("runc", "runsc"), help="default: both")
    parser.add_argument("--runs", type=positive_int, default=5)
    args = parser.parse_args()
    runtimes = args.runtime or ["runc", "runsc"]
    variants = ["before", "now"] if args.before else ["now"]
    times: dict[str, dict[str, list[float]]] = {}
    images: dict[str, str] = {}
    for runtime in runtimes:
        config = SandboxConfig(owner=OWNER, timeout=600, runtime=None if runtime == "runc" else runtime)
        backend = DockerBackend(config)
        if runtime not in backend.docker.info().get("Runtimes", {}):
            print(f"skipped {runtime}: the engine has no such runtime")
            continue
        backend.prepare()
        images["now"] = backend.image
        if args.before:
            images["before"] = args.before
        try:
            sessions = {}
            for variant in variants:
                backend_v = DockerBackend(config)
                backend_v.prepare()
                backend_v.image = images[variant]
                sessions[variant] = Sandbox(backend_v)
                sessions[variant].start()
                for code, stream, end in CASES.values():  # once each, unmeasured: imports, caches
                    _run(sessions[variant], code, stream, end)
            for n in range(args.runs):
                for variant in variants if n % 2 == 0 else variants[::-1]:
                    for name, (code, stream, end) in CASES.items():
                        key = f"{runtime}|{name}|{variant}"
                        times.setdefault(key, []).append(_run(sessions[variant], code, stream, end))
            for sb in sessions.values():
                sb.close()
        finally:
            remove_containers(backend.docker, label=f"tooltree.owner={OWNER}")
    rows, report = [], {}
    for key, values in times.items():
        runtime, name, variant = key.split("|")
        report.setdefault(runtime, {}).setdefault(name, {})[variant] = summary(values)
    for runtime, cases in report.items():
        for name, by in cases.items():
            row = [runtime, name]
            for variant in ("before", "now"):
                row.append(f"{by[variant]['median']:.2f}" if variant in by else "-")
            ratio = by["before"]["median"] / by["now"]["median"] if "before" in by else None
            by["speedup"] = ratio
            row.append(f"{ratio:.1f}x" if ratio else "-")
            rows.append(row)
    print_table(
        f"Printing in the sandbox: median of {args.runs} runs, s (before: {args.before or '-'})",
        ["runtime", "script", "before", "now", "before / now"],
        rows,
    )
    write_json("print_speed.json", {"images": images, "runs": args.runs, "cases": report})
    return 0


if __name__ == "__main__":
    sys.exit(main())
