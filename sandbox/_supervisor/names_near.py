"""The name nearest a wrong one, measured as Python 3.12's `traceback` measures it for "Did you mean: 'x'?".

A Levenshtein distance where a change of case costs half a change; a name is near enough at most about a third of
the two names' length apart; names over 40 characters, and lists of over 750, get none.
"""

from __future__ import annotations

from collections.abc import Iterable

_MAX_CANDIDATES = 750
_MAX_NAME = 40
_MOVE_COST = 2
_CASE_COST = 1


def _distance(a: str, b: str, limit: int) -> int:
    """The edit distance of ``a`` and ``b`` (a change of case costs `_CASE_COST`, any other edit `_MOVE_COST`); past
    ``limit``, any number over it."""
    if a == b:
        return 0
    if abs(len(a) - len(b)) * _MOVE_COST > limit:
        return limit + 1
    row = [i * _MOVE_COST for i in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i * _MOVE_COST
        best = row[0]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else _CASE_COST if ca.lower() == cb.lower() else _MOVE_COST
            previous, row[j] = row[j], min(previous + cost, row[j] + _MOVE_COST, row[j - 1] + _MOVE_COST)
            best = min(best, row[j])
        if best > limit:
            return limit + 1
    return row[-1]


def closest(wrong: str, candidates: Iterable[str]) -> str | None:
    """The candidate nearest ``wrong`` that is near enough, the first of equals in ``candidates``' order; else None."""
    names = [c for c in dict.fromkeys(candidates) if isinstance(c, str)]
    if len(names) > _MAX_CANDIDATES or len(wrong) > _MAX_NAME:
        return None
    found, best = None, len(wrong)
    for name in names:
        if name == wrong or len(name) > _MAX_NAME:
            continue
        limit = min((len(name) + len(wrong) + 3) * _MOVE_COST // 6, best - 1)
        distance = _distance(wrong, name, limit)
        if distance <= limit:
            found, best = name, distance
    return found
