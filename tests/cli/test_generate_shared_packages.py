"""`generate-tree` of a config whose server names map to one package (``my.docs`` and ``my/docs``: ``my_docs``)
warns, naming the servers and the package each got (`tooltree_cli.generate_cmd.shared_packages`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import sample_config_yaml
from tool_tree.tree import Manifest
from tooltree_cli.main import main


def _generate(config: Path, out: Path, *extra: str) -> int:
    return main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", *extra])


def test_two_servers_of_one_package_name_are_a_warning_naming_each_ones_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: both accepted as my_docs and my_docs_2 in silence; a script could not tell which was which.
    config, out = tmp_path / "tooltree.yaml", tmp_path / "tree"
    text = sample_config_yaml("docs", "crm").replace("  docs:\n", "  my.docs:\n").replace("  crm:\n", "  my/docs:\n")
    config.write_text(text, encoding="utf-8")
    assert _generate(config, out) == 0  # a warning, not an error: such a config worked, and keeps working
    said = (
        "servers 'my.docs' and 'my/docs' map to the same package, my_docs: 'my.docs' is servers.my_docs, 'my/docs' "
        f"is servers.my_docs_2; rename one in {config} for packages a script tells apart by name"
    )
    assert f"warning: {said}\n" in capsys.readouterr().err
    assert {s.name: s.package for s in Manifest.load(out).servers} == {"my.docs": "my_docs", "my/docs": "my_docs_2"}
    assert _generate(config, out, "--check", "--json") == 0  # said by every run, --check too
    assert json.loads(capsys.readouterr().out)["warnings"] == [said]


def test_one_server_whose_name_is_not_its_package_is_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, out = tmp_path / "tooltree.yaml", tmp_path / "tree"
    config.write_text(sample_config_yaml("docs", "crm").replace("  docs:\n", "  my.docs:\n"), encoding="utf-8")
    assert _generate(config, out, "--json") == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    assert {s.name: s.package for s in Manifest.load(out).servers} == {"my.docs": "my_docs", "crm": "crm"}
