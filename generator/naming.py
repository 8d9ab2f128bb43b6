"""Map untrusted names (servers, tools, properties) to safe Python identifiers.

Every name a server sends is hostile text: MCP allows ``-``, ``.``, ``/`` and more in tool
names, and a property can be called ``from``, ``2fa`` or ``__init__``. Two mappings:

- :func:`to_identifier`, for module, function and type names (they are bound at module level and
  imported into scripts): ASCII only (any other character becomes ``_``; unicode letters are
  folded by NFKD first, so ``café`` becomes ``cafe``; camelCase is kept as written); never a
  keyword, soft keyword, builtin name, dunder, or one of the caller's reserved names (those get a
  trailing ``_``); never empty, never starting with a digit.
- :func:`to_parameter`, for the keyword-only parameters of a stub: the wire name itself whenever
  Python can bind it (``id``, ``type``, ``format``, ``match``, ``_cursor`` stay as they are: a
  keyword-only parameter may shadow a builtin, and a soft keyword is an ordinary name there);
  only keywords, ``__debug__``, names that are not ASCII identifiers and the caller's reserved
  names (what the stub's body refers to) are changed, the same way as above.

Assigning names to a whole list (:func:`assign_identifiers`, :func:`assign_parameters`) is
deterministic and stable:

1. a name given before (``previous``, read from the manifest) is kept while it is still valid,
   so adding a tool or a property never renames an existing one;
2. then every name that is already its own identifier keeps it (``get_item`` keeps ``get_item``
   even when ``get-item`` sorts first);
3. then the others, sorted, take their mapped name or the first free ``_2``, ``_3`` … after it.
   Collisions count case-insensitively for file names (``Foo`` vs ``foo``).

The same names (and the same ``previous``) give the same identifiers whatever order they arrive in.
"""

from __future__ import annotations

import builtins
import keyword
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping

MAX_IDENTIFIER = 64

_RESERVED_ALWAYS = (
    set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins)) | {"self", "cls", "typing", "annotations"}
)
_NON_IDENT = re.compile(r"[^0-9A-Za-z_]+")
_UNDERSCORES = re.compile(r"_+")


def to_identifier(name: str, *, fallback: str = "x", reserved: Iterable[str] = ()) -> str:
    """Turn ``name`` into a safe ASCII identifier (not de-duplicated against other names)."""
    ident = _ascii_identifier(name, fallback)
    if ident in _RESERVED_ALWAYS or ident in set(reserved) or ident.startswith("__"):
        ident = ident.lstrip("_") + "_" if ident.startswith("__") else ident + "_"
        if ident in _RESERVED_ALWAYS or ident == "_":
            ident = f"{fallback}_{ident}"
    return ident


def _ascii_identifier(name: str, fallback: str) -> str:
    """``name`` folded to ASCII, other characters as single ``_``, not starting with a digit, capped."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    ident = _UNDERSCORES.sub("_", _NON_IDENT.sub("_", folded).strip("_"))
    if not ident:
        ident = fallback
    if ident[0].isdigit():
        ident = f"{fallback}_{ident}"
    return ident[:MAX_IDENTIFIER].rstrip("_") or fallback


def to_parameter(name: str, *, reserved: Iterable[str] = ()) -> str:
    """The keyword-only parameter for the wire name ``name`` (not de-duplicated against other names)."""
    taken = set(reserved)
    if _bindable(name) and name not in taken:
        return name
    ident = name if _bindable(name) else _ascii_identifier(name, "x")
    while not _bindable(ident) or ident in taken:
        ident += "_"
    return ident


def _bindable(name: str) -> bool:
    """An ASCII identifier a function can take as a keyword-only parameter."""
    return name.isascii() and name.isidentifier() and not keyword.iskeyword(name) and name != "__debug__"


def assign_identifiers(
    names: Iterable[str],
    *,
    fallback: str = "x",
    reserved: Iterable[str] = (),
    case_insensitive: bool = False,
    previous: Mapping[str, str] | None = None,
    occupied: Iterable[str] = (),
) -> dict[str, str]:
    """Give each distinct name a unique :func:`to_identifier`; the result does not depend on input order.

    ``case_insensitive`` makes ``Foo`` and ``foo`` collide too (use it for file names).
    ``previous`` maps names to the identifiers they were given before; those are kept when still valid.
    ``occupied`` identifiers are not given, as ``reserved`` ones, but taken as another name's would be: one that
    would get it gets a numbered one (``crm_2``), which it keeps once the identifier is free again.
    """
    reserved_set = set(reserved)
    return _assign(
        names,
        lambda name: to_identifier(name, fallback=fallback, reserved=reserved_set),
        reserved_set | set(occupied),
        case_insensitive,
        previous or {},
    )


def assign_parameters(
    names: Iterable[str], *, reserved: Iterable[str] = (), previous: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Give each distinct wire name a unique :func:`to_parameter`, as :func:`assign_identifiers` does."""
    reserved_set = set(reserved)
    return _assign(names, lambda name: to_parameter(name, reserved=reserved_set), reserved_set, False, previous or {})


def _assign(
    names: Iterable[str],
    convert: Callable[[str], str],
    reserved: set[str],
    case_insensitive: bool,
    previous: Mapping[str, str],
) -> dict[str, str]:
    def key(ident: str) -> str:
        return ident.lower() if case_insensitive else ident

    taken = {key(r) for r in reserved}
    out: dict[str, str] = {}

    def give(name: str, ident: str) -> None:
        taken.add(key(ident))
        out[name] = ident

    distinct = sorted(set(names))
    for name in distinct:  # 1. kept from before, while the rules still give it to itself
        ident = previous.get(name)
        if isinstance(ident, str) and convert(ident) == ident and key(ident) not in taken:
            give(name, ident)
    for name in distinct:  # 2. names that are their own identifier
        if name not in out and convert(name) == name and key(name) not in taken:
            give(name, name)
    tried: dict[str, int] = {}  # base → the last suffix it took: `taken` only grows, so none below is free
    for name in distinct:  # 3. the rest, in sorted order
        if name not in out:
            base = convert(name)
            n = tried.get(base, 1)
            candidate = base if n == 1 else f"{base}_{n}"
            while key(candidate) in taken:
                n += 1
                candidate = f"{base}_{n}"
            tried[base] = n
            give(name, candidate)
    return out
