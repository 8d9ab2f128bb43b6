"""`tooltree serve --no-regenerate` of a tree whose servers its config lacks or disables says so as it starts.

With no ``./tooltree.yaml``, serve's error offers ``--no-regenerate`` to serve an existing tree; taken without
``--config``, every call of the tree's tools was refused, and serve said nothing until a script made one. Now one
warning names the servers and what to pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, TEST_OWNER, sample_project

WAIT = 120.0


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sample_project(tmp_path_factory.mktemp("unconfigured"), "crm", "docs", timeout=30)


def serve_stderr(cwd: Path, *args: str) -> str:
    """What `tooltree serve --no-regenerate --warm 0 ARGS` run in ``cwd`` says on stderr until its client leaves."""
    done = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", "serve", "--no-regenerate", "--warm", "0", *args],
        cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "TOOLTREE_SANDBOX_OWNER": TEST_OWNER},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_serving_a_tree_with_no_config_warns_that_its_tools_calls_fail(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    # A copy of the tree, in a folder with no tooltree.yaml: the file its manifest records is not beside it (else it
    # is read: tests/cli/test_tree_config_file.py).
    tree = Path(shutil.copytree(project[1], tmp_path / "tree"))
    said = serve_stderr(tmp_path, "--tree", str(tree))
    assert (
        f"tooltree serve: warning: {tree} has server(s) crm, docs, and no config was given: every call of their "
        "tools fails; pass the --config the tree was generated from\n"
    ) in said


def test_serving_a_tree_with_a_config_that_lacks_or_disables_a_server_names_it(
    project: tuple[Path, Path], tmp_path: Path
) -> None:
    config, tree = project
    partial = tmp_path / "partial.yaml"
    text = config.read_text(encoding="utf-8").replace("  docs:\n", "  docs:\n    enabled: false\n")
    partial.write_text(text, encoding="utf-8")
    said = serve_stderr(tmp_path, "--config", str(partial), "--tree", str(tree))
    assert f"warning: {tree} has server(s) docs, and {partial} does not have or disables them" in said
    assert "crm" not in said.split("has server(s)")[1].split(",")[0]


def test_serving_a_tree_with_its_own_config_says_nothing_of_it(project: tuple[Path, Path]) -> None:
    config, tree = project
    assert "warning" not in serve_stderr(tree.parent, "--config", str(config), "--tree", str(tree))
