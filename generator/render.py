"""Render one stub module from one raw MCP tool definition.

A stub is plain source built here line by line (no template: every piece of server text goes
through :mod:`generator.literals`, and that is easiest to see in straight code). After
rendering, the source is parsed and its top-level structure checked by
:func:`check_stub`; a stub that fails the check (it never should) is replaced by the minimal
stub, which passes it by construction.

Parameters follow the input schema's properties: keyword-only, required ones first, optional
ones defaulting to ``None`` and left out of the call when ``None``. A tool whose input schema
cannot be taken apart gets ``def f(**arguments: Any) -> ToolResult``, the raw schema in its
docstring, and a warning.
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from generator.literals import docstring_literal, preferred_literal, string_literal
from generator.naming import assign_identifiers
from generator.schema_types import (
    FieldDef,
    InputShape,
    Property,
    SchemaConversionError,
    TypeBuilder,
    TypedDictDef,
    camel,
    measure,
)
from generator.stub_check import BUILTIN_TYPES, RUNTIME_MODULE, check_stub
from generator.text import clean, first_sentence, one_line
from generator.type_expr import (
    ANY,
    NONE,
    RUNTIME_NAMES,
    TYPING_NAMES,
    Atom,
    ImportNames,
    Lit,
    PyType,
    Union,
    import_alias,
    make_union,
    render_type,
)

LINE = 120
_SENTENCE_END = re.compile(r"[.!?]\s+(?=[A-Z0-9`\"'(\[])")
"""A sentence's end and the space after it (starting with the punctuation: a fast search)."""
SINGLE = "'"
MAX_DESCRIPTION = 4_000
"""Characters of a tool description shown in the function docstring."""
MAX_ARG_DESCRIPTION = 1_000
MAX_TYPE_DESCRIPTION = 2_000
MAX_FIELD_DESCRIPTION = 300
MAX_RAW_SCHEMA = 8_000
"""Characters of pretty JSON shown for a schema that could not be converted."""
MAX_RETURN_FIELDS = 30
MAX_SOURCE = 500_000
"""Characters of one stub; a bigger one (thousands of long property names) becomes the minimal stub."""
_LOCALS = frozenset({"arguments", "result"})
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


@dataclass(slots=True)
class _Parts:
    """The pieces of one stub, gathered before the text is laid out."""

    server: str
    tool: str
    function: str
    schema_hash: str
    description: str
    title: str
    hints: list[str]
    definitions: list[TypedDictDef] = field(default_factory=list)
    params: list[tuple[str, Property]] = field(default_factory=list)
    extra: PyType | None = None
    """Type of ``**arguments`` (no properties, or the fallback); None for none."""
    raw_input: Any = None
    fallback_reason: str = ""
    output: PyType | None = None
    output_fields: list[tuple[str, str, str]] = field(default_factory=list)


def render_stub(*, server: str, tool: dict[str, Any], function: str, schema_hash: str) -> RenderedStub:
    """Render the stub module for one raw (wire-format) tool definition.

    Never fails because of what ``tool`` contains: anything the converter cannot handle turns
    into ``Any``, ``dict[str, Any]`` or the ``**arguments`` fallback, with a warning.

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
        label = f"tool {one_line(name, 80)!r}" if isinstance(name, str) else f"tool {function!r}"
        found.append(f"{label}: {message}")

    if not isinstance(name, str):
        warn("the tool has no name; the stub calls the tool ''")
    annotations = _dict(raw.get("annotations"))
    parts = _Parts(
        server=server,
        tool=name if isinstance(name, str) else "",
        function=function,
        schema_hash=schema_hash,
        description=_text(raw.get("description")),
        title=_text(raw.get("title")) or _text(annotations.get("title")),
        hints=[text for key, value, text in _HINTS if annotations.get(key) is value],
    )
    try:
        _convert(parts, raw, warn)
        source = _layout(parts)
    except (RecursionError, TypeError, ValueError, KeyError, AttributeError) as e:
        # A converter bug must not lose the tool: the minimal stub still works.
        warn(f"internal error while rendering ({type(e).__name__}: {e}); using the minimal stub")
        return RenderedStub(_minimal(parts, raw), function, found)
    if len(source) > MAX_SOURCE:
        warn(f"the stub would be {len(source):,} characters; using the minimal stub")
        return RenderedStub(_minimal(parts, raw), function, found)
    problem = check_stub(source, function=function, server=server, tool=parts.tool)
    if problem is not None:
        warn(f"the rendered stub failed the structure check ({problem}); using the minimal stub")
        source = _minimal(parts, raw)
    return RenderedStub(source, function, found)


# ── conversion ──────────────────────────────────────────────────────────────────────────────


def _convert(parts: _Parts, raw: dict[str, Any], warn: Callable[[str], None]) -> None:
    # The builder also keeps clear of every importable name and `annotations`.
    builder = TypeBuilder(reserved=ImportNames(parts.function).aliases | {parts.function}, warn=warn)
    output_schema = raw.get("outputSchema")
    output_name = builder.names.allocate(parts.function + "_output") if isinstance(output_schema, dict) else ""
    fn_camel = camel(parts.function)

    shape: InputShape | None = None
    if "inputSchema" not in raw or raw.get("inputSchema") is None:
        parts.fallback_reason = "the tool has no input schema"
    else:
        try:
            shape = builder.input_shape(raw["inputSchema"], hint=fn_camel + "Arguments")
        except SchemaConversionError as e:
            parts.fallback_reason = f"the input schema could not be converted: {e}"
    if shape is None:
        warn(f"{parts.fallback_reason}; using **arguments: Any")
        parts.raw_input = raw.get("inputSchema")
        parts.extra = ANY
    else:
        parts.extra = shape.extra
        ordered = [p for p in shape.properties if p.required] + [p for p in shape.properties if not p.required]
        param_reserved = builder.names.taken | _LOCALS
        idents = assign_identifiers([p.wire for p in ordered], fallback="x", reserved=param_reserved)
        parts.params = [(idents[p.wire], p) for p in ordered]

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


# ── layout ──────────────────────────────────────────────────────────────────────────────────


def _layout(parts: _Parts) -> str:
    names = ImportNames(parts.function)
    blocks: list[str] = []
    if parts.definitions:
        module_names = {d.name for d in parts.definitions} | names.aliases | TYPING_NAMES | BUILTIN_TYPES | {"None"}
        for d in parts.definitions:
            blocks.append(_typed_dict_source(d, module_names, names))
    blocks.append(_function_source(parts, names))
    return _module(parts, names, blocks)


def _module(parts: _Parts, names: ImportNames, blocks: list[str]) -> str:
    head = [_module_docstring(parts), "", "from __future__ import annotations", ""]
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


def _module_docstring(parts: _Parts) -> str:
    server, tool = one_line(parts.server, 200), one_line(parts.tool, 200)
    head = f"{_shorter(server, 60)}.{_shorter(tool, 80)}"
    room = max(40, LINE - 6 - len(head))  # the first line fits in 120 columns when the names are short
    summary = first_sentence(parts.description, room) or one_line(parts.title, room)
    lines = [f"{head} — {summary}" if summary else head, ""]
    # The full names (the first line may shorten them); the schema hash is in the manifest.
    origin = f"Generated by tooltree from tool {tool!r} of MCP server {server!r}; do not edit."
    lines += _wrap(origin, LINE - 4, "", "")
    return docstring_literal("\n".join([line.rstrip() for line in lines]))


def _typed_dict_source(d: TypedDictDef, module_names: set[str], names: ImportNames) -> str:
    typed_dict = names.use("TypedDict")

    def annotation(f: FieldDef, quote: str | None, wrap: str | None = None) -> str:
        text = render_type(f.type, names, quote=quote, wrap=wrap)
        return text if f.required else f"{names.use('NotRequired')}[{text}]"

    if d.uses_class_syntax(module_names):
        lines = [f"class {d.name}({typed_dict}):"]
        doc = _typed_dict_doc(d)
        if doc:
            lines += ["    " + docstring_literal(doc, indent="    "), ""]
        for f in d.fields:
            line = f"    {f.key}: {annotation(f, None)}"
            lines.append(line if len(line) <= LINE else f"    {f.key}: {annotation(f, None, '    ')}")
        return "\n".join(lines)
    # Functional form: the keys are not all plain identifiers. The value types are strings
    # (forward references) so definitions may refer to each other in any order.
    items = [f"{preferred_literal(f.key)}: {string_literal(annotation(f, SINGLE))}" for f in d.fields]
    one = f"{d.name} = {typed_dict}({string_literal(d.name)}, {{{', '.join(items)}}})"
    if len(one) <= LINE:
        return one
    return "\n".join(
        [f"{d.name} = {typed_dict}(", f"    {string_literal(d.name)},", "    {"]
        + [f"        {item}," for item in items]
        + ["    },", ")"]
    )


def _typed_dict_doc(d: TypedDictDef) -> str:
    lines = _paragraphs(d.description, MAX_TYPE_DESCRIPTION, width=LINE - 4)
    documented = [f for f in d.fields if f.description.strip()]
    if documented:
        lines += ["", "Attributes:"] if lines else [f"The {d.name} object.", "", "Attributes:"]
        for f in documented:
            lines += _wrap(f"{f.key}: {one_line(f.description, MAX_FIELD_DESCRIPTION)}", LINE - 4, "    ")
    return "\n".join(lines)


def _function_source(parts: _Parts, names: ImportNames) -> str:
    params: list[str] = []
    for ident, p in parts.params:
        t = p.type if p.required else make_union([p.type, NONE])
        default = "" if p.required else " = None"
        param = f"{ident}: {render_type(t, names)}{default}"
        if len(param) > LINE - 5:  # a long enum: one value per line
            param = f"{ident}: {render_type(t, names, wrap='    ')}{default}"
        params.append(param)
    if parts.extra is not None:
        params.append(f"**arguments: {render_type(parts.extra, names)}")
    elif params:
        params.insert(0, "*")
    returns = names.use("ToolResult") if parts.output is None else render_type(parts.output, names)
    one = f"def {parts.function}({', '.join(params)}) -> {returns}:"
    if len(one) <= LINE:
        lines = [one]
    else:
        lines = [f"def {parts.function}("] + [f"    {p}," for p in params] + [f") -> {returns}:"]
    lines.append("    " + docstring_literal(_function_doc(parts), indent="    "))
    lines += _body(parts, names)
    return "\n".join(lines)


def _body(parts: _Parts, names: ImportNames) -> list[str]:
    server, tool = preferred_literal(parts.server), preferred_literal(parts.tool)
    lines: list[str] = []
    if parts.params:
        keys = [(ident, preferred_literal(p.wire), p.required) for ident, p in parts.params]
        required = [f"{key}: {ident}" for ident, key, is_required in keys if is_required]
        head = f"    arguments: dict[str, {names.use('Any')}] = {{"
        one = head + ", ".join(required) + "}"
        lines += [one] if len(one) <= LINE else [head, *[f"        {r}," for r in required], "    }"]
        for ident, key, is_required in keys:
            if not is_required:
                lines += [f"    if {ident} is not None:", f"        arguments[{key}] = {ident}"]
        args = "arguments"
    else:
        args = "arguments" if parts.extra is not None else "{}"
    call_tool = names.use("call_tool")

    def call(prefix: str) -> list[str]:
        one = f"    {prefix}{call_tool}({server}, {tool}, {args})"
        if len(one) <= LINE:
            return [one]
        return [f"    {prefix}{call_tool}(", f"        {server},", f"        {tool},", f"        {args},", "    )"]

    if parts.output is None:
        return [*lines, *call("return ")]
    # A plain name is written as is; anything else as a string, so nothing is evaluated.
    target = (
        parts.output.name
        if isinstance(parts.output, Atom)
        else string_literal(render_type(parts.output, names, quote=SINGLE))
    )
    cast, structured = names.use("cast"), names.use("structured")
    return [*lines, *call("result = "), f"    return {cast}({target}, {structured}(result, {server}, {tool}))"]


# ── docstrings ──────────────────────────────────────────────────────────────────────────────


def _function_doc(parts: _Parts) -> str:
    width = LINE - 4
    lines: list[str] = []
    paragraphs = _paragraphs(_split_summary(_dedent(_tidy(parts.description))), MAX_DESCRIPTION, width=width)
    if paragraphs:
        lines += paragraphs
    else:
        summary = (
            one_line(parts.title, 200)
            or f"Call the {one_line(parts.tool, 80)!r} tool of {one_line(parts.server, 60)!r}."
        )
        lines += _wrap(summary, width, "")
    if parts.hints:
        lines += ["", f"Hints: {', '.join(parts.hints)}."]
    args = _args_doc(parts, width)
    if args:
        lines += ["", "Args:", *args]
    # A ToolResult (and the ToolError of a failing tool) is explained once, where the runtime is
    # introduced; a stub documents only what is particular to its tool.
    if parts.output is not None:
        lines += ["", "Returns:", *_returns_doc(parts, width)]
    if parts.fallback_reason:
        lines += ["", "Input schema:", *_raw_schema(parts.raw_input)]
    return "\n".join(lines)


def _args_doc(parts: _Parts, width: int) -> list[str]:
    out: list[str] = []
    for ident, p in parts.params:
        text = one_line(_text(p.schema.get("description")), MAX_ARG_DESCRIPTION)
        notes = _constraints(p)
        if ident != p.wire:
            notes.append(f"Sent as {_json_preview(p.wire, 100)}.")
        body = " ".join(x for x in [_sentence(text), *notes] if x)
        if body:  # the signature already says everything about an undocumented parameter
            out += _wrap(f"{ident}: {body}", width, "    ")
    if parts.fallback_reason:
        why = one_line(parts.fallback_reason, 300)
        out += _wrap(
            f"**arguments: the tool's arguments, by their wire names ({why}; see the schema below).", width, "    "
        )
    elif parts.extra is not None:
        out += _wrap("**arguments: the tool's arguments, by their wire names (any keys).", width, "    ")
    return out


def _returns_doc(parts: _Parts, width: int) -> list[str]:
    assert parts.output is not None
    if not isinstance(parts.output, Atom):
        return [f"    {render_type(parts.output, ImportNames())}: the tool's structured result."]
    out = [f"    {parts.output.name}: the tool's structured result, with keys:"]
    for key, annotation, description in parts.output_fields[:MAX_RETURN_FIELDS]:
        desc = one_line(description, 100)
        out += _wrap(
            f"{one_line(key, 80)} ({one_line(annotation, 80)}){': ' + desc if desc else ''}", width, "        "
        )
    if len(parts.output_fields) > MAX_RETURN_FIELDS:
        out.append(f"        … and {len(parts.output_fields) - MAX_RETURN_FIELDS} more (see {parts.output.name}).")
    return out


def _constraints(p: Property) -> list[str]:
    s = p.schema
    for key in ("anyOf", "oneOf"):
        options = s.get(key)
        if isinstance(options, list):
            branches = [b for b in options if isinstance(b, dict) and b.get("type") != "null"]
            if len(branches) == 1:
                s = {**branches[0], **s}
    notes: list[str] = []
    if s.get("deprecated") is True:
        notes.append("Deprecated.")
    if isinstance(s.get("format"), str):
        notes.append(f"Format: {one_line(s['format'], 60)}.")
    if not s.keys().isdisjoint(_LIMITS):
        for key, label in _LIMITS.items():
            value = s.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                notes.append(f"{label}: {_json_preview(value, 40)}.")
    if s.get("uniqueItems") is True:
        notes.append("Items must be unique.")
    if isinstance(s.get("pattern"), str):
        notes.append(f"Pattern: {one_line(s['pattern'], 200)}.")
    enum = s.get("enum")
    if isinstance(enum, list) and enum and not _shows_literal(p.type):
        notes.append(f"One of: {_json_preview(enum, 300)[1:-1]}.")
    if "default" in s:
        notes.append(f"Server default: {_json_preview(s['default'], 200)}.")
    return notes


_LIMITS = {
    "minimum": "Minimum",
    "maximum": "Maximum",
    "exclusiveMinimum": "Greater than",
    "exclusiveMaximum": "Less than",
    "minLength": "Min length",
    "maxLength": "Max length",
    "minItems": "Min items",
    "maxItems": "Max items",
}
"""Numeric constraints shown in a parameter's description, in this order."""


def _shows_literal(t: PyType) -> bool:
    return isinstance(t, Lit) or (isinstance(t, Union) and any(isinstance(m, Lit) for m in t.members))


def _raw_schema(schema: Any) -> list[str]:
    problem = measure(schema, max_nodes=1_000_000)
    if problem is not None:
        return [f"    (not shown: {problem})"]
    try:
        text = json.dumps(schema, indent=2, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ["    (not shown: not JSON)"]
    if len(text) > MAX_RAW_SCHEMA:
        text = text[:MAX_RAW_SCHEMA] + "\n…"
    return ["    " + line.rstrip() for line in _tidy(text).split("\n")]


# ── text helpers ────────────────────────────────────────────────────────────────────────────


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


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


def _split_summary(text: str) -> str:
    """Put a one-line first paragraph's first sentence on its own, as a docstring summary line."""
    first, sep, rest = text.partition("\n\n")
    if "\n" in first:
        return text
    end = _SENTENCE_END.search(first)
    if end is not None and end.start() < 110:  # the sentence, with its punctuation, fits in 110
        return first[: end.start() + 1] + "\n\n" + first[end.end() :] + sep + rest
    return text


def _shorter(flat: str, limit: int) -> str:
    """``one_line(text, limit)``, given ``flat = one_line(text, n)`` for some ``n > limit``.

    A flattened text is its own ``one_line``, and capping a capped text at a shorter length caps
    the original the same way, so only a text too long for ``limit`` needs the second pass.
    """
    return flat if len(flat) <= limit else one_line(flat, limit)


def _sentence(text: str) -> str:
    return text if not text or text[-1] in ".!?…" else text + "."


_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(value, ensure_ascii=False)`` without building an encoder per call (encoding keeps no state)."""


def _json_preview(value: Any, limit: int) -> str:
    try:
        text = _JSON.encode(value)
    except (TypeError, ValueError, RecursionError):
        text = "…"
    return one_line(text, limit)


# Every character of Unicode category Zs (space separators) except the plain space itself.
_UNICODE_SPACES = re.compile("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")


def _tidy(text: str) -> str:
    """Clean control characters and turn every unicode space into a plain space."""
    if text.replace("\n", " ").isprintable():
        return text  # nothing to do: both steps change only non-printable characters other than \n
    return _UNICODE_SPACES.sub(" ", clean(text))


def _dedent(text: str) -> str:
    """Like `inspect.cleandoc`: remove the indentation common to the lines after the first (docstrings)."""
    if "\n" not in text:
        return text.strip()
    first, *rest = text.strip("\n").split("\n")
    cut = min((len(line) - len(line.lstrip(" ")) for line in rest if line.strip()), default=0)
    if cut:
        rest = [line[cut:] for line in rest]
    return "\n".join([first.strip(), *rest]).strip()


def _paragraphs(text: str, limit: int, *, width: int) -> list[str]:
    """Description text as wrapped lines: paragraphs kept, blank runs collapsed, capped with …"""
    tidy = _dedent(_tidy(text))
    if len(tidy) > limit:
        tidy = tidy[: limit - 1].rstrip() + "…"
    out: list[str] = []
    for line in tidy.split("\n"):
        line = line.rstrip()
        if not line:
            if out and out[-1]:
                out.append("")
            continue
        lead = line[: len(line) - len(line.lstrip(" "))]
        out += _wrap(line.lstrip(" "), width, lead, lead)
    return out


def _wrap(text: str, width: int, indent: str, continuation: str | None = None) -> list[str]:
    if len(indent) + len(text) <= width and "\n" not in text:
        return [(indent + text).rstrip()]
    cont = indent + "    " if continuation is None else continuation
    if " ".join(text.split()) == text:  # the usual case: words between single spaces
        return _fill(text, width, indent, cont) or [indent.rstrip()]
    return _greedy_wrap(text, width, indent, cont) or [indent.rstrip()]


def _fill(text: str, width: int, indent: str, continuation: str) -> list[str]:
    """What :func:`_greedy_wrap` gives for words between single spaces, found by searching for spaces."""
    lines: list[str] = []
    prefix, rest = indent, text
    while rest and len(prefix) + len(rest) > width:
        cut = rest.rfind(" ", 0, max(width - len(prefix), 0) + 1)  # after the last word that fits
        if cut < 0:  # the first word is longer than a line: it gets a line of its own
            cut = rest.find(" ")
            if cut < 0:
                break
        lines.append(prefix + rest[:cut])
        prefix, rest = continuation, rest[cut + 1 :]
    if rest:
        lines.append(prefix + rest)
    return lines


_WRAP_SPACES = str.maketrans(dict.fromkeys("\t\n\x0b\x0c\r", " "))
_SPACE_RUNS = re.compile("( +)")


def _greedy_wrap(text: str, width: int, indent: str, continuation: str) -> list[str]:
    """``textwrap.wrap`` with ``break_long_words=False, break_on_hyphens=False``, line for line.

    Tabs are expanded and ASCII white space becomes spaces; the text is cut into runs of spaces
    and the words between them. A line takes runs while they fit, a word longer than a line gets
    a line of its own, and a run that is all white space (``str.strip``: a "word" such as
    U+3000 counts too) is dropped at the end of a line and at the start of every line but the first.
    """
    chunks = [c for c in _SPACE_RUNS.split(text.expandtabs().translate(_WRAP_SPACES)) if c]
    chunks.reverse()  # popped from the end
    lines: list[str] = []
    while chunks:
        prefix = continuation if lines else indent
        room = width - len(prefix)
        if lines and not chunks[-1].strip():
            chunks.pop()
        line: list[str] = []
        size = 0
        while chunks and size + len(chunks[-1]) <= room:
            size += len(chunks[-1])
            line.append(chunks.pop())
        if chunks and not line:
            line.append(chunks.pop())
        if line and not line[-1].strip():
            line.pop()
        if line:
            lines.append(prefix + "".join(line))
    return lines


# ── the fallback ────────────────────────────────────────────────────────────────────────────


def _minimal(parts: _Parts, raw: dict[str, Any]) -> str:
    """The smallest useful stub: ``**arguments`` in, ``ToolResult`` out. Passes `check_stub`."""
    safe = _Parts(
        server=parts.server,
        tool=parts.tool,
        function=parts.function,
        schema_hash=parts.schema_hash,
        description=parts.description,
        title=parts.title,
        hints=[],
        extra=ANY,
        raw_input=raw.get("inputSchema"),
        fallback_reason=parts.fallback_reason or "the stub could not be generated",
    )
    return _layout(safe)
