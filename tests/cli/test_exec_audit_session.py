"""`tooltree exec --audit`: each run writes its own ``session`` id in its lines, so that the lines of several runs
appending to one log are told apart. Before: ``""`` for every run.

Real parts: the real CLI, a real container, the sample CRM server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import sample_project
from tooltree_cli.main import main

pytestmark = pytest.mark.usefixtures("sandbox_owner")  # its containers and volumes removed by the engine fixture

SCRIPT = (
    "from servers.crm import get_record\n"
    "for record in ('L-00001', 'L-00002'):\n"
    "    try:\n"
    "        get_record(object_type='lead', record_id=record)\n"
    "    except Exception as e:\n"
    "        print(e)\n"
)
"""Two calls of a small tool (whether the record is found does not matter: each call has its line)."""


@pytest.mark.docker
def test_each_exec_run_has_its_own_session_in_the_audit_log(
    docker_engine: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = sample_project(tmp_path, "crm", timeout=120)  # not 20: each run's first call starts the server (3 s)
    audit = tmp_path / "audit.jsonl"
    for _ in range(2):
        argv = ["exec", "-c", SCRIPT, "--config", str(config), "--tree", str(tree), "--json", "--audit", str(audit)]
        assert main(argv) == 0, capsys.readouterr()
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [line["tool"] for line in lines] == ["get_record"] * 4
    sessions = [line["session"] for line in lines]
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3], sessions
    assert all(re.fullmatch(r"[0-9a-f]{32}", session) for session in sessions), sessions
