"""Tuple arrays (``prefixItems``; draft-04..2019 ``items: [...]``) and nested objects that allow keys beyond
their ``properties``: the types a caller can pass, what the docstring says to pass, and what reaches a real
server (the official SDK's ``MCPServer`` with pydantic tuple arguments)."""

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
TUPLES = REPO / "tests" / "servers" / "tuple_server.py"
MYPY = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]

PAIR = {"maxItems": 2, "minItems": 2, "prefixItems": [{"type": "integer"}, {"type": "string"}], "type": "array"}
"""``tuple[int, str]`` as pydantic writes it."""


def _tool(name: str, properties: dict[str, Any], required: list[str], output: Any = None) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": name,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    }
    if output is not None:
        tool["outputSchema"] = output
    return tool


def _stub(tool: dict[str, Any]) -> str:
    stub = render_stub(server="demo", tool=tool, function=tool["name"])
    assert stub.warnings == []
    return stub.source


def _mypy(tmp_path: Path, stubs: dict[str, str], script: str) -> subprocess.CompletedProcess[str]:
    for name, source in stubs.items():
        (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    (tmp_path / "use.py").write_text(script, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(REPO)}
    files = ["use.py", *(f"{n}.py" for n in stubs)]
    return subprocess.run([*MYPY, *files], cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8")


# ── tuples ──────────────────────────────────────────────────────────────────────────────────


def test_a_closed_prefix_items_tuple_takes_a_tuple_or_a_list_and_says_so() -> None:
    source = _stub(_tool("move", {"pair": PAIR, "maybe": {"anyOf": [PAIR, {"type": "null"}]}}, ["pair"]))
    assert "pair: tuple[int, str] | list[int | str]," in source
    assert "maybe: tuple[int, str] | list[int | str] | None | NotGiven = NOT_GIVEN" in source
    assert "pair: A JSON array of 2 items (int, str): pass a tuple or a list." in source


def test_items_false_closes_a_tuple_and_max_items_shortens_it() -> None:
    closed = {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "number"}], "items": False}
    short = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "maxItems": 1}
    source = _stub(_tool("t", {"closed": closed, "short": short}, ["closed", "short"]))
    assert "closed: tuple[bool, float] | list[bool | float]" in source
    assert "short: tuple[int] | list[int]" in source
    assert "short: A JSON array of 1 item (int): pass a tuple or a list." in source


def test_an_open_tuple_takes_a_tuple_or_a_list_of_any_item_type() -> None:
    """``tuple[int, str, *tuple[float, ...]]`` needs Python 3.11 to parse; stubs run on 3.10 too."""
    open_2020 = {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": {"type": "number"}}
    source = _stub(_tool("t", {"row": open_2020}, ["row"]))
    assert "row: tuple[int | str | float, ...] | list[int | str | float]" in source
    assert "row: A JSON array: int, str, then any number of float; pass a tuple or a list." in source


def test_the_draft_07_tuple_form_with_additional_items_is_a_tuple_too() -> None:
    """zod-to-json-schema and other draft-07 writers put the positions in ``items`` as a list."""
    closed = {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False}
    open_ = {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}}
    sized = {"type": "array", "items": [{"type": "integer"}, {"type": "integer"}], "minItems": 2, "maxItems": 2}
    source = _stub(_tool("t", {"closed": closed, "open": open_, "sized": sized}, ["closed", "open", "sized"]))
    assert "closed: tuple[int, str] | list[int | str]," in source
    assert "open: tuple[int | str, ...] | list[int | str]," in source
    assert "sized: tuple[int, int] | list[int]," in source


def test_a_tuple_in_a_structured_result_is_the_list_json_gives() -> None:
    output = {"type": "object", "properties": {"at": PAIR}, "required": ["at"]}
    source = _stub(_tool("where", {}, [], output))
    assert "    at: list[int | str]\n" in source


def test_tuple_parameters_type_check_and_a_wrong_item_type_is_caught(tmp_path: Path) -> None:
    nested = {"type": "object", "properties": {"corner": PAIR}, "required": ["corner"]}
    source = _stub(_tool("move", {"pair": PAIR, "box": nested}, ["pair"]))
    good = _mypy(
        tmp_path,
        {"move": source},
        "from move import move\n"
        "move(pair=(1, 'a'))\n"
        "move(pair=[1, 'a'], box={'corner': (2, 'b')})\n"
        "t: tuple[int, str] = (3, 'c')\n"
        "move(pair=t)\n",
    )
    assert good.returncode == 0, good.stdout
    bad = _mypy(tmp_path, {"move": source}, "from move import move\nmove(pair=('a', 1))\nmove(pair=(1, 'a', 2))\n")
    assert bad.returncode == 1, bad.stdout
    assert {line.split(":")[1] for line in bad.stdout.splitlines() if ": error:" in line} == {"2", "3"}, bad.stdout


# ── objects with keys beyond their properties ──────────────────────────────────────────────


def test_a_nested_object_with_pattern_properties_is_a_dict_whose_keys_are_documented() -> None:
    labels = {
        "type": "object",
        "description": "Labels.",
        "properties": {"id": {"type": "string"}, "rank": {"type": "integer"}},
        "patternProperties": {"^x-": {"type": "boolean"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    source = _stub(_tool("tag", {"labels": labels}, ["labels"]))
    assert "labels: dict[str, str | int | bool]" in source
    assert "class Labels(" not in source
    assert "Labels. Keys: 'id' (str), 'rank' (int, optional); more keys matching '^x-' (bool)." in source


def test_a_nested_object_with_an_additional_properties_schema_or_true_is_a_dict() -> None:
    typed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    free = {"$ref": "#/$defs/Style"}
    tool = _tool("draw", {"typed": typed, "style": free}, ["typed", "style"])
    tool["inputSchema"]["$defs"] = {
        "Style": {
            "type": "object",
            "title": "Style",
            "properties": {"colour": {"type": "string"}},
            "required": ["colour"],
            "additionalProperties": True,
        }
    }
    source = _stub(tool)
    assert "typed: dict[str, int | str]" in source
    assert "style: dict[str, Any]" in source
    assert "Keys: 'a' (int, optional); more keys (str)." in source
    assert "Keys: 'colour' (str); more keys (Any)." in source
    assert "TypedDict" not in source


def test_a_closed_nested_object_stays_a_typeddict() -> None:
    closed = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    plain = {"type": "object", "properties": {"b": {"type": "integer"}}}
    source = _stub(_tool("t", {"closed": closed, "plain": plain}, ["closed", "plain"]))
    assert "class Closed(TypedDict):" in source
    assert "class Plain(TypedDict):" in source


def test_an_open_object_in_a_typeddict_field_and_its_extra_keys_type_check(tmp_path: Path) -> None:
    open_ = {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "patternProperties": {"^n_": {"type": "integer"}},
    }
    outer = {"type": "object", "properties": {"meta": open_}, "required": ["meta"]}
    source = _stub(_tool("put", {"item": outer}, ["item"]))
    assert "    meta: dict[str, str | int]\n" in source
    good = _mypy(tmp_path, {"put": source}, "from put import put\nput(item={'meta': {'id': 'a', 'n_count': 2}})\n")
    assert good.returncode == 0, good.stdout
    bad = _mypy(tmp_path, {"put": source}, "from put import put\nput(item={'meta': {'id': 'a', 'n_count': 2.5}})\n")
    assert bad.returncode == 1, bad.stdout


def test_an_open_object_in_a_structured_result_keeps_its_typeddict() -> None:
    """Reading the known keys typed is what a caller wants; a TypedDict value may hold more keys (PEP 589)."""
    meta = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": True}
    source = _stub(_tool("get", {}, [], {"type": "object", "properties": {"meta": meta}, "required": ["meta"]}))
    assert "class Meta(TypedDict):\n    n: NotRequired[int]\n" in source
    assert "    meta: Meta\n" in source


# ── end to end with the official SDK ────────────────────────────────────────────────────────


def test_a_pydantic_tuple_argument_is_sent_as_an_array_and_its_call_type_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tree_of(tmp_path, "tuples", TUPLES, capsys)
    move_to = (out / "servers/tuples/move_to.py").read_text(encoding="utf-8")
    assert "point: tuple[int, int] | list[int]," in move_to
    assert "label: tuple[str, float] | list[str | float] | None | NotGiven = NOT_GIVEN," in move_to
    draw = (out / "servers/tuples/draw.py").read_text(encoding="utf-8")
    assert "def draw(*, style: dict[str, Any]) -> DrawOutput:" in draw

    script = (
        "from servers.tuples import draw, move_to\n"
        "moved: str = move_to(point=(3, 4), label=('here', 0.5))['result']\n"
        "listed: str = move_to(point=[5, 6])['result']\n"
        "drawn: str = draw(style={'colour': 'red', 'width': 2})['result']\n"
    )
    (out / "use.py").write_text(script, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": os.pathsep.join([str(out), str(REPO)])}
    checked = subprocess.run(
        [*MYPY, "use.py", "servers"], cwd=out, env=env, capture_output=True, text=True, encoding="utf-8"
    )
    assert checked.returncode == 0, checked.stdout

    namespace = run_on_tree(out, tmp_path / "c.yaml", script, "use.py")  # type-checked, run for real
    # pydantic makes a tuple only from a JSON array.
    assert json.loads(namespace["moved"]) == {"point": ["tuple", 3, 4], "label": ["here", 0.5]}
    assert json.loads(namespace["listed"]) == {"point": ["tuple", 5, 6], "label": None}
    assert json.loads(namespace["drawn"]) == {"colour": "red", "width": 2}
