"""Small printing helpers shared by subcommands."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any


def error(message: str) -> None:
    """One clear line on stderr."""
    print(f"tooltree: error: {message}", file=sys.stderr)


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    """A plain aligned text table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)
