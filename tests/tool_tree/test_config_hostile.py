"""Configs too deep, too large or too long are refused with a `ConfigError` naming the file (and line) before
they cost the reader much: no RecursionError, no minutes of parsing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tool_tree.config_compose as config_compose
from tool_tree.config import MAX_CONFIG_BYTES, MAX_DEPTH, MAX_DESCRIPTION, ConfigError, load_config, parse_config


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="tooltree.yaml", environ={})
    return info.value


TOO_DEEP = f"nested too deep: more than {MAX_DEPTH} levels of mappings and lists (tooltree's settings go 4 deep)"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        # Before: RecursionError, exit 1 (20,000 `[` in YAML; a .mcp.json nested 100,000 deep).
        ("servers: {}\nsandbox:\n  pip_packages: " + "[" * 20_000 + "]" * 20_000 + "\n", 3),
        ('{"mcpServers": {"x": {"command": "a", "args": ' + "[" * 100_000 + "]" * 100_000 + "}}}", 1),
        ('{"mcpServers":\n {"x": {"command": "a", "args": ' + "[" * 500 + "]" * 500 + "}}}", 2),  # json.loads takes it
        ("servers:\n  x:\n    command: a\n    args:\n" + "".join("  " * (i + 3) + "-\n" for i in range(200)), 66),
    ],
    ids=["yaml-flow", "json-deeper-than-its-parser", "json", "yaml-block"],
)
def test_a_config_nested_too_deep_is_a_config_error_naming_file_and_line(text: str, line: int) -> None:
    e = error_of(text)
    assert str(e) == f"tooltree.yaml:{line}: {TOO_DEEP}"


def test_aliases_nested_in_aliases_past_the_depth_limit_are_refused_not_recursed() -> None:
    # Each anchor is shallow in the text; expanded, twenty of them nest 40 levels each.
    lines = ["a0: &a0 " + "[" * 40 + "x" + "]" * 40]
    lines += [f"a{i}: &a{i} " + "[" * 40 + f"*a{i - 1}" + "]" * 40 for i in range(1, 20)]
    e = error_of("\n".join(lines) + "\nservers: {}\n")
    assert e.message == TOO_DEEP and e.line is not None


def test_a_config_nested_to_the_limit_is_read_and_one_level_more_refused() -> None:
    def text(lists: int) -> str:  # the top mapping, then `lists` lists inside each other
        return "servers: {}\nextra: " + "[" * lists + "]" * lists + "\n"

    e = error_of(text(MAX_DEPTH - 1))
    assert e.message == "unknown key" and e.key == "extra"  # read whole, then refused for its key alone
    assert error_of(text(MAX_DEPTH)).message == TOO_DEEP


def test_a_yaml_file_over_the_size_limit_is_refused_naming_it_and_the_limit(tmp_path: Path) -> None:
    # Before: a 10 MB YAML took 31 s and 870 MB before the value cap refused it.
    path = tmp_path / "tooltree.yaml"
    text = "servers: {}\n# " + "x" * MAX_CONFIG_BYTES + "\n"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == (
        f"{path}: too large: {len(text):,} bytes, over the 2 MiB a configuration may have"
        " (10,000 servers take about 1.1 MiB)"
    )
    with pytest.raises(ConfigError, match="too large: 2,097,153 characters, over the 2 MiB"):
        parse_config("#" * (MAX_CONFIG_BYTES + 1), environ={})


def test_a_file_just_within_the_size_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    text = json.dumps({"mcpServers": {"a": {"command": "x"}}, "history": ""})
    path.write_text(text[:-2] + "x" * (MAX_CONFIG_BYTES - len(text)) + '"}', encoding="utf-8")
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert [s.name for s in load_config(path, environ={}).servers] == ["a"]


def test_more_values_than_the_composer_may_build_are_refused_before_the_rest_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(config_compose, "MAX_NODES", 1000)
    e = error_of("servers: {}\nsandbox:\n  pip_packages:\n" + "    - a\n" * 2000)
    assert str(e) == "tooltree.yaml:997: the file holds more than 1,000 values"


def test_a_description_over_the_limit_is_refused_naming_file_line_and_key() -> None:
    # Before: a 50 MB description was accepted and copied into INDEX.md, the manifest and the search index.
    ok = parse_config(f"servers:\n  a:\n    command: x\n    description: {'d' * MAX_DESCRIPTION}\n", environ={})
    assert len(ok.servers[0].description) == MAX_DESCRIPTION
    e = error_of(f"servers:\n  a:\n    command: x\n    description: {'d' * (MAX_DESCRIPTION + 1)}\n")
    assert str(e) == (
        "tooltree.yaml:4: servers.a.description: 2,001 characters; at most 2,000"
        " (one line saying what the server is for)"
    )
