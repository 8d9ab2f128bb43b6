"""`--audit` of `tooltree exec` and `tooltree serve` where its lines would land in a file of the run's own: inside the
tree, inside the workspace, or the config file, refused before anything starts (`tooltree_cli.common.audit_problem`).

Before: `tooltree exec --audit tree/manifest.json` appended a JSON line per call to the manifest, and every later
command failed on it ("malformed manifest"); an audit log inside `--workspace` could be rewritten by the script, whose
copy the saved workspace then put in its place.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tooltree_cli.main import main

CASES = [
    (
        "tree/manifest.json",
        "--audit: {tmp}/tree/manifest.json is inside the tree {tmp}/tree: its lines would go into the tree's file of "
        "that name (its manifest, a stub) or add one to the tree; keep it outside",
    ),
    (
        "ws/audit.jsonl",
        "--audit: {tmp}/ws/audit.jsonl is inside the workspace {tmp}/ws: a script could rewrite the audit log, and "
        "the workspace saved back would put its copy in place; keep it outside",
    ),
    (
        "tooltree.yaml",
        "--audit: {tmp}/tooltree.yaml is the config file: its lines would be appended to it; give the audit log a "
        "path of its own",
    ),
]


@pytest.mark.parametrize("command", ["exec", "serve"])
@pytest.mark.parametrize(("audit", "said"), CASES)
def test_an_audit_log_in_the_tree_the_workspace_or_the_config_exits_2_and_leaves_the_file_as_it_was(
    command: str, audit: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, workspace, config = tmp_path / "tree", tmp_path / "ws", tmp_path / "tooltree.yaml"
    tree.mkdir()
    workspace.mkdir()
    (tree / "manifest.json").write_text("{}\n", encoding="utf-8")
    config.write_text("servers: {}\n", encoding="utf-8")
    options = ["--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    options += ["--audit", str(tmp_path / audit)]
    argv = ["exec", "-c", "print(1)", *options] if command == "exec" else ["serve", "--no-regenerate", *options]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"tooltree: error: {said.format(tmp=tmp_path)}\n"
    assert (tree / "manifest.json").read_text(encoding="utf-8") == "{}\n"
    assert config.read_text(encoding="utf-8") == "servers: {}\n" and list(workspace.iterdir()) == []


def test_an_audit_log_beside_the_tree_and_the_workspace_is_taken(tmp_path: Path) -> None:
    from tooltree_cli.common import audit_problem

    (tmp_path / "tree").mkdir()
    (tmp_path / "tooltree.yaml").write_text("servers: {}\n", encoding="utf-8")
    audit = str(tmp_path / "tree-audit.jsonl")  # a name that starts as the tree's does not make it inside
    assert audit_problem(audit, tree=str(tmp_path / "tree"), workspace=str(tmp_path / "ws"), config=None) is None
    assert audit_problem(audit, tree="tree", workspace=None, config=str(tmp_path / "tooltree.yaml")) is None


@pytest.mark.parametrize("command", ["exec", "serve"])
def test_an_audit_log_that_is_the_config_the_tree_records_exits_2_when_run_from_another_folder(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: without --config, only ./tooltree.yaml was kept from the audit log, where the run reads the file its
    # tree records (tests/cli/test_tree_config_file.py): its lines were appended to that project's config.
    from tests.support import sample_project

    (tmp_path / "proj").mkdir(), (tmp_path / "elsewhere").mkdir()
    config, tree = sample_project(tmp_path / "proj", "crm")
    before = config.read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    options = ["--tree", str(tree), "--audit", str(config)]
    assert main(["exec", "-c", "print(1)", *options] if command == "exec" else ["serve", *options]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: --audit: {config} is the config file: its lines would be appended to it; give the audit "
        "log a path of its own\n"
    )
    assert config.read_text(encoding="utf-8") == before
