"""How many lines of a module a call runs: a measure of work that, unlike a time, is the same on every
machine, so a test can tell work that grows with the square of the input from work that grows with it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any


@dataclass
class Lines:
    count: int = 0


@contextmanager
def lines_run(*modules: ModuleType) -> Iterator[Lines]:
    """Count the lines of ``modules`` run inside the ``with`` block (in this thread)."""
    files = {m.__file__ for m in modules}
    lines = Lines()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            lines.count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename in files else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        yield lines
    finally:
        sys.settrace(before)
