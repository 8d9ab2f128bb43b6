"""The example at the head of `sandbox.session`'s docstring runs as written (before: it gave the sandbox no tree, so
its script's import failed, and took the ``len`` of a `ToolResult`, which has none)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import sandbox.session

pytestmark = pytest.mark.docker


def test_the_session_modules_example_runs_as_written(
    backend: object, sample_tree: Path, sandbox_owner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    example = re.search(r"::\n\n((?:    .*\n|\n)+)", sandbox.session.__doc__ or "")
    assert example is not None
    shutil.copytree(sample_tree, tmp_path / "tree")
    monkeypatch.chdir(tmp_path)
    asked: list[tuple[str, str]] = []

    def handler(server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        asked.append((server, tool))
        return {"content": [{"type": "text", "text": '{"leads": [{"id": 1}, {"id": 2}, {"id": 3}]}'}]}

    code = example.group(1).replace("\n    ", "\n").strip()
    exec(compile(code, "example", "exec"), {"Sandbox": sandbox.session.Sandbox, "handler": handler})
    assert asked == [("crm", "list_leads")]
    assert capsys.readouterr().out.startswith("3\n crm.list_leads ok")
    assert (tmp_path / "runs" / "42" / "skills").is_dir()  # the workspace was saved back
