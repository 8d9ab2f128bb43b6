"""A workspace that holds the tree, or lies inside it, is refused before anything starts: a script could rewrite the
tree through it (its manifest is the list of tools the bridge allows), and the workspace saved back would put the
script's copy in place.

Before: `tooltree exec --workspace .` in the folder holding `./tree` (both defaults) let a script write
`tree/manifest.json`; it was saved into the tree, and every later command failed on it (or ran on what it said).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tooltree_cli.main import main


def _tree(root: Path) -> Path:
    tree = root / "tree"
    (tree / "servers").mkdir(parents=True)
    (tree / "manifest.json").write_text("{}\n", encoding="utf-8")
    return tree


@pytest.mark.parametrize("where", ["the folder holding the tree", "the tree", "a folder in the tree"])
@pytest.mark.parametrize("command", ["exec", "serve"])
def test_a_workspace_holding_the_tree_or_inside_it_exits_2_before_anything_starts(
    command: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path)
    workspace = {"the folder holding the tree": tmp_path, "the tree": tree, "a folder in the tree": tree / "servers"}
    options = ["--tree", str(tree), "--workspace", str(workspace[where])]
    argv = ["exec", "-c", "print(1)", *options] if command == "exec" else ["serve", "--no-regenerate", *options]
    assert main(argv) == 2
    relation = "holds" if where == "the folder holding the tree" else "is inside"
    assert capsys.readouterr().err == (
        f"tooltree: error: --workspace: {workspace[where]} {relation} the tree {tree}: a script could rewrite the "
        "tree (its manifest lists the tools the bridge allows), and the workspace saved back would put its copy in "
        "place; give the workspace a folder of its own\n"
    )
    assert (tree / "manifest.json").read_text(encoding="utf-8") == "{}\n"


def test_a_sandbox_given_a_workspace_holding_its_tree_is_refused(tmp_path: Path) -> None:
    from sandbox import Sandbox, SandboxConfig
    from sandbox.errors import WorkspaceError

    tree = _tree(tmp_path)
    with pytest.raises(WorkspaceError, match=r"holds the tree .*: a script could rewrite the tree"):
        Sandbox(config=SandboxConfig(), tree=tree, workspace=tmp_path)


@pytest.mark.parametrize("where", ["the folder holding the tree", "a folder in the tree"])
def test_a_sandbox_of_a_backend_running_the_tree_is_refused_a_workspace_holding_it(tmp_path: Path, where: str) -> None:
    # As a `SandboxPool` makes its sessions (`acquire`), and `Runtime` with a pool. Before: taken, and a script's
    # manifest.json was saved into the tree.
    from sandbox import DockerBackend, Sandbox, SandboxConfig
    from sandbox.errors import WorkspaceError

    tree = _tree(tmp_path)
    workspace = tmp_path if where == "the folder holding the tree" else tree / "servers"
    with pytest.raises(WorkspaceError, match=r"(holds|is inside) the tree .*: a script could rewrite"):
        Sandbox(DockerBackend(SandboxConfig(), tree=tree), workspace=workspace)
    Sandbox(DockerBackend(SandboxConfig(), tree=tree), workspace=tmp_path / "ws")  # one beside it is taken


def test_a_workspace_beside_the_tree_is_taken(tmp_path: Path) -> None:
    from sandbox.session_args import tree_in_workspace

    tree = _tree(tmp_path)
    assert tree_in_workspace(tmp_path / "tree-work", tree) is None  # a name that starts as the tree's is beside it
    assert tree_in_workspace(tmp_path / "ws", tree) is None
