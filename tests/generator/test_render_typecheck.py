"""Rendered stubs type-check under ``mypy --strict``, and mypy catches wrong calls to them."""

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
    "ping": {"name": "ping", "inputSchema": {"type": "object"}},
    "cast": {
        "name": "cast",
        "inputSchema": {"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}

GOOD = """\
from typing import Any

from servers.demo import cast, ping, raw_call, search, update_record, walk_tree
from tool_tree.runtime import ToolResult

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
ok: bool = cast(value=1)["ok"]
"""

BAD = """\
from servers.demo import update_record, walk_tree

update_record(record_id="rec_1", status="won", from_="me", colour="red")
update_record(record_id=5, status="won", from_="me")
update_record(record_id="rec_1", status="maybe", from_="me")
walk_tree(root={"name": "a", "children": [{"nmae": "b"}]})
update_record("rec_1", "won", "me")
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typecheck")
    demo = root / "servers" / "demo"
    demo.mkdir(parents=True)
    (root / "servers" / "__init__.py").write_text('"""Servers."""\n', encoding="utf-8")
    for function, tool in TOOLS.items():
        stub = render_stub(server="demo", tool=tool, function=function, schema_hash="sha256:test")
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
    assert by_line == {3, 4, 5, 6, 7}, output
    assert 'Unexpected keyword argument "colour"' in output
    assert 'Argument "record_id" to "update_record" has incompatible type "int"; expected "str"' in output
    assert '"status" to "update_record" has incompatible type "Literal[\'maybe\']"' in output
    assert '"nmae"' in output
    assert "Too many positional arguments" in output
