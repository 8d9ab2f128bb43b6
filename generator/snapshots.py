"""`read_snapshots`: the stored listings ``generate-tree --from-snapshot`` renders a tree from, checked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tool_tree.tree import TreeError


def read_snapshots(directory: Path) -> dict[str, dict[str, Any]]:
    """Snapshot files in ``directory``, keyed by the server name stored inside each.

    Raises:
        TreeError: a snapshot file is not valid JSON of the expected shape.
    """
    found: dict[str, dict[str, Any]] = {}
    if not directory.is_dir():
        raise TreeError(f"{directory}: no snapshots folder (generate the tree from live servers first)")
    for path in sorted(directory.glob("*.json")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
            data = json.loads(text)
        except (ValueError, OSError) as e:
            raise TreeError(f"{path}: unreadable snapshot ({e})") from None
        if _SURROGATE_ESCAPE.search(text) is not None and not _is_text(data):
            raise TreeError(
                f"{path}: unreadable snapshot (it holds an escape of a lone surrogate, such as \\ud800, which "
                "is no character and cannot be written)"
            )
        if (
            not isinstance(data, dict)
            or not isinstance(data.get("server"), str)
            or not isinstance(data.get("tools"), list)
        ):
            raise TreeError(f"{path}: not a tooltree snapshot (needs `server` and `tools`)")
        found[data["server"]] = data
    return found


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""JSON's escape of a surrogate: a pair of them is one character, one alone is none (and fails every write)."""


def _is_text(data: Any) -> bool:
    """Whether every string in ``data`` is text UTF-8 can encode (no lone surrogate)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
