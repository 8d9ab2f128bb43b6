"""Why a tool's definition cannot be carried as JSON: a number that is not finite once read, and where it is.

The SDK reads ``NaN`` and ``Infinity`` (not JSON) and a JSON number past a float's range (``1e309``, valid JSON) as
a float that is NaN or infinite; the manifest, the bridge's argument check and the model's tool list cannot carry
either. Before, both were said as "NaN or Infinity", so ``"maximum": 1e309`` read as a server sending NaN.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tool_tree.text import cut_name

PATH_CHARS = 120
"""The most characters of the place a warning names (its keys are a server's text, escaped)."""


def not_json(raw: dict[str, Any]) -> str | None:
    """What in ``raw`` JSON cannot carry, as a warning says it (``a number past a float's range (as 1e309 is) at
    inputSchema.properties.x.maximum, which tooltree cannot carry``); None when every number is finite. The walk is
    iterative (a definition may nest as deep as its parser let it), and made only when the encoder refuses it."""
    try:
        json.dumps(raw, allow_nan=False)
    except ValueError:
        pass
    else:
        return None
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), raw)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return _what(value).format(_place(path))
        if isinstance(value, dict):
            stack += [((*path, str(k)), v) for k, v in reversed(value.items())]
        elif isinstance(value, list):
            stack += [((*path, i), v) for i, v in reversed(list(enumerate(value)))]
    return None


def _what(value: float) -> str:
    if math.isnan(value):
        return "NaN at {}, which JSON cannot carry"
    sign = "-" if value < 0 else ""
    return f"a number past a float's range (as {sign}1e309 or {sign}Infinity is) at {{}}, which tooltree cannot carry"


def _place(path: tuple[str | int, ...]) -> str:
    """``inputSchema.properties.x.maximum``, ``enum[2]``: the keys escaped as names are (`cut_name`), cut."""
    text = "".join(
        f"[{p}]" if isinstance(p, int) else f"{'.' if i else ''}{cut_name(p, 40)}" for i, p in enumerate(path)
    )
    return text if len(text) <= PATH_CHARS else text[: PATH_CHARS - 1] + "…"
