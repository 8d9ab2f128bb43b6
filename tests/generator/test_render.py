import ast
import inspect
import random
import re
import textwrap
import unicodedata
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import generator.render as render_module
from generator.render import MAX_DESCRIPTION, RenderedStub, render_stub
from generator.stub_check import check_stub
from generator.text import clean, one_line
from tool_tree.runtime import ToolError, ToolResult, set_transport

Call = tuple[str, str, dict[str, Any]]

CRM_TOOL: dict[str, Any] = {
    "name": "update_record",
    "description": "Update fields on a CRM record.\n\nOnly the fields you pass are changed.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "record_id": {"type": "string", "description": "The record's id.", "pattern": "^rec_[0-9]+$"},
            "status": {"type": "string", "enum": ["open", "won", "lost"], "description": "New pipeline status."},
            "tags": {"type": "array", "items": {"type": "string"}, "default": [], "description": "Labels to set."},
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["street"],
            },
            "from": {"type": "string", "format": "email", "description": "Who made the change"},
            "user-id": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None},
        },
        "required": ["record_id", "status", "from"],
    },
    "outputSchema": {
        "type": "object",
        "properties": {"id": {"type": "string", "description": "The record id."}, "version": {"type": "integer"}},
        "required": ["id"],
    },
}


def _render(tool: dict[str, Any], *, server: str = "crm", function: str | None = None) -> RenderedStub:
    name = tool.get("name")
    fn = function or (name if isinstance(name, str) and name.isidentifier() else "tool")
    return render_stub(server=server, tool=tool, function=fn, schema_hash="sha256:" + "0" * 64)


def _load(stub: RenderedStub) -> Any:
    namespace: dict[str, Any] = {"__name__": f"servers.demo.{stub.function}"}
    exec(compile(stub.source, f"<{stub.function}>", "exec"), namespace)
    return namespace[stub.function]


@pytest.fixture
def calls() -> Iterator[list[Call]]:
    recorded: list[Call] = []

    def transport(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        recorded.append((server, tool, dict(arguments)))
        return {"content": [{"type": "text", "text": '{"ok": true}'}], "structuredContent": {"id": "rec_1"}}

    previous = set_transport(transport)
    yield recorded
    set_transport(previous)


def test_stub_reads_like_the_documented_example() -> None:
    stub = _render(CRM_TOOL)
    assert stub.warnings == []
    src = stub.source
    assert src.startswith('"""crm.update_record — Update fields on a CRM record.\n\nServer: crm\nTool: update_record\n')
    assert "Schema: sha256:" + "0" * 64 in src
    assert "do not edit" in src
    assert "from typing import Any, Literal, NotRequired, TypedDict, cast\n" in src
    assert "from tool_tree.runtime import call_tool, structured\n" in src
    assert "class Address(TypedDict):\n    street: str\n    city: NotRequired[str]\n" in src
    assert "class UpdateRecordOutput(TypedDict):" in src
    assert (
        "def update_record(\n"
        "    *,\n"
        "    record_id: str,\n"
        '    status: Literal["open", "won", "lost"],\n'
        "    from_: str,\n"
        "    tags: list[str] | None = None,\n"
        "    address: Address | None = None,\n"
        "    user_id: int | None = None,\n"
        ") -> UpdateRecordOutput:\n"
    ) in src
    assert '    arguments: dict[str, Any] = {"record_id": record_id, "status": status, "from": from_}\n' in src
    assert '    if user_id is not None:\n        arguments["user-id"] = user_id\n' in src
    assert '    result = call_tool("crm", "update_record", arguments)\n' in src
    assert '    return cast(UpdateRecordOutput, structured(result, "crm", "update_record"))\n' in src
    assert check_stub(src, function="update_record", server="crm", tool="update_record") is None


def test_docstring_documents_args_constraints_and_returns() -> None:
    func = ast.parse(_render(CRM_TOOL).source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    doc = ast.get_docstring(func) or ""
    assert doc.startswith("Update fields on a CRM record.\n\nOnly the fields you pass are changed.\n\nArgs:\n")
    assert "    record_id: The record's id. Pattern: ^rec_[0-9]+$.\n" in doc
    assert "    status: New pipeline status.\n" in doc
    assert '    from_: Who made the change. Format: email. Sent as "from".\n' in doc
    assert "    tags: Labels to set. Server default: [].\n" in doc
    assert '    user_id: Minimum: 1. Server default: null. Sent as "user-id".\n' in doc
    assert "Returns:\n    UpdateRecordOutput: the tool's structured result, with keys:\n" in doc
    assert doc.endswith("        id (str): The record id.\n        version (int, optional)")
    assert "Raises:" not in doc  # ToolError is explained once, not in every stub


def test_an_untyped_result_and_undocumented_parameters_add_no_boilerplate() -> None:
    tool = {
        "name": "ping",
        "description": "Check the server.",
        "inputSchema": {"type": "object", "properties": {"host": {"type": "string"}, "count": {"type": "integer"}}},
    }
    src = _render(tool).source
    func = ast.parse(src).body[-1]
    assert isinstance(func, ast.FunctionDef)
    assert "-> ToolResult:" in src
    assert ast.get_docstring(func) == "Check the server."


def test_stub_sends_exact_wire_names_and_omits_unset_optionals(calls: list[Call]) -> None:
    update_record = _load(_render(CRM_TOOL))
    out = update_record(record_id="rec_1", status="won", from_="a@b.c", user_id=7)
    assert out == {"id": "rec_1"}
    assert calls == [("crm", "update_record", {"record_id": "rec_1", "status": "won", "from": "a@b.c", "user-id": 7})]
    update_record(record_id="rec_2", status="open", from_="x", tags=[], address={"street": "Main"})
    assert calls[1][2] == {
        "record_id": "rec_2",
        "status": "open",
        "from": "x",
        "tags": [],
        "address": {"street": "Main"},
    }


def test_parameters_are_keyword_only_with_required_first() -> None:
    sig = inspect.signature(_load(_render(CRM_TOOL)))
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values())
    assert list(sig.parameters) == ["record_id", "status", "from_", "tags", "address", "user_id"]
    assert [p.default for p in sig.parameters.values()][3:] == [None, None, None]


def test_tool_without_output_schema_returns_tool_result(calls: list[Call]) -> None:
    tool = {"name": "search", "description": "Search.", "inputSchema": {"type": "object", "properties": {"q": {}}}}
    stub = _render(tool)
    assert "def search(*, q: Any = None) -> ToolResult:" in stub.source
    assert '    return call_tool("crm", "search", arguments)\n' in stub.source
    assert "from tool_tree.runtime import ToolResult, call_tool\n" in stub.source
    result = _load(stub)()
    assert isinstance(result, ToolResult) and result.json() == {"id": "rec_1"}
    assert calls == [("crm", "search", {})]


def test_tool_without_parameters_takes_none(calls: list[Call]) -> None:
    stub = _render({"name": "ping", "inputSchema": {"type": "object", "properties": {}}})
    assert "def ping() -> ToolResult:" in stub.source
    assert '    return call_tool("crm", "ping", {})\n' in stub.source
    assert "from typing" not in stub.source
    _load(stub)()
    assert calls == [("crm", "ping", {})]


def test_object_with_only_additional_properties_takes_keyword_arguments(calls: list[Call]) -> None:
    stub = _render({"name": "put", "inputSchema": {"type": "object", "additionalProperties": {"type": "string"}}})
    assert "def put(**arguments: str) -> ToolResult:" in stub.source
    assert stub.warnings == []
    _load(stub)(**{"a-b": "1", "c": "2"})
    assert calls == [("crm", "put", {"a-b": "1", "c": "2"})]


@pytest.mark.parametrize("schema", [{"type": "string"}, True, [], "string", 5, {"anyOf": [{"type": "object"}]}])
def test_unconvertible_input_schema_falls_back_to_keyword_arguments(schema: Any, calls: list[Call]) -> None:
    stub = _render({"name": "odd", "description": "Odd tool.", "inputSchema": schema})
    assert "def odd(**arguments: Any) -> ToolResult:" in stub.source
    assert len(stub.warnings) == 1 and "tool 'odd': the input schema could not be converted" in stub.warnings[0]
    assert "**arguments: Any" in stub.warnings[0]
    func = ast.parse(stub.source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    doc = ast.get_docstring(func) or ""
    assert "Input schema:\n" in doc
    assert "**arguments: the tool's arguments, by their wire names" in doc
    _load(stub)(**{"any-key": 1})
    assert calls == [("crm", "odd", {"any-key": 1})]


def test_missing_input_schema_falls_back_with_a_warning() -> None:
    stub = _render({"name": "bare"})
    assert "def bare(**arguments: Any) -> ToolResult:" in stub.source
    assert stub.warnings == ["tool 'bare': the tool has no input schema; using **arguments: Any"]


def test_raw_schema_in_the_fallback_docstring_is_pretty_json_and_capped() -> None:
    schema = {"type": "string", "description": "x" * 20_000}
    stub = _render({"name": "big", "inputSchema": schema})
    func = ast.parse(stub.source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    doc = ast.get_docstring(func) or ""
    assert '    {\n      "type": "string",\n' in doc
    assert doc.rstrip().endswith("…")
    assert len(stub.source) < 12_000


def test_output_schema_that_is_not_an_object_returns_tool_result_with_a_warning() -> None:
    stub = _render({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}})
    assert "def t() -> ToolResult:" in stub.source
    assert stub.warnings == [
        "tool 't': the output schema could not be converted (it is not an object schema); returning ToolResult"
    ]
    stub = _render({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": "nope"})
    assert stub.warnings == ["tool 't': the output schema is not a JSON object; returning ToolResult"]


def test_output_object_without_properties_returns_a_plain_dict(calls: list[Call]) -> None:
    stub = _render({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}})
    assert "def t() -> dict[str, Any]:" in stub.source
    assert 'return cast("dict[str, Any]", structured(result, "crm", "t"))' in stub.source
    assert _load(stub)() == {"id": "rec_1"}


def test_tool_error_is_raised_from_the_stub() -> None:
    def failing(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "no such record"}], "isError": True}

    previous = set_transport(failing)
    try:
        with pytest.raises(ToolError, match="no such record"):
            _load(_render(CRM_TOOL))(record_id="r", status="won", from_="x")
    finally:
        set_transport(previous)


def test_server_name_is_passed_verbatim() -> None:
    server = 'my "crm"\nserver\\'
    stub = render_stub(server=server, tool=CRM_TOOL, function="update_record", schema_hash="h")
    assert check_stub(stub.source, function="update_record", server=server, tool="update_record") is None
    assert "'my \"crm\"\\nserver\\\\'" in stub.source


def test_rendering_is_deterministic() -> None:
    assert _render(CRM_TOOL).source == _render(CRM_TOOL).source
    reordered = {k: CRM_TOOL[k] for k in reversed(list(CRM_TOOL))}
    assert _render(reordered).source == _render(CRM_TOOL).source


def test_parameter_names_are_unique_and_avoid_type_and_local_names() -> None:
    tool = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a-b": {"type": "string"},
                "a.b": {"type": "string"},
                "arguments": {"type": "string"},
                "result": {"type": "string"},
                "Item": {"type": "object", "title": "Item", "properties": {"x": {}}},
                "TOutput": {"type": "string"},
                "cast": {"type": "string"},
            },
            "required": ["a-b", "a.b"],
        },
        "outputSchema": {"type": "object", "properties": {"x": {}}},
    }
    stub = _render(tool)
    params = list(inspect.signature(_load(stub)).parameters)
    assert params == ["a_b", "a_b_2", "arguments_", "result_", "Item_", "TOutput_", "cast_"]
    assert "class Item(TypedDict):" in stub.source and "class TOutput(TypedDict):" in stub.source


def test_keys_that_are_not_identifiers_use_the_functional_typeddict_form() -> None:
    tool = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "filter": {
                    "type": "object",
                    "properties": {"from": {"type": "string"}, "user-id": {"type": "integer"}, "ok": {}},
                    "required": ["from"],
                }
            },
        },
    }
    src = _render(tool).source
    assert (
        'Filter = TypedDict("Filter", {"from": "str", "user-id": "NotRequired[int]", "ok": "NotRequired[Any]"})' in src
    )
    _load(_render(tool))


def test_long_description_is_capped_with_an_ellipsis() -> None:
    stub = _render({"name": "t", "description": "word " * 5000, "inputSchema": {"type": "object"}})
    func = ast.parse(stub.source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    doc = ast.get_docstring(func) or ""
    body = doc.split("\n\nArgs:")[0]
    assert body.endswith("…") and len(body) <= MAX_DESCRIPTION + 100


def test_typical_stub_lines_fit_in_120_columns() -> None:
    for line in _render(CRM_TOOL).source.split("\n"):
        assert len(line) <= 120, line


def test_annotations_become_hints_and_title_is_the_summary_without_description() -> None:
    stub = _render(
        {
            "name": "t",
            "title": "Fetch a page",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": True},
        }
    )
    func = ast.parse(stub.source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    doc = ast.get_docstring(func) or ""
    assert doc == "Fetch a page\n\nHints: read-only, reaches outside systems."
    assert '"""crm.t — Fetch a page\n' in stub.source


def test_nested_descriptions_land_in_the_typeddict_docstring() -> None:
    tool = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "addr": {
                    "type": "object",
                    "description": "A postal address.",
                    "properties": {"city": {"type": "string", "description": "City name."}},
                }
            },
        },
    }
    tree = ast.parse(_render(tool).source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    assert ast.get_docstring(cls) == "A postal address.\n\nAttributes:\n    city: City name."


def test_function_name_must_be_a_safe_identifier() -> None:
    for bad in ["class", "a-b", "ｆ", "", "match", "__debug__"]:
        with pytest.raises(ValueError):
            render_stub(server="s", tool=CRM_TOOL, function=bad, schema_hash="h")


@pytest.mark.parametrize(
    "function", ["call_tool", "cast", "Any", "TypedDict", "ToolResult", "structured", "NotRequired"]
)
def test_function_named_like_an_import_gets_aliased_imports(function: str, calls: list[Call]) -> None:
    without_output = {k: v for k, v in CRM_TOOL.items() if k != "outputSchema"}
    sources = []
    for tool in ({**CRM_TOOL, "name": function}, {**without_output, "name": function}):
        stub = render_stub(server="crm", tool=tool, function=function, schema_hash="h")
        assert stub.warnings == []
        assert check_stub(stub.source, function=function, server="crm", tool=function) is None
        _load(stub)(record_id="r", status="won", from_="x")
        sources.append(stub.source)
    assert any(f"{function} as {function}_" in src for src in sources)
    assert calls == [("crm", function, {"record_id": "r", "status": "won", "from": "x"})] * 2


def test_a_converter_bug_still_gives_the_minimal_stub(monkeypatch: pytest.MonkeyPatch, calls: list[Call]) -> None:
    # Fault injection: no real schema triggers this path, so a converter bug is simulated.
    def broken(*args: Any) -> None:
        raise TypeError("boom")

    monkeypatch.setattr(render_module, "_convert", broken)
    stub = _render(CRM_TOOL)
    assert stub.warnings == [
        "tool 'update_record': internal error while rendering (TypeError: boom); using the minimal stub"
    ]
    assert "def update_record(**arguments: Any) -> ToolResult:" in stub.source
    assert check_stub(stub.source, function="update_record", server="crm", tool="update_record") is None
    _load(stub)(record_id="r")
    assert calls == [("crm", "update_record", {"record_id": "r"})]


def test_a_stub_failing_the_structure_check_is_replaced_by_the_minimal_stub(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fault injection: the escaping never lets a stub fail the check, so a failure is simulated once.
    verdicts = iter(["unexpected Expr in the function body"])
    monkeypatch.setattr(render_module, "check_stub", lambda *a, **k: next(verdicts, None) or check_stub(*a, **k))
    stub = _render(CRM_TOOL)
    assert stub.warnings == [
        "tool 'update_record': the rendered stub failed the structure check "
        "(unexpected Expr in the function body); using the minimal stub"
    ]
    assert "def update_record(**arguments: Any) -> ToolResult:" in stub.source
    assert check_stub(stub.source, function="update_record", server="crm", tool="update_record") is None


@pytest.mark.parametrize(
    ("mutation", "problem"),
    [
        ("\nimport os\n", "unexpected top-level Import"),
        ("\nprint('x')\n", "unexpected top-level Expr"),
        ("\nclass Evil(TypedDict):\n    x: int = __import__('os').system('x')\n", "holds more than annotated names"),
        ("\nEvil = TypedDict('Evil', {'a': '__import__(\"os\")'})\n", "unexpected Call in a type"),
    ],
)
def test_structure_check_rejects_anything_but_definitions(mutation: str, problem: str) -> None:
    src = _render(CRM_TOOL).source
    marker = "\n\nclass Address(TypedDict):"
    mutated = src.replace(marker, "\n" + mutation + marker, 1)
    verdict = check_stub(mutated, function="update_record", server="crm", tool="update_record")
    assert verdict is not None and problem in verdict


def test_structure_check_rejects_a_call_to_another_tool_or_server() -> None:
    src = _render(CRM_TOOL).source
    assert check_stub(src, function="update_record", server="crm", tool="delete_record") == "malformed call_tool() call"
    assert check_stub(src, function="update_record", server="other", tool="update_record") is not None
    assert check_stub(src, function="other", server="crm", tool="update_record") is not None


def test_docstring_style_descriptions_are_dedented() -> None:
    description = "Create a task.\n\n    The task is assigned to you.\n      - indented list item\n    Done."
    stub = _render({"name": "t", "description": description, "inputSchema": {"type": "object"}})
    func = ast.parse(stub.source).body[-1]
    assert isinstance(func, ast.FunctionDef)
    doc = ast.get_docstring(func) or ""
    assert doc == "Create a task.\n\nThe task is assigned to you.\n  - indented list item\nDone."


def test_long_enums_are_written_one_value_per_line() -> None:
    values = [f"application/vnd.example.type-number-{i}" for i in range(6)]
    tool = {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "kind": {"enum": values},
                "doc": {"type": "object", "properties": {"mime": {"enum": values}}, "required": ["mime"]},
            },
        },
    }
    stub = _render(tool)
    assert (
        "    kind: Literal[\n" + "".join(f'        "{v}",\n' for v in values) + "    ] | None = None,\n" in stub.source
    )
    assert "    mime: Literal[\n" + "".join(f'        "{v}",\n' for v in values) + "    ]\n" in stub.source
    assert all(len(line) <= 120 for line in stub.source.split("\n"))
    assert check_stub(stub.source, function="t", server="crm", tool="t") is None


# ── the structure check stands in for compile() ─────────────────────────────────────────────
# Each mutation parses, but compile() refuses it; the check must refuse it too.
CRM_FUNCTION_HEADER = "def update_record(\n    *,\n    record_id: str,"


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("    from_: str,", "    record_id: str,", "parameter record_id is repeated"),
        ("    from_: str,", "    __debug__: str,", "binds the name __debug__"),
        ("    street: str", "    __debug__: str", "binds the name __debug__"),
        ("cast(UpdateRecordOutput,", "cast(None[int],", "cast target is not a name or a string"),
        ("cast(UpdateRecordOutput,", "cast('x'['y'],", "cast target is not a name or a string"),
    ],
)
def test_structure_check_refuses_what_only_the_compiler_would_catch(old: str, new: str, problem: str) -> None:
    src = _render(CRM_TOOL).source
    assert CRM_FUNCTION_HEADER in src and old in src
    mutated = src.replace(old, new, 1)
    ast.parse(mutated)
    with warnings.catch_warnings(), pytest.raises(SyntaxError):
        warnings.simplefilter("error")
        compile(mutated, "<stub>", "exec")
    verdict = check_stub(mutated, function="update_record", server="crm", tool="update_record")
    assert verdict is not None and problem in verdict


def test_structure_check_refuses_a_keyword_parameter_named_like_the_keyword_arguments() -> None:
    src = _render({"name": "t", "inputSchema": {"type": "object", "additionalProperties": True}}).source
    mutated = src.replace("def t(**arguments: Any)", "def t(*, arguments: Any = None, **arguments: Any)", 1)
    assert mutated != src
    with pytest.raises(SyntaxError):
        compile(mutated, "<stub>", "exec")
    assert check_stub(mutated, function="t", server="crm", tool="t") == "unexpected **kwargs"


def test_structure_check_refuses_a_function_named_debug() -> None:
    src = _render({"name": "t", "inputSchema": {"type": "object"}}).source.replace("def t(", "def __debug__(", 1)
    with pytest.raises(SyntaxError):
        compile(src, "<stub>", "exec")
    assert check_stub(src, function="__debug__", server="crm", tool="t") == "the stub binds the name __debug__"


_MUTANT_TOOLS: list[dict[str, Any]] = [
    CRM_TOOL,
    {
        "name": "t",
        "inputSchema": {
            "type": "object",
            "properties": {
                "filter": {"type": "object", "properties": {"from": {"type": "string"}, "user-id": {"enum": [1, -2]}}},
                "kind": {"enum": ["a", "b", None]},
            },
        },
        "outputSchema": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    {"name": "t", "inputSchema": {"type": "object", "additionalProperties": True}},
]
_MUTANT_TEXT = [
    "__debug__", "arguments", "result", "record_id", "from_", "x", "str", "None", "Any", "cast", "TypedDict", "_",
    "None[int]", "'x'['y']", "1[2]", "{1}[0]", "-1", "Literal[1, 'a', None]", "str | None", "1 | 2", "b'x'",
    "1.5", "lambda: 1", "(yield)", "await x", "*x", "x := 1", "...",
]  # fmt: skip
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|'[^'\n]*'|\"[^\"\n]*\"|-?\d+")


def test_every_mutated_stub_the_check_accepts_compiles() -> None:
    # compile() is not part of the check: a tree the walk accepts must compile anyway.
    rng = random.Random(0)
    stubs = [_render(tool) for tool in _MUTANT_TOOLS]
    accepted = refused = 0
    for _ in range(1500):
        stub = rng.choice(stubs)
        source = stub.source
        for _ in range(rng.randint(1, 2)):
            token = rng.choice(list(_TOKEN.finditer(source)))
            source = source[: token.start()] + rng.choice(_MUTANT_TEXT) + source[token.end() :]
        tool = "update_record" if stub.function == "update_record" else "t"
        if check_stub(source, function=stub.function, server="crm", tool=tool) is not None:
            refused += 1
            continue
        accepted += 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(source, "<stub>", "exec")
    assert accepted > 100 and refused > 100


# ── text helpers: faster forms give exactly what the plain forms gave ──────────────────────

_WRAP_PIECES = ["a", "bc", "word", "-", "é", "x" * 40, " ", "  ", "\t", "\n", "\r", "\x0b", "\x85", "\u3000"]
_WRAP_TEXT = st.one_of(
    st.lists(st.text(alphabet="abcé-.", min_size=1, max_size=30), max_size=40).map(" ".join),
    st.lists(st.sampled_from(_WRAP_PIECES), max_size=40).map("".join),
)


def _textwrap_wrap(text: str, width: int, indent: str, continuation: str | None) -> list[str]:
    """How docstring text was wrapped before: with the standard library."""
    if len(indent) + len(text) <= width and "\n" not in text:
        return [(indent + text).rstrip()]
    cont = indent + "    " if continuation is None else continuation
    return textwrap.wrap(
        text, width=width, initial_indent=indent, subsequent_indent=cont, break_long_words=False, break_on_hyphens=False
    ) or [indent.rstrip()]


@settings(max_examples=400, deadline=None)
@given(
    _WRAP_TEXT,
    st.sampled_from([1, 8, 30, 116]),
    st.sampled_from(["", "    ", " " * 40]),
    st.sampled_from([None, "", "        ", " " * 50]),
)
def test_wrapping_gives_the_lines_textwrap_gives(text: str, width: int, indent: str, continuation: str | None) -> None:
    assert render_module._wrap(text, width, indent, continuation) == _textwrap_wrap(text, width, indent, continuation)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=40))
def test_tidy_cleans_and_turns_every_unicode_space_into_a_space(text: str) -> None:
    expected = "".join(" " if unicodedata.category(ch) == "Zs" else ch for ch in clean(text))
    assert render_module._tidy(text) == expected


_OLD_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")


def _split_summary_by_splitting(text: str) -> str:
    first, sep, rest = text.partition("\n\n")
    if "\n" in first:
        return text
    sentences = _OLD_SENTENCE_END.split(first, maxsplit=1)
    if len(sentences) == 2 and len(sentences[0]) <= 110:
        return sentences[0] + "\n\n" + sentences[1] + sep + rest
    return text


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "Ab", ".", "!", "?", " ", "  ", "\t", "\n", "\n\n", "(", "`", "x" * 50]), max_size=30
    )
)
def test_summary_split_matches_splitting_at_the_first_sentence_end(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert render_module._split_summary(text) == _split_summary_by_splitting(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\t", "\n", "\x00", "\u3000", "…", "x" * 30]), max_size=30))
def test_a_shorter_cap_of_a_flattened_text_is_the_cap_of_the_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    flat = one_line(text, 200)
    for limit in (1, 2, 5, 60, 80, 199):
        assert render_module._shorter(flat, limit) == one_line(text, limit)


@pytest.mark.parametrize("length", [109, 110, 111])
def test_summary_sentence_is_split_off_only_when_it_fits_in_110_characters(length: int) -> None:
    text = "A" * (length - 1) + ".  Then more."
    assert render_module._split_summary(text) == _split_summary_by_splitting(text)
    assert render_module._split_summary(text).startswith("A" * (length - 1) + ".\n\n") == (length <= 110)
