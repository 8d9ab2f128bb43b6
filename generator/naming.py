"""Map untrusted names (servers, tools, properties) to safe Python identifiers.

Every name a server sends is hostile text: MCP allows ``-``, ``.``, ``/`` and more in tool
names, and a property can be called ``from``, ``2fa`` or ``__init__``. The mapping is

- ASCII only: any other character becomes ``_`` (unicode letters are folded by NFKD first, so
  ``café`` becomes ``cafe``); camelCase is kept as written;
- never a keyword, soft keyword, builtin name, dunder, or one of the caller's reserved names
  (those get a trailing ``_``), never empty, never starting with a digit;
- deterministic: the same list of names always gives the same identifiers, whatever the order
  they arrive in. Collisions after sanitising (``a-b`` vs ``a.b``, ``Foo`` vs ``foo`` on a
  case-insensitive file system) are resolved by sorting the originals and suffixing ``_2``,
  ``_3`` … in that order.
"""

from __future__ import annotations

import builtins
import keyword
import re
import unicodedata
from collections.abc import Iterable

MAX_IDENTIFIER = 64

_RESERVED_ALWAYS = (
    set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins)) | {"self", "cls", "typing", "annotations"}
)
_NON_IDENT = re.compile(r"[^0-9A-Za-z_]+")


def to_identifier(name: str, *, fallback: str = "x", reserved: Iterable[str] = ()) -> str:
    """Turn ``name`` into a safe ASCII identifier (not de-duplicated against other names)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    ident = _NON_IDENT.sub("_", folded).strip("_")
    ident = re.sub(r"_+", "_", ident)
    if not ident:
        ident = fallback
    if ident[0].isdigit():
        ident = f"{fallback}_{ident}"
    ident = ident[:MAX_IDENTIFIER].rstrip("_") or fallback
    if ident in _RESERVED_ALWAYS or ident in set(reserved) or ident.startswith("__"):
        ident = ident.lstrip("_") + "_" if ident.startswith("__") else ident + "_"
        if ident in _RESERVED_ALWAYS or ident == "_":
            ident = f"{fallback}_{ident}"
    return ident


def assign_identifiers(
    names: Iterable[str], *, fallback: str = "x", reserved: Iterable[str] = (), case_insensitive: bool = False
) -> dict[str, str]:
    """Give each distinct name a unique identifier; the result does not depend on input order.

    ``case_insensitive`` makes ``Foo`` and ``foo`` collide too (use it for file names).
    """
    reserved_set = set(reserved)
    taken: set[str] = {r.lower() if case_insensitive else r for r in reserved_set}
    out: dict[str, str] = {}
    for name in sorted(set(names)):
        base = to_identifier(name, fallback=fallback, reserved=reserved_set)
        candidate, n = base, 1
        while (candidate.lower() if case_insensitive else candidate) in taken:
            n += 1
            candidate = f"{base}_{n}"
        taken.add(candidate.lower() if case_insensitive else candidate)
        out[name] = candidate
    return out
