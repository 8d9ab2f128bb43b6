"""`generate-tree` and what its configuration file holds besides the servers it lists: a disabled server's
variables that are not set, a top-level ``x-`` key holding YAML anchors, and a file that is not there."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support import SAMPLE_SERVERS, sample_config_yaml
from tool_tree.config import ConfigError, load_config
from tool_tree.tree import Manifest
from tooltree_cli.main import main

DRIVE_YAML = """\
  drive:
    url: https://drive.example.com/mcp
    headers: {Authorization: "Bearer ${DRIVE_TOKEN}"}
    enabled: false
"""
ENABLED_DRIVE_YAML = DRIVE_YAML.replace("    enabled: false\n", "")


def _generate(config: Path, out: Path, *extra: str) -> int:
    return main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", *extra])


def _drive_token_not_set(config: Path) -> str:
    """What generate-tree says of ``config`` whose enabled drive (`ENABLED_DRIVE_YAML`) needs the unset DRIVE_TOKEN."""
    return (
        f"tooltree: error: {config}:7: servers.drive.headers.Authorization: environment variable ${{DRIVE_TOKEN}} "
        "is not set\n"
    )


def test_a_disabled_servers_unset_variable_does_not_stop_the_run_and_is_an_error_once_it_is_enabled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: exit 2, "tooltree.yaml:6: servers.drive.headers.Authorization: environment variable ${DRIVE_TOKEN} is
    # not set", though drive is disabled: variables were expanded before `enabled` was read.
    monkeypatch.delenv("DRIVE_TOKEN", raising=False)
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm") + DRIVE_YAML, encoding="utf-8")
    assert _generate(config, tmp_path / "tree") == 0
    assert "tooltree: listing tools from 1 server(s) (1 disabled: drive) …" in capsys.readouterr().err
    assert {s.name for s in Manifest.load(tmp_path / "tree").servers} == {"crm"}

    config.write_text(sample_config_yaml("crm") + ENABLED_DRIVE_YAML, encoding="utf-8")
    assert _generate(config, tmp_path / "tree") == 2
    assert capsys.readouterr().err == _drive_token_not_set(config)


def test_a_server_not_asked_for_needs_no_variable_and_the_one_asked_for_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `--server crm` failed on drive's unset variable, exit 2, though drive was not asked for.
    monkeypatch.delenv("DRIVE_TOKEN", raising=False)
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm") + ENABLED_DRIVE_YAML, encoding="utf-8")
    assert _generate(config, tmp_path / "tree", "--server", "crm") == 0
    assert {s.name for s in Manifest.load(tmp_path / "tree").servers} == {"crm"}
    capsys.readouterr()
    assert _generate(config, tmp_path / "tree", "--server", "drive") == 2
    assert capsys.readouterr().err == _drive_token_not_set(config)


def test_a_json_configs_disabled_servers_unset_variable_does_not_stop_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: exit 2, "mcp.json:1: mcpServers.drive.headers.Authorization: environment variable ${DRIVE_TOKEN} is not
    # set" for an entry of "disabled": true.
    monkeypatch.delenv("DRIVE_TOKEN", raising=False)
    servers = {
        "crm": {"command": sys.executable, "args": [str(SAMPLE_SERVERS / "crm.py")]},
        "drive": {"url": "https://drive.example.com/mcp", "headers": {"Authorization": "Bearer ${DRIVE_TOKEN}"},
                  "disabled": True},
    }  # fmt: skip
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    assert _generate(config, tmp_path / "tree") == 0
    assert "tooltree: listing tools from 1 server(s) (1 disabled: drive) …" in capsys.readouterr().err
    assert {s.name for s in Manifest.load(tmp_path / "tree").servers} == {"crm"}


def test_a_top_level_x_key_holds_anchors_for_merge_keys_and_another_unknown_key_is_still_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree.yaml:1: x-common: unknown key", exit 2: merge keys had nowhere to take their mapping from.
    config = tmp_path / "tooltree.yaml"
    common = "x-common: &common\n  timeout: 20\n  concurrency: 4\n"
    crm = sample_config_yaml("crm").replace("  crm:\n", "  crm:\n    <<: *common\n")
    config.write_text(common + crm, encoding="utf-8")
    assert _generate(config, tmp_path / "tree") == 0
    assert {s.name for s in Manifest.load(tmp_path / "tree").servers} == {"crm"}
    (server,) = load_config(config).servers
    assert (server.timeout, server.concurrency) == (20.0, 4)

    capsys.readouterr()
    config.write_text("servers: {}\n" + common.replace("x-common", "common"), encoding="utf-8")
    assert _generate(config, tmp_path / "tree") == 2
    assert capsys.readouterr().err == f"tooltree: error: {config}:2: common: unknown key\n"


def _assert_refused(
    config: Path, python_says: str, cli_says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`load_config` refuses ``config`` with the error ``python_says``; generate-tree exits 2 saying ``cli_says``."""
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert str(info.value) == python_says
    assert _generate(config, tmp_path / "tree") == 2
    assert capsys.readouterr().err == f"tooltree: error: {cli_says}\n"


def test_a_missing_config_names_no_option_from_python_and_the_cli_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: load_config said "(create one, or pass --config PATH)" to a Python caller too.
    missing = tmp_path / "nope.yaml"
    python_says, cli_says = f"{missing}: no such file", f"{missing}: no such file (create one, or pass --config PATH)"
    _assert_refused(missing, python_says, cli_says, tmp_path, capsys)


def test_a_folder_given_as_the_config_names_no_option_from_python_and_the_cli_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: load_config said "is a folder; --config names the configuration file" to a Python caller too.
    folder = tmp_path / "configs"
    folder.mkdir()
    python_says = f"{folder}: is a folder, not a configuration file"
    cli_says = f"{folder}: is a folder, not a configuration file; --config names the configuration file"
    _assert_refused(folder, python_says, cli_says, tmp_path, capsys)


@pytest.mark.parametrize(
    "command",
    [["generate-tree"], ["image", "build"], ["exec", "-c", "print(1)"], ["serve"], ["agent", "a task"]],
    ids=lambda command: command[0],
)
def test_an_empty_config_path_is_refused_not_taken_for_the_default_or_the_working_folder(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `--config "$CONFIG"` with the variable unset read ./tooltree.yaml in generate-tree (this one, whose
    # server cannot start: exit 3), and was "`.`: is a folder" in the other commands.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tooltree.yaml").write_text("servers:\n  a: {command: /no/such/server}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--config", ""])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith("error: argument --config" + ("/-c" if command[0] in ("generate-tree", "image") else "") +
                        ": expected the configuration file's path, got an empty one\n")  # fmt: skip
    assert not (tmp_path / "tree").exists()


def test_a_run_from_snapshots_needs_no_servers_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: exit 2, "environment variable ${CRM_TOKEN} is not set", though a run from snapshots starts no server (a
    # CI job checking the tree offline has no tokens).
    monkeypatch.delenv("CRM_TOKEN", raising=False)
    config, out = tmp_path / "tooltree.yaml", tmp_path / "tree"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    assert _generate(config, out) == 0
    config.write_text(sample_config_yaml("crm") + '    env: {CRM_TOKEN: "${CRM_TOKEN}"}\n', encoding="utf-8")
    capsys.readouterr()
    assert _generate(config, out, "--from-snapshot", "--check") == 0
    assert _generate(config, out, "--from-snapshot", "--server", "crm") == 0
    assert "CRM_TOKEN" not in capsys.readouterr().err
    assert _generate(config, out, "--check") == 2  # one that starts the server still needs it
    assert "servers.crm.env.CRM_TOKEN: environment variable ${CRM_TOKEN} is not set" in capsys.readouterr().err


def _check_elsewhere(tree: Path, *extra: str) -> int:
    return main(["generate-tree", "--check", "--out", str(tree), "--embeddings", "off", *extra])


def test_check_without_config_from_another_folder_reads_the_config_the_tree_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: ./tooltree.yaml was read, the other folder's: "tooltree.yaml: no such file", exit 2, or another
    # project's servers checked against this tree.
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    config = project / "tooltree.yaml"
    config.write_text(sample_config_yaml("docs"), encoding="utf-8")
    assert _generate(config, project / "tree") == 0
    capsys.readouterr()
    monkeypatch.chdir(elsewhere)
    assert _check_elsewhere(project / "tree") == 0
    err = capsys.readouterr().err
    manifest = project / "tree" / "manifest.json"
    said = f"tooltree: reading {config}, the configuration {manifest} records (--config names another)\n"
    assert said in err and err.rstrip().endswith(f"{project / 'tree'}: up to date")

    (elsewhere / "tooltree.yaml").write_text(sample_config_yaml("crm"), encoding="utf-8")  # not this tree's
    assert _check_elsewhere(project / "tree") == 0
    assert said in capsys.readouterr().err

    monkeypatch.chdir(project)  # its own folder: nothing to say
    assert _check_elsewhere(Path("tree")) == 0
    assert "reading" not in capsys.readouterr().err

    config.rename(project / "moved.yaml")
    monkeypatch.chdir(elsewhere)
    assert _check_elsewhere(project / "tree") == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: {project / 'tree' / 'manifest.json'}: the tree was generated from {config}, which cannot "
        "be read (No such file or directory): pass --config PATH\n"
    )
    (elsewhere / "tooltree.yaml").unlink()
    assert _check_elsewhere(project / "tree", "--from-snapshot") == 0  # as with no file recorded: every snapshot
    assert _check_elsewhere(project / "tree", "--config", str(project / "moved.yaml")) == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="gives a file to another user: needs root")
def test_a_recorded_config_of_another_user_is_not_read_unless_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("docs"), encoding="utf-8")
    assert _generate(config, tmp_path / "tree") == 0
    os.chown(config, 54321, 54321)
    monkeypatch.chdir(tmp_path.parent)
    capsys.readouterr()
    assert _check_elsewhere(tmp_path / "tree") == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: {tmp_path / 'tree' / 'manifest.json'}: the tree was generated from {config}, another "
        "user's file, read only when named: pass --config PATH\n"
    )
    assert _check_elsewhere(tmp_path / "tree", "--config", str(config)) == 0

    # In the project's own folder the recorded file is ./tooltree.yaml, read without a manifest too (before: refused,
    # so another user of a shared project could no longer run generate-tree there without --config).
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert _check_elsewhere(Path("tree")) == 0
    assert "reading" not in capsys.readouterr().err
