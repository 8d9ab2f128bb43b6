"""`exec`, `agent` and `serve` given no ``--config`` read the configuration file their ``--tree`` records, as
`generate-tree` does (`tooltree_cli.common.load_optional_config`): before, run from another folder, they read
./tooltree.yaml, another project's, or none."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support import sample_config_yaml, sample_project
from tooltree_cli.main import main

pytestmark = pytest.mark.usefixtures("sandbox_owner")  # its containers and volumes removed by the engine fixture


def _project(tmp_path: Path, *names: str, then: str = "") -> tuple[Path, Path]:
    """tmp_path/proj/tooltree.yaml of the named sample servers and the tree generated from it, ``then`` appended to
    the file after (a section the tree does not depend on); the working folder is tmp_path/elsewhere, which has no
    tooltree.yaml."""
    (tmp_path / "proj").mkdir()
    config, tree = sample_project(tmp_path / "proj", *names)
    if then:
        config.write_text(config.read_text(encoding="utf-8") + then, encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    os.chdir(tmp_path / "elsewhere")
    return config, tree


@pytest.fixture(autouse=True)
def _back_to_the_working_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path.cwd())  # `_project` changes it; restored after each test


def _reading(config: Path, tree: Path) -> str:
    """The note of a command reading ``config``, the file ``tree`` records."""
    return f"tooltree: reading {config}, the configuration {tree / 'manifest.json'} records (--config names another)\n"


@pytest.mark.docker
def test_exec_from_another_folder_calls_the_servers_of_the_config_its_tree_records(
    docker_engine: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree: no tooltree.yaml here, so no servers: the script runs without its tools", and the call failed.
    config, tree = _project(tmp_path, "crm", then="sandbox:\n  timeout: 120\n")
    capsys.readouterr()
    script = "from servers.crm import search_records\nsearch_records(object_type='account', query='north')"
    assert main(["exec", "-c", script, "--tree", str(tree), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == _reading(config, tree)
    result = json.loads(out)
    assert result["error"] is None and [(c["tool"], c["ok"]) for c in result["calls"]] == [("search_records", True)]


def test_exec_from_another_folder_is_refused_on_the_recorded_configs_error_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the file was not read, and the script ran without the servers.
    config, tree = _project(tmp_path, "crm", then="sandbox:\n  timout: 5\n")
    capsys.readouterr()
    assert main(["exec", "-c", "print(1)", "--tree", str(tree)]) == 2
    line = sample_config_yaml("crm").count("\n") + 2
    assert capsys.readouterr().err == (
        _reading(config, tree) + f"tooltree: error: {config}:{line}: sandbox.timout: unknown key (did you mean "
        "'timeout'?)\n"
    )
    assert main(["exec", "-c", "print(1)", "--tree", str(tree), "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "reading" not in capsys.readouterr().err  # --config names another: the recorded one is not read


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="gives a file to another user: needs root")
def test_exec_does_not_read_a_recorded_config_of_another_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = _project(tmp_path, "crm")
    os.chown(config, 54321, 54321)
    capsys.readouterr()
    assert main(["exec", "-c", "print(1)", "--tree", str(tree)]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: {tree / 'manifest.json'}: the tree was generated from {config}, another user's file, read "
        "only when named: pass --config PATH\n"
    )


def test_an_agent_dry_run_from_another_folder_counts_the_agent_settings_of_the_config_its_tree_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "no tooltree.yaml here: the dry run counts the tree alone, without a config's `agent:` settings", and
    # the pinned signature was not counted.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config, tree = _project(tmp_path, "crm", then="agent:\n  pinned: [crm.update_record]\n")
    capsys.readouterr()
    assert main(["agent", "Read the Northwind deal", "--tree", str(tree), "--dry-run", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == _reading(config, tree)
    (recorded,) = json.loads(out)["modes"]
    assert main(["agent", "Read the Northwind deal", "--tree", str(tree), "--dry-run", "--json", "--config",
                 str(config)]) == 0  # fmt: skip
    (named,) = json.loads(capsys.readouterr().out)["modes"]
    assert recorded == named

    copy = tmp_path / "elsewhere" / "tree"  # copied away: the file it records is not there; as before, none is read
    shutil.copytree(tree, copy)
    assert main(["agent", "Read the Northwind deal", "--tree", "tree", "--dry-run", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("tooltree: no tooltree.yaml here: the dry run counts the tree alone")
    assert json.loads(out)["modes"][0]["system_tokens"] < recorded["system_tokens"]


def test_serve_from_another_folder_reads_the_config_its_tree_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the file was not read: no passthrough, and every server of the tree "not in the config".
    config, tree = _project(tmp_path, "crm", then="serve:\n  passthrough: [crm.nope]\n")
    capsys.readouterr()
    assert main(["serve", "--tree", str(tree), "--no-regenerate"]) == 2
    err = capsys.readouterr().err
    line = sample_config_yaml("crm").count("\n") + 2
    expected = f"tooltree: error: {config}:{line}: serve.passthrough: passthrough tool 'crm.nope' is not in the tree"
    assert err.startswith(_reading(config, tree) + expected)


def test_serve_that_would_regenerate_the_tree_from_a_recorded_config_that_is_gone_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As generate-tree: the refresh would write the tree from another file (./tooltree.yaml, another project's).
    config, tree = _project(tmp_path, "crm")
    config.rename(config.with_name("moved.yaml"))
    (tmp_path / "elsewhere" / "tooltree.yaml").write_text(sample_config_yaml("docs"), encoding="utf-8")
    capsys.readouterr()
    assert main(["serve", "--tree", str(tree)]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: {tree / 'manifest.json'}: the tree was generated from {config}, which cannot be read (No "
        "such file or directory): pass --config PATH\n"
    )
    assert (tree / "servers" / "crm").is_dir() and not (tree / "servers" / "docs").exists()
