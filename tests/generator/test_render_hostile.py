"""Hostile tool definitions: every stub compiles, keeps its shape, and runs nothing on import."""

import ast
import builtins
import inspect
import keyword
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.naming import to_identifier
from generator.render import MAX_SOURCE, RenderedStub, render_stub
from generator.stub_check import check_stub
from generator.type_expr import import_alias
from tool_tree.runtime import set_transport

TEXT_PAYLOADS = [
    '"""',
    "'''",
    '"""+__import__(\'os\').system(\'x\')+"""',
    "'''+__import__('os').system('x')+'''",
    'ends with a quote"',
    "ends with a backslash\\",
    '\\"""\nimport os\n"""',
    "first\rimport os; os.system('x')",
    "first\r\nsecond\n\n\nthird",
    "nul\x00byte",
    "vt\x0bff\x0cfs\x1cgs\x1drs\x1eus\x1fnel\x85",
    "line\u2028import os\u2029sep",
    "\n# -*- coding: utf-7 -*-\n",
    "# comment\nimport os",
    "bidi \u202e\u2066 trick \u2069",
    "zero\u200bwidth\ufeff",
    "\ud800 lone surrogate \udfff",
    "\\N{BULLET} \\x41 \\u0041 \\",
    "{{ 7*7 }} {% raw %} ${x} %(x)s {0}",
    "\t\ttabs\tand\u00a0nbsp\u3000",
    "emoji 🎉 café Ωmega",
    '""""""""""',
    "",
    " ",
]
NAME_PAYLOADS = [
    "__init__",
    "__class__",
    "__builtins__",
    "__import__",
    "../../etc/passwd",
    "class",
    "None",
    "True",
    "1x",
    "2fa",
    "from",
    "ｆｒｏｍ",  # fullwidth: NFKD folds it to "from"
    "ﬁle",  # ligature: NFKC would turn it into "file"
    "раураl",  # Cyrillic look-alike
    "self",
    "_",
    "print",
    "match",
    "type",
    "annotations",
    "TypedDict",
    "Any",
    "cast",
    "call_tool",
    "structured",
    "ToolResult",
    "arguments",
    "result",
    "user-id",
    "a.b",
    "a/b",
    "a b",
    "",
    "x" * 300,
]
PAYLOADS = TEXT_PAYLOADS + NAME_PAYLOADS
ALLOWED_IMPORTS = {"__future__", "typing", "tool_tree.runtime"}


def _guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if name not in ALLOWED_IMPORTS or level != 0:
        raise AssertionError(f"importing the stub imported {name!r}")
    return builtins.__import__(name, globals, locals, fromlist, level)


def _refuse_calls(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"importing the stub called {server}.{tool}")


class _Recorder:
    """A transport that records the arguments of every call."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(dict(arguments))
        return {"content": []}


@contextmanager
def _transport(transport: Any) -> Iterator[None]:
    previous = set_transport(transport)
    try:
        yield
    finally:
        set_transport(previous)


def _function_for(tool: Any) -> str:
    name = tool.get("name") if isinstance(tool, dict) else None
    return to_identifier(name if isinstance(name, str) else "", fallback="tool")


def _tool_name(tool: Any) -> str:
    name = tool.get("name") if isinstance(tool, dict) else None
    return name if isinstance(name, str) else ""


def _render(tool: Any, server: str = "srv") -> RenderedStub:
    return render_stub(server=server, tool=tool, function=_function_for(tool))


def _assert_safe(stub: RenderedStub, *, server: str, tool: str) -> dict[str, Any]:
    """Compiles, passes the structure check, imports only what stubs import, runs nothing."""
    stub.source.encode("utf-8")
    assert "\r" not in stub.source and "\x00" not in stub.source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = compile(stub.source, f"<{stub.function}>", "exec")
    assert check_stub(stub.source, function=stub.function, server=server, tool=tool) is None
    assert not any("internal error" in w or "structure check" in w for w in stub.warnings), stub.warnings
    tree = ast.parse(stub.source)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert called <= {import_alias(n, stub.function) for n in ("TypedDict", "call_tool", "cast", "structured")}
    assert not any(isinstance(n, ast.Call) and not isinstance(n.func, ast.Name) for n in ast.walk(tree))
    namespace: dict[str, Any] = {
        "__name__": f"servers.hostile.{stub.function}",
        "__builtins__": {**vars(builtins), "__import__": _guarded_import},
    }
    with _transport(_refuse_calls):
        exec(code, namespace)
    defined = {k for k in namespace if not k.startswith("__")}
    types = {n.name for n in tree.body if isinstance(n, ast.ClassDef)} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert defined == types | imported | {stub.function}
    assert inspect.isfunction(namespace[stub.function])
    return namespace


def _tools_for(p: str) -> list[dict[str, Any]]:
    return [
        {
            "name": p,
            "title": p,
            "description": p,
            "inputSchema": {
                "type": "object",
                "properties": {
                    p: {"type": "string", "description": p, "default": p, "pattern": p, "format": p, "title": p}
                },
                "required": [p],
            },
        },
        {
            "name": "t",
            "description": f"Summary. {p}\n\n{p}",
            "inputSchema": {
                "type": "object",
                "description": p,
                "properties": {
                    "x": {"enum": [p, p + "2", None], "description": p},
                    "y": {"const": p},
                    "z": {
                        "type": "object",
                        "title": p,
                        "description": p,
                        "properties": {p: {"type": "integer", "description": p}, "ok": {"description": p}},
                        "required": [p],
                    },
                    "w": {"$ref": "#/$defs/" + p},
                    "v": {"type": "array", "items": {"$ref": "#/definitions/" + p}, "default": [p, {p: p}]},
                    p + "_opt": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}], "default": p},
                },
                "required": ["y", "z"],
                "$defs": {p: {"type": "object", "title": p, "properties": {p: {"$ref": "#/$defs/" + p}}}},
                "definitions": {p: {"type": "string", "enum": [p]}},
            },
            "outputSchema": {
                "type": "object",
                "title": p,
                "properties": {p: {"enum": [p]}, "self": {"$ref": "#"}},
                "required": [p],
            },
            "annotations": {"title": p, "readOnlyHint": True},
        },
    ]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_payload_everywhere_gives_a_safe_stub(payload: str) -> None:
    for tool in _tools_for(payload):
        stub = _render(tool)
        _assert_safe(stub, server="srv", tool=tool["name"])


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_payload_in_a_returned_objects_docs_gives_a_safe_stub(payload: str) -> None:
    # a TypedDict's docstring: CPython encodes a class's docstring to UTF-8 when it creates the class
    output = {"type": "object", "description": payload, "properties": {"note": {"description": payload}}}
    tool = {"name": "t", "inputSchema": {"type": "object"}, "outputSchema": output}
    stub = _render(tool)
    assert "(TypedDict" in stub.source
    _assert_safe(stub, server="srv", tool="t")


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_payload_as_server_name_gives_a_safe_stub(payload: str) -> None:
    tool = _tools_for("x")[1]
    stub = render_stub(server=payload, tool=tool, function="t")
    _assert_safe(stub, server=payload, tool="t")


def test_payload_text_only_ever_appears_inside_string_literals() -> None:
    attack = '"""+__import__(\'os\').system(\'echo pwned\')+"""'
    stub = _render({"name": "t", "description": attack, "inputSchema": {"type": "object"}})
    tree = ast.parse(stub.source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "__import__" not in names and "os" not in names
    docs = [
        ast.get_docstring(n, clean=False) or ""
        for n in [tree, tree.body[-1]]
        if isinstance(n, ast.Module | ast.FunctionDef)
    ]
    assert any("__import__('os').system('echo pwned')" in d for d in docs)


def test_carriage_return_and_line_separators_do_not_end_a_line_of_source() -> None:
    tool = {"name": "t", "description": "a\rimport os\u2028import sys\x85x", "inputSchema": {"type": "object"}}
    stub = _render(tool)
    assert "import os" not in [line.strip() for line in stub.source.split("\n")]
    _assert_safe(stub, server="srv", tool="t")


def test_property_names_map_to_distinct_safe_parameters_and_keep_wire_names() -> None:
    props = {name: {"type": "string"} for name in NAME_PAYLOADS}
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": props, "required": NAME_PAYLOADS[:5]}}
    stub = _render(tool)
    namespace = _assert_safe(stub, server="srv", tool="t")
    params = inspect.signature(namespace["t"]).parameters
    assert len(params) == len(NAME_PAYLOADS)
    for name in params:
        assert name.isascii() and name.isidentifier() and not keyword.iskeyword(name) and name != "__debug__"
    # What Python can bind keeps its wire name (builtins and dunders too); the body's names do not.
    assert {"print", "type", "match", "self", "_", "__init__", "__builtins__", "Any", "arguments"} <= set(params)
    assert {"call_tool", "from", "class", "None"}.isdisjoint(params)
    assert stub.parameters == {w: p for w, p in zip(_wires(stub), params, strict=True) if w != p}
    sent = _Recorder()
    with _transport(sent):
        namespace["t"](**{name: f"v:{name}" for name in params})
    assert set(sent.calls[0]) == set(NAME_PAYLOADS)


def _wires(stub: RenderedStub) -> list[str]:
    """The wire names the stub sends, in parameter order (read from its call_tool dict)."""
    call = next(n for n in ast.walk(ast.parse(stub.source)) if isinstance(n, ast.Dict) and n.keys)
    return [k.value for k in call.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


@pytest.mark.parametrize("given", [*PAYLOADS, "__import__('os').system('x')", "a b", "x\ny", "call_tool", "from"])
def test_names_from_a_tampered_manifest_are_kept_only_when_they_are_safe(given: str) -> None:
    props = {name: {"type": "string"} for name in ["a", "b-c", "from"]}
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": props}}
    stub = render_stub(server="srv", tool=tool, function="t", parameters={"b-c": given, "from": given})
    namespace = _assert_safe(stub, server="srv", tool="t")
    params = list(inspect.signature(namespace["t"]).parameters)
    assert len(set(params)) == 3 and all(p.isascii() and p.isidentifier() for p in params)
    assert not keyword.iskeyword(given) or given not in params


def test_huge_description_is_capped() -> None:
    stub = _render({"name": "t", "description": "A" * 1_000_000 + '"""', "inputSchema": {"type": "object"}})
    _assert_safe(stub, server="srv", tool="t")
    assert len(stub.source) < 10_000


def test_ten_thousand_properties_fall_back_to_keyword_arguments() -> None:
    props = {f"p{i}": {"type": "string", "description": '"""' * 3} for i in range(10_000)}
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": props}})
    _assert_safe(stub, server="srv", tool="t")
    assert "def t(**arguments: Any) -> ToolResult:" in stub.source
    assert any("more than 500 properties" in w for w in stub.warnings)
    assert len(stub.source) < 20_000


@pytest.mark.parametrize("depth", [40, 5_000])
def test_deeply_nested_schemas_are_cut_off(depth: int) -> None:
    schema: Any = {"type": "string"}
    for i in range(depth):
        schema = {"type": "object", "properties": {f"k{i % 3}": schema}}
    stub = _render({"name": "t", "inputSchema": schema, "outputSchema": schema})
    _assert_safe(stub, server="srv", tool="t")
    if depth == 40:  # typed down to the depth a stub keeps, Any below it
        assert stub.warnings == [
            f"tool 't': {which} schema: schema nested deeper than 32 levels; using Any below that"
            for which in ("input", "output")
        ]
    else:  # too deep to convert at all: the minimal stub
        assert stub.warnings == [
            "tool 't': the input schema could not be converted: nested deeper than 100 levels; using **arguments: Any",
            "tool 't': the output schema could not be converted (nested deeper than 100 levels); returning ToolResult",
        ]
        assert "def t(**arguments: Any) -> ToolResult:" in stub.source


@pytest.mark.parametrize("rest", [False, {"type": "integer"}], ids=["closed", "open"])
def test_tuple_arrays_nested_deep_give_a_stub_as_small_as_their_schema(rest: Any) -> None:
    # Before: a tuple array's items were written twice, in `tuple[...]` and in `list[...]`, at every level: nested 16
    # deep (a schema of 1 KB) the stub was 2 MB (the minimal stub was used), 20 deep 32 MB, 31 deep it never finished.
    schema: Any = {"type": "string"}
    for _ in range(16):
        schema = {"type": "array", "prefixItems": [schema, {"type": "null"}], "items": rest}
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": {"p": schema}}})
    namespace = _assert_safe(stub, server="srv", tool="t")
    assert stub.warnings == [] and len(stub.source) < 5_000, (stub.warnings, len(stub.source))
    annotation = inspect.signature(namespace["t"]).parameters["p"].annotation
    assert annotation.startswith("list[list[") and "tuple[tuple[" in annotation  # the inner levels: tuples too


def test_deeply_nested_default_does_not_break_rendering() -> None:
    default: Any = 1
    for _ in range(50_000):
        default = [default]
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"default": default}}}})
    _assert_safe(stub, server="srv", tool="t")


@pytest.mark.parametrize(
    "default",
    [10**5000, 2**70, math.nan, math.inf, "x" * 100_000, {"a": [1, {"b": None}]}, [], {}, None],
    ids=["hugeint", "bigint", "nan", "inf", "long", "nested", "list", "dict", "null"],
)
def test_weird_defaults_are_documented_safely(default: Any) -> None:
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": {"a": {"default": default}}}})
    _assert_safe(stub, server="srv", tool="t")
    assert "Server default:" in stub.source


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"type": "object", "properties": {"me": {"$ref": "#"}}},
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}},
        },
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}]}},
        },
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}},
        },
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "array", "items": {"$ref": "#/$defs/A"}}},
        },
        {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},
        {"allOf": [{"$ref": "#"}]},
    ],
)
def test_self_referential_and_looping_refs_give_a_safe_stub(schema: Any) -> None:
    stub = _render({"name": "t", "inputSchema": schema, "outputSchema": schema})
    _assert_safe(stub, server="srv", tool="t")


@pytest.mark.parametrize("schema", [True, False, [], "string", None, 0, 1.5, {"type": None}, {"properties": []}])
def test_non_dict_and_malformed_schemas_give_a_safe_stub(schema: Any) -> None:
    stub = _render({"name": "t", "inputSchema": schema, "outputSchema": schema})
    _assert_safe(stub, server="srv", tool="t")
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": {"a": schema}, "required": schema}})
    _assert_safe(stub, server="srv", tool="t")


@pytest.mark.parametrize("tool", [[], "tool", None, 7, {"name": 5, "description": ["x"], "inputSchema": {}}])
def test_malformed_tool_definitions_give_a_safe_stub(tool: Any) -> None:
    stub = render_stub(server="srv", tool=tool, function="tool")
    _assert_safe(stub, server="srv", tool=_tool_name(tool))


def test_schema_keys_that_make_generators_emit_imports_are_ignored() -> None:
    prop = {"type": "string", "x-python-type": "os.system", "customTypePath": "os.path.join", "x-python-import": "os"}
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": {"a": prop}}})
    _assert_safe(stub, server="srv", tool="t")
    assert "os" not in {n.id for n in ast.walk(ast.parse(stub.source)) if isinstance(n, ast.Name)}
    assert "def t(*, a: str | NotGiven = NOT_GIVEN) -> ToolResult:" in stub.source


def test_enum_values_with_quotes_and_newlines_round_trip_to_the_wire() -> None:
    values = ['say "hi"', "it's", "line\nbreak", "back\\slash", '"""', "\u2028"]
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": {"v": {"enum": values}}, "required": ["v"]}}
    stub = _render(tool)
    namespace = _assert_safe(stub, server="srv", tool="t")
    func = ast.parse(stub.source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    annotation = func.args.kwonlyargs[0].annotation
    assert isinstance(annotation, ast.Subscript) and isinstance(annotation.slice, ast.Tuple)
    assert [ast.literal_eval(e) for e in annotation.slice.elts] == values
    sent = _Recorder()
    with _transport(sent):
        namespace["t"](v=values[0])
    assert sent.calls == [{"v": values[0]}]


# ── property-based: random tool definitions ─────────────────────────────────────────────────

_TYPES = ["string", "integer", "number", "boolean", "null", "array", "object", "frob"]
_ALL_CHARS = st.characters(exclude_categories=())
_texts = st.one_of(st.sampled_from(TEXT_PAYLOADS), st.text(alphabet=_ALL_CHARS, max_size=30))
_names = st.one_of(
    st.sampled_from([*NAME_PAYLOADS, "a", "b", "c", "a-b", "a_b", "A", "B"]), st.text(alphabet=_ALL_CHARS, max_size=10)
)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _texts)
_json = st.recursive(_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(_names, c, max_size=3), max_leaves=4)
_refs = st.one_of(
    st.sampled_from(
        [
            "#",
            "#/$defs/A",
            "#/$defs/B",
            "#/definitions/A",
            "#/properties/a",
            "#/$defs/A/properties/a",
            "http://x/y",
            "#/",
        ]
    ),
    _texts,
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.one_of(st.sampled_from(_TYPES), st.lists(st.sampled_from(_TYPES), max_size=3), _scalars),
            "properties": st.dictionaries(_names, children, max_size=4) | _json,
            "required": st.lists(_names, max_size=3) | _json,
            "items": children | st.lists(children, max_size=2),
            "prefixItems": st.lists(children, max_size=2),
            "additionalProperties": children,
            "anyOf": st.lists(children, max_size=3) | _json,
            "oneOf": st.lists(children, max_size=3),
            "allOf": st.lists(children, max_size=3),
            "$ref": _refs,
            "enum": st.lists(_scalars, max_size=4) | _json,
            "const": _json,
            "default": _json,
            "nullable": st.booleans(),
            "description": _texts,
            "title": _texts,
            "format": _texts,
            "pattern": _texts,
            "minimum": st.integers() | st.floats(),
            "maxLength": _json,
            "$defs": st.dictionaries(st.sampled_from(["A", "B"]) | _names, children, max_size=2),
            "definitions": st.dictionaries(st.sampled_from(["A"]) | _names, children, max_size=1),
            "x-python-type": _texts,
        },
    )


_leaves = st.one_of(st.sampled_from([{"type": t} for t in _TYPES] + [{}, True, False]), _json)
_schemas = st.recursive(_leaves, _extend, max_leaves=8)
_object_roots = st.builds(
    lambda props, required, defs: {"type": "object", "properties": props, "required": required, "$defs": defs},
    st.dictionaries(_names, _schemas, max_size=6),
    st.lists(_names, max_size=4),
    st.dictionaries(st.sampled_from(["A", "B"]), _schemas, max_size=2),
)
_tools = st.fixed_dictionaries(
    {"name": _names},
    optional={
        "title": _texts,
        "description": _texts,
        "inputSchema": _object_roots | _schemas,
        "outputSchema": _object_roots | _schemas,
        "annotations": st.fixed_dictionaries({}, optional={"readOnlyHint": _json, "title": _texts}) | _json,
        "_meta": _json,
    },
)


def _sentinel(name: str) -> tuple[str, str]:
    return ("sentinel", name)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_tools, _texts)
def test_random_tool_definitions_give_safe_stubs_that_send_their_wire_names(tool: dict[str, Any], server: str) -> None:
    stub = render_stub(server=server, tool=tool, function=_function_for(tool))
    assert render_stub(server=server, tool=tool, function=_function_for(tool)) == stub
    namespace = _assert_safe(stub, server=server, tool=_tool_name(tool))
    func = namespace[stub.function]
    params = inspect.signature(func).parameters
    keyword_only = [p for p in params.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    sent: list[tuple[str, str, dict[str, Any]]] = []

    def record(s: str, t: str, a: dict[str, Any]) -> dict[str, Any]:
        sent.append((s, t, dict(a)))
        return {"content": [], "structuredContent": {}}

    with _transport(record):
        if keyword_only:
            func(**{p.name: _sentinel(p.name) for p in keyword_only})
            # only the required ones: the optional ones are left out of the call
            func(**{p.name: _sentinel(p.name) for p in keyword_only if p.default is inspect.Parameter.empty})
        else:
            func(**({"any-key": 1} if params else {}))
    assert all(s == server and t == _tool_name(tool) for s, t, _ in sent)
    if keyword_only:
        full, required_only = sent[0][2], sent[1][2]
        assert sorted(v for v in full.values()) == sorted(_sentinel(p.name) for p in keyword_only)
        assert sorted(v for v in required_only.values()) == sorted(
            _sentinel(p.name) for p in keyword_only if p.default is inspect.Parameter.empty
        )
        root = tool.get("inputSchema")
        if isinstance(root, dict) and set(root) <= {"type", "properties", "required", "$defs"}:
            props, required = root.get("properties"), root.get("required")
            declared = [k for k in props if isinstance(k, str)] if isinstance(props, dict) else []
            named = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
            assert set(full) == set(declared).union(named)  # a name only required is sent too


def test_a_tool_gives_at_most_twenty_warnings_about_its_schemas_and_says_the_rest_are_not_given() -> None:
    # Before: one warning a property: 490 `$ref`s that lead nowhere, in the input and the output schema, gave 980 a
    # tool; 450 such tools (a 15 MB listing) gave 441,000, a 52 MB manifest and 56 MB of --json.
    props = {f"p{i}": {"$ref": f"#/$defs/missing{i}"} for i in range(490)}
    props["when"] = {"type": "string", "format": "date-time"}
    tool = {"name": "t", "inputSchema": {"type": "object", "properties": props}, "outputSchema": 7}
    stub = _render(tool)
    _assert_safe(stub, server="srv", tool="t")
    assert "    p489: Any | NotGiven = NOT_GIVEN," in stub.source and "    when: str | NotGiven" in stub.source
    said = [f"tool 't': input schema: $ref '#/$defs/missing{i}' cannot be resolved" for i in range(20)]
    assert [w.split(" (")[0] for w in stub.warnings[:20]] == said
    assert stub.warnings[20:] == [
        "tool 't': more warnings about its schemas are not given: only the first 20 are",
        "tool 't': the output schema is not a JSON object; returning ToolResult",  # the tool's own: always given
    ]


def test_a_stub_that_would_be_huge_becomes_the_minimal_stub() -> None:
    props = {f"{i}-" + "k" * 2_000: {"type": "object", "properties": {"a" * 2_000: {}}} for i in range(400)}
    stub = _render({"name": "t", "inputSchema": {"type": "object", "properties": props}})
    _assert_safe(stub, server="srv", tool="t")
    assert "def t(**arguments: Any) -> ToolResult:" in stub.source
    assert any("using the minimal stub" in w for w in stub.warnings)
    assert len(stub.source) < 20_000


def test_a_tool_whose_minimal_stub_is_still_over_the_limit_gets_no_stub() -> None:
    stub = render_stub(server="srv", tool={"name": "n" * MAX_SOURCE, "inputSchema": {"type": "object"}}, function="t")
    assert stub.left_out and stub.source == ""
    assert stub.warnings[0].startswith(f"tool '{'n' * 79}…': the stub would be ")
    assert stub.warnings[1].endswith(f" characters (the limit is {MAX_SOURCE:,}); left out")


def test_only_the_first_max_text_characters_of_a_servers_text_are_read() -> None:
    # A 10 MB description took 4-6 s to render, nearly all of it on text no stub shows; now the generator reads
    # the first MAX_TEXT characters of a description, a title or a parameter's description, and nothing after.
    from generator.parts import MAX_TEXT, text_of
    from generator.schema_convert import _description

    huge = "Lists files. " + "word " * 2_000_000
    assert text_of(huge) == huge[:MAX_TEXT] and _description({"description": huge}) == huge[:MAX_TEXT]
    assert text_of(None) == "" and _description({"description": 7}) == ""
    schema = {"type": "object", "properties": {"x": {"description": huge}}}
    stub = render_stub(server="srv", tool={"name": "t", "description": huge, "inputSchema": schema}, function="t")
    assert "Lists files." in stub.source and not stub.left_out and len(stub.source) < 3 * MAX_TEXT
