"""The "Did you mean: 'x'?" Python 3.12's `traceback` adds to a script's NameError, AttributeError and ImportError.

The worker formats a script's error with `traceback.TracebackException`, which adds these suggestions only from
Python 3.12 on (before, only the interpreter's own hook did, and the worker formats errors itself): in a sandbox of
3.10 or 3.11 a model's typo (``leedz``, ``crm.serach_records``) got none. The names come from where 3.12 takes them
and are measured as it measures them (`names_near`). Besides what 3.12 says, in any version:

- a package's modules count among its names, imported or not: ``from servers import crmm`` → 'crm', and a module not
  found in a package is matched against them: ``import servers.crmm`` → 'servers.crm';
- a server's package in the tree (``servers.<server>``) names the README that lists its tools when no tool is close;
- a name not defined that is a tool of the tree says where to import it from (``from servers.crm import
  search_records``);
- a TypeError refusing a call of a stub names the stub, and a stub's result given to asyncio says that stubs are
  synchronous (`stub_calls`).

Only what is already loaded is looked at: nothing is imported to suggest a name.
"""

from __future__ import annotations

import importlib.util
import os
import pkgutil
import re
import sys
import traceback
import types
from collections.abc import Iterable

from .names_near import closest
from .stub_calls import result_given_to_asyncio, stub_call_refused

_MODULE_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_SERVER_PACKAGE = re.compile(r"servers\.\w+")


def _modules_in(package: types.ModuleType) -> list[str]:
    """The modules of ``package`` (its files, imported or not); none for a module that is no package."""
    path = getattr(package, "__path__", None)
    return [m.name for m in pkgutil.iter_modules(path)] if isinstance(path, list) else []


def _public(names: Iterable[str], wrong: str) -> list[str]:
    """``names`` but those starting with an underscore, unless ``wrong`` does."""
    return sorted(n for n in names if isinstance(n, str) and (n[:1] != "_" or wrong[:1] == "_"))


def _tools_listed(module: types.ModuleType) -> str:
    """For a server's package of the tree with a README: where its tools are listed."""
    name, file = module.__name__, getattr(module, "__file__", None)
    if not _SERVER_PACKAGE.fullmatch(name) or not isinstance(file, str):
        return ""
    if not os.path.isfile(os.path.join(os.path.dirname(file), "README.md")):
        return ""
    return f". The tools of {name} are listed in {name.replace('.', '/')}/README.md"


def _in_module(module: types.ModuleType | None, wrong: str) -> str:
    if module is None:
        return ""
    found = closest(wrong, _public({*dir(module), *_modules_in(module)}, wrong))
    return f". Did you mean: '{found}'?" if found else _tools_listed(module)


def _innermost(tb: types.TracebackType | None) -> types.FrameType | None:
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame


def _name_error(exc: NameError) -> str:
    wrong: object = exc.name
    frame = _innermost(exc.__traceback__)
    if not isinstance(wrong, str) or frame is None:
        return ""
    found = None
    if "self" in frame.f_locals and hasattr(frame.f_locals["self"], wrong):
        found = f"self.{wrong}"
    else:
        found = closest(wrong, [*frame.f_locals, *frame.f_globals, *frame.f_builtins])
    said = f". Did you mean: '{found}'?" if found else ""
    if wrong in sys.stdlib_module_names:
        said += f" Or did you forget to import '{wrong}'?" if found else f". Did you forget to import '{wrong}'?"
    elif imports := _tool_imports(wrong):
        said += f"{' Or d' if said else '. D'}id you forget to import it ({' or '.join(imports)})?"
    return said


def _tool_imports(name: str) -> list[str]:
    """``from servers.<server> import <name>`` for each server of the tree with a tool of that name (the first 3)."""
    if name[:1] == "_":
        return []
    servers = sys.modules.get("servers")
    spec = None if servers is not None else importlib.util.find_spec("servers")  # finds, imports nothing
    folders = getattr(servers, "__path__", None) if servers is not None else spec and spec.submodule_search_locations
    found = []
    for folder in folders or []:
        for server in sorted(os.listdir(folder)):
            if server.isidentifier() and os.path.isfile(os.path.join(folder, server, f"{name}.py")):
                found.append(f"from servers.{server} import {name}")
    return found[:3]


def _attribute_error(exc: AttributeError) -> str:
    wrong: object = exc.name  # None when raised by hand (typeshed says str)
    obj = exc.obj
    if wrong is None:  # raised by hand, as a module's __getattr__ does (a server's package): its text says which
        said = _MODULE_ATTRIBUTE.fullmatch(str(exc))
        if said is None:
            return ""
        return _in_module(sys.modules.get(said[1]), said[2])
    if not isinstance(wrong, str):
        return ""
    if isinstance(obj, types.ModuleType):
        return _in_module(obj, wrong)
    frame = _innermost(exc.__traceback__)
    own = frame is not None and frame.f_locals.get("self") is obj  # in its own method: its private names too
    found = closest(wrong, sorted(n for n in dir(obj) if isinstance(n, str)) if own else _public(dir(obj), wrong))
    return f". Did you mean: '{found}'?" if found else ""


def _import_error(exc: ImportError) -> str:
    if isinstance(exc, ModuleNotFoundError):
        parent, _, wrong = (exc.name or "").rpartition(".")
        package = sys.modules.get(parent) if parent else None
        found = closest(wrong, _modules_in(package)) if package is not None else None
        return f". Did you mean: '{parent}.{found}'?" if found else ""
    said = _CANNOT_IMPORT.match(str(exc))
    if said is None:
        return ""
    return _in_module(sys.modules.get(said[2]), said[1])


def suggestion(exc: BaseException, text: str = "") -> str:
    """What to add to the message ``text`` of ``exc`` (from ". Did you mean: 'x'?"), or "" when nothing is near
    enough; a TypeError refusing a call of a stub gets the stub, and a ValueError of asyncio's refusing a stub's result
    says that stubs are synchronous (`stub_calls`).

    A suggestion is a courtesy: whatever a script's objects raise while their names are read (a ``__dir__`` or a
    property that fails) leaves the error as it was."""
    try:
        if isinstance(exc, TypeError):
            return stub_call_refused(exc, text)
        if isinstance(exc, ValueError):
            return result_given_to_asyncio(exc)
        if ". Did you " in text:  # its Python's `traceback` gave one (3.12 on)
            return ""
        if isinstance(exc, NameError):
            return _name_error(exc)
        if isinstance(exc, AttributeError):
            return _attribute_error(exc)
        if isinstance(exc, ImportError):
            return _import_error(exc)
    except Exception:  # see the docstring: never a second error in place of the script's
        return ""
    return ""


def suggested(te: traceback.TracebackException, exc: BaseException | None) -> None:
    """Add `suggestion` of ``exc`` to the message ``te`` formats."""
    text = te.__dict__.get("_str")
    if exc is not None and isinstance(text, str):
        te.__dict__["_str"] = text + suggestion(exc, text)
