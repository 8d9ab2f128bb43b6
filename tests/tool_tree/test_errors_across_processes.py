"""tooltree's errors cross a process boundary and `copy` whole: pickle and `copy` make an exception again from its
``args``, which for these is not what their ``__init__`` takes (before: a TypeError, so a `multiprocessing` pool
waited for ever for the result of a task that raised one, and a `ProcessPoolExecutor` said its process had been
"terminated abruptly"; a copied `ConfigError` said its place twice)."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tool_tree.config import ConfigError
from tool_tree.pool import ServerUnavailable
from tool_tree.runtime import ToolCallError, ToolError, ToolResult

ERRORS = [
    ServerUnavailable("crm", "the server exited during start-up", "Traceback …"),
    ToolCallError("crm", "get_record", "no answer within 30 s", "timeout"),
    ToolError("crm", "get_record", "no such record", ToolResult(content=[{"type": "text", "text": "no such record"}])),
    ConfigError("expected a number", file="tooltree.yaml", line=3, key="servers.crm.timeout"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_an_error_pickled_or_copied_keeps_its_type_text_and_attributes(error: Exception) -> None:
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(again) is type(error)
        assert str(again) == str(error)
        assert again.args == error.args
        assert {k: repr(v) for k, v in vars(again).items()} == {k: repr(v) for k, v in vars(error).items()}


_WORKER_RAISES = """
import concurrent.futures
from tool_tree.pool import ServerUnavailable

def fails():
    raise ServerUnavailable("crm", "the server exited during start-up", "Traceback")

if __name__ == "__main__":
    with concurrent.futures.ProcessPoolExecutor(1) as workers:
        try:
            workers.submit(fails).result(timeout=60)
        except Exception as e:
            print(type(e).__name__, e.server, e.stderr_tail)
"""


def test_a_server_unavailable_raised_in_a_process_pools_worker_reaches_the_caller(tmp_path: Path) -> None:
    script = tmp_path / "workers.py"  # a program of its own: its pool's helper processes end with it
    script.write_text(_WORKER_RAISES, encoding="utf-8")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120, env=environ)
    assert done.stdout == "ServerUnavailable crm Traceback\n", done.stderr  # before: BrokenProcessPool
