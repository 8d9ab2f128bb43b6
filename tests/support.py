"""Helpers shared by test modules (fixtures live in conftest.py; plain functions live here)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The owner label of every container and volume a test run creates. Unique per run, so the engine
# fixture's clean-up at the end of one run never removes another run's live sandboxes.
TEST_OWNER = os.environ.get("TOOLTREE_TEST_OWNER") or f"tooltree-test-{os.getpid()}"
os.environ["TOOLTREE_TEST_OWNER"] = TEST_OWNER  # worker processes of the same run share it
SAMPLE_SERVERS = REPO / "tests" / "sample_servers"


def sample_config_yaml(*names: str) -> str:
    """A ``servers:`` section starting the named sample servers over stdio with this interpreter."""
    lines = ["servers:"]
    for name in names:
        script = SAMPLE_SERVERS / f"{name}.py"
        lines += [f"  {name}:", f"    command: {json.dumps(sys.executable)}", f"    args: [{json.dumps(str(script))}]"]
    return "\n".join(lines) + "\n"


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie counts as gone: its parent already died)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
