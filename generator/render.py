"""Render one stub module from one raw MCP tool definition.

A stub is plain source built here line by line (no template: every piece of server text goes
through :mod:`generator.literals`, and that is easiest to see in straight code). After
rendering, the source is parsed and its top-level structure checked by
:func:`check_stub`; a stub that fails the check (it never should) is replaced by the minimal
stub, which passes it by construction. The docstrings come from :mod:`generator.docstrings`.

Parameters follow the input schema's properties, under the names the server gave them
(:func:`generator.naming.assign_parameters`): keyword-only, required ones first, optional ones
defaulting to ``NOT_GIVEN``, which the runtime leaves out of the call (``None`` is sent as
``null``, and the types allow it only where the schema allows null). Keys beyond the properties
(an object without ``properties``, or with ``additionalProperties`` or ``patternProperties``)
come in as ``**arguments``.
A tool whose input schema cannot be taken apart gets ``def f(**arguments: Any) -> ToolResult``,
the raw schema in its docstring, and a warning.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from generator.docstrings import LINE, function_docstring, module_docstring, typed_dict_docstring
from generator.literals import docstring_literal, preferred_literal, string_literal
from generator.naming import assign_parameters
from generator.parts import Param, StubParts, text_of, tool_title
from generator.schema_types import SchemaConversionError, TypeBuilder
from generator.stub_check import BUILTIN_TYPES, RUNTIME_MODULE, check_stub
from generator.type_defs import FieldDef, InputShape, TypedDictDef, camel
from generator.type_expr import (
    ANY,
    RUNTIME_NAMES,
    TYPING_NAMES,
    Atom,
    ImportNames,
    import_alias,
    render_type,
    type_names,
)
from tool_tree.text import quoted_name

SINGLE = "'"
MAX_SOURCE = 500_000
"""Characters of one stub; a bigger one (thousands of long property names) becomes the minimal stub, and
a tool whose minimal stub is bigger still gets none."""
_HINTS = (
    ("readOnlyHint", True, "read-only"),
    ("destructiveHint", True, "destructive (may delete or overwrite data)"),
    ("idempotentHint", True, "idempotent"),
    ("openWorldHint", True, "reaches outside systems"),
)


@dataclass(frozen=True, slots=True)
class RenderedStub:
    source: str
    """The full module text."""
    function: str
    """The function name (the ``function`` argument)."""
    warnings: list[str] = field(default_factory=list)
    """What went wrong in converting the tool's schemas (the stub is still usable)."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Wire name → parameter, for the parameters whose name is not the wire name (kept in the manifest)."""
    left_out: bool = False
    """Even the minimal stub is over `MAX_SOURCE` characters: the tool gets no stub (``source`` is empty)."""


def render_stub(
    *, server: str, tool: dict[str, Any], function: str, parameters: Mapping[str, str] | None = None
) -> RenderedStub:
    """Render the stub module for one raw (wire-format) tool definition.

    ``parameters`` are the names given to the tool's parameters before (wire name → identifier,
    from the manifest); they are kept while still valid, so regenerating never renames one.
    Never fails because of what ``tool`` contains: anything the converter cannot handle turns
    into ``Any``, ``dict[str, Any]`` or the ``**arguments`` fallback, with a warning; a tool whose
    stub would be over `MAX_SOURCE` characters even then is ``left_out``, with a warning.

    Raises:
        ValueError: ``function`` is not a safe ASCII identifier (a caller bug: use
            :func:`generator.naming.assign_identifiers`).
    """
    if not _is_safe_identifier(function):
        raise ValueError(f"function name {function!r} is not a safe identifier")
    raw = tool if isinstance(tool, dict) else {}
    name = raw.get("name")
    found: list[str] = []

    def warn(message: str) -> None:
        label = f"tool {quoted_name(name)}" if isinstance(name, str) else f"tool {function!r}"
        found.append(f"{label}: {message}")

    if not isinstance(name, str):
        warn("the tool has no name; the stub calls the tool ''")
    annotations = _dict(raw.get("annotations"))
    parts = StubParts(
        server=server,
        tool=name if isinstance(name, str) else "",
        function=function,
        description=text_of(raw.get("description")),
        title=tool_title(raw),
        hints=[text for key, value, text in _HINTS if annotations.get(key) is value],
    )
    try:
        _convert(parts, raw, warn, parameters or {})
        source = _layout(parts)
    except (RecursionError, TypeError, ValueError, KeyError, AttributeError) as e:
        # A converter bug must not lose the tool: the minimal stub still works.
        warn(f"internal error while rendering ({type(e).__name__}: {e}); using the minimal stub")
        return _minimal_stub(parts, raw, warn, found)
    if len(source) > MAX_SOURCE:
        warn(f"the stub would be {len(source):,} characters; using the minimal stub")
        return _minimal_stub(parts, raw, warn, found)
    problem = check_stub(source, function=function, server=server, tool=parts.tool)
    if problem is not None:
        warn(f"the rendered stub failed the structure check ({problem}); using the minimal stub")
        return _minimal_stub(parts, raw, warn, found)
    renamed = {p.prop.wire: p.ident for p in parts.params if p.renamed}
    return RenderedStub(source, function, found, renamed)


# ── conversion ──────────────────────────────────────────────────────────────────────────────


def _convert(parts: StubParts, raw: dict[str, Any], warn: Callable[[str], None], previous: Mapping[str, str]) -> None:
    # The builder also keeps clear of every importable name and `annotations`.
    builder = TypeBuilder(reserved=ImportNames(parts.function).aliases | {parts.function}, warn=warn)
    output_schema = raw.get("outputSchema")
    output_name = builder.names.allocate(parts.function + "_output") if isinstance(output_schema, dict) else ""

    shape: InputShape | None = None
    if "inputSchema" not in raw or raw.get("inputSchema") is None:
        parts.fallback_reason = "the tool has no input schema"
    else:
        try:
            shape = builder.input_shape(raw["inputSchema"], hint=camel(parts.function) + "Arguments")
        except SchemaConversionError as e:
            parts.fallback_reason = f"the input schema could not be converted: {e}"
    if shape is None:
        warn(f"{parts.fallback_reason}; using **arguments: Any")
        parts.raw_input = raw.get("inputSchema")
        parts.extra = ANY
    else:
        parts.extra, parts.extra_patterns = shape.extra, shape.patterns

    if output_schema is not None and not isinstance(output_schema, dict):
        warn("the output schema is not a JSON object; returning ToolResult")
    elif isinstance(output_schema, dict):
        try:
            parts.output = builder.output_type(output_schema, name=output_name)
        except SchemaConversionError as e:
            warn(f"the output schema could not be converted ({e}); returning ToolResult")
    parts.definitions = list(builder.definitions)
    if isinstance(parts.output, Atom):
        for d in parts.definitions:
            if d.name == parts.output.name:
                parts.output_fields = [
                    (f.key, render_type(f.type, ImportNames()) + ("" if f.required else ", optional"), f.description)
                    for f in d.fields
                ]
    if shape is not None:
        ordered = [p for p in shape.properties if p.required] + [p for p in shape.properties if not p.required]
        idents = assign_parameters([p.wire for p in ordered], reserved=_body_names(parts), previous=previous)
        parts.params = [Param(idents[p.wire], p) for p in ordered]


def _body_names(parts: StubParts) -> set[str]:
    """Names the function's body looks up: a parameter must not shadow them.

    Annotations and defaults are looked up at module level (a parameter may be called ``str``
    or ``Any``), but the body's calls, its local ``result`` and the ``cast`` target are not.
    """
    used = {"call_tool"}
    local = set()
    if parts.output is not None:
        used |= {"cast", "structured"} | type_names(parts.output)
        local.add("result")
    if parts.extra is not None:
        local.add("arguments")
    return local | {import_alias(n, parts.function) if n in TYPING_NAMES | RUNTIME_NAMES else n for n in used}


# ── layout ──────────────────────────────────────────────────────────────────────────────────


def _layout(parts: StubParts) -> str:
    names = ImportNames(parts.function)
    blocks: list[str] = []
    if parts.definitions:
        module_names = {d.name for d in parts.definitions} | names.aliases | TYPING_NAMES | BUILTIN_TYPES | {"None"}
        for d in parts.definitions:
            blocks.append(_typed_dict_source(d, module_names, names))
    blocks.append(_function_source(parts, names))
    head = [docstring_literal(module_docstring(parts)), "", "from __future__ import annotations", ""]
    for module, group in (("typing", TYPING_NAMES), (RUNTIME_MODULE, RUNTIME_NAMES)):
        imported = [_import_item(n, parts.function) for n in sorted(names.used & group)]
        if imported:
            head += [f"from {module} import {', '.join(imported)}", ""]
    # isort style: two blank lines before a class or def after the imports, one before a statement.
    gap = "\n\n\n" if blocks[0].startswith(("class ", "def ")) else "\n\n"
    return "\n".join(head[:-1]) + gap + "\n\n\n".join(blocks) + "\n"


def _import_item(name: str, function: str) -> str:
    alias = import_alias(name, function)
    return name if alias == name else f"{name} as {alias}"


def _typed_dict_source(d: TypedDictDef, module_names: set[str], names: ImportNames) -> str:
    typed_dict = names.use("TypedDict")

    def annotation(f: FieldDef, quote: str | None, wrap: str | None = None) -> str:
        text = render_type(f.type, names, quote=quote, wrap=wrap)
        return text if f.required else f"{names.use('NotRequired')}[{text}]"

    if d.uses_class_syntax(module_names):
        lines = [f"class {d.name}({typed_dict}):"]
        doc = typed_dict_docstring(d)
        if doc:
            lines += ["    " + docstring_literal(doc, indent="    "), ""]
        for f in d.fields:
            line = f"    {f.key}: {annotation(f, None)}"
            lines.append(line if len(line) <= LINE else f"    {f.key}: {annotation(f, None, '    ')}")
        return "\n".join(lines)
    # Functional form: the keys are not all plain identifiers. The value types are strings
    # (forward references) so definitions may refer to each other in any order.
    # It has no body to hold a docstring: the string right after it is its docstring (as for any module attribute).
    items = [f"{preferred_literal(f.key)}: {string_literal(annotation(f, SINGLE))}" for f in d.fields]
    one = f"{d.name} = {typed_dict}({string_literal(d.name)}, {{{', '.join(items)}}})"
    doc = typed_dict_docstring(d)
    after = [docstring_literal(doc)] if doc else []
    if len(one) <= LINE:
        return "\n".join([one, *after])
    return "\n".join(
        [f"{d.name} = {typed_dict}(", f"    {string_literal(d.name)},", "    {"]
        + [f"        {item}," for item in items]
        + ["    },", ")", *after]
    )


def _function_source(parts: StubParts, names: ImportNames) -> str:
    params = [_parameter(p, names) for p in parts.params]
    if params:
        params.insert(0, "*")
    if parts.extra is not None:
        params.append(f"**arguments: {render_type(parts.extra, names)}")
    returns = names.use("ToolResult") if parts.output is None else render_type(parts.output, names)
    one = f"def {parts.function}({', '.join(params)}) -> {returns}:"
    if len(one) <= LINE:
        lines = [one]
    else:
        lines = [f"def {parts.function}("] + [f"    {p}," for p in params] + [f") -> {returns}:"]
    lines.append("    " + docstring_literal(function_docstring(parts), indent="    "))
    lines += _body(parts, names)
    return "\n".join(lines)


def _parameter(param: Param, names: ImportNames) -> str:
    """``name: T`` for a required parameter, ``name: T | NotGiven = NOT_GIVEN`` for an optional one."""
    p = param.prop
    tail = "" if p.required else f" | {names.use('NotGiven')} = {names.use('NOT_GIVEN')}"
    text = f"{param.ident}: {render_type(p.type, names)}{tail}"
    if len(text) > LINE - 5:  # a long enum: one value per line
        text = f"{param.ident}: {render_type(p.type, names, wrap='    ')}{tail}"
    return text


def _body(parts: StubParts, names: ImportNames) -> list[str]:
    server, tool = preferred_literal(parts.server), preferred_literal(parts.tool)
    items = [f"{preferred_literal(p.prop.wire)}: {p.ident}" for p in parts.params]
    renamed = [p for p in parts.params if p.renamed]
    after: list[str] = []  # call_tool's arguments after the dict
    if parts.extra is not None and renamed:
        # ``**arguments`` may hold a renamed parameter's wire name (``**{"from": …}`` beside ``from_``), which Python
        # does not refuse: call_tool does, naming the parameter (merged into the dict, it replaced its value).
        pairs = [f"{preferred_literal(p.prop.wire)}: {preferred_literal(p.ident)}" for p in renamed]
        after = ["arguments", "{" + ", ".join(pairs) + "}"]
    elif parts.extra is not None:
        items.append("**arguments")
    arguments = "arguments" if items == ["**arguments"] else "{" + ", ".join(items) + "}"
    call_tool = names.use("call_tool")

    def call(prefix: str) -> list[str]:
        one = f"    {prefix}{call_tool}({', '.join([server, tool, arguments, *after])})"
        if len(one) <= LINE:
            return [one]
        lines = [f"    {prefix}{call_tool}(", f"        {server},", f"        {tool},"]
        rest = [f"        {a}," for a in after]
        if len(f"        {arguments},") <= LINE or not items:
            return [*lines, f"        {arguments},", *rest, "    )"]
        return [*lines, "        {", *[f"            {item}," for item in items], "        },", *rest, "    )"]

    if parts.output is None:
        return call("return ")
    # A plain name is written as is; anything else as a string, so nothing is evaluated.
    target = (
        parts.output.name
        if isinstance(parts.output, Atom)
        else string_literal(render_type(parts.output, names, quote=SINGLE))
    )
    cast, structured = names.use("cast"), names.use("structured")
    return [*call("result = "), f"    return {cast}({target}, {structured}(result, {server}, {tool}))"]


# ── helpers and the fallback ────────────────────────────────────────────────────────────────


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_safe_identifier(name: str) -> bool:
    """An ASCII identifier a module can bind (not a keyword, soft keyword or ``__debug__``)."""
    return (
        name.isascii()
        and name.isidentifier()
        and not keyword.iskeyword(name)
        and not keyword.issoftkeyword(name)
        and name != "__debug__"
    )


def _minimal_stub(parts: StubParts, raw: dict[str, Any], warn: Callable[[str], None], found: list[str]) -> RenderedStub:
    """The minimal stub, or none (``left_out``) when even that is over `MAX_SOURCE` characters."""
    source = _minimal(parts, raw)
    if len(source) > MAX_SOURCE:
        warn(f"even the minimal stub would be {len(source):,} characters (the limit is {MAX_SOURCE:,}); left out")
        return RenderedStub("", parts.function, found, left_out=True)
    return RenderedStub(source, parts.function, found)


def _minimal(parts: StubParts, raw: dict[str, Any]) -> str:
    """The smallest useful stub: ``**arguments`` in, ``ToolResult`` out. Passes `check_stub`."""
    safe = StubParts(
        server=parts.server,
        tool=parts.tool,
        function=parts.function,
        description=parts.description,
        title=parts.title,
        hints=[],
        extra=ANY,
        raw_input=raw.get("inputSchema"),
        fallback_reason=parts.fallback_reason or "the stub could not be generated",
    )
    return _layout(safe)
