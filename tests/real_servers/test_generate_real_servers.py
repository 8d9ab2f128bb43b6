"""`generate-tree` against the six real third-party servers: every tool gets a stub whose parameters
carry the schema's own names, the tree and calls to it type-check, and a rerun under `--check` finds
no drift."""

from __future__ import annotations

import ast
import json
import keyword
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tool_tree.tree import requires_task
from tooltree_cli.main import main

pytestmark = pytest.mark.real_servers

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "tests" / "real_servers.yaml"
NAMES = ["everything", "filesystem", "memory", "git", "time", "fetch"]


@pytest.fixture(scope="module")
def real_tree(tmp_path_factory: pytest.TempPathFactory, real_servers_root: Path) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("real") / "tree"
    with pytest.MonkeyPatch.context() as mp:  # the config reads the install folder from the environment
        mp.setenv("TOOLTREE_REAL_SERVERS", str(real_servers_root))
        assert main(["generate-tree", "--config", str(CONFIG), "--out", str(out)]) == 0
        yield out


def test_every_tool_of_every_real_server_gets_a_stub(real_tree: Path) -> None:
    manifest = json.loads((real_tree / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(s["name"] for s in manifest["servers"]) == sorted(NAMES)
    for server in manifest["servers"]:
        snapshot = json.loads((real_tree / server["snapshot"]).read_text(encoding="utf-8"))
        # Every tool but those that run only as MCP tasks, which a plain call cannot run (left out, with a warning).
        listed = sorted(t["name"] for t in snapshot["tools"] if not requires_task(t))
        stubs = sorted(t["tool"] for t in manifest["tools"] if t["server"] == server["name"])
        assert listed == stubs and listed, server["name"]
        for t in manifest["tools"]:
            assert (real_tree / t["path"]).is_file()
    # `everything` names its tools with dashes; their stubs get identifiers, the wire name is kept.
    dashed = [t for t in manifest["tools"] if "-" in t["tool"]]
    assert dashed
    stub = (real_tree / dashed[0]["path"]).read_text(encoding="utf-8")
    assert f'call_tool("everything", "{dashed[0]["tool"]}"' in stub


def test_each_servers_line_in_the_index_says_what_it_is_not_what_its_instructions_are(real_tree: Path) -> None:
    # Before: everything's line was its instructions' first sentence, "Audience: These instructions are written
    # for an LLM or autonomous agent integrating with the Everything MCP Server".
    lines = {line.split(" ", 2)[1]: line for line in (real_tree / "servers" / "INDEX.md").read_text().splitlines()
             if line.startswith("- ")}  # fmt: skip
    assert "Audience" not in lines["everything"] and "instructions" not in lines["everything"]
    assert lines["everything"].startswith("- everything (") and "Everything Reference Server" in lines["everything"]


def test_every_parameter_has_its_wire_name_unless_python_cannot_bind_it(real_tree: Path) -> None:
    manifest = json.loads((real_tree / "manifest.json").read_text(encoding="utf-8"))
    snapshots = {
        s["name"]: {t["name"]: t for t in json.loads((real_tree / s["snapshot"]).read_text(encoding="utf-8"))["tools"]}
        for s in manifest["servers"]
    }
    checked = 0
    for entry in manifest["tools"]:
        schema = snapshots[entry["server"]][entry["tool"]].get("inputSchema") or {}
        wires = list(schema.get("properties") or {})
        tree = ast.parse((real_tree / entry["path"]).read_text(encoding="utf-8"))
        func = tree.body[-1]
        assert isinstance(func, ast.FunctionDef)
        params = sorted(a.arg for a in func.args.kwonlyargs)
        renamed = entry["parameters"]
        assert params == sorted(renamed.get(w, w) for w in wires), entry["tool"]
        assert all(keyword.iskeyword(w) or not (w.isascii() and w.isidentifier()) for w in renamed), renamed
        checked += len(wires)
    assert checked > 50


CALLS = """\
from servers.fetch import fetch
from servers.filesystem import read_text_file
from servers.git import git_log
from servers.time import get_current_time
from tool_tree.runtime import NOT_GIVEN, ToolResult

now: str = get_current_time(timezone="UTC")["datetime"]
page: ToolResult = fetch(url="https://example.com", max_length=100, raw=NOT_GIVEN)
content: str = read_text_file(path="a.txt", head=3)["content"]
log: ToolResult = git_log(repo_path=".", start_timestamp=None)
"""


def test_the_real_tree_and_calls_to_it_type_check_under_mypy_strict(real_tree: Path, tmp_path: Path) -> None:
    (real_tree / "calls.py").write_text(CALLS, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(REPO)}
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]
    result = subprocess.run(
        [*cmd, "--cache-dir", str(tmp_path), "-p", "servers", "-m", "calls"],
        cwd=real_tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    (real_tree / "calls.py").unlink()
    assert result.returncode == 0, result.stdout[-4000:]
    assert "Success: no issues found" in result.stdout


def test_rerun_against_the_live_servers_reports_no_drift(real_tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["generate-tree", "--config", str(CONFIG), "--out", str(real_tree), "--check", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert (code, summary["drift"]) == (0, [])


def test_no_stub_of_a_real_server_writes_one_typed_dict_twice(real_tree: Path) -> None:
    # Before: server-memory's create_relations and create_entities each defined their items twice (RelationsItem and
    # RelationsItem_2, the output's closed by additionalProperties: false alone), the result typed with the second.
    twice = []
    for stub in sorted((real_tree / "servers").glob("*/*.py")):
        seen: dict[tuple[str, str], str] = {}
        for node in ast.parse(stub.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                name, body = node.name, ast.dump(ast.Module(body=node.body, type_ignores=[]))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.value.args) == 2:
                name, body = ast.unparse(node.targets[0]), ast.dump(node.value.args[1])  # TypedDict("N", {...})
            else:
                continue
            base = name.rsplit("_", 1)[0] if name.rsplit("_", 1)[-1].isdigit() else name
            body = body.replace(name, base)  # its docstring names it
            if (base, body) in seen:
                twice.append(f"{stub.parent.name}/{stub.name}: {seen[base, body]} and {name}")
            seen[base, body] = name
    assert twice == []
