"""`read_snapshots`: the stored listings ``generate-tree --from-snapshot`` renders a tree from, checked."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from tool_tree.held_values import HeldValues
from tool_tree.text import quoted_name
from tool_tree.tree import SNAPSHOTS_DIR, Manifest, TreeError, snapshot_json


def read_snapshots(directory: Path, named: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Snapshot files in ``directory``, keyed by the server name stored inside each.

    ``named`` maps each server of the tree whose snapshots folder ``directory`` is to the name of its snapshot file
    there (from the manifest). The tree's other files are the user's (a copy kept as ``crm-old.json``, notes): one
    that is no snapshot is passed over, and one holding a server's snapshot does not replace the file the manifest
    names for it. Without ``named`` (a folder of snapshots alone), every ``*.json`` file must be a snapshot.

    Raises:
        TreeError: a snapshot file is not valid JSON of the expected shape, or two files hold the same server and
            neither is the one ``named`` gives.
    """
    found: dict[str, dict[str, Any]] = {}
    sources: dict[str, Path] = {}
    held = HeldValues.reading()  # every file is held until all are read
    if not directory.is_dir():
        raise TreeError(f"{directory}: no snapshots folder (generate the tree from live servers first)")
    ours = set(named.values()) if named is not None else set()
    for path in sorted(directory.glob("*.json")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = _read(path, held)
        except TreeError:
            if named is not None and path.name not in ours:
                continue  # a file of the user's: not one tooltree reads
            raise
        server = data["server"]
        if named is not None and path.name != named.get(server, path.name) and (directory / named[server]).is_file():
            continue  # a copy of the user's: the file the manifest names is the server's snapshot
        if server in sources:
            raise TreeError(
                f"{sources[server]} and {path} both hold the snapshot of server {quoted_name(server)}: move the one "
                "not to use out of the folder"
            )
        found[server] = data
        sources[server] = path
    return found


def tree_snapshot_files(out: Path, snapshots: Path, previous: Manifest | None) -> dict[str, str] | None:
    """The ``named`` of `read_snapshots`: the name of each server's snapshot file the manifest of the tree ``out``
    (``previous``) records, when ``snapshots`` is that tree's own snapshots folder; else None."""
    if previous is None or snapshots.resolve() != (out / SNAPSHOTS_DIR).resolve():
        return None
    return {s.name: PurePosixPath(s.snapshot or f"{SNAPSHOTS_DIR}/{s.package}.json").name for s in previous.servers}


def _read(path: Path, held: HeldValues | None = None) -> dict[str, Any]:
    """The snapshot in the file ``path``, its values counted against ``held`` (`tool_tree.tree.snapshot_json`).

    Raises:
        TreeError: the file is not valid JSON of a snapshot's shape.
    """
    try:
        raw = path.read_bytes()
        data = snapshot_json(raw, held)
    except (ValueError, OSError) as e:
        raise TreeError(f"{path}: unreadable snapshot ({e})") from None
    if _SURROGATE_ESCAPE.search(raw) is not None and not _is_text(data):
        raise TreeError(
            f"{path}: unreadable snapshot (it holds an escape of a lone surrogate, such as \\ud800, which "
            "is no character and cannot be written)"
        )
    if not isinstance(data, dict) or not isinstance(data.get("server"), str) or not isinstance(data.get("tools"), list):
        raise TreeError(f"{path}: not a tooltree snapshot (needs `server` and `tools`)")
    return data


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""JSON's escape of a surrogate: a pair of them is one character, one alone is none (and fails every write)."""


def _is_text(data: Any) -> bool:
    """Whether every string in ``data`` is text UTF-8 can encode (no lone surrogate)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
