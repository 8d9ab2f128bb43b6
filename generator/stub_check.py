"""The second line of defence: parse a rendered stub and check its top-level structure.

The renderer escapes every piece of server text, so this check should never fail. It exists so
that a bug in the escaping cannot ship: a stub is accepted only if it has exactly the shape the
renderer writes, where nothing at module level runs except imports from ``typing`` /
``tool_tree.runtime`` and ``TypedDict`` definitions::

    \"\"\"docstring\"\"\"
    from __future__ import annotations
    from typing import ...                      (only names in TYPING_NAMES)
    from tool_tree.runtime import ...           (ToolResult, NotGiven, NOT_GIVEN, NotRequired, call_tool, structured)
    class X(TypedDict): <annotated names>       (types made of known names, [], |, constants, ...)
    Y = TypedDict("Y", {"key": "type", ...})
    \"\"\"Y's docstring (optional: a plain string, only right after a functional TypedDict)\"\"\"
    def <function>(*, <params> = NOT_GIVEN, **arguments: T) -> T:
        return call_tool(<server>, <tool>, {"wire": param, ..., **arguments})   (or: arguments, {})
          or call_tool(<server>, <tool>, {"wire": param, ...}, arguments, {"wire": "param", ...})
      or
        result = call_tool(<server>, <tool>, {...})
        return cast(T, structured(result, <server>, <tool>))

The source is parsed once (warnings as errors, so an invalid escape is a syntax error) and the
tree is walked; it is not also compiled, because a tree of this shape compiles whenever it
parses. Everything the compiler and symbol table check beyond the parser is either a construct
the walk admits nowhere (loops, ``yield``/``await``, ``global``/``nonlocal``, ``*``/``**`` in
calls or targets (``**arguments`` only ends the arguments dict), keyword arguments, ``return``
outside the function, statements other than the ones above) or checked by the walk itself: no
name ``__debug__`` is bound, no parameter name is repeated, and the only type written as an
expression outside an annotation (the ``cast`` target) is a plain name or a string. Annotations
are never compiled as expressions: the ``from __future__ import annotations`` the walk requires
turns them into strings.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from generator.type_expr import IMPORTABLE_NAMES, TYPING_NAMES, import_alias, import_aliases

RUNTIME_MODULE = "tool_tree.runtime"
BUILTIN_TYPES = frozenset({"str", "int", "float", "bool", "list", "tuple", "dict"})


class _Reject(Exception):
    """Internal: the stub's structure is not what the renderer writes."""


@dataclass(frozen=True, slots=True)
class _Stub:
    """What the checked stub must match."""

    function: str
    server: str
    tool: str

    def name(self, imported: str) -> str:
        """What an imported name is called in this stub."""
        return import_alias(imported, self.function)


def check_stub(source: str, *, function: str, server: str, tool: str) -> str | None:
    """Why ``source`` is not a well-formed stub, or None when it is.

    A well-formed stub is: the module docstring, ``from __future__ import annotations``,
    imports from ``typing`` and ``tool_tree.runtime`` only, TypedDict definitions (annotated
    names only), and exactly one function ``function`` whose body builds the arguments dict
    and calls ``call_tool(server, tool, ...)``. Nothing at module level calls anything but
    ``TypedDict``.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tree = ast.parse(source)
        _check_module(tree, _Stub(function, server, tool))
    except (SyntaxError, ValueError, SyntaxWarning, DeprecationWarning) as e:
        return f"does not compile: {type(e).__name__}: {e}"
    except _Reject as e:
        return str(e)
    return None


_FUTURE_IMPORTS = frozenset({"annotations"})
_RUNTIME_IMPORTS = frozenset({"ToolResult", "NotGiven", "NOT_GIVEN", "NotRequired", "call_tool", "structured"})
_TYPE_IMPORTS = (TYPING_NAMES - {"cast"}) | {"ToolResult", "NotGiven", "NotRequired"}
"""Imported names a type may refer to."""


def _check_module(tree: ast.Module, stub: _Stub) -> None:
    body = tree.body
    if not body or not _is_docstring(body[0]):
        raise _Reject("no module docstring")
    if len(body) < 2 or not _is_import(body[1], "__future__", _FUTURE_IMPORTS, stub, exact=True):
        raise _Reject("no `from __future__ import annotations`")
    start = 2
    if start < len(body) and _is_import(body[start], "typing", TYPING_NAMES, stub):
        start += 1
    if start < len(body) and _is_import(body[start], RUNTIME_MODULE, _RUNTIME_IMPORTS, stub):
        start += 1
    func = body[-1] if start < len(body) else None
    if not isinstance(func, ast.FunctionDef):
        raise _Reject("the module does not end with the function")
    definitions = _without_attribute_docstrings(body[start:-1])
    names = [_type_name(stmt) for stmt in definitions]
    for name in [*names, func.name]:
        _check_bindable(name)
    types = set(names)
    imported = import_aliases(IMPORTABLE_NAMES, stub.function)
    if len(types) < len(names) or types & (imported | BUILTIN_TYPES | {stub.function, "annotations"}):
        raise _Reject("a type name is defined twice or shadows another name")
    allowed = types | BUILTIN_TYPES | import_aliases(_TYPE_IMPORTS, stub.function)
    for stmt in definitions:
        _check_typed_dict(stmt, allowed, stub)
    _check_function(func, allowed, stub)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_import(
    node: ast.stmt, module: str, names: set[str] | frozenset[str], stub: _Stub, *, exact: bool = False
) -> bool:
    if not (isinstance(node, ast.ImportFrom) and node.module == module and node.level == 0):
        return False
    for alias in node.names:
        name = alias.name
        if name not in names or (alias.asname or name) != (name if exact else stub.name(name)):
            raise _Reject(f"unexpected import from {module}")
    return not exact or {a.name for a in node.names} == names


def _without_attribute_docstrings(definitions: list[ast.stmt]) -> list[ast.stmt]:
    """The definitions without the docstring of each functional TypedDict (a plain string right after it: a class
    keeps its docstring in its body, the functional form cannot)."""
    kept: list[ast.stmt] = []
    for i, stmt in enumerate(definitions):
        if not (_is_docstring(stmt) and i and isinstance(definitions[i - 1], ast.Assign)):
            kept.append(stmt)
    return kept


def _type_name(stmt: ast.stmt) -> str:
    if isinstance(stmt, ast.ClassDef):
        return stmt.name
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    raise _Reject(f"unexpected top-level {type(stmt).__name__} at line {stmt.lineno}")


def _check_typed_dict(stmt: ast.stmt, allowed: set[str], stub: _Stub) -> None:
    typed_dict = stub.name("TypedDict")
    if isinstance(stmt, ast.ClassDef):
        if (
            stmt.decorator_list
            or stmt.keywords
            or len(stmt.bases) != 1
            or not _is_name(stmt.bases[0], typed_dict)
            or getattr(stmt, "type_params", [])
        ):
            raise _Reject(f"class {stmt.name} is not a plain TypedDict")
        fields = stmt.body[1:] if _is_docstring(stmt.body[0]) else stmt.body
        if not fields:
            raise _Reject(f"class {stmt.name} has no fields")
        for node in fields:
            if not (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.value is None
                and node.simple == 1
            ):
                raise _Reject(f"class {stmt.name} holds more than annotated names")
            _check_bindable(node.target.id)
            _check_type(node.annotation, allowed)
        return
    name = _type_name(stmt)
    call = stmt.value if isinstance(stmt, ast.Assign) else None
    if not (
        isinstance(call, ast.Call)
        and _is_name(call.func, typed_dict)
        and not call.keywords
        and len(call.args) == 2
        and _is_str(call.args[0], name)
        and isinstance(call.args[1], ast.Dict)
    ):
        raise _Reject(f"{name} is not a functional TypedDict")
    for key, value in zip(call.args[1].keys, call.args[1].values, strict=True):
        if key is None or not _is_str(key):
            raise _Reject(f"{name} has a key that is not a string")
        _check_type(_string_type(value), allowed)


def _check_type(node: ast.expr, allowed: set[str]) -> None:
    """A type expression made only of known names, subscripts, ``|`` and literal constants."""
    if isinstance(node, ast.Name):
        if node.id not in allowed:
            raise _Reject(f"unknown name {node.id!r} in a type")
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _check_type(node.left, allowed)
        _check_type(node.right, allowed)
    elif isinstance(node, ast.Subscript):
        _check_type(node.value, allowed)
        _check_type(node.slice, allowed)
    elif isinstance(node, ast.Constant):
        if not (node.value is None or node.value is Ellipsis or isinstance(node.value, (str, int))):
            raise _Reject("unexpected constant in a type")
    elif isinstance(node, ast.Tuple):
        for elt in node.elts:
            _check_type(elt, allowed)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        if not (isinstance(node.operand, ast.Constant) and type(node.operand.value) is int):
            raise _Reject("unexpected negation in a type")
    else:
        raise _Reject(f"unexpected {type(node).__name__} in a type")


def _check_function(func: ast.FunctionDef, allowed: set[str], stub: _Stub) -> None:
    a = func.args
    if func.name != stub.function or func.decorator_list or a.posonlyargs or a.args or a.vararg or a.defaults:
        raise _Reject("the function's header is not what the renderer writes")
    if getattr(func, "type_params", []):
        raise _Reject("the function has type parameters")
    params = set()
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if arg.annotation is None or not (default is None or _is_name(default, stub.name("NOT_GIVEN"))):
            raise _Reject(f"parameter {arg.arg} is not annotated or has a default other than NOT_GIVEN")
        _check_type(arg.annotation, allowed)
        _check_bindable(arg.arg)
        if arg.arg in params:
            raise _Reject(f"parameter {arg.arg} is repeated")
        params.add(arg.arg)
    extra = a.kwarg is not None
    if a.kwarg is not None:
        if a.kwarg.arg != "arguments" or a.kwarg.annotation is None or "arguments" in params:
            raise _Reject("unexpected **kwargs")
        _check_type(a.kwarg.annotation, allowed)
    if func.returns is None:
        raise _Reject("no return annotation")
    _check_type(func.returns, allowed)
    body = func.body[1:] if func.body and _is_docstring(func.body[0]) else list(func.body)
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        _check_call_tool(body[0].value, params, extra, stub)
        return
    if not (
        len(body) == 2
        and isinstance(body[0], ast.Assign)
        and len(body[0].targets) == 1
        and _is_name(body[0].targets[0], "result")
        and isinstance(body[1], ast.Return)
        and body[1].value is not None
    ):
        raise _Reject("the function's body is not what the renderer writes")
    _check_call_tool(body[0].value, params, extra, stub)
    value = body[1].value
    if not (isinstance(value, ast.Call) and _is_name(value.func, stub.name("cast"))):
        raise _Reject("the function does not return a cast structured result")
    if len(value.args) != 2 or value.keywords:
        raise _Reject("malformed cast")
    target, inner = value.args
    # The target is evaluated: a plain name, or a string holding the type (never evaluated).
    if not (isinstance(target, ast.Name) or _is_str(target)):
        raise _Reject("the cast target is not a name or a string")
    _check_type(_string_type(target) if _is_str(target) else target, allowed)
    if not (
        isinstance(inner, ast.Call)
        and _is_name(inner.func, stub.name("structured"))
        and not inner.keywords
        and len(inner.args) == 3
        and _is_name(inner.args[0], "result")
        and _is_str(inner.args[1], stub.server)
        and _is_str(inner.args[2], stub.tool)
    ):
        raise _Reject("malformed structured() call")


def _check_call_tool(node: ast.expr, params: set[str], extra: bool, stub: _Stub) -> None:
    """``call_tool(<server>, <tool>, A)``: A is ``arguments`` (only with ``**arguments``) or a dict of
    string keys to parameters, ending with ``**arguments`` at most; or ``call_tool(<server>, <tool>, D, arguments,
    N)`` (only with ``**arguments``): D such a dict without ``**arguments``, N a dict of strings to strings."""
    if not (
        isinstance(node, ast.Call)
        and _is_name(node.func, stub.name("call_tool"))
        and not node.keywords
        and len(node.args) in (3, 5)
        and _is_str(node.args[0], stub.server)
        and _is_str(node.args[1], stub.tool)
    ):
        raise _Reject("malformed call_tool() call")
    arguments = node.args[2]
    if len(node.args) == 5:
        names = node.args[4]
        if not (
            extra
            and _is_name(node.args[3], "arguments")
            and isinstance(arguments, ast.Dict)
            and isinstance(names, ast.Dict)
            and all(k is not None and _is_str(k) and _is_str(v) for k, v in zip(names.keys, names.values, strict=True))
        ):
            raise _Reject("malformed arguments of call_tool()")
        extra = False  # the dict holds the parameters alone
    if extra and _is_name(arguments, "arguments"):
        return
    if not isinstance(arguments, ast.Dict):
        raise _Reject("malformed arguments of call_tool()")
    items = list(zip(arguments.keys, arguments.values, strict=True))
    if extra and items and items[-1][0] is None and _is_name(items[-1][1], "arguments"):
        items.pop()
    if not all(k is not None and _is_str(k) and isinstance(v, ast.Name) and v.id in params for k, v in items):
        raise _Reject("malformed arguments of call_tool()")


def _check_bindable(name: str) -> None:
    if name == "__debug__":
        raise _Reject("the stub binds the name __debug__")


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_str(node: ast.expr, value: str | None = None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (value is None or node.value == value)


def _string_type(node: ast.expr) -> ast.expr:
    """The type expression inside a string constant (a forward reference)."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        raise _Reject("expected a type written as a string")
    return ast.parse(node.value, mode="eval").body
