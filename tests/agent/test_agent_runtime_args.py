"""`Agent` given a `Runtime` refuses the settings that belong to it (before: ``workspace=`` was ignored, and the
files a script wrote never reached the folder, without a word), and arguments of the wrong type."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent import Agent, AgentSetupError
from sandbox import SandboxConfig
from sandbox.host import Runtime
from tests.agent.conftest import Project


def test_workspace_or_sandbox_config_with_a_runtime_is_refused_naming_where_it_goes(
    project: Project, tmp_path: Path
) -> None:
    runtime = Runtime(project.config, project.tree)
    with pytest.raises(AgentSetupError, match=r"workspace= is for the runtime an Agent makes itself.*Runtime\("):
        Agent(project.config, tree=project.tree, runtime=runtime, workspace=tmp_path / "ws")
    with pytest.raises(AgentSetupError, match="sandbox_config= is for the runtime"):
        Agent(project.config, tree=project.tree, runtime=runtime, sandbox_config=SandboxConfig())
    assert not (tmp_path / "ws").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({"runtime": "rt"}, "runtime: expected a sandbox.host.Runtime"), ({"batch": "no"}, "batch: expected True")],
)
def test_a_runtime_or_batch_of_the_wrong_type_is_refused(
    project: Project, arguments: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        Agent(project.config, tree=project.tree, **arguments)  # type: ignore[arg-type]


def test_a_runtime_of_another_tree_is_refused_naming_both(project: Project, tmp_path: Path) -> None:
    # Before: taken; the model was shown the agent's tree (here the default, ./tree) and its scripts ran on the
    # runtime's, importing stubs it had not read.
    other = tmp_path / "other-tree"
    shutil.copytree(project.tree, other)
    runtime = Runtime(project.config, other)
    with pytest.raises(AgentSetupError) as info:
        Agent(project.config, tree=project.tree, runtime=runtime)
    assert str(info.value) == (
        f"the runtime runs the tree {other}, not {project.tree}: give the Agent the runtime's tree "
        "(Agent(config, tree=runtime.tree, runtime=runtime))"
    )
    same = Agent(project.config, tree=Path(str(other) + "/"), runtime=runtime)  # the same folder, written otherwise
    assert same.runtime is runtime
