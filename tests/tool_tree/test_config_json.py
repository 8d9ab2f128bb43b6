"""A JSON configuration larger than a YAML one may be (a ``~/.claude.json`` grown with Claude Code's history)
has its ``mcpServers`` read alone, with the file's lines and within the reader's bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tool_tree.config import (
    MAX_CONFIG_BYTES,
    MAX_DEPTH,
    MAX_JSON_CONFIG_BYTES,
    ConfigError,
    load_config,
    parse_config,
    setting_named,
)


def claude_json(servers: dict[str, object], *, history_bytes: int = MAX_CONFIG_BYTES + 3_000_000) -> str:
    """Text like a ``~/.claude.json``: indented, a large ``projects`` history before ``mcpServers`` and keys after."""
    entry = {"display": "fix the failing test in ünïcode 日本語 " * 4, "pastedContents": {}}
    per_project = len(json.dumps([entry] * 50, indent=2, ensure_ascii=False))
    projects = {
        f"/home/user/project{i}": {"history": [entry] * 50, "mcpServers": {}, "allowedTools": []}
        for i in range(history_bytes // per_project + 1)
    }
    doc = {"numStartups": 412, "projects": projects, "mcpServers": servers, "oauthAccount": {"email": "u@x"}}
    return json.dumps(doc, indent=2, ensure_ascii=False)


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_a_claude_json_over_the_yaml_limit_is_read_with_its_servers(tmp_path: Path) -> None:
    # Before: refused, "too large: 5,1xx,xxx bytes, over the 2 MiB a configuration may have".
    path = tmp_path / ".claude.json"
    text = claude_json({"fs": {"command": "npx", "args": ["-y", "fs"]}, "web": {"type": "http", "url": "http://h/mcp"}})
    path.write_text(text, encoding="utf-8")
    assert path.stat().st_size > MAX_CONFIG_BYTES + 2_000_000
    config = load_config(path, environ={})
    assert [(s.name, s.transport) for s in config.servers] == [("fs", "stdio"), ("web", "http")]
    assert config.servers[0].args == ("-y", "fs") and config.sections == {}


def test_an_error_in_the_mcp_servers_of_a_large_claude_json_names_its_line_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    text = claude_json({"fs": {"command": "npx", "args": "-y fs"}})
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    line = line_of(text, '"args": "-y fs"')
    assert line > 50_000
    assert str(info.value) == f"{path}:{line}: mcpServers.fs.args: expected a list of strings, got str '-y fs'"


def test_a_problem_the_reader_finds_in_mcp_servers_names_the_line_of_the_file() -> None:
    # The value is read alone; the reader counts its lines from where it starts in the file.
    text = '{"history": [1,\n 2],\n   "mcpServers": {"a": {"command": "x",\n "args": ["x"]}, "a": {}}}'
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=".mcp.json", environ={})
    assert str(info.value) == ".mcp.json:4: mcpServers.a: duplicate key"
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    with pytest.raises(ConfigError) as info:
        parse_config('{"h": 1,\n\n "mcpServers": {"a": {"command": "x", "args": ' + deep + "}}}", environ={})
    assert info.value.line == 3 and info.value.message.startswith("nested too deep: more than 64 levels")


def test_the_rest_of_a_json_config_is_checked_to_be_json_and_its_errors_name_the_line() -> None:
    text = '{\n  "mcpServers": {},\n  "projects": {"a": [1, 2,]}\n}\n'
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=".claude.json", environ={})
    assert str(info.value) == ".claude.json:3: invalid JSON: Expecting value (column 27)"
    for bad, problem in [
        ('{"mcpServers": {}} x', "Extra data (column 20)"),
        ('{"mcpServers": {} "a": 1}', "Expecting ',' delimiter (column 19)"),
        ('{"mcpServers" {}}', "Expecting ':' delimiter (column 15)"),
        ('{"mcpServers": {}, }', "Expecting property name enclosed in double quotes (column 20)"),
    ]:
        with pytest.raises(ConfigError) as info:
            parse_config(bad, source=".mcp.json", environ={})
        assert str(info.value) == f".mcp.json:1: invalid JSON: {problem}", bad


def test_other_keys_of_a_json_config_are_ignored_however_many_values_or_levels_they_hold() -> None:
    # Before: they went through the YAML reader and counted against its bounds (this history of 0.5 MB and
    # 240,000 values was refused: "more than 200,000 values"), and a key repeated among them was an error.
    history = json.dumps({"h": [[1, 2, 3]] * 60_000}, separators=(",", ":"))
    text = '{"projects": ' + history + ', "x": 1, "x": 2, "mcpServers": {"a": {"command": "x"}}}'
    assert len(text) < MAX_CONFIG_BYTES
    assert [s.name for s in parse_config(text, environ={}).servers] == ["a"]
    nested = "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)
    assert parse_config('{"mcpServers": {}, "n": ' + nested + "}", environ={}).servers == ()


def test_a_json_config_without_mcp_servers_or_with_two_says_so() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('\n{"servers": {}}', source=".mcp.json", environ={})
    assert str(info.value) == ".mcp.json:2: expected a top-level `mcpServers` object"
    with pytest.raises(ConfigError) as info:
        parse_config('{"mcpServers": {},\n "mcpServers": {}}', source=".mcp.json", environ={})
    assert str(info.value) == ".mcp.json:2: mcpServers: duplicate key"


@pytest.mark.parametrize(
    ("source", "text", "expected"),
    [
        (".mcp.json", "", ".mcp.json: the file is empty; expected a JSON object with `mcpServers`"),
        (
            ".vscode/mcp.json",
            "// servers to come\n",
            ".vscode/mcp.json: the file is empty; expected a JSON object with `mcpServers`, `servers` or "
            "`context_servers`",
        ),
        (
            ".mcp.json",
            '{"mcpServers": {\n " ": {"command": "x"}}}',
            ".mcp.json:2: mcpServers: server names must not be empty",
        ),
        (".mcp.json", "null\n", ".mcp.json: the file holds null; expected a JSON object with `mcpServers`"),
    ],
    ids=["empty", "comments-alone", "blank-name", "null"],
)
def test_a_json_file_with_nothing_in_it_is_told_so_in_its_own_terms(source: str, text: str, expected: str) -> None:
    # Before: "expected a `servers:` mapping" (tooltree.yaml's, for an empty file and for `null`), "invalid JSON:
    # Expecting value (column 1)", and `servers` named for a blank name in `mcpServers`.
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=source, environ={})
    assert str(info.value) == expected


def test_a_value_deeper_than_the_json_scanner_goes_is_refused_naming_where_it_passes_the_depth_limit() -> None:
    text = '{"mcpServers": {},\n "projects":\n ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=".claude.json", environ={})
    assert str(info.value).startswith(".claude.json:3: nested too deep: more than 64 levels")


def test_mcp_servers_over_the_yaml_limit_are_refused_naming_their_line() -> None:
    # Before: 5.5 MB of .mcp.json with 200,000 servers was read (30 s, 792 MB).
    servers = {f"s{i}": {"command": "x"} for i in range(MAX_CONFIG_BYTES // 20)}
    text = '{"other": 1,\n "mcpServers": ' + json.dumps(servers) + "}"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=".mcp.json", environ={})
    size = len(json.dumps(servers))
    assert str(info.value) == (
        f".mcp.json:2: mcpServers: too large: {size:,} characters, over the 2 MiB its servers may have"
        " (10,000 servers take about 1.1 MiB)"
    )


def test_a_json_file_over_the_json_limit_is_refused_unread_naming_the_limit(tmp_path: Path) -> None:
    path = tmp_path / ".claude.json"
    with path.open("wb") as f:  # sparse: no 128 MiB written
        f.write(b'{"mcpServers": {}, "history": "')
        f.truncate(MAX_JSON_CONFIG_BYTES + 1)
    path.chmod(0o200)  # write-only: opening it would be "cannot read" (unless root), so this shows it is not opened
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == (
        f"{path}: too large: {MAX_JSON_CONFIG_BYTES + 1:,} bytes, over the 128 MiB a JSON configuration may have"
        f" (and 2 MiB its mcpServers); to keep its servers alone: jq '{{mcpServers}}' {path} > .mcp.json"
    )


def test_servers_claude_code_keeps_for_the_working_folder_are_read_with_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `claude mcp add` adds a server to the folder it is run in by default (its local scope), under
    # projects[<folder>].mcpServers. Before: not read: a file with only those was refused ("expected a top-level
    # `mcpServers` object"), and beside a user-scope server they were left out without a word.
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    local = {"time": {"command": "mcp-server-time"}, "fs": {"command": "local-fs", "args": ["--here"]}}
    projects = {"/elsewhere": {"mcpServers": {"other": {"command": "x"}}}, str(project): {"mcpServers": local}}
    doc = {"projects": projects, "mcpServers": {"fs": {"command": "user-fs"}, "mem": {"command": "mem"}}}
    path = tmp_path / ".claude.json"
    text = json.dumps(doc, indent=2)
    path.write_text(text, encoding="utf-8")
    monkeypatch.chdir(project / "src")  # below the project's folder, as Claude Code is run from anywhere in it
    config = load_config(path, environ={})
    assert [(s.name, s.command, s.args) for s in config.servers] == [
        ("fs", "local-fs", ("--here",)),  # the local one wins, as in Claude Code
        ("mem", "mem", ()),
        ("time", "mcp-server-time", ()),
    ]
    path.write_text(text.replace('"local-fs"', '["local-fs"]'), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    local_key = f"projects[{json.dumps(str(project))}].mcpServers"  # where the user finds it (before: mcpServers.fs)
    assert str(info.value).startswith(f"{path}:{line_of(text, 'local-fs')}: {local_key}.fs.command: expected")
    del doc["mcpServers"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert [s.name for s in load_config(path, environ={}).servers] == ["time", "fs"]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == (
        f"{path}:1: expected a top-level `mcpServers` object, or one in `projects` for this folder "
        f"({tmp_path.resolve()}) or one above it: Claude Code keeps a server `claude mcp add` added (its local "
        "scope) under the folder it was added in; run tooltree there, or add the server with `--scope user`"
    )


def test_a_project_scope_server_is_named_as_the_claude_json_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a server of projects["/folder"].mcpServers was named mcpServers.NAME in errors and messages, a key the
    # file does not have (or a user-scope server's of the same name).
    project = tmp_path / "app"
    project.mkdir()
    local: dict[str, Any] = {"crm": {"command": "crm-server", "timeout": 5}}
    doc = {"mcpServers": {"mem": {"command": "mem"}}, "projects": {str(project): {"mcpServers": local}}}
    path = tmp_path / ".claude.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    monkeypatch.chdir(project)
    config = load_config(path, environ={}, using=["crm", "mem"])
    where = f"projects[{json.dumps(str(project))}].mcpServers"
    assert setting_named(config.server("crm"), "timeout", ".claude.json", default=True) == (
        f"{where}.crm.timeout in .claude.json, default 30"
    )
    assert setting_named(config.server("crm"), "env.TOKEN") == f"{where}.crm.env.TOKEN"
    assert setting_named(config.server("mem"), "command") == "mcpServers.mem.command"  # the user's scope
    local["crm"]["timeout"] = "soon"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.key == f"{where}.crm.timeout"
    doc["projects"] = {str(project): {"mcpServers": ["not", "a", "mapping"]}}
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.key == where and "expected a mapping of server names" in str(info.value)
