"""A stub's signature as a caller sees it, read from its source, and what changed between two (`compare`).

Signatures are compared as rendered, not as schemas: a script calls the parameter names, defaults and types of the
stub, and those also change when tooltree renders differently (an older tree's ``format_`` that a rerun names
``format``) while the schema did not, and a schema changes in ways no caller sees (descriptions, examples,
defaults). A parameter is followed by its wire name (the key the stub's body sends), so a stub parameter renamed
under the same wire name reads as renamed. A type is compared with the TypedDicts it refers to, by their structure
(a TypedDict renamed ``Filter_2`` with the same keys is the same type). The limits a parameter's line of the
docstring's ``Args:`` gives (``Maximum: 100.``, ``Pattern: ….``: the schema's ``maximum``, ``pattern``, ``format``…)
are compared too: a limit added or tightened refuses calls the server took before, while the signature reads the
same. Parsing a stub takes about 0.07 ms.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tool_tree.text import quoted_name

MAX_PARSED = 600_000
"""Bytes of a stub parsed for its signature (the generator writes none over 500,000 characters, nearly all ASCII); a
bigger file (a user's, a tree's from elsewhere) is not compared: parsing 2 MB of tiny tokens took 870 MB."""
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IDENT_PARTS = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)")
_LOWER_BOUNDS = ("Minimum", "Greater than", "Min length", "Min items")
_UPPER_BOUNDS = ("Maximum", "Less than", "Max length", "Max items")
_UNIQUE = "Items must be unique"
_LIMIT = re.compile(
    rf"(?:^|(?<= ))(?:({'|'.join(_LOWER_BOUNDS + _UPPER_BOUNDS)}|Format): (\S{{1,80}}?)\.(?= |$)"
    r"|(Pattern|One of): (.{1,320}?)\.(?= (?:One of|Examples|Server default): | Sent as |$)"
    rf"|({_UNIQUE})\.(?= |$))"
)
"""A limit `generator.docstrings` writes in a parameter's line: ``Maximum: 10.``, ``Pattern: ^[a-z]+$.`` (a value is
at most as long as it writes one, so a line of a stub edited by hand is read in time linear in its length)."""
_ARG_LINE = re.compile(r"    (\*\*)?([^\W\d]\w*): ")

Change = tuple[str, bool, str, str, str]
"""(kind, breaking, parameter, old, new): a kind of `generator.api_changes.KINDS`."""


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: str
    """The annotation, without ``| NotGiven``."""
    members: frozenset[str]
    """The union's members, each value of a ``Literal`` one of them."""
    required: bool


@dataclass(frozen=True, slots=True)
class Signature:
    params: dict[str, Parameter]
    """By wire name."""
    extra: str | None
    """The annotation of ``**arguments``, if the stub takes them."""
    returns: str
    returns_members: frozenset[str]
    defs: dict[str, dict[str, str]]
    """The module's TypedDicts: name → key → annotation."""
    limits: dict[str, dict[str, str]]
    """A parameter's limits, as its line of the docstring's ``Args:`` writes them: name → label → value."""


def signature(source: bytes | None, function: str) -> Signature | None:
    """The signature of the stub ``function`` in ``source``; None when there is none to read (a file missing, too
    big, not Python, or without that function)."""
    if source is None or len(source) > MAX_PARSED:
        return None
    try:
        # Read as Python reads it (a coding line, ``\r`` line ends in a stub edited by hand), and then as UTF-8 with
        # ``\n`` line ends: the offsets of the AST are of UTF-8 bytes in lines that Python ends also at a ``\r``.
        code = source.decode(tokenize.detect_encoding(io.BytesIO(source).readline)[0])
        code = code.replace("\r\n", "\n").replace("\r", "\n")
        module = ast.parse(code)
        return _read(module, code.encode("utf-8"), function)
    except (SyntaxError, ValueError, LookupError, RecursionError, MemoryError):  # UnicodeError is a ValueError
        return None


def _read(module: ast.Module, source: bytes, function: str) -> Signature | None:
    """`signature`, of the parsed ``module`` (``source``: its text, as UTF-8 with ``\\n`` line ends)."""
    canon: dict[str, str] = {}  # an import's alias → its name (``Any_`` in the stub of a tool called ``Any``)
    for node in module.body:
        if isinstance(node, ast.ImportFrom):
            canon.update((a.asname, a.name) for a in node.names if a.asname)
    starts = [0]  # where each line starts (an offset of the AST is of UTF-8 bytes)
    at = source.find(b"\n")
    while at != -1:
        starts.append(at + 1)
        at = source.find(b"\n", at + 1)

    def text(node: ast.expr | None) -> str:
        """The source of ``node`` as the stub writes it (one written over lines, as `ast.unparse` writes it)."""
        if node is None:
            return ""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a functional TypedDict's value
            return _canonical(node.value, canon)
        if node.end_lineno == node.lineno and node.end_col_offset is not None:
            line = starts[node.lineno - 1]
            written = source[line + node.col_offset : line + node.end_col_offset].decode("utf-8", "replace")
        else:
            try:
                written = ast.unparse(node)
            except (RecursionError, ValueError):
                return "?"
        return _canonical(written, canon)

    defs: dict[str, dict[str, str]] = {}
    found: ast.FunctionDef | None = None
    for node in module.body:
        if isinstance(node, ast.ClassDef) and any(text(b) == "TypedDict" for b in node.bases):
            defs[node.name] = {
                s.target.id: text(s.annotation)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            call = node.value
            if isinstance(call, ast.Call) and text(call.func) == "TypedDict" and len(call.args) == 2:
                fields = call.args[1]
                if isinstance(fields, ast.Dict):
                    defs[node.targets[0].id] = {
                        str(k.value): text(v)
                        for k, v in zip(fields.keys, fields.values, strict=True)
                        if isinstance(k, ast.Constant)
                    }
        elif isinstance(node, ast.FunctionDef) and node.name == function:
            found = node
    if found is None:
        return None
    wires = _wire_names(found, canon)
    params: dict[str, Parameter] = {}
    for arg, default in zip(found.args.kwonlyargs, found.args.kw_defaults, strict=True):
        annotation = arg.annotation
        if (
            default is not None
            and isinstance(annotation, ast.BinOp)
            and isinstance(annotation.op, ast.BitOr)
            and text(annotation.right) == "NotGiven"
        ):
            annotation = annotation.left
        wire = wires.get(arg.arg, arg.arg)
        params[wire] = Parameter(arg.arg, text(annotation), _members(annotation, text), default is None)
    kwarg = found.args.kwarg
    extra = None if kwarg is None else text(kwarg.annotation) or "Any"
    limits = _limits(ast.get_docstring(found) or "")
    return Signature(params, extra, text(found.returns), _members(found.returns, text), defs, limits)


def _limits(docstring: str) -> dict[str, dict[str, str]]:
    """The limits each parameter's line of the ``Args:`` section gives (wrapped lines joined)."""
    lines = docstring.split("\n")
    if "Args:" not in lines:
        return {}
    # The last: a tool's description (FastMCP's, from a Python docstring) may hold an Args: section of its own.
    start = len(lines) - lines[::-1].index("Args:")
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines[start:]:
        if (m := _ARG_LINE.match(line)) is not None:
            current = None if m[1] else entries.setdefault(m[2], [])
            if current is not None:
                current.append(line[m.end() :])
        elif line.startswith("        ") and current is not None:
            current.append(line.strip())
        else:
            break
    out: dict[str, dict[str, str]] = {}
    for name, parts in entries.items():
        found: dict[str, str] = {}
        for m in _LIMIT.finditer(" ".join(" ".join(parts).split())):
            label, value = (m[1], m[2]) if m[1] else (m[3], m[4]) if m[3] else (m[5], "")
            found.setdefault(label, value)
        if found:
            out[name] = found
    return out


def _canonical(text: str, canon: Mapping[str, str]) -> str:
    return _IDENT.sub(lambda m: canon.get(m[0], m[0]), text) if canon else text


def _wire_names(function: ast.FunctionDef, canon: Mapping[str, str]) -> dict[str, str]:
    """Parameter → the key the stub's ``call_tool(server, tool, {...})`` sends it under."""
    for statement in function.body:
        node = statement.value if isinstance(statement, (ast.Return, ast.Assign)) else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and canon.get(node.func.id, node.func.id) == "call_tool"
            and len(node.args) >= 3
            and isinstance(node.args[2], ast.Dict)
        ):
            d = node.args[2]
            return {
                v.id: k.value
                for k, v in zip(d.keys, d.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name)
            }
    return {}


def _members(node: ast.expr | None, text: Callable[[ast.expr | None], str]) -> frozenset[str]:
    """The members of a union type (``a | b``), a ``Literal``'s values each one."""
    out: set[str] = set()
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            stack += [n.left, n.right]
        elif isinstance(n, ast.Subscript) and text(n.value) == "Literal":
            values = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            out.update(f"Literal[{text(v)}]" for v in values)
        else:
            out.add(text(n))
    return frozenset(out)


def _same(a: str, old: Mapping[str, Mapping[str, str]], b: str, new: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether the type ``a`` (of the TypedDicts ``old``) is ``b`` (of ``new``) whatever the TypedDicts are called: the
    same text around their names, and TypedDicts of the same keys of the same types. A pair met again is taken as the
    same (a recursive TypedDict), so one written twice under two names (``Style_2``) is the same as once."""
    assumed: set[tuple[str, str]] = set()
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        xs, ys = _IDENT_PARTS.split(x), _IDENT_PARTS.split(y)  # text, name, text, name, …, text
        if len(xs) != len(ys):
            return False
        for i, (m, n) in enumerate(zip(xs, ys, strict=True)):
            if i % 2 == 0 or (m not in old and n not in new):
                if m != n:
                    return False
            elif m not in old or n not in new or old[m].keys() != new[n].keys():
                return False
            elif (m, n) not in assumed:
                assumed.add((m, n))
                pending += [(old[m][key], new[n][key]) for key in old[m]]
    return True


def _within(small: frozenset[str], big: frozenset[str], old: Signature, new: Signature) -> bool:
    """Whether each member of ``small`` (of ``old``) is one of ``big`` (of ``new``) with the same structure, or
    ``big`` takes anything."""
    if "Any" in big:
        return True
    return all(
        (m in big and _same(m, old.defs, m, new.defs)) or _base(m) in big or (m == "int" and "float" in big)
        for m in small
    )


def _base(member: str) -> str:
    """The type of the value of ``Literal[value]`` (``str`` for ``Literal["a"]``); "" for another type."""
    if not member.startswith("Literal[") or len(member) < 10:
        return ""
    value = member[8:-1]
    if value[0] in "\"'":
        return "str"
    if value in ("True", "False"):
        return "bool"
    return "int" if value.lstrip("-").isascii() and value.lstrip("-").isdigit() else ""


def _key_of(typed_dict: str, key: str) -> str:
    """A TypedDict's key as a change names it: ``Row.name``; one that is no identifier as a subscript, escaped
    (``Row['x\\u200b']``, ``Row['a b']``: before, ``Row.x`` of the key ``x\\u200b``, which another key is named)."""
    return f"{typed_dict}.{key}" if key.isidentifier() else f"{typed_dict}[{quoted_name(key)}]"


def _keys(text: str, old: Signature, new: Signature, *, sent: bool) -> tuple[str, bool] | None:
    """For a type written the same in ``old`` and ``new`` whose TypedDicts changed (by the same names): what
    changed of their keys, and whether it breaks a caller (``sent``: a parameter's type, where a new key that is not
    ``NotRequired`` breaks a call; else a returned one, where only a key removed or changed does). None when the
    change is not one of keys of TypedDicts of the same names."""
    said: list[str] = []
    breaks = False
    seen: set[str] = set()
    pending = [n for n in _IDENT.findall(text) if n in old.defs]
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        before, after = old.defs[name], new.defs.get(name)
        if after is None:
            return None
        for key, annotation in before.items():
            if key not in after:
                said.append(f"{_key_of(name, key)} removed")
                breaks = True
            elif after[key] != annotation:
                if after[key] == f"NotRequired[{annotation}]" and sent:  # a caller may leave it out now
                    said.append(f"{_key_of(name, key)} now optional")
                elif annotation == f"NotRequired[{after[key]}]" and not sent:  # a reader always gets it now
                    said.append(f"{_key_of(name, key)} now always given")
                else:
                    said.append(f"{_key_of(name, key)}: {annotation} → {after[key]}")
                    breaks = True
            pending += [n for n in _IDENT.findall(annotation) if n in old.defs]
        for key, annotation in after.items():
            if key not in before:
                required = not annotation.startswith("NotRequired[")
                said.append(f"{_key_of(name, key)} added" + (" (required)" if required and sent else ""))
                breaks = breaks or (required and sent)
    return ("; ".join(said), breaks) if said else None


def compare(old: Signature, new: Signature) -> list[Change]:
    """What changed from ``old`` to ``new``: (kind, breaking, parameter, old, new) each."""
    out: list[Change] = []
    for wire, p in old.params.items():
        q = new.params.get(wire)
        if q is None:
            out.append(("parameter removed", True, p.name, p.type, ""))
            continue
        if q.name != p.name:
            out.append(("parameter renamed", True, p.name, p.name, q.name))
        if q.required and not p.required:
            out.append(("now required", True, q.name, "", ""))
        elif p.required and not q.required:
            out.append(("now optional", False, q.name, "", ""))
        if not _same(p.type, old.defs, q.type, new.defs):
            out.append(_type_change(q.name, p.type, q.type, p.members, q.members, old, new))
        out += _limit_changes(q.name, old.limits.get(p.name, {}), new.limits.get(q.name, {}))
    for wire, q in new.params.items():
        if wire not in old.params:
            out.append(("new required" if q.required else "new optional", q.required, q.name, "", q.type))
    if old.extra is not None and new.extra is None:
        out.append(("arguments removed", True, "", old.extra, ""))
    elif old.extra is None and new.extra is not None:
        out.append(("arguments added", False, "", "", new.extra))
    elif old.extra is not None and new.extra is not None and not _same(old.extra, old.defs, new.extra, new.defs):
        one, other = frozenset({old.extra}), frozenset({new.extra})
        out.append(_type_change("**arguments", old.extra, new.extra, one, other, old, new))
    if not _same(old.returns, old.defs, new.returns, new.defs):
        keys = _keys(old.returns, old, new, sent=False) if old.returns == new.returns else None
        if keys is not None:
            out.append(("returns keys changed" if keys[1] else "returns keys added", keys[1], "", old.returns, keys[0]))
        else:
            narrower = _within(new.returns_members, old.returns_members, new, old)  # no value a reader did not get
            kind = "returns narrowed" if narrower else "returns changed"
            out.append((kind, not narrower, "", old.returns, new.returns))
    return out


def _limit_changes(name: str, was: Mapping[str, str], becomes: Mapping[str, str]) -> list[Change]:
    """What changed of a parameter's limits: one added or tightened refuses calls the server took (a bound moved
    in, a ``Format``, ``Pattern`` or ``One of`` added or changed), one removed or loosened refuses none."""
    out: list[Change] = []
    for label in [*was, *(k for k in becomes if k not in was)]:
        before, after = was.get(label), becomes.get(label)
        if before == after:
            continue
        narrower = after is not None and (before is None or not _looser(label, before, after))
        kind = "limit narrowed" if narrower else "limit widened"
        out.append((kind, narrower, name, _limit_text(label, before), _limit_text(label, after)))
    return out


def _limit_text(label: str, value: str | None) -> str:
    """``Maximum: 10``; ``no maximum`` when there is none."""
    if label == _UNIQUE:
        return "items may repeat" if value is None else "items must be unique"
    if value is None:
        return "any value" if label == "One of" else f"no {label.lower()}"
    return f"{label}: {value}"


def _looser(label: str, before: str, after: str) -> bool:
    """Whether the limit ``label`` refuses no value as ``after`` that it took as ``before`` (both given)."""
    if label in _LOWER_BOUNDS or label in _UPPER_BOUNDS:
        try:
            was, becomes = float(before), float(after)
        except ValueError:  # a value the docstring cut
            return False
        return becomes <= was if label in _LOWER_BOUNDS else becomes >= was
    if label == "One of":  # values added after those there were
        return not before.endswith("…") and after.startswith(before + ", ")
    return False


def _type_change(
    name: str, was: str, becomes: str, members: frozenset[str], after: frozenset[str], old: Signature, new: Signature
) -> Change:
    """A parameter's type changed: wider (breaks no call), keys of its TypedDicts changed, or other."""
    keys = _keys(was, old, new, sent=True) if was == becomes else None
    if keys is not None:
        return ("keys changed" if keys[1] else "keys added", keys[1], name, was, keys[0])
    wider = _within(members, after, old, new)
    return ("type widened" if wider else "type changed", not wider, name, was, becomes)
