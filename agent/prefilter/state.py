"""The admitted set: the tools a conversation has been shown so far. It only grows.

Kept in admission order, because the tools array appends each newly admitted tool at the end
(the prompt-cache prefix before it stays the same). Optionally persisted per agent profile
(``--prefilter-state FILE``) so the set carries over between conversations::

    {"format": "tooltree-prefilter-state", "version": 1, "admitted": ["crm.get_record", ...]}

Keys that are not in the current catalog (a server was removed) are kept in the file and not
offered. A file that cannot be read is never overwritten: the run fails open and says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from agent.prefilter.base import FilterError

STATE_FORMAT = "tooltree-prefilter-state"
STATE_VERSION = 1


class AdmittedSet:
    """Tool keys in the order they were admitted; ``grow`` is the only way to change it."""

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._order: list[str] = []
        self._seen: set[str] = set()
        self.grow(keys)

    def grow(self, keys: Iterable[str]) -> list[str]:
        """Add ``keys`` not yet admitted (in the order given); returns the ones added."""
        added: list[str] = []
        for key in keys:
            if key not in self._seen:
                self._seen.add(key)
                self._order.append(key)
                added.append(key)
        return added

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._order))

    def keys(self) -> list[str]:
        """A copy, in admission order."""
        return list(self._order)

    def copy(self) -> AdmittedSet:
        return AdmittedSet(self._order)


def load_state(path: Path) -> AdmittedSet:
    """The set persisted at ``path``; an empty set when the file does not exist.

    Raises:
        FilterError: (``corrupt_state``) the file cannot be read or is not a state file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return AdmittedSet()
    except (OSError, UnicodeDecodeError) as e:
        raise FilterError(f"{path}: cannot read the pre-filter state ({e})", kind="corrupt_state") from None
    fix = "fix or delete the file; until then every tool is offered"
    try:
        data = json.loads(text)
    except ValueError as e:
        raise FilterError(f"{path}: corrupt pre-filter state ({e}); {fix}", kind="corrupt_state") from None
    admitted = data.get("admitted") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("format") != STATE_FORMAT or data.get("version") != STATE_VERSION:
        raise FilterError(f"{path}: not a version-{STATE_VERSION} pre-filter state file; {fix}", kind="corrupt_state")
    if not isinstance(admitted, list) or not all(isinstance(k, str) for k in admitted):
        raise FilterError(f"{path}: 'admitted' must be a list of server.tool names; {fix}", kind="corrupt_state")
    return AdmittedSet(admitted)


def save_state(path: Path, admitted: AdmittedSet) -> None:
    """Write the set to ``path`` atomically (a temporary file, then a rename).

    Raises:
        FilterError: (``error``) the file cannot be written.
    """
    data = {"format": STATE_FORMAT, "version": STATE_VERSION, "admitted": admitted.keys()}
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:
        raise FilterError(f"{path}: cannot write the pre-filter state ({e})") from None
