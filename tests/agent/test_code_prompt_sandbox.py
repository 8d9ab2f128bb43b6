"""What the agent's code-mode system prompt tells the model of the sandbox itself: no network, and Python's standard
library with the packages ``sandbox.pip_packages`` adds, in the words `tooltree serve` uses (`agent.prompts.
sandbox_holds`). Before, only serve said it, and an agent's model wrote ``import numpy`` or ``urlopen(...)``, read
the error and tried again."""

from __future__ import annotations

from pathlib import Path

from agent import Agent
from agent.prompts import sandbox_holds
from sandbox.config import SandboxConfig
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tool_tree.config import load_config

NO_PACKAGES = "The sandbox has no network, and only Python's standard library (no third-party packages)."
TWO_PACKAGES = "The sandbox has no network, and only Python's standard library and tabulate, pandas>=2."


def with_packages(project: Project, tmp_path: Path) -> Path:
    """A config of the project's servers whose sandbox image adds two packages."""
    text = project.config_path.read_text(encoding="utf-8")
    path = tmp_path / "tooltree.yaml"
    path.write_text(text.replace("sandbox:\n", "sandbox:\n  pip_packages: [tabulate, pandas>=2]\n"), encoding="utf-8")
    return path


def test_the_code_prompt_says_the_sandbox_has_no_network_and_the_standard_library_only(project: Project) -> None:
    system = Agent(project.config, tree=project.tree, mode="code").system
    assert sandbox_holds() == NO_PACKAGES
    assert f"calling them. {NO_PACKAGES}\n" in system
    assert system.count("no network") == 1
    assert "no network" not in Agent(project.config, tree=project.tree, mode="direct").system


def test_the_code_prompt_names_the_packages_of_the_config_the_runtime_or_the_sandbox_config(
    project: Project, tmp_path: Path
) -> None:
    config = load_config(with_packages(project, tmp_path))
    assert TWO_PACKAGES in Agent(config, tree=project.tree).system
    # Pre-filtered code mode renders the same prompt with the admitted signatures.
    assert TWO_PACKAGES in Agent(config, tree=project.tree, prefilter="local").system
    given = SandboxConfig(pip_packages=("tabulate", "pandas>=2"))
    assert TWO_PACKAGES in Agent(project.config, tree=project.tree, sandbox_config=given).system
    runtime = Runtime(config, project.tree)  # not started: only its settings are read
    assert TWO_PACKAGES in Agent(project.config, tree=project.tree, runtime=runtime).system
