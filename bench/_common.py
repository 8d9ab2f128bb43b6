"""Shared helpers for the benchmarks: timing whole processes, medians, tables, JSON output, patched attributes."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
CORPORA = Path(os.environ.get("TOOLTREE_CORPORA", ROOT.parent / "shared" / "corpora"))


def sandbox_owner(default: str) -> str:
    """The owner label of a benchmark's sandboxes: ``$TOOLTREE_SANDBOX_OWNER`` when set, as every command takes it
    (runs on one engine then keep their sandboxes, and the removal of them by label, apart), else ``default``."""
    from sandbox.config import OWNER_ENV

    return os.environ.get(OWNER_ENV) or default


def corpus(*parts: str) -> Path:
    """A file of the shared benchmark corpora; exits with a clear message when it is absent."""
    path = CORPORA.joinpath(*parts)
    if not path.exists():
        sys.exit(f"benchmark corpus not found: {path} (set TOOLTREE_CORPORA to the corpora folder)")
    return path


def time_process(argv: Sequence[str], runs: int, *, env: dict[str, str] | None = None) -> list[float]:
    """Wall-clock seconds of ``runs`` whole-process runs of ``argv`` (each must exit 0 or 3).

    Bytecode caching is on, as for an installed package (pip compiles it), even when this shell
    sets ``PYTHONDONTWRITEBYTECODE``: otherwise every run would compile the modules it imports.
    """
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 3):
            sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return times


def proc_status(key: str, pid: int | str = "self") -> int:
    """A size field of ``/proc/PID/status`` in bytes (``VmRSS``: resident set, ``VmHWM``: its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count of runs or sessions)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def summary(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median": statistics.median(ordered), "p90": p90, "min": ordered[0], "runs": len(ordered)}


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


@contextmanager
def patched(patches: Mapping[tuple[Any, str], Any]) -> Iterator[None]:
    """Each ``(owner, name)`` attribute set to its value for the ``with`` block, and set back after it (an
    experiment's stand-in for what the search calls)."""
    real = {key: getattr(*key) for key in patches}
    for (owner, name), value in patches.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), value in real.items():
            setattr(owner, name, value)


def write_json(name: str, data: Any) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / name
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {path.relative_to(ROOT)}")
    return path


def checkouts(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, list[Path]]:
    """``parser``'s arguments with a repeatable ``--src DIR`` (another checkout of tooltree to measure beside this
    one, ``git worktree add /tmp/before <commit>``), parsed; and the checkouts to measure, this one first."""
    parser.add_argument(
        "--src", type=Path, action="append", default=[], help="another checkout to measure beside this one (repeatable)"
    )
    args = parser.parse_args()
    return args, [ROOT, *(src.resolve() for src in args.src)]


def run_in(src: Path, code: str, *args: object, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    """What ``python -c code args`` printed, run in the checkout ``src`` with its code first on the path (this
    checkout's virtualenv; ``env`` added to the environment); exits naming ``src`` and the end of its stderr if it
    fails."""
    done = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=src, env={**os.environ, **(env or {}), "PYTHONPATH": str(src)}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{src}: exited {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout
