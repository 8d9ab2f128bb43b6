"""A `generate-tree` run (another process) that regenerates the tree during a code-mode run: the run says once that
its scripts keep the tree their sandbox started with, while list_files, read_file and search_tools show the new one.

Real parts: the sample servers, a real sandbox container, a real `generate-tree` process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.toolsets.code import REGENERATED, CodeToolset
from sandbox import SandboxConfig
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.support import REPO, TEST_OWNER

pytestmark = pytest.mark.docker


def test_a_tree_regenerated_during_a_run_is_said_once_and_the_scripts_keep_their_tree(
    project: Project, docker_engine: object, tmp_path: Path
) -> None:
    # Before: read_file showed the new stub and search_tools found it, its import failed in the run's scripts, and
    # nothing said why.
    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    snapshots = tmp_path / "snapshots"
    shutil.copytree(tree / "snapshots", snapshots)
    crm = json.loads((snapshots / "crm.json").read_text(encoding="utf-8"))
    crm["tools"].append({"name": "archive_lead", "description": "Archive a lead.", "inputSchema": {"type": "object"}})
    (snapshots / "crm.json").write_text(json.dumps(crm), encoding="utf-8")
    toolset = CodeToolset(tree)
    settings = SandboxConfig(owner=TEST_OWNER, timeout=60.0)
    with Runtime(project.config, tree, sandbox_config=settings) as runtime:
        first = toolset.call("execute_python", {"code": "print('started')"}, runtime)
        assert first.content[0]["text"] == "started"
        done = subprocess.run(
            [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot", str(snapshots), "--out",
             str(tree), "--config", str(project.config_path)],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        read = toolset.call("read_file", {"path": "servers/crm/archive_lead.py"}, runtime)
        assert str(read.content[0]["text"]).startswith(f"[{REGENERATED}]\n\n") and "def archive_lead(" in str(
            read.content[0]["text"]
        )
        script = toolset.call("execute_python", {"code": "from servers.crm import archive_lead"}, runtime)
        assert script.is_error and "archive_lead" in str(script.content)
        assert REGENERATED not in str(script.content)  # said once
