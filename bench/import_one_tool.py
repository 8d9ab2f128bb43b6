"""Benchmark what a script pays to import one tool of a big server: ``from servers.<server> import <tool>``.

    TOOLTREE_CORPORA=../shared/corpora python bench/import_one_tool.py [--runs 7] [--src DIR ...]

For each checkout (this one, and each ``--src``: ``git worktree add /tmp/before <commit>``), a tree of one server of
N tools (the 527 real schemas of ``livemcpbench/tools.json``, renamed and repeated) is generated from a snapshot by
that checkout's `generate-tree`, then a fresh interpreter (``python -I``, the tree first on its path, as the sandbox
runs scripts) imports one tool from the server's package; whole-process seconds, median and p90 over ``--runs``.
The row "every tool" imports them all (``from servers.<server> import *``): what a package that imports each of its
stubs as it is imported costs for one tool. Run on the host's interpreter, not in the sandbox: compare rows of one
run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import checkouts, corpus, positive_int, print_table, summary, time_process, write_json

SIZES = (500, 2_000, 10_000)


def snapshot(dest: Path, tools: int) -> Path:
    """A snapshot folder of one server, ``big``, of ``tools`` tools."""
    data = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    real = [t for e in data for body in e["tools"].values() for t in body.get("tools", [])]
    listed = []
    for i in range(tools):
        t = dict(real[i % len(real)])
        t["name"] = f"{t['name']}_{i}"
        listed.append(t)
    dest.mkdir(parents=True)
    (dest / "big.json").write_text(json.dumps({"server": "big", "info": {}, "tools": listed}), encoding="utf-8")
    return dest


def generate(src: Path, snapshots: Path, tree: Path) -> str:
    """Generate ``tree`` with checkout ``src``; the function name of the server's first tool."""
    argv = [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--embeddings", "off"]
    argv += ["--from-snapshot", str(snapshots), "--out", str(tree)]
    done = subprocess.run(argv, cwd=src, env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True)
    if done.returncode != 0:
        raise SystemExit(f"{src}: generate-tree exited {done.returncode}\n{done.stderr.decode()[-3000:]}")
    stubs = sorted(p.stem for p in (tree / "servers" / "big").glob("*.py") if p.stem != "__init__")
    return stubs[0]


def importing(tree: Path, what: str) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from servers.big import {what}"
    return [sys.executable, "-I", "-c", code]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=positive_int, default=7)
    args, srcs = checkouts(parser)
    results: dict[str, Any] = {}
    rows: list[list[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for size in SIZES:
            snapshots = snapshot(work / f"snap{size}", size)
            for n, src in enumerate(srcs):
                tree = work / f"tree{size}-{n}"
                first = generate(src, snapshots, tree)
                cases = {"one tool": first, **({"every tool": "*"} if n == 0 else {})}
                for case, what in cases.items():
                    t = summary(time_process(importing(tree, what), args.runs))
                    results[f"{src.name}/{size}/{case}"] = {"checkout": str(src), "tools": size, **t}
                    rows.append([src.name, f"{size:,}", case, f"{t['median']:.3f}", f"{t['p90']:.3f}"])
    print_table(
        "import from a server's package (fresh interpreter, whole process, seconds)",
        ["checkout", "tools", "imports", "median", "p90"],
        rows,
    )
    write_json("import_one_tool.json", results)


if __name__ == "__main__":
    main()
