"""`make bench`: run every benchmark that can run here, one after another.

Each benchmark prints its table and writes JSON under bench/out/. Benchmarks that need a Docker
engine are skipped (with a line saying so) when none answers; those that read the shared corpora
say where they looked when the corpora are missing.
"""

from __future__ import annotations

import subprocess
import sys

from _common import ROOT


def docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main() -> int:
    live = (ROOT / ".real-servers" / ".stamp").is_file()
    runs: list[tuple[list[str], bool, str]] = [
        (["generate_tree.py", "--runs", "5", *(["--live"] if live else [])], True, ""),
        (["search_recall.py"], (ROOT / "bench" / "search_recall.py").is_file(), "not present"),
        (["sandbox_latency.py"], docker_ok(), "no Docker engine"),
        (["bridge_latency.py"], docker_ok(), "no Docker engine"),
        (["agent_replication.py"], docker_ok(), "no Docker engine"),
        (["soak.py"], docker_ok(), "no Docker engine"),
        (["serve.py"], docker_ok(), "no Docker engine"),
    ]
    failed = 0
    for argv, ok, why in runs:
        print(f"\n######## bench/{' '.join(argv)}", flush=True)
        if not ok:
            print(f"skipped: {why}")
            continue
        code = subprocess.run([sys.executable, str(ROOT / "bench" / argv[0]), *argv[1:]], cwd=ROOT, check=False)
        failed += code.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
