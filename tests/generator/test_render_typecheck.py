"""Rendered stubs type-check under ``mypy --strict`` with the schema's own parameter names, and mypy
catches wrong calls to them (a wrong name or type, ``None`` where the schema has no null)."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.render import render_stub

REPO = Path(__file__).resolve().parents[2]

TOOLS: dict[str, dict[str, Any]] = {
    "update_record": {
        "name": "update-record",
        "description": "Update fields on a CRM record.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "record_id": {"type": "string", "pattern": "^rec_[0-9]+$"},
                "status": {"type": "string", "enum": ["open", "won", "lost"]},
                "tags": {"type": "array", "items": {"type": "string"}, "default": []},
                "address": {
                    "type": "object",
                    "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                    "required": ["street"],
                },
                "from": {"type": "string"},
                "user-id": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
            "required": ["record_id", "status", "from"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "version": {"type": "integer"}, "meta": {"type": "object"}},
            "required": ["id", "version"],
        },
    },
    "walk_tree": {
        "name": "walk_tree",
        "description": 'Walk a tree of "nodes".',
        "inputSchema": {
            "type": "object",
            "properties": {
                "root": {"$ref": "#/$defs/Node"},
                "mode": {"enum": ['say "hi"', "it's", "a\nb", 3, True, None]},
                "options": {
                    "type": "object",
                    "properties": {"max-depth": {"type": "integer"}, "class": {"type": "boolean"}},
                    "required": ["max-depth"],
                },
            },
            "required": ["root"],
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                        "link": {"anyOf": [{"$ref": "#/$defs/Link"}, {"type": "null"}]},
                    },
                    "required": ["name"],
                },
                "Link": {
                    "type": "object",
                    "properties": {"to-node": {"$ref": "#/$defs/Node"}},
                    "required": ["to-node"],
                },
            },
        },
        "outputSchema": {
            "type": "object",
            "properties": {"visited": {"type": "integer"}, "last": {"$ref": "#"}},
            "required": ["visited"],
        },
    },
    "search": {
        # The shape FastMCP / pydantic produce.
        "name": "search",
        "inputSchema": {
            "$defs": {
                "Filter": {
                    "properties": {"field": {"title": "Field", "type": "string"}, "value": {"title": "Value"}},
                    "required": ["field", "value"],
                    "title": "Filter",
                    "type": "object",
                }
            },
            "properties": {
                "query": {"title": "Query", "type": "string"},
                "kind": {"enum": [f"application/vnd.example.document-type-{i}" for i in range(5)], "title": "Kind"},
                "limit": {"default": 10, "title": "Limit", "type": "integer"},
                "filters": {
                    "anyOf": [{"items": {"$ref": "#/$defs/Filter"}, "type": "array"}, {"type": "null"}],
                    "default": None,
                },
            },
            "required": ["query"],
            "title": "searchArguments",
            "type": "object",
        },
    },
    "raw_call": {"name": "raw call", "inputSchema": {"type": "string"}},
    "get_item": {
        # Builtin names as the server wrote them; a nullable and a plain optional parameter.
        "name": "get_item",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "type": {"enum": ["a", "b"]},
                "format": {"type": "string"},
                "filter": {"type": ["string", "null"]},
                "range": {"type": "array", "items": {"type": "integer"}},
                "input": {"type": "object"},
            },
            "required": ["id"],
        },
    },
    "set_labels": {
        # A free-form object whose values are typed: any key, string values.
        "name": "set_labels",
        "inputSchema": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "annotate": {
        "name": "annotate",
        "inputSchema": {
            "type": "object",
            "properties": {"note": {"type": "string"}},
            "required": ["note"],
            "additionalProperties": {"type": "integer"},
        },
    },
    "ping": {"name": "ping", "inputSchema": {"type": "object"}},
    "cast": {
        "name": "cast",
        "inputSchema": {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}

GOOD = """\
from typing import Any

from servers.demo import annotate, cast, get_item, ping, raw_call, search, set_labels, update_record, walk_tree
from tool_tree.runtime import NOT_GIVEN, ToolResult

out = update_record(record_id="rec_1", status="won", from_="me", address={"street": "Main"}, user_id=None)
record_id: str = out["id"]
version: int = out["version"]
meta: dict[str, Any] | None = out.get("meta")
walked = walk_tree(
    root={"name": "a", "children": [{"name": "b", "link": {"to-node": {"name": "c"}}}]},
    mode='say "hi"',
    options={"max-depth": 3, "class": True},
)
visited: int = walked["visited"]
last = walked.get("last")
if last is not None:
    again: int = last["visited"]
found: ToolResult = search(
    query="x", limit=5, filters=[{"field": "a", "value": 1}], kind="application/vnd.example.document-type-3"
)
text: str = found.text
raw: ToolResult = raw_call(anything=1, **{"odd-key": "v"})
pong: ToolResult = ping()
pong = ping(anything={"free": "form"}, more=[1])
ok: bool = cast(value=1)["ok"]
item: ToolResult = get_item(id="x", type="a", format="json", filter=None, range=[1, 2], input={"k": [1]})
item = get_item(id="x", filter="open", type=NOT_GIVEN)
labels: ToolResult = set_labels(colour="red", **{"size-class": "L"})
noted: ToolResult = annotate(note="n", rank=1, **{"x-y": 2})
"""

BAD = """\
from servers.demo import annotate, get_item, set_labels, update_record, walk_tree

update_record(record_id="rec_1", status="won", from_="me", colour="red")
update_record(record_id=5, status="won", from_="me")
update_record(record_id="rec_1", status="maybe", from_="me")
walk_tree(root={"name": "a", "children": [{"nmae": "b"}]})
update_record("rec_1", "won", "me")
get_item(id="x", format=None)
set_labels(colour=1)
annotate(note="n", rank="first")
get_item(ident="x")
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typecheck")
    demo = root / "servers" / "demo"
    demo.mkdir(parents=True)
    (root / "servers" / "__init__.py").write_text('"""Servers."""\n', encoding="utf-8")
    for function, tool in TOOLS.items():
        stub = render_stub(server="demo", tool=tool, function=function)
        (demo / f"{function}.py").write_text(stub.source, encoding="utf-8")
    init = ['"""demo."""', ""] + [f"from .{f} import {f}" for f in sorted(TOOLS)]
    init += ["", f"__all__ = {sorted(TOOLS)!r}", ""]
    (demo / "__init__.py").write_text("\n".join(init), encoding="utf-8")
    (root / "mypy.ini").write_text(
        "[mypy]\nstrict = True\nwarn_unreachable = True\n\n[mypy-tool_tree.*]\nfollow_imports = silent\n",
        encoding="utf-8",
    )
    return root


def _mypy(project: Path, script: str, cache: Path) -> tuple[int, str]:
    (project / "script.py").write_text(script, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": os.pathsep.join([str(project), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(cache), "servers", "script.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=600,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_rendered_stubs_and_correct_calls_pass_mypy_strict(project: Path, cache: Path) -> None:
    code, output = _mypy(project, GOOD, cache)
    assert code == 0, output


def test_mypy_reports_wrong_names_types_and_enum_values(project: Path, cache: Path) -> None:
    code, output = _mypy(project, BAD, cache)
    assert code == 1, output
    lines = [line for line in output.splitlines() if ": error:" in line]
    assert all(line.startswith("script.py:") for line in lines), output
    by_line = {int(line.split(":")[1]) for line in lines}
    assert by_line == {3, 4, 5, 6, 7, 8, 9, 10, 11}, output
    assert 'Unexpected keyword argument "colour"' in output
    assert 'Argument "record_id" to "update_record" has incompatible type "int"; expected "str"' in output
    assert '"status" to "update_record" has incompatible type "Literal[\'maybe\']"' in output
    assert '"nmae"' in output
    assert "Too many positional arguments" in output
    # None is not "left out": a parameter whose schema has no null does not take it.
    assert 'Argument "format" to "get_item" has incompatible type "None"; expected "str | NotGiven"' in output
    # The extra keys of a free-form object are type-checked against its additionalProperties.
    assert 'Argument "colour" to "set_labels" has incompatible type "int"; expected "str"' in output
    assert 'Argument "rank" to "annotate" has incompatible type "str"; expected "int"' in output
    assert 'Unexpected keyword argument "ident" for "get_item"' in output
