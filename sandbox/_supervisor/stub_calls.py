"""What a script's wrong call of a stub adds to its TypeError: the stub's file and signature, and the name it meant.

Python refuses such a call before the stub's body runs, so its traceback ends at the script's line and names the
function alone: ``search_records() got an unexpected keyword argument 'querry'``, ``search_records() missing 1 required
keyword-only argument: 'query'``, ``search_records() takes 0 positional arguments but 2 were given``. The stub is found
among those the script imported (a stub's module is named after its function: ``servers.crm.search_records``) and
added, with its parameters' types as the stub writes them:

    TypeError: search_records() got an unexpected keyword argument 'querry'. Did you mean: 'query'? The stub,
    servers/crm/search_records.py: search_records(*, object_type: Literal['lead', 'contact'], query: str, ...)

A ``ToolResult`` (or ``StructuredResult``) awaited, given to ``asyncio.gather`` or to ``asyncio.run`` (a ValueError: 'a
coroutine was expected, got ToolResult(...)'), says that stubs are synchronous: the call ran, and returned it.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
from collections.abc import Callable
from typing import Any

from .names_near import closest

_MAX_SIGNATURE = 600
_REFUSED = re.compile(
    r"(?P<function>\w+)\(\) (?:got an unexpected keyword argument '(?P<unexpected>\w+)'"
    r"|missing \d+ required keyword-only arguments?: (?P<missing>.+)"
    r"|takes 0 positional arguments but \d+ (?:was|were) given)"
)
_AWAITED = re.compile(  # 3.10 to 3.13; then 3.14's words
    r"object (?:ToolResult|StructuredResult) can't be used in 'await' expression"
    r"|'(?:ToolResult|StructuredResult)' object can't be awaited"
)
_STUB_MODULE = re.compile(r"servers\.\w+\.\w+")


def _stubs_named(function: str) -> list[Callable[..., Any]]:
    """The stub functions of that name the script imported (one per server that has such a tool)."""
    found: list[Callable[..., Any]] = []
    for name, module in list(sys.modules.items()):
        if name.endswith(f".{function}") and _STUB_MODULE.fullmatch(name) and isinstance(module, types.ModuleType):
            stub = getattr(module, function, None)
            if inspect.isfunction(stub) and stub.__module__ == name:
                found.append(stub)
    return found


def _innermost_frame(tb: types.TracebackType | None) -> types.FrameType | None:
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return None if tb is None else tb.tb_frame


def _the_stub(exc: TypeError, function: str) -> Callable[..., Any] | None:
    """The stub the refused call was of: the only one of its name, and not shadowed where the call was made by a
    function of the script's of the same name."""
    stubs = _stubs_named(function)
    frame = _innermost_frame(exc.__traceback__)
    if frame is not None:
        named = frame.f_locals.get(function, frame.f_globals.get(function))
        if named is not None:
            stubs = [s for s in stubs if s is named]
    return stubs[0] if len(stubs) == 1 else None


def _signature(stub: Callable[..., Any]) -> str:
    """``name(*, a: str, b: int | NotGiven = NOT_GIVEN)``: each type as the stub's text writes it."""
    parts, keyword_only = [], False
    for p in inspect.signature(stub).parameters.values():
        if p.kind is p.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
            keyword_only = True
        star = "**" if p.kind is p.VAR_KEYWORD else "*" if p.kind is p.VAR_POSITIONAL else ""
        part = star + p.name
        if p.annotation is not p.empty:
            part += f": {p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)}"
        if p.default is not p.empty:
            part += f" = {p.default!r}"
        parts.append(part)
    text = f"{stub.__name__}({', '.join(parts)})"
    return text if len(text) <= _MAX_SIGNATURE else f"{stub.__name__}(...), too long to show here"


def _is_result(value: object) -> bool:
    kind = type(value)
    return kind.__name__ in ("ToolResult", "StructuredResult") and kind.__module__.startswith("tool_tree.runtime")


def _results_given_to_asyncio(exc: BaseException) -> bool:
    """Whether asyncio refused a stub's result where it wanted an awaitable (``asyncio.gather`` of stub calls hashes
    them first: 'unhashable type: 'list'', since a `ToolResult` holds lists)."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if str(frame.f_globals.get("__name__", "")).startswith("asyncio"):
            for value in frame.f_locals.values():
                if _is_result(value) or (isinstance(value, tuple) and any(_is_result(v) for v in value)):
                    return True
        tb = tb.tb_next
    return False


def result_given_to_asyncio(exc: ValueError) -> str:
    """What to add to the message of ``exc``, a ValueError, when asyncio refused a stub's result where it wanted a
    coroutine (``asyncio.run(search_records(...))``: 'a coroutine was expected, got ToolResult(...)'); else ""."""
    if not _results_given_to_asyncio(exc):
        return ""
    return ". Stubs are synchronous: call them without await or asyncio (the call ran: asyncio was given its result)"


def stub_call_refused(exc: TypeError, text: str) -> str:
    """What to add to the message ``text`` of ``exc``, a TypeError, when it refused a call of a stub; else ""."""
    if _AWAITED.fullmatch(text):
        return ". Stubs are synchronous: call them without await (the call ran: what was awaited is its result)"
    if _results_given_to_asyncio(exc):
        return (
            ". Stubs are synchronous: call them without await or asyncio, and several at once with "
            "parallel(lambda: ..., lambda: ...) (the calls ran: asyncio was given their results)"
        )
    said = _REFUSED.fullmatch(text)
    stub = None if said is None else _the_stub(exc, said["function"])
    if said is None or stub is None:
        return ""
    parameters = inspect.signature(stub).parameters
    added = ""
    if said["unexpected"] and ". Did you " not in text:
        found = closest(said["unexpected"], [n for n, p in parameters.items() if p.kind is p.KEYWORD_ONLY])
        added = f". Did you mean: '{found}'?" if found else ""
    elif said["missing"] is None and said["unexpected"] is None:
        added = ". Pass each argument by its name."
    file = stub.__module__.replace(".", "/") + ".py"
    return f"{added or '.'} The stub, {file}: {_signature(stub)}"
