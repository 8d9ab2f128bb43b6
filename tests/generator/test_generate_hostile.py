"""A hostile server cannot make `generate-tree` write outside the tree or emit code that runs on import."""

from __future__ import annotations

import ast
import importlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import generator.render
import tool_tree.connect
import tool_tree.runtime as runtime
from generator.index_files import LAZY_INIT
from generator.layout import MAX_TOOL_NAME
from tool_tree.tree import schema_hash
from tooltree_cli.generate_cmd import EXIT_OK, EXIT_SERVERS
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
    "x" * MAX_TOOL_NAME,
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


def assert_package_init(source: str) -> None:
    """A server package's ``__init__.py``: a docstring, imports of the standard library under names of its own,
    ``__all__`` of string constants, relative imports of its stubs for type checkers alone, then the fixed code that
    imports a stub at its tool's first use (`generator.index_files.LAZY_INIT`), the same in every package: nothing a
    server's names or text shaped runs."""
    assert source.endswith(LAZY_INIT)
    tree = ast.parse(source.removesuffix(LAZY_INIT))
    compile(tree, "<package>", "exec")
    standard = {"__future__", "importlib", "types", "typing"}
    for node in tree.body:
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant) and node is tree.body[0]
        elif isinstance(node, ast.Import):
            assert [(a.name, a.asname) for a in node.names] == [("sys", "_sys")]
        elif isinstance(node, ast.ImportFrom) and node.module in standard:
            assert node.level == 0 and all(a.asname is None or a.asname.startswith("_") for a in node.names)
        elif isinstance(node, ast.If):
            assert isinstance(node.test, ast.Name) and node.test.id == "_TYPE_CHECKING" and not node.orelse
            assert all(isinstance(n, ast.ImportFrom) and n.level == 1 for n in node.body)
        else:
            assert isinstance(node, ast.Assign) and isinstance(node.value, ast.List), ast.dump(node)[:200]
            assert [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]
            assert all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts)


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
    assert_only_definitions((out / "servers" / "__init__.py").read_text(encoding="utf-8"))
    for init in (out / "servers").glob("*/__init__.py"):
        assert_package_init(init.read_text(encoding="utf-8"))

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


def test_a_symlink_planted_where_the_search_index_was_written_first_is_never_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, the index was written to `.search_index.json.tmp` by name, through a link found there: the file it
    # pointed to (outside the tree) was overwritten with the index, and the index became a link to it.
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    (snaps / "svc.json").write_text(json.dumps({"server": "svc", "tools": [hostile_tool("alpha")]}), encoding="utf-8")
    out = tmp_path / "tree"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    (out / ".search_index.json.tmp").symlink_to(victim)
    assert main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"]) == 0
    assert victim.read_text(encoding="utf-8") == "precious"
    index = out / "search_index.json"
    assert not index.is_symlink() and json.loads(index.read_text(encoding="utf-8"))["format"]
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == [".search_index.json.tmp"]


def raw_servers(tmp_path: Path, specs: dict[str, dict[str, Any]]) -> Path:
    """A config starting `raw_server.py` once per spec; specs are written by `json.dumps`, so NaN stays NaN."""
    lines = ["servers:"]
    for name, spec in specs.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        args = f"[{json.dumps(str(RAW))}, {json.dumps(str(path))}]"
        lines += [f"  {name}:", f"    command: {json.dumps(sys.executable)}", f"    args: {args}"]
    config = tmp_path / "c.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def generate_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["generate-tree", *args, "--json", "--embeddings", "off"])
    return code, json.loads(capsys.readouterr().out)


def number_tool(name: str, default: float) -> dict[str, Any]:
    return {
        "name": name,
        "inputSchema": {"type": "object", "properties": {"x": {"type": "number", "default": default}}},
    }


def strict_json(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_tool_holding_nan_or_infinity_is_left_out_with_a_warning_and_every_other_stub_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = [number_tool("nan_tool", math.nan), number_tool("ok", 0), number_tool("inf_tool", float("1e400"))]
    config = raw_servers(tmp_path, {"good": {"pages": [[number_tool("fine", 1.5)]]}, "evil": {"pages": [evil]}})
    out = tmp_path / "tree"
    code, summary = generate_json(["--config", str(config), "--out", str(out)], capsys)
    assert code == EXIT_OK
    assert {s["name"]: s["status"] for s in summary["servers"]} == {"good": "ok", "evil": "ok"}
    assert summary["warnings"] == [
        "evil: left out tool 'nan_tool': its definition holds NaN at inputSchema.properties.x.default, which JSON "
        "cannot carry",
        "evil: left out tool 'inf_tool': its definition holds a number past a float's range (as 1e309 or Infinity is) "
        "at inputSchema.properties.x.default, which tooltree cannot carry",
    ]
    manifest = strict_json((out / "manifest.json").read_text(encoding="utf-8"))
    assert sorted((t["server"], t["tool"]) for t in manifest["tools"]) == [("evil", "ok"), ("good", "fine")]
    stubs = sorted(p.relative_to(out).as_posix() for p in (out / "servers").rglob("*.py") if p.stem != "__init__")
    assert stubs == ["servers/evil/ok.py", "servers/good/fine.py"]
    for stub in stubs:
        assert_only_definitions((out / stub).read_text(encoding="utf-8"))


def test_a_number_past_a_floats_range_is_said_so_and_where_not_called_nan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "its definition holds NaN or Infinity, which JSON cannot carry", of `"minimum": -1e309`, valid JSON
    # that the SDK reads as an infinite float: it read as a server sending NaN, and said nowhere which number.
    spec = tmp_path / "big.json"
    tool = '{"name": "big", "inputSchema": {"type": "object", "properties": {"n\u200b": {"minimum": -1e309}}}}'
    spec.write_text('{"pages": [[' + tool + "]]}", encoding="utf-8")
    config = tmp_path / "c.yaml"
    run = f"[{json.dumps(str(RAW))}, {json.dumps(str(spec))}]"
    config.write_text(
        f"servers:\n  svc:\n    command: {json.dumps(sys.executable)}\n    args: {run}\n", encoding="utf-8"
    )
    code, summary = generate_json(["--config", str(config), "--out", str(tmp_path / "tree")], capsys)
    assert code == EXIT_OK
    assert summary["warnings"] == [
        "svc: left out tool 'big': its definition holds a number past a float's range (as -1e309 or -Infinity is) "
        "at inputSchema.properties.n\\u200b.minimum, which tooltree cannot carry"
    ]


def test_a_definition_holding_nan_still_hashes_so_a_live_check_refuses_it_as_changed() -> None:
    # The bridge hashes the live definition at call time; NaN there must give a mismatch, not an exception.
    nan = schema_hash(number_tool("t", math.nan))
    assert nan == schema_hash(number_tool("t", math.nan)) != schema_hash(number_tool("t", 0))
    assert schema_hash(number_tool("t", math.inf)) not in {nan, schema_hash(number_tool("t", -math.inf))}


def test_a_tool_name_over_the_limit_is_left_out_with_a_warning_and_the_rest_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    longest, over, far_over = "n" * MAX_TOOL_NAME, "o" * (MAX_TOOL_NAME + 1), "p" * 1_500
    tools = [hostile_tool(name) for name in (over, longest, "fine", far_over)]
    config = raw_servers(tmp_path, {"svc": {"pages": [tools[:2], tools[2:]]}})
    out = tmp_path / "tree"
    code, summary = generate_json(["--config", str(config), "--out", str(out)], capsys)
    assert code == EXIT_OK and summary["servers"][0]["status"] == "ok"
    assert summary["warnings"] == [
        f"svc: left out tool '{name[:79]}…': its name is {len(name):,} characters (the limit is {MAX_TOOL_NAME})"
        for name in (over, far_over)
    ]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(t["tool"] for t in manifest["tools"]) == sorted([longest, "fine"])
    for t in manifest["tools"]:
        assert_only_definitions((out / t["path"]).read_text(encoding="utf-8"))


def test_a_tool_whose_minimal_stub_is_over_the_size_limit_is_left_out_and_the_rest_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the real limit only a name far past MAX_TOOL_NAME makes even the minimal stub too big
    # (test_render_hostile.py has that case): a lower limit shows what the tree does with one.
    monkeypatch.setattr(generator.render, "MAX_SOURCE", 4_000)
    big = {"name": "big", "description": "Words. " * 1_000, "inputSchema": {"type": "object"}}
    small = {"name": "small", "description": "Short.", "inputSchema": {"type": "object"}}
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    (snaps / "svc.json").write_text(json.dumps({"server": "svc", "tools": [big, small]}), encoding="utf-8")
    out = tmp_path / "tree"
    code, summary = generate_json(["--from-snapshot", str(snaps), "--out", str(out)], capsys)
    assert code == EXIT_OK
    assert summary["warnings"][0].startswith("svc: tool 'big': the stub would be ")
    assert summary["warnings"][1].startswith("svc: tool 'big': even the minimal stub would be ")
    assert summary["warnings"][1].endswith(" characters (the limit is 4,000); left out")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert [t["tool"] for t in manifest["tools"]] == ["small"]
    assert sorted(p.name for p in (out / "servers" / "svc").iterdir()) == ["README.md", "__init__.py", "small.py"]
    assert "big" not in (out / "servers" / "svc" / "__init__.py").read_text(encoding="utf-8")


def test_a_server_listing_past_the_byte_tool_or_value_cap_fails_alone_with_the_cap_in_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real caps (64 MiB, 100,000 tools, 2,500,000 values) take a server process that much to reach: lower ones
    # behave alike. The value cap: before it, 64 MiB of `[{}, {}, …]` over 15 pages held generate-tree at 2.3 GB a
    # server (8.6 GB for four such servers), since every server's listing is held until all are listed.
    monkeypatch.setattr(tool_tree.connect, "MAX_LIST_BYTES", 1 << 20)
    monkeypatch.setattr(tool_tree.connect, "MAX_LIST_TOOLS", 3)
    monkeypatch.setattr(tool_tree.connect, "MAX_LIST_VALUES", 2_000)
    page = [{"name": f"t{i}", "description": "x" * 400_000, "inputSchema": {"type": "object"}} for i in range(3)]

    def dense(name: str) -> dict[str, Any]:  # 5 values and 990 objects in its list: 995 values
        return {"name": name, "inputSchema": {"type": "object", "x": [{}] * 990}}

    config = raw_servers(
        tmp_path,
        {
            "large": {"pages": [page[:1], page[1:2], page[2:]]},
            "many": {"pages": [[hostile_tool("a"), hostile_tool("b")], [hostile_tool("c"), hostile_tool("d")]]},
            "dense": {"pages": [[dense("d1")], [dense("d2")]]},
            "denser": {"pages": [[dense("d1")], [dense("d2"), hostile_tool("d3")]]},
            "fine": {"pages": [[hostile_tool("alpha")]]},
        },
    )
    out = tmp_path / "tree"
    code, summary = generate_json(["--config", str(config), "--out", str(out)], capsys)
    assert code == EXIT_SERVERS
    servers = {s["name"]: s for s in summary["servers"]}
    statuses = [servers[name]["status"] for name in ("large", "many", "dense", "denser", "fine")]
    assert statuses == ["failed", "failed", "ok", "failed", "ok"]
    assert (
        "tools/list holds more than 1 MiB of tool definitions, the limit for one server (reached on page 3)"
        in (servers["large"]["error"])
    )
    assert "tools/list holds more than 3 tools, the limit for one server" in servers["many"]["error"]
    assert (  # 2,006 values; `dense`'s 1,990 are within: counted exactly (a count of `,[{` says 3,970)
        "tools/list holds more than 2,000 JSON values of tool definitions, the limit for one server (reached on page 2)"
        in servers["denser"]["error"]
    )
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    written = [(t["server"], t["tool"]) for t in manifest["tools"]]
    assert written == [("dense", "d1"), ("dense", "d2"), ("fine", "alpha")]
    assert (out / "servers" / "fine" / "alpha.py").is_file()


def test_a_snapshot_holding_a_lone_surrogate_is_refused_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Valid JSON (`"\ud800"`) that no UTF-8 file can hold. Before: "tooltree: error: UnicodeEncodeError: …" and
    # exit 1, with no file named. A pair of surrogate escapes is one character, and is read as it.
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    tool = '{"name": "t", "description": "lone \\udcff here", "inputSchema": {"type": "object"}}'
    (snaps / "s.json").write_text('{"server": "s", "info": {}, "tools": [' + tool + "]}", encoding="utf-8")
    out = tmp_path / "tree"
    assert main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"]) == 2
    assert capsys.readouterr().err.endswith(
        f"tooltree: error: {snaps / 's.json'}: unreadable snapshot (it holds an escape of a lone surrogate, such as "
        "\\ud800, which is no character and cannot be written)\n"
    )
    assert not out.exists()
    (snaps / "s.json").write_text(
        '{"server": "s", "info": {}, "tools": [' + tool.replace("\\udcff", "\\ud83d\\ude00") + "]}", encoding="utf-8"
    )
    assert main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"]) == 0
    assert "lone \U0001f600 here" in (out / "servers/s/t.py").read_text(encoding="utf-8")
