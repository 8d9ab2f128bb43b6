"""A tool call cancelled by its execution's end while its server was still starting says so in the ledger.

Before: "cancelled: the execution ended before the server answered", and why (a server hanging in its start-up)
was in the host's log alone, which the model never sees.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import raw_server_tree
from tooltree_cli.main import main


@pytest.mark.docker
def test_a_call_cancelled_while_its_server_starts_says_the_server_was_starting(
    docker_engine: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, _ = raw_server_tree(tmp_path, [{"name": "echo", "inputSchema": {"type": "object"}}])
    spec = tmp_path / "raw.json"
    spec.write_text(json.dumps({**json.loads(spec.read_text(encoding="utf-8")), "start_delay": 60}), encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "sandbox:\n  timeout: 3\n", encoding="utf-8")
    code = "from servers.raw import echo\necho()"
    assert main(["exec", "-c", code, "--config", str(config), "--tree", str(tree), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["timed_out"] is True
    (call,) = printed["calls"]
    assert call["error"] == (
        "cancelled: the execution ended before the server answered (the server raw was still starting: it had not "
        "answered its start-up yet; a script that waits longer needs a longer sandbox timeout, and the server its "
        "own timeout setting)"
    )
