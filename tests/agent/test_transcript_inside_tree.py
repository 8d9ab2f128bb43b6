"""`tooltree agent --transcript`: a path inside the tree is refused before the run (real CLI, fake API)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.testing import FakeMessagesAPI, reply
from tests.agent.conftest import Project
from tooltree_cli.main import main


@pytest.mark.parametrize("name", ["manifest.json", "servers/crm/get_record.py", "runs/new.jsonl"])
def test_a_transcript_inside_the_tree_is_refused_and_the_tree_is_kept(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    # Before: the transcript was opened (emptied) over the tree's file; with the manifest gone, the run then failed
    # with "TreeError: ... not a version-1 tooltree manifest", and the tree had to be generated again.
    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    target = tree / name
    before = target.read_bytes() if target.exists() else None
    api.add(reply("Done."))
    args = ["agent", "List the gallery", "--config", str(project.config_path), "--tree", str(tree), "--mode", "direct",
            "--transcript", str(target), "--quiet"]  # fmt: skip
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: the transcript {target} is inside the tree {tree}: writing it would empty the tree's file "
        "of that name (its manifest, a stub) or add one to the tree; keep it outside\n"
    )
    assert api.requests == []
    assert (target.read_bytes() if target.exists() else None) == before
    # Beside the tree, it is written.
    beside = tmp_path / "run.jsonl"
    assert main([*args[:-3], "--transcript", str(beside), "--quiet"]) == 0
    assert capsys.readouterr().out == "Done.\n" and beside.stat().st_size > 0
