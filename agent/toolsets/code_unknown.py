"""What code mode answers a call of a tool it does not offer whose name is a tool of the tree: a model that calls
``crm__get_record`` (as direct mode names it), ``crm.get_record`` or ``get_record`` as a tool of its own is told that
it is a function to call in ``execute_python``, and how to import it. Before, the answer listed the four tools alone,
and the model had to guess why the tool it had read of was not one."""

from __future__ import annotations

from collections.abc import Sequence

from agent.naming import native_names
from tool_tree.text import shown
from tool_tree.tree import Manifest, ToolEntry

SHOWN = 3
"""The most functions one answer names (a bare ``search`` may be a tool of many servers)."""


def _folded(name: str) -> str:
    return name.replace("-", "_").replace("/", ".").lower()


def tree_functions(name: str, manifest: Manifest) -> list[ToolEntry]:
    """The tools of the tree ``name`` names: by direct mode's native name, ``<server>.<tool>``, ``<package>.<function>``
    (``-`` and ``_``, ``/`` and ``.``, and case alike), or by its function or tool name alone."""
    wanted = _folded(name)
    native = {_folded(n): entry for n, entry in native_names(manifest.tools).items()}
    if (entry := native.get(wanted)) is not None:
        return [entry]
    named = [t for t in manifest.tools if wanted in {_folded(f"{t.server}.{t.tool}"), _folded(t.qualified_name)}]
    if named:
        return named[:1]
    return [t for t in manifest.tools if wanted in {_folded(t.function), _folded(t.tool)}]


def unknown_code_tool(name: str, offered: Sequence[str], manifest: Manifest) -> str:
    """The error of a call of ``name``, which code mode does not offer: with how to call the tree's tool of that name
    in a script, when it names one."""
    said = f"unknown tool {shown(name)}; the tools are {', '.join(offered)}"
    found = tree_functions(name, manifest)
    if not found:
        return said
    names = ", ".join(t.qualified_name for t in found[:SHOWN])
    imports = "; ".join(f"from servers.{t.path.split('/')[1]} import {t.function}" for t in found[:SHOWN])
    what = "is a Python function" if len(found) == 1 else "are Python functions"
    more = f" ({len(found) - SHOWN} more: search_tools)" if len(found) > SHOWN else ""
    return f"{said}. {names} {what} of the tree{more}, to call in a script with execute_python: {imports}"
