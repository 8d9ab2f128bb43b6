"""A hostile server cannot make `generate-tree` write outside the tree or emit code that runs on import."""

from __future__ import annotations

import ast
import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tool_tree.runtime as runtime
from tooltree_cli.main import main

RAW = Path(__file__).resolve().parents[1] / "servers" / "raw_server.py"
EVIL_TEXT = '"""\nimport os; os.system("touch /tmp/pwned")\n"""\r\x00\u2028\\'
HOSTILE_NAMES = [
    "../../../escape",
    "a/b/c",
    "/abs",
    "__init__",
    "README",
    "servers",
    "call_tool",
    "Foo",
    "foo",
    "x" * 5000,
    "class",
    "2fa",
    "dup",
    "dup",
    "naïve",
    "",
    EVIL_TEXT,
]


def hostile_tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": EVIL_TEXT,
        "inputSchema": {
            "type": "object",
            "properties": {
                EVIL_TEXT: {"type": "string", "description": EVIL_TEXT, "default": EVIL_TEXT},
                "from": {"enum": [EVIL_TEXT, "ok"]},
            },
            "required": [EVIL_TEXT],
        },
    }


ALLOWED_IMPORTS = {"__future__", "typing", "tool_tree.runtime"}


def assert_only_definitions(source: str) -> None:
    """Top level holds a docstring, imports of the runtime and typing, classes, type aliases and defs: no calls."""
    tree = ast.parse(source)
    compile(tree, "<stub>", "exec")
    for node in tree.body:
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant) and node is tree.body[0]
        elif isinstance(node, ast.ImportFrom):
            assert node.module in ALLOWED_IMPORTS or (node.level == 1 and node.module is not None)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            assert [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]
            assert all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)
        elif isinstance(node, ast.Assign):
            call = node.value
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "TypedDict"
        elif isinstance(node, ast.ClassDef):
            assert all(isinstance(b, ast.AnnAssign | ast.Expr) for b in node.body)
        else:
            assert isinstance(node, ast.FunctionDef), ast.dump(node)[:200]


@pytest.fixture
def clean_modules() -> Iterator[None]:
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name == "servers" or name.startswith("servers."):
            del sys.modules[name]


def test_hostile_names_stay_inside_the_tree_and_import_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, clean_modules: None
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"pages": [[hostile_tool(n) for n in HOSTILE_NAMES]], "instructions": EVIL_TEXT}), encoding="utf-8"
    )
    config = tmp_path / "c.yaml"
    server = f"    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(RAW))}, {json.dumps(str(spec))}]\n"
    config.write_text(f'servers:\n  "../evil":\n{server}  "Crm":\n{server}  crm:\n{server}', encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    out = work / "tree"
    before = {p for p in tmp_path.rglob("*")}
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in summary["servers"]] == ["ok", "ok", "ok"]
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(p == out or out in p.parents for p in created if p != work)
    assert not Path("/tmp/pwned").exists()

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    packages = sorted(s["package"] for s in manifest["servers"])
    assert len(set(p.lower() for p in packages)) == 3
    tools = [t for t in manifest["tools"] if t["server"] == "crm"]
    assert sorted(t["tool"] for t in tools) == sorted(set(HOSTILE_NAMES) - {""})  # nameless skipped, dup once
    assert any("listed twice" in w for w in summary["warnings"])
    for t in manifest["tools"]:
        path = out / t["path"]
        assert path.parent.parent == out / "servers" and path.suffix == ".py"
        assert_only_definitions(path.read_text(encoding="utf-8"))
    for init in (out / "servers").rglob("__init__.py"):
        assert_only_definitions(init.read_text(encoding="utf-8"))

    def refuse(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError(f"importing a stub called {server}.{tool}")

    monkeypatch.syspath_prepend(str(out))
    previous = runtime.set_transport(refuse)
    try:
        for s in manifest["servers"]:
            module = importlib.import_module(f"servers.{s['package']}")
            assert sorted(module.__all__) == sorted(
                t["function"] for t in manifest["tools"] if t["server"] == s["name"]
            )
    finally:
        runtime.set_transport(previous)
    assert not Path("/tmp/pwned").exists()


def test_a_symlink_planted_in_the_tree_is_refused_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    (snaps / "svc.json").write_text(json.dumps({"server": "svc", "tools": [hostile_tool("alpha")]}), encoding="utf-8")
    out = tmp_path / "tree"
    assert main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out)]) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    stub = out / "servers" / "svc" / "alpha.py"
    stub.unlink()
    stub.symlink_to(victim)
    code = main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out)])
    assert code == 2
    assert "refusing" in capsys.readouterr().err
    assert victim.read_text(encoding="utf-8") == "precious"
