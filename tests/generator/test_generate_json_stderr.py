"""``generate-tree --json`` carries what the human output shows of a failed server: its stderr, kept stubs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import sample_config_yaml
from tooltree_cli.main import main

FAILING = "import sys\nsys.stderr.write('starting\\nno such database: crm.db\\n')\nsys.exit(1)\n"


def failing_config(tmp_path: Path, name: str) -> Path:
    script = tmp_path / "failing.py"
    script.write_text(FAILING, encoding="utf-8")
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        f"servers:\n  crm:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(script))}]\n",
        encoding="utf-8",
    )
    return config


def generate_json(config: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_json_output_of_a_failed_server_holds_the_last_lines_of_its_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = generate_json(failing_config(tmp_path, "tooltree"), tmp_path / "tree", capsys)
    (crm,) = report["servers"]
    assert crm["status"] == "failed" and crm["error"] == "the server exited during start-up, with exit status 1"
    assert crm["stderr_tail"].splitlines()[-2:] == ["starting", "no such database: crm.db"]
    assert crm["kept_previous"] is False  # no tree before: nothing to keep


def test_json_output_says_a_failed_server_kept_its_previous_stubs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    working = tmp_path / "working.yaml"
    working.write_text(sample_config_yaml("crm"), encoding="utf-8")
    out = tmp_path / "tree"
    assert generate_json(working, out, capsys)["servers"][0]["status"] == "ok"
    (crm,) = generate_json(failing_config(tmp_path, "broken"), out, capsys)["servers"]
    assert crm["status"] == "failed" and crm["kept_previous"] is True
    assert "no such database: crm.db" in crm["stderr_tail"]
    assert (out / "servers" / "crm").is_dir()


def test_json_output_of_a_server_that_started_has_an_empty_stderr_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    (crm,) = generate_json(config, tmp_path / "tree", capsys)["servers"]
    assert crm["status"] == "ok" and crm["stderr_tail"] == "" and crm["kept_previous"] is False
