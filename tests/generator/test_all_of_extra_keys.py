"""``allOf`` objects keep what their members say of keys beyond the properties (``additionalProperties``,
``patternProperties``, ``unevaluatedProperties``): the stub takes the extra keys the schema allows, under
``mypy --strict``, and leaves out the ones it refuses, as the host's check (``jsonschema``) does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from generator.render import render_stub
from tool_tree.schema_check import tool_validator

REPO = Path(__file__).resolve().parents[2]
MYPY = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]

BASE = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def _stub(name: str, schema: dict[str, Any], *, warnings: int = 0) -> str:
    stub = render_stub(server="demo", tool={"name": name, "inputSchema": schema}, function=name)
    assert len(stub.warnings) == warnings, stub.warnings
    return stub.source


def _mypy_errors(tmp_path: Path, name: str, source: str, calls: list[str]) -> set[int]:
    """The lines of ``calls`` (1-based) that ``mypy --strict`` refuses."""
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    (tmp_path / "use.py").write_text(f"from {name} import {name}\n" + "\n".join(calls) + "\n", encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(REPO)}
    done = subprocess.run(
        [*MYPY, "use.py", f"{name}.py"], cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8"
    )
    assert "use.py" in done.stdout or done.returncode == 0, done.stdout + done.stderr
    return {int(line.split(":")[1]) - 1 for line in done.stdout.splitlines() if line.startswith("use.py:")}


def _host_accepts(schema: dict[str, Any], arguments: dict[str, Any]) -> bool:
    return tool_validator(schema, "demo.t").is_valid(arguments)


def test_an_all_of_input_schema_with_an_open_member_takes_more_arguments(tmp_path: Path) -> None:
    schema = {
        "allOf": [BASE, {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": True}]
    }
    source = _stub("t", schema)
    assert "def t(*, a: str, b: int | NotGiven = NOT_GIVEN, **arguments: Any) -> ToolResult:" in source
    assert '{"a": a, "b": b, **arguments}' in source
    calls = ["t(a='x', b=1, note='free')", "t(a='x', note=[1])", "t(b=1)", "t(a=1)"]
    assert _mypy_errors(tmp_path, "t", source, calls) == {3, 4}
    assert _host_accepts(schema, {"a": "x", "b": 1, "note": "free"})
    assert not _host_accepts(schema, {"b": 1})


def test_an_all_of_member_with_pattern_properties_types_the_extra_arguments(tmp_path: Path) -> None:
    labels = {
        "type": "object",
        "properties": {"b": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "boolean"}},
    }
    schema = {"type": "object", "allOf": [BASE, labels]}
    source = _stub("t", schema)
    assert "def t(*, a: str, b: int | NotGiven = NOT_GIVEN, **arguments: bool) -> ToolResult:" in source
    assert "**arguments: more arguments, by their wire names (keys matching '^x-')." in source
    calls = ["t(a='x', **{'x-on': True})", "t(a='x', **{'x-on': 'yes'})"]
    assert _mypy_errors(tmp_path, "t", source, calls) == {2}
    assert _host_accepts(schema, {"a": "x", "x-on": True})
    assert not _host_accepts(schema, {"a": "x", "x-on": "yes"})


def test_an_unevaluated_properties_schema_beside_all_of_types_the_extra_arguments(tmp_path: Path) -> None:
    more = {"type": "object", "properties": {"b": {"type": "integer"}}}
    schema = {"allOf": [BASE, more], "unevaluatedProperties": {"type": "number"}}
    source = _stub("t", schema)
    assert "def t(*, a: str, b: int | NotGiven = NOT_GIVEN, **arguments: float) -> ToolResult:" in source
    assert _mypy_errors(tmp_path, "t", source, ["t(a='x', b=2, z=1.5)", "t(a='x', z='no')"]) == {2}
    assert _host_accepts(schema, {"a": "x", "b": 2, "z": 1.5})
    assert not _host_accepts(schema, {"a": "x", "z": "no"})


def test_a_plain_object_with_unevaluated_properties_takes_more_arguments() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "unevaluatedProperties": {"type": "string"}}
    assert "def t(*, a: str | NotGiven = NOT_GIVEN, **arguments: str) -> ToolResult:" in _stub("t", schema)


def test_a_closed_all_of_member_closes_the_object_and_refuses_the_other_members_properties() -> None:
    """JSON Schema: ``additionalProperties: false`` sees only its own member's properties, so ``a`` is refused
    (by the host's check too); the stub leaves it out, says why, and takes no extra keys."""
    optional_a = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True}
    closed = {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": False}
    schema = {"allOf": [optional_a, closed]}
    stub = render_stub(server="demo", tool={"name": "t", "inputSchema": schema}, function="t")
    assert "def t(*, b: int | NotGiven = NOT_GIVEN) -> ToolResult:" in stub.source
    assert any("JSON Schema refuses 'a'; leaving them out" in w for w in stub.warnings), stub.warnings
    assert _host_accepts(schema, {"b": 1})
    assert not _host_accepts(schema, {"a": "x", "b": 1})
    assert not _host_accepts(schema, {"b": 1, "c": 2})


def test_members_that_all_name_the_same_properties_stay_closed_and_keep_them() -> None:
    closed_a = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    schema = {"allOf": [closed_a, {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}}]}
    assert "def t(*, a: str | NotGiven = NOT_GIVEN) -> ToolResult:" in _stub("t", schema)


def test_a_nested_all_of_object_with_an_open_member_is_a_dict_that_takes_more_keys(tmp_path: Path) -> None:
    open_ = {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    schema = {"type": "object", "properties": {"opt": {"allOf": [BASE, open_]}}, "required": ["opt"]}
    source = _stub("t", schema)
    assert "def t(*, opt: dict[str, str | int]) -> ToolResult:" in source
    assert "opt: Keys: 'a' (str), 'b' (int, optional); more keys (str)." in source
    calls = ["t(opt={'a': 'x', 'b': 1, 'n': 'y'})", "t(opt={'a': 'x', 'n': 2.5})"]
    assert _mypy_errors(tmp_path, "t", source, calls) == {2}
    assert _host_accepts(schema, {"opt": {"a": "x", "b": 1, "n": "y"}})
    assert not _host_accepts(schema, {"opt": {"a": "x", "n": 2.5}})


def test_a_property_another_members_value_schema_refuses_by_type_is_left_out() -> None:
    """``a`` is not in the second member's properties, so its value must be an integer there: no string is."""
    optional_a = {"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "integer"}}}
    ints = {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": {"type": "number"}}
    schema = {"allOf": [optional_a, ints]}
    stub = render_stub(server="demo", tool={"name": "t", "inputSchema": schema}, function="t")
    signature = (
        "def t(*, c: int | NotGiven = NOT_GIVEN, b: int | NotGiven = NOT_GIVEN, **arguments: float) -> ToolResult:"
    )
    assert signature in stub.source
    assert any("JSON Schema refuses 'a'" in w for w in stub.warnings), stub.warnings
    assert not _host_accepts(schema, {"a": "x"})
    assert _host_accepts(schema, {"b": 1, "c": 2, "z": 0.5})


def test_pattern_only_members_leave_the_patterns_they_share() -> None:
    first = {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x-": {}, "^y-": {}}}
    second = {
        "type": "object",
        "properties": {"b": {"type": "string"}},
        "patternProperties": {"^y-": {"type": "integer"}},
    }
    source = _stub("t", {"allOf": [first, second]})
    assert "**arguments: int) -> ToolResult:" in source
    assert "(keys matching '^y-')" in source
