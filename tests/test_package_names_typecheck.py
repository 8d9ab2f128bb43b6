"""The names `sandbox` and `agent` export lazily are the ones a type checker sees: a misspelt one is an error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# The packages' own modules are skipped (Any to mypy): only their __init__'s names are judged, in under a second.
MYPY_INI = """\
[mypy]
strict = True

[mypy-sandbox.*,agent.*,tool_tree.*,generator.*]
follow_imports = skip

[mypy-sandbox,agent]
follow_imports = normal
"""


def _mypy(tmp_path: Path, script: str) -> tuple[int, str]:
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    (tmp_path / "script.py").write_text(script)
    command = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache")]
    run = subprocess.run(
        [*command, "script.py"],
        cwd=tmp_path,
        env={"MYPYPATH": str(Path(__file__).resolve().parent.parent), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return run.returncode, run.stdout + run.stderr


def test_a_misspelt_name_imported_from_sandbox_or_agent_is_a_type_error(tmp_path: Path) -> None:
    # Before: each package's module __getattr__ (returning Any) was seen by mypy too, so any name passed the check
    # and failed only when run (`from sandbox import Sandboxx`: AttributeError).
    code, output = _mypy(tmp_path, "import agent\nfrom sandbox import Sandboxx\n\nagent.Runtim\n")
    assert code == 1, output
    assert 'Module "sandbox" has no attribute "Sandboxx"; maybe "Sandbox"?' in output
    assert 'Module has no attribute "Runtim"; maybe "Runtime"?' in output


def test_the_exported_names_type_check(tmp_path: Path) -> None:
    script = "import agent\nimport sandbox\n\n"
    script += "".join(f"sandbox.{name}\n" for name in sandbox_names()) + "".join(f"agent.{n}\n" for n in agent_names())
    code, output = _mypy(tmp_path, script)
    assert code == 0, output


def sandbox_names() -> list[str]:
    import sandbox

    return list(sandbox.__all__)


def agent_names() -> list[str]:
    import agent

    return list(agent.__all__)
