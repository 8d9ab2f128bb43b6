"""Stubs are true to their tools' schemas: a call the schema accepts type-checks and reaches the server as the
server names it, a call it refuses does not type-check, and a key ``required`` names without a property to define
it is still a key the caller can pass (and read, in a result): before, the stub left it out, so no call through it
could be valid. The end-to-end test runs against a strict server built with the official SDK
(tests/servers/schema_shapes_server.py), which refuses any call its schema refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.render import render_stub
from tests.generator.test_generate_schema_shapes import tree_of
from tests.support import run_on_tree

REPO = Path(__file__).resolve().parents[2]
SHAPES = REPO / "tests" / "servers" / "schema_shapes_server.py"
MYPY = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]


def _stub(input_schema: dict[str, Any], output_schema: dict[str, Any] | None = None) -> str:
    tool: dict[str, Any] = {"name": "find", "inputSchema": input_schema}
    if output_schema is not None:
        tool["outputSchema"] = output_schema
    stub = render_stub(server="demo", tool=tool, function="find")
    assert stub.warnings == []
    return stub.source


# ── a required key no property defines ──────────────────────────────────────────────────────


def test_a_required_name_no_property_defines_is_a_required_parameter_of_any_type() -> None:
    source = _stub({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query", "token"]})
    assert "def find(*, query: str, token: Any) -> ToolResult:" in source
    assert '{"query": query, "token": token}' in source


def test_its_type_is_the_additional_properties_schema_unless_a_pattern_may_judge_it() -> None:
    typed = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "n"]}
    typed["additionalProperties"] = {"type": "integer"}
    assert "def find(*, a: str, n: int, **arguments: int) -> ToolResult:" in _stub(typed)
    patterned = {**typed, "patternProperties": {"^n": {"type": "string"}}}
    assert "def find(*, a: str, n: Any, **arguments: int | str) -> ToolResult:" in _stub(patterned)


def test_in_a_nested_object_and_in_a_result_it_is_a_required_key() -> None:
    meta = {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k", "v"]}
    out = {"type": "object", "properties": {"ok": {"type": "boolean"}, "meta": meta}, "required": ["ok", "id", "meta"]}
    source = _stub({"type": "object", "properties": {"meta": meta}, "required": ["meta"]}, out)
    assert "class Meta(TypedDict):\n    k: str\n    v: Any\n" in source
    assert "class FindOutput(TypedDict):\n    ok: bool\n    meta: Meta\n    id: Any\n" in source  # the same Meta


def test_a_result_without_properties_stays_a_dict_whatever_it_requires() -> None:
    assert "def find() -> dict[str, Any]:" in _stub(
        {"type": "object", "properties": {}}, {"type": "object", "required": ["id"]}
    )


def test_a_name_required_twice_is_one_parameter() -> None:
    source = _stub({"type": "object", "properties": {}, "required": ["token", "token"]})
    assert "def find(*, token: Any) -> ToolResult:" in source


def test_required_names_count_towards_the_cap_on_an_objects_keys() -> None:
    many = {"type": "object", "properties": {"k": {"type": "string"}}, "required": [f"r{i}" for i in range(600)]}
    tool = {"name": "find", "inputSchema": {"type": "object", "properties": {"meta": many}}}
    stub = render_stub(server="demo", tool=tool, function="find")
    assert "meta: dict[str, Any] | NotGiven = NOT_GIVEN" in stub.source
    assert stub.warnings == ["tool 'find': input schema: an object has more than 500 properties; using dict[str, Any]"]


# ── an object without properties: its values are what additionalProperties and patternProperties allow ──

PATTERNED = {
    "type": "object",
    "additionalProperties": {"type": "integer"},
    "patternProperties": {"^s_": {"type": "string"}},
}


def test_an_argument_object_takes_the_values_its_patterns_allow_beside_additional_properties() -> None:
    closed = {"type": "object", "additionalProperties": False, "patternProperties": {"^s_": {"type": "string"}}}
    source = _stub({"type": "object", "properties": {"m": PATTERNED, "c": closed}, "required": ["m", "c"]})
    assert "def find(*, m: dict[str, int | str], c: dict[str, str]) -> ToolResult:" in source


def test_a_result_object_holds_the_values_its_patterns_allow_beside_additional_properties() -> None:
    nested = _stub({"type": "object", "properties": {}}, {"type": "object", "properties": {"m": PATTERNED}})
    assert "    m: NotRequired[dict[str, int | str]]\n" in nested
    assert "def find() -> dict[str, int | str]:" in _stub({"type": "object", "properties": {}}, PATTERNED)


def test_without_additional_properties_the_patterns_leave_any_other_key_free() -> None:
    free = {"type": "object", "patternProperties": {"^s_": {"type": "string"}}}
    assert "def find(*, m: dict[str, Any]) -> ToolResult:" in _stub(
        {"type": "object", "properties": {"m": free}, "required": ["m"]}
    )


# ── end to end: type checks, then the same calls against a strict server ────────────────────

VALID = """\
from servers.shapes import needs_token, report, shapes

full = shapes(
    from_="a", a_b_2=1, tree={"name": "root", "children": [{"name": "leaf", "children": []}]},
    self=2, class_=None, a_b=True, result=3, arguments=["x"], mode="fast", level="max", counts={"n": 1},
    labels={"x-y": "z", "other": 4}, limits={"n": 1, "s_name": "x"}, merged={"p": 1, "q": "s"},
    when="2026-01-01T00:00:00Z",
).text
least = shapes(from_="b", a_b_2=0.5, tree={"name": "r"}, level=None).text
token = needs_token(query="q", token={"scope": "read"}).text
reported = report()
ok: bool = reported["ok"]
ident = reported["id"]
"""

INVALID = [
    'shapes(from_="a", a_b_2=1)',  # tree is required
    'shapes(from_="a", a_b_2=1, tree={"name": 1})',  # nested wrong type
    'shapes(from_="a", a_b_2=1, tree={"name": "r", "kids": []})',  # nested unknown key
    'shapes(from_="a", a_b_2="1", tree={"name": "r"})',  # string for a number
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, self=1.5)',  # float for an integer
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, mode="slow")',  # not the const
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, level=2)',  # not in the enum
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, a_b=None)',  # null where the schema has no null
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, counts={"n": "1"})',  # a value of the wrong type
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, merged={"q": "s"})',  # allOf member's required key
    'shapes(from_="a", a_b_2=1, tree={"name": "r"}, limits={"n": 1.5})',  # neither an integer nor a string
    'shapes(**{"from": "a"}, a_b_2=1, tree={"name": "r"})',  # the wire name is not a parameter
    'needs_token(query="q")',  # the undefined required key
    'report()["missing"]',  # a key the result does not have
]


def test_calls_type_check_as_the_schema_allows_and_reach_a_strict_server_as_it_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tree_of(tmp_path, "shapes", SHAPES, capsys)
    invalid = "from servers.shapes import needs_token, report, shapes\n" + "".join(f"{c}\n" for c in INVALID)
    (out / "valid.py").write_text(VALID, encoding="utf-8")
    (out / "invalid.py").write_text(invalid, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": os.pathsep.join([str(out), str(REPO)])}

    def mypy(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*MYPY, *files], cwd=out, env=env, capture_output=True, text=True, encoding="utf-8")

    checked = mypy("valid.py", "servers")
    assert checked.returncode == 0, checked.stdout
    refused = mypy("invalid.py")
    lines = {int(line.split(":")[1]) for line in refused.stdout.splitlines() if line.startswith("invalid.py:")}
    assert lines == set(range(2, 2 + len(INVALID))), refused.stdout

    namespace = run_on_tree(out, tmp_path / "c.yaml", VALID, "valid.py")  # type-checked, run for real
    # The server's own names, nested values intact, integers as integers, and nothing the caller left out.
    assert json.loads(namespace["full"]) == {
        "from": "a",
        "a-b": 1,
        "tree": {"name": "root", "children": [{"name": "leaf", "children": []}]},
        "self": 2,
        "class": None,
        "a_b": True,
        "result": 3,
        "arguments": ["x"],
        "mode": "fast",
        "level": "max",
        "counts": {"n": 1},
        "labels": {"x-y": "z", "other": 4},
        "limits": {"n": 1, "s_name": "x"},
        "merged": {"p": 1, "q": "s"},
        "when": "2026-01-01T00:00:00Z",
    }
    assert json.loads(namespace["least"]) == {"from": "b", "a-b": 0.5, "tree": {"name": "r"}, "level": None}
    assert json.loads(namespace["token"]) == {"query": "q", "token": {"scope": "read"}}
    assert namespace["reported"] == {"ok": True, "id": 7}
