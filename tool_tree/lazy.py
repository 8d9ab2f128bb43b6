"""`lazy_exports`: a package's public names, each imported from its module on first use.

A package that re-exports names from modules which pull in heavy dependencies (the MCP SDK, anthropic, docker-py)
stays cheap to import: ``from sandbox import Sandbox`` loads only what `Sandbox` needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``, whose globals are ``namespace``: a name of ``exports``
    (name → module) is imported from its module when first asked for, then kept in ``namespace``; ``names`` are its
    ``__all__``.

    Define them where a type checker does not look (``if not TYPE_CHECKING:``), beside the same imports under ``if
    TYPE_CHECKING:``: it then refuses a misspelt name (``from sandbox import Sandboxx``) rather than take it as ``Any``.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *names])

    return __getattr__, __dir__
