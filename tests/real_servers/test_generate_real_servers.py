"""`generate-tree` against the six real third-party servers: every tool gets a stub, the tree type-checks,
and a rerun under `--check` finds no drift."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

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
        listed = sorted(t["name"] for t in snapshot["tools"])
        stubs = sorted(t["tool"] for t in manifest["tools"] if t["server"] == server["name"])
        assert listed == stubs and listed, server["name"]
        for t in manifest["tools"]:
            assert (real_tree / t["path"]).is_file()
    # `everything` names its tools with dashes; their stubs get identifiers, the wire name is kept.
    dashed = [t for t in manifest["tools"] if "-" in t["tool"]]
    assert dashed
    stub = (real_tree / dashed[0]["path"]).read_text(encoding="utf-8")
    assert f'call_tool("everything", "{dashed[0]["tool"]}"' in stub


def test_the_real_tree_type_checks_under_mypy_strict(real_tree: Path) -> None:
    env = {**os.environ, "MYPYPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull, "-p", "servers"],
        cwd=real_tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert "Success: no issues found" in result.stdout


def test_rerun_against_the_live_servers_reports_no_drift(real_tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["generate-tree", "--config", str(CONFIG), "--out", str(real_tree), "--check", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert (code, summary["drift"]) == (0, [])
