"""Every independent error of a configuration file is reported at once (each with file, line and key), capped; the
errors that make the rest meaningless (YAML syntax, a top level that is no mapping) alone."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

from tool_tree.config import ConfigError, load_config, parse_config
from tooltree_cli.common import config_sections
from tooltree_cli.main import main

THREE_MISTAKES = """\
servers:
  crm:
    command: python
    timout: 30
  drive:
    url: https://drive.example.com/mcp
    timeout: -1
sandbox:
  memory: lots
  cpus: many
"""


def test_every_independent_error_of_a_file_is_reported_at_once_with_its_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_text(THREE_MISTAKES + "agnet:\n  model: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, sections=config_sections())
    assert str(info.value).splitlines() == [
        f"{path}:11: agnet: unknown key (did you mean 'agent'?)",
        f"{path}:9: sandbox.memory: not a size: 'lots' (use e.g. 512m or 2g)",
        f"{path}:10: sandbox.cpus: expected a positive number (a CPU limit; fractions allowed), got 'many'",
        f"{path}:4: servers.crm.timout: unknown key (did you mean 'timeout'?)",
        f"{path}:7: servers.drive.timeout: expected a positive number of seconds, got -1",
    ]
    first = info.value  # the first error's own fields, as a single error has them
    assert (first.line, first.key, first.message) == (11, "agnet", "unknown key (did you mean 'agent'?)")
    assert [(e.line, e.key) for e in first.errors] == [
        (11, "agnet"),
        (9, "sandbox.memory"),
        (10, "sandbox.cpus"),
        (4, "servers.crm.timout"),
        (7, "servers.drive.timeout"),
    ]
    assert str(pickle.loads(pickle.dumps(first))) == str(copy.copy(first)) == str(first)


def test_a_duplicate_key_and_each_unknown_key_of_one_server_are_reported_with_its_other_errors() -> None:
    text = "servers:\n  a:\n    command: x\n    argz: []\n    timeout: no\n    enviro: {}\n  a:\n    command: y\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="t.yaml")
    assert str(info.value).splitlines() == [
        "t.yaml:7: servers.a: duplicate key",
        "t.yaml:4: servers.a.argz: unknown key (did you mean 'args'?)",
        "t.yaml:6: servers.a.enviro: unknown key (did you mean 'env'?)",
        "t.yaml:5: servers.a.timeout: expected a positive number of seconds, got False",
    ]


@pytest.mark.parametrize("key", ["envFile: .env", "type: http", "disabled: true"])
def test_an_unknown_key_of_a_server_is_not_read_as_another_formats_key(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"servers:\n  a:\n    command: x\n    {key}\n", source="t.yaml", folder="/nonexistent")
    assert len(info.value.errors) == 1 and str(info.value).startswith(f"t.yaml:4: servers.a.{key.split(':')[0]}: ")


def test_past_twenty_errors_the_rest_are_counted() -> None:
    text = "servers:\n" + "".join(f"  s{i}:\n    command: x\n    bad: 1\n" for i in range(25))
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="t.yaml")
    lines = str(info.value).splitlines()
    assert lines[:2] == ["t.yaml:4: servers.s0.bad: unknown key", "t.yaml:7: servers.s1.bad: unknown key"]
    assert lines[19:] == ["t.yaml:61: servers.s19.bad: unknown key", "and 5 more errors"]
    assert len(info.value.errors) == 25


def test_a_file_of_thousands_of_mistakes_stops_at_a_thousand_errors() -> None:
    text = "servers:\n  a:\n" + "    k: 1\n" * 5000
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="t.yaml")
    assert len(info.value.errors) == 1000
    assert str(info.value).splitlines()[-1] == "and 980 more errors (reading stopped at 1,000)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("servers:\n  a: {command: x, bad: 1}\n  b: [\n", "t.yaml:4: invalid YAML: "),
        ("- servers\n- sandbox\n", "t.yaml:1: expected a mapping at the top level, got a list"),
    ],
)
def test_an_error_that_makes_the_rest_meaningless_is_reported_alone(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="t.yaml")
    assert len(str(info.value).splitlines()) == 1 and str(info.value).startswith(expected)


def test_a_misspelt_servers_key_is_one_error_not_two() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("server:\n  a: {command: x}\n", source="t.yaml")
    assert str(info.value) == "t.yaml:1: server: unknown key (did you mean 'servers'?)"


@pytest.mark.parametrize(
    ("entry", "said"),
    [("comand: x", "comand: unknown key (did you mean 'command'?)"),
     ("httpUrl: https://a.example/mcp", "httpUrl: unknown key (Gemini CLI's name of it: write `url`)")],
)  # fmt: skip
def test_a_misspelt_command_or_url_is_one_error_not_two(entry: str, said: str) -> None:
    # Before: a second line of the one mistake, "servers.a: server needs `command` (stdio) or `url` (HTTP)".
    with pytest.raises(ConfigError) as info:
        parse_config(f"servers:\n  a:\n    {entry}\n  b:\n    argz: []\n", source="t.yaml")
    assert str(info.value).splitlines() == [
        f"t.yaml:3: servers.a.{said}",
        "t.yaml:5: servers.b.argz: unknown key (did you mean 'args'?)",
        "t.yaml:5: servers.b: server needs `command` (stdio) or `url` (HTTP)",
    ]


def test_generate_tree_prints_every_error_of_its_config_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_text(THREE_MISTAKES, encoding="utf-8")
    code = main(["generate-tree", "--config", str(path), "--out", str(tmp_path / "tree"), "--embeddings", "off"])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tooltree: error: {path}:9: sandbox.memory: not a size: 'lots' (use e.g. 512m or 2g)",
        f"{path}:10: sandbox.cpus: expected a positive number (a CPU limit; fractions allowed), got 'many'",
        f"{path}:4: servers.crm.timout: unknown key (did you mean 'timeout'?)",
        f"{path}:7: servers.drive.timeout: expected a positive number of seconds, got -1",
    ]
    assert not (tmp_path / "tree").exists()
