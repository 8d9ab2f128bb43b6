"""What `tooltree serve` tells the model of the sandbox itself, in its instructions and in ``execute_python``'s
description (which is all a client that ignores the instructions reads): no network, and Python's standard library
with the packages ``sandbox.pip_packages`` adds. Before, neither said it, and a model wrote ``import numpy`` or
``urlopen(...)``, read the error and tried again."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.serve.server import ToolServer
from agent.serve.settings import ServeSettings
from sandbox.config import SandboxConfig
from tests.support import sample_config_yaml
from tooltree_cli.common import load
from tooltree_cli.main import main


@pytest.fixture(scope="module")
def crm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The config and tree of the crm sample server."""
    folder = tmp_path_factory.mktemp("sandbox-said")
    config = folder / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


def said(crm: tuple[Path, Path], packages: tuple[str, ...]) -> tuple[str, str]:
    """serve's instructions and ``execute_python``'s description, with ``packages`` in the sandbox image."""
    config = load(str(crm[0]))
    app = ToolServer(config, crm[1], settings=ServeSettings.from_config(config),
                     sandbox_config=SandboxConfig(pip_packages=packages))  # fmt: skip
    (tool,) = [t for t in app.tools.tools if t.name == "execute_python"]
    return app.instructions, str(tool.description)


def test_serve_tells_the_model_the_sandbox_has_no_network_and_the_standard_library_only(
    crm: tuple[Path, Path],
) -> None:
    instructions, description = said(crm, ())
    holds = "The sandbox has no network, and only Python's standard library (no third-party packages)."
    assert holds in instructions.split("\n")[0]
    assert holds in description


def test_serve_names_the_packages_the_config_adds_to_the_sandbox(crm: tuple[Path, Path]) -> None:
    instructions, description = said(crm, ("tabulate", "pandas>=2"))
    holds = "The sandbox has no network, and only Python's standard library and tabulate, pandas>=2."
    assert holds in instructions and holds in description
