"""Benchmark the save after each script of `tooltree serve --workspace`: telling whether anything changed, and a save.

    python bench/workspace_sync.py [--runs 10] [--runtime runsc] [--shape "20,000 empty folders"]

For workspaces of a few shapes (empty; 100 files of 1 KB; 3,000 files of 16 KB, 48 MB; 20,000 empty files; 20,000
empty folders), or the ``--shape`` named, on one session whose workspace folder is a temporary folder on the host:

- ``unchanged``: `Sandbox.save_workspace_if_changed` when nothing changed since the last save (the sandbox walks the
  workspace's names, modes, sizes and times: `workspace.stamp`), the cost every script pays;
- ``one file written``: the same after a script rewrote one small file, which saves that file (a save after the
  session's first into its folder sends only the files changed since the last one);
- ``save_workspace``: a plain save into the session's folder (nothing changed: every file goes as unchanged);
- ``whole save``: a save into a new folder, which sends every file (what each save cost before saves sent only
  the changed files).

Medians (and p90) over ``--runs``; writes ``bench/out/workspace_sync[_<runtime>].json``. Needs a Docker engine and
the image (``python -m sandbox.image build``); containers carry ``tooltree.owner=tooltree-bench-<pid>``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, positive_int, print_table, summary, write_json

sys.path.insert(0, str(ROOT))

from sandbox import Sandbox, SandboxConfig
from sandbox._docker import DockerEngine
from sandbox.prune import remove_containers

OWNER = f"tooltree-bench-{os.getpid()}"
SHAPES = {
    "empty": "",
    "100 files of 1 KB": "for i in range(100):\n    open(f'w/{i}', 'wb').write(b'x' * 1000)",
    "3,000 files of 16 KB": "for i in range(3000):\n    open(f'w/{i}', 'wb').write(os.urandom(16000))",
    "20,000 empty files": "for i in range(20000):\n    open(f'w/{i}', 'wb').close()",
    "20,000 empty folders": "for i in range(20000):\n    os.mkdir(f'w/{i}')",
}


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def measure(config: SandboxConfig, make: str, runs: int) -> dict[str, list[float]]:
    folder = Path(tempfile.mkdtemp(prefix="tooltree-bench-ws-"))
    times: dict[str, list[float]] = {"unchanged": [], "one file written": [], "save_workspace": [], "whole save": []}
    try:
        with Sandbox(config=config, workspace=folder) as sb:
            made = sb.execute(f"import os\nos.makedirs('w', exist_ok=True)\n{make}", timeout=300)
            assert made.ok, made.error
            sb.save_workspace()
            for n in range(runs):
                assert sb.execute("pass").ok
                times["unchanged"].append(timed(sb.save_workspace_if_changed))
                assert sb.execute(f"open('changed.txt', 'w').write('{n}')").ok
                times["one file written"].append(timed(sb.save_workspace_if_changed))
                times["save_workspace"].append(timed(sb.save_workspace))
                elsewhere = Path(tempfile.mkdtemp(prefix="tooltree-bench-ws-whole-"))
                try:
                    times["whole save"].append(timed(functools.partial(sb.save_workspace, elsewhere / "ws")))
                finally:
                    shutil.rmtree(elsewhere, ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=10)
    parser.add_argument("--runtime", default=None, help="an OCI runtime such as runsc (default: the engine's)")
    parser.add_argument("--shape", choices=list(SHAPES), action="append", help="measure only this workspace shape")
    args = parser.parse_args()
    config = SandboxConfig(owner=OWNER, runtime=args.runtime, timeout=300)
    results: dict[str, dict[str, dict[str, float]]] = {}
    rows = []
    try:
        for shape, make in SHAPES.items():
            if args.shape and shape not in args.shape:
                continue
            measured = measure(config, make, args.runs)
            results[shape] = {kind: summary(values) for kind, values in measured.items()}
            rows.append([shape, *(f"{1000 * results[shape][k]['median']:.1f}" for k in measured)])
    finally:
        remove_containers(DockerEngine(), label=f"tooltree.owner={OWNER}")
    runtime = args.runtime or "default"
    print_table(
        f"workspace saves after a script, ms (median of {args.runs}; runtime {runtime})",
        ["workspace", "unchanged (stamp only)", "one file written (stamp + save)", "save_workspace", "whole save"],
        rows,
    )
    name = "workspace_sync.json" if args.runtime is None else f"workspace_sync_{args.runtime}.json"
    write_json(name, {"runtime": runtime, "runs": args.runs, "results": results})


if __name__ == "__main__":
    main()
