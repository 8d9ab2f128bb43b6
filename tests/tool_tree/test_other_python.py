"""A server started as ``python`` that fails for want of its packages under another interpreter says which ``python``
that was, and which tooltree runs on: in generate-tree's report and in a call's error.

Before: "the server exited during start-up, with exit status 1" and its stderr's ``No module named 'mcp'`` alone, as
`tooltree generate-tree --config examples/tooltree.yaml` says outside the virtualenv with Python 3.8 first on PATH.

Real parts: a real process (a ``python`` on the server's PATH that answers as Python 3.8 and fails as one without the
``mcp`` package), the real discovery and pool.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from generator.discover import discover_all
from tool_tree.config import ServerConfig
from tool_tree.pool import ServerPool
from tool_tree.pool_errors import PoolError

pytestmark = pytest.mark.anyio

OLD_PYTHON = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "Python 3.8.10"; exit 0; fi
echo "Traceback (most recent call last):" >&2
echo "ModuleNotFoundError: No module named 'mcp'" >&2
exit 1
"""


def old_python_first(tmp_path: Path, command: str = "python") -> tuple[ServerConfig, str]:
    """A server started as ``command``, found in a folder first on its PATH: a Python without the server's packages."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "python"
    program.write_text(OLD_PYTHON, encoding="utf-8")
    program.chmod(0o755)
    path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    server = ServerConfig(name="crm", command=command, args=("crm.py",), env={"PATH": path}, timeout=30)
    said = (
        f"; `python` is {program} (Python 3.8.10), not the Python tooltree runs on ({os.path.abspath(sys.executable)}, "
        f"Python {sys.version.split()[0]}): give the interpreter that has the server's packages as its command"
    )
    return server, said


async def test_generate_says_which_python_a_server_failed_under_and_which_tooltree_runs_on(tmp_path: Path) -> None:
    server, said = old_python_first(tmp_path)
    (found,) = await discover_all([server])
    assert found.error == f"the server exited during start-up, with exit status 1{said}"
    assert "No module named 'mcp'" in found.stderr_tail


async def test_a_call_of_a_server_that_failed_under_another_python_says_which(tmp_path: Path) -> None:
    server, said = old_python_first(tmp_path)
    async with ServerPool([server]) as pool:
        with pytest.raises(PoolError) as raised:
            await pool.call("crm", "list_leads", {})
    assert f"the server exited during start-up, with exit status 1{said}" in str(raised.value)


async def test_a_python_of_tooltrees_own_environment_is_not_said_to_be_another(tmp_path: Path) -> None:
    # The server's own failure under the right interpreter: its stderr alone says what is wrong.
    script = tmp_path / "broken.py"
    script.write_text("import tooltree_no_such_package\n", encoding="utf-8")
    server = ServerConfig(name="crm", command=sys.executable, args=(str(script),), timeout=30)
    (found,) = await discover_all([server])
    assert found.error == "the server exited during start-up, with exit status 1"


async def test_the_version_of_the_other_python_is_asked_off_the_event_loop(tmp_path: Path) -> None:
    # Its ``--version`` answers only once a task of the failed start's event loop has seen it asked. Before, it was
    # asked on that loop (up to 2 s, as every other server's start and call of the pool waited): the task never ran
    # meanwhile, so the version was never said.
    server, said = old_python_first(tmp_path)
    asked, answer = tmp_path / "asked", tmp_path / "answer"
    program = tmp_path / "bin" / "python"
    waits = f'touch "{asked}"; i=0; while [ ! -e "{answer}" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; '
    program.write_text(OLD_PYTHON.replace("then echo", f"then {waits}echo"), encoding="utf-8")

    async def answered_from_the_loop() -> None:
        with anyio.fail_after(30):
            while not asked.exists():
                await anyio.sleep(0.01)
        answer.touch()

    async with anyio.create_task_group() as tasks, ServerPool([server]) as pool:
        tasks.start_soon(answered_from_the_loop)
        with pytest.raises(PoolError) as raised:
            await pool.call("crm", "list_leads", {})
    assert f"the server exited during start-up, with exit status 1{said}" in str(raised.value)
