from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tool_tree.config import SECTIONS as SECTIONS_BY_DEFAULT
from tool_tree.config import ConfigError, Setting, load_config, parse_config, unmatched_filter

GOOD = """\
servers:
  crm:
    command: python
    args: [servers/crm.py, "--token=${CRM_TOKEN}"]
    env: {LEVEL: "${LEVEL:-info}"}
    timeout: 5
    include: ["search_*"]
  drive:
    url: https://drive.example/mcp
    headers: {Authorization: "Bearer ${DRIVE_TOKEN}"}
    enabled: false
"""


def error_of(text: str, **kw: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="tooltree.yaml", environ={}, **kw)  # type: ignore[arg-type]
    return info.value


def test_yaml_config_expands_variables_and_reads_every_key() -> None:
    config = parse_config(GOOD, source="tooltree.yaml", environ={"CRM_TOKEN": "s3cret", "DRIVE_TOKEN": "t"})
    crm, drive = config.servers
    assert crm.command == "python"
    assert crm.args == ("servers/crm.py", "--token=s3cret")
    assert crm.env == {"LEVEL": "info"}
    assert crm.timeout == 5.0
    assert crm.include == ("search_*",)
    assert crm.transport == "stdio"
    assert drive.url == "https://drive.example/mcp"
    assert drive.headers == {"Authorization": "Bearer ${DRIVE_TOKEN}"}  # disabled: its variables are not looked up
    assert drive.transport == "http"
    assert [s.name for s in config.enabled_servers] == ["crm"]
    assert crm.protocol == drive.protocol == "auto"
    legacy = parse_config("servers:\n  a: {command: x, protocol: legacy}\n", source="tooltree.yaml", environ={})
    assert legacy.servers[0].protocol == "legacy"


def test_missing_variable_is_named_with_file_line_and_key() -> None:
    e = error_of(GOOD.replace("${DRIVE_TOKEN}", "x"))
    assert str(e) == "tooltree.yaml:4: servers.crm.args[1]: environment variable ${CRM_TOKEN} is not set"
    assert e.line == 4


def test_unknown_key_suggests_the_right_one() -> None:
    e = error_of("servers:\n  a:\n    command: x\n    timout: 3\n")
    assert str(e) == "tooltree.yaml:4: servers.a.timout: unknown key (did you mean 'timeout'?)"


def test_unknown_top_level_key_is_an_error() -> None:
    e = error_of("server:\n  a: {command: x}\n", sections={})
    assert "server: unknown key (did you mean 'servers'?)" in str(e)
    assert e.line == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("servers:\n  a:\n    command: x\n    timeout: soon\n", "4: servers.a.timeout: expected a positive number"),
        ("servers:\n  a:\n    command: x\n    timeout: -1\n", "4: servers.a.timeout: expected a positive number"),
        ("servers:\n  a:\n    command: x\n    args: x.py\n", "4: servers.a.args: expected a list of strings"),
        ("servers:\n  a:\n    args: [x]\n", "3: servers.a: server needs `command` (stdio) or `url` (HTTP)"),
        ("servers:\n  a: {command: x, url: 'http://h'}\n", "2: servers.a: server has both `command` and `url`"),
        ("servers:\n  a: {url: 'ftp://h'}\n", "2: servers.a.url: expected an http:// or https:// URL"),
        ("servers:\n  a: {url: 'http://h', args: [x]}\n", "servers.a.args: `args` only applies to `command` servers"),
        ("servers:\n  a: {command: x, enabled: yes please}\n", "servers.a.enabled: expected true or false"),
        ("servers:\n  a: {command: x}\n  a: {command: y}\n", "3: servers.a: duplicate key"),
        ("servers: [a, b]\n", "1: servers: expected a mapping of server names, got a list"),
        ("servers:\n  a: {command: [x\n", "invalid YAML"),
        ("", "the file is empty"),
        ("---\n", "tooltree.yaml: the file holds no settings; expected a `servers:` mapping"),
        ("# servers to come\n---\n...\n", "tooltree.yaml: the file holds no settings"),
    ],
)
def test_invalid_config_gives_one_precise_line(text: str, expected: str) -> None:
    message = str(error_of(text))
    assert expected in message
    assert message.startswith("tooltree.yaml")
    assert "\n" not in message


def test_mcp_servers_json_is_read_unchanged_and_foreign_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        '{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"], "alwaysAllow": ["read"]},\n'
        '  "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}},\n'
        '  "off": {"command": "y", "disabled": true}},\n'
        ' "projects": {"/home": {}}, "theme": "dark"}\n',
        encoding="utf-8",
    )
    config = load_config(path, environ={})
    assert [(s.name, s.transport, s.enabled) for s in config.servers] == [
        ("fs", "stdio", True),
        ("web", "http", True),
        ("off", "stdio", False),
    ]
    assert config.servers[0].args == ("-y", "x")


def test_a_client_config_that_lists_tooltree_itself_leaves_that_entry_out_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # `claude mcp add --scope project` writes tooltree into the .mcp.json that `--config` reads: before, serve
    # started a copy of itself to list it, and scripts could call that copy's execute_python through the bridge.
    path = tmp_path / ".mcp.json"
    path.write_text(
        '{"mcpServers": {\n'
        '  "fs": {"command": "npx", "args": ["-y", "x"]},\n'
        '  "tooltree": {"command": "/u/tooltree/.venv/bin/tooltree", "args": ["serve", "--config", ".mcp.json"]},\n'
        '  "tt-module": {"command": "python3.11", "args": ["-m", "tooltree_cli.main", "serve"]},\n'
        '  "tt-search": {"command": "tooltree", "args": ["search", "x"]}}}\n',
        encoding="utf-8",
    )
    config = load_config(path, environ={})
    assert [s.name for s in config.servers] == ["fs", "tt-search"]  # only a `serve` is tooltree proxying itself
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:3: tooltree starts `tooltree serve` itself; it is left out (tooltree would list and proxy a copy "
        "of itself)",
        f"{path}:4: tt-module starts `tooltree serve` itself; it is left out (tooltree would list and proxy a copy "
        "of itself)",
    ]


def test_a_json_config_is_read_as_json_reads_it_emoji_escapes_and_unicode_line_breaks(tmp_path: Path) -> None:
    # Read by a YAML reader, Python's json.dump of an emoji ("\\ud83d\\ude00") was two lone surrogates (the
    # server then failed: "surrogates not allowed"), a raw U+2028 in a key a syntax error, a NEL in a value a space.
    import json

    path = tmp_path / ".mcp.json"
    servers = {"emoji\U0001f600": {"command": "x", "args": ["\U0001f600", "\\ud83d"]}, "a\u2028b": {"command": "y"},
               "nel": {"command": "z", "args": ["p\x85q", "r\u2029s"]}}  # fmt: skip
    for ascii_only in (True, False):
        path.write_text(json.dumps({"mcpServers": servers}, ensure_ascii=ascii_only, indent=1), encoding="utf-8")
        config = load_config(path, environ={})
        assert {s.name: s.args for s in config.servers} == {k: tuple(v.get("args", ())) for k, v in servers.items()}


@pytest.mark.parametrize(
    ("name", "key", "extra"),
    [
        (".mcp.json", "mcpServers", {}),
        (".vscode/mcp.json", "servers", {"inputs": []}),
        (".zed/settings.json", "context_servers", {"theme": "One Dark"}),
        ("tooltree.json", "servers", {"agent": {"pinned": ["a.b"]}}),
    ],
)
def test_a_json_config_indented_with_tabs_is_read_and_its_errors_name_their_line(
    tmp_path: Path, name: str, key: str, extra: dict[str, object]
) -> None:
    # Before: every one was "invalid YAML: found character '\t' that cannot start any token" (json.dump's
    # indent="\t", Go's encoders and many editors write tabs; JSON takes them as white space).
    import json

    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    doc = {key: {"a": {"command": "x", "args": ["-v"]}}, **extra}
    path.write_text(json.dumps(doc, indent="\t").replace(",\n", ",\t\n"), encoding="utf-8")
    assert [(s.name, s.args) for s in load_config(path, environ={}).servers] == [("a", ("-v",))]
    path.write_text(json.dumps({**doc, key: {"a": {"command": "x", "args": "-v"}}}, indent="\t"), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:5: {key}.a.args: expected a list of strings, got str '-v'"


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "claude.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: invalid JSON")


def test_json_type_error_names_the_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / ".mcp.json"
    path.write_text(
        '{\n  "mcpServers": {\n    "a": {"command": "x",\n          "args": "nope"}\n  }\n}\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r":4: mcpServers\.a\.args: expected a list of strings"):
        load_config(path, environ={})


def test_an_entry_tooltree_cannot_connect_to_is_left_out_with_a_warning_and_the_others_are_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: one SSE entry made the whole client config an error, even for `--server` naming another.
    text = (
        '{"mcpServers": {\n  "a": {"type": "sse", "url": "http://h/sse"},\n  "b": {"command": "x"},\n'
        '  "c": {"type": "websocket", "url": "ws://h/"},\n  "d": {"type": "http", "url": "http://h/mcp"}\n}}'
    )
    config = parse_config(text, source=".mcp.json", environ={})
    assert [s.name for s in config.servers] == ["b", "d"]
    assert caplog.messages == [
        ".mcp.json:2: mcpServers.a.type: an SSE server, which tooltree does not connect to (use its Streamable HTTP "
        "endpoint); the server is left out",
        ".mcp.json:4: mcpServers.c.type: 'websocket' is not a type tooltree knows; the server is left out",
    ]


def test_a_type_its_entry_contradicts_is_said(caplog: pytest.LogCaptureFixture) -> None:
    # Before: `"type": "http"` on an entry with a command alone (or `"stdio"` with a URL alone) was not a word.
    text = (
        '{"mcpServers": {\n  "a": {"type": "http", "command": "x"},\n  "b": {"type": "stdio", "url": "http://h/mcp"},'
        '\n  "c": {"type": "http", "url": "http://h/mcp"}}}'
    )
    a, b, c = parse_config(text, source=".mcp.json", environ={}).servers
    assert (a.transport, b.transport, c.transport) == ("stdio", "http", "http")
    assert caplog.messages == [
        ".mcp.json:2: mcpServers.a.type: 'http', but the entry has `command` and no `url`; tooltree starts the command",
        ".mcp.json:3: mcpServers.b.type: 'stdio', but the entry has `url` and no `command`; tooltree connects to "
        "the URL",
    ]


def test_a_json_config_reads_tooltrees_own_keys_and_warns_of_a_misspelt_one(caplog: pytest.LogCaptureFixture) -> None:
    # Before: `concurrency`, `include`, `exclude` and `description` were dropped without a word (the memory server
    # then lost entities to concurrent calls), and a misspelt `arsg` ran the server without its arguments.
    text = """{"mcpServers": {
  "memory": {"command": "mcp-server-memory", "concurrency": 1, "include": ["read_*"], "exclude": ["read_x"],
             "description": "what we know", "protocol": "legacy", "timeout": 9, "autoApprove": ["read_graph"]},
  "fs": {"command": "mcp-server-filesystem",
         "arsg": ["/data"],
         "enabled": false}
}}"""
    memory, fs = parse_config(text, source="claude.json", environ={}).servers
    assert (memory.concurrency, memory.include, memory.exclude) == (1, ("read_*",), ("read_x",))
    assert (memory.description, memory.protocol, memory.timeout) == ("what we know", "legacy", 9.0)
    assert fs.args == () and fs.enabled
    assert caplog.messages == [  # `autoApprove` (another client's key) is ignored without a word
        "claude.json:5: mcpServers.fs.arsg: not a key tooltree reads; ignored (did you mean 'args'?)",
        "claude.json:6: mcpServers.fs.enabled: not a key tooltree reads; ignored (did you mean 'disabled'?)",
    ]
    bad = error_of('{"mcpServers": {"a": {"command": "x", "concurrency": 0}}}')
    assert "1: mcpServers.a.concurrency: expected" in str(bad)


def test_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml")


def test_a_config_that_is_a_link_to_a_missing_file_says_so(tmp_path: Path) -> None:
    # Before: "tooltree.yaml: no such file", of a file `ls` lists (a dotfile manager's link to a file moved away).
    (tmp_path / "tooltree.yaml").symlink_to(tmp_path / "moved" / "tooltree.yaml")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "tooltree.yaml")
    assert info.value.message == f"a link to {str(tmp_path / 'moved' / 'tooltree.yaml')!r}, which does not exist"
    assert isinstance(info.value.__cause__, FileNotFoundError)  # the CLI says what to do, as for a missing file


def test_cwd_is_relative_to_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_text("servers:\n  a: {command: x, cwd: sub}\n", encoding="utf-8")
    assert load_config(path, environ={}).servers[0].cwd == str((tmp_path / "sub").resolve())


def test_dollar_dollar_is_a_literal_dollar() -> None:
    config = parse_config("servers:\n  a: {command: x, args: ['$${HOME}']}\n", environ={})
    assert config.servers[0].args == ("${HOME}",)


SECTIONS = {"tool": {"name": Setting(str, "a name"), "tags": Setting(list, "a list of tags")}}


UNREAD = {"tool": None}
"""A section allowed and handed on unread, for its owner to read."""


def test_tooltrees_sections_beside_mcp_servers_in_yaml_are_said_to_be_ignored(caplog: pytest.LogCaptureFixture) -> None:
    # Before: a YAML file of `mcpServers` (another client's format, read as such) dropped `agent:` without a word.
    text = "mcpServers:\n  a:\n    command: x\nagent:\n  pinned: [a.t]\nversion: 1.2.0\n"
    config = parse_config(text, source="clients.yaml", environ={})
    assert [s.name for s in config.servers] == ["a"] and dict(config.sections) == {}
    assert caplog.messages == [  # another program's key (`version`) is that program's: no word of it
        "clients.yaml:4: agent: ignored: beside `mcpServers` (another client's format) only the servers are read; "
        "name them `servers:` (`enabled: false` for `disabled: true`) to have tooltree's settings read"
    ]


def test_sections_are_handed_on_with_the_line_of_each_key() -> None:
    text = "servers: {}\ntool:\n  name: ${WHO}\n  tags: [a, b]\n"
    config = parse_config(text, environ={"WHO": "x"}, sections=UNREAD)
    assert config.section("tool").read(SECTIONS["tool"]) == {"name": "x", "tags": ("a", "b")}
    assert config.section("absent").read(SECTIONS["tool"]) == {}
    bad = parse_config("servers: {}\ntool:\n  nmae: x\n", source="tooltree.yaml", environ={}, sections=UNREAD)
    with pytest.raises(ConfigError) as info:
        bad.section("tool").read(SECTIONS["tool"])
    assert str(info.value) == "tooltree.yaml:3: tool.nmae: unknown key (did you mean 'name'?)"


def test_named_sections_are_checked_while_loading_and_others_refused() -> None:
    e = error_of("servers: {}\ntool:\n  tags: 3\n", sections=SECTIONS)
    assert str(e) == "tooltree.yaml:3: tool.tags: expected a list of tags, got 3"
    e = error_of("servers: {}\ntols:\n  tags: []\n", sections=SECTIONS)
    assert str(e) == "tooltree.yaml:2: tols: unknown key (did you mean 'tool'?)"
    e = error_of("servers: {}\ntool: [code]\n", sections=UNREAD)
    assert str(e) == "tooltree.yaml:2: tool: expected a mapping of tool settings, got a list"


def test_by_default_tooltrees_sections_are_allowed_and_a_misspelt_one_is_an_error() -> None:
    # Before: without `sections=` (the Python API) any section loaded, `agnet:` and all, while the CLI refused it.
    text = "servers: {}\nsandbox:\n  timout: 2\nagnet:\n  mode: code\n"
    assert str(error_of(text)) == "tooltree.yaml:4: agnet: unknown key (did you mean 'agent'?)"
    config = parse_config(text.split("agnet")[0] + "pool: {start_jobs: 2}\nagent: {mode: code}\nserve: {}\n")
    assert sorted(config.sections) == ["agent", "pool", "sandbox", "serve"]
    from sandbox.config import SandboxConfig

    with pytest.raises(ConfigError) as info:  # a section's keys: where its owner reads it
        SandboxConfig.from_config(config)
    assert str(info.value) == "<config>:3: sandbox.timout: unknown key (did you mean 'timeout'?)"


def test_the_default_sections_are_the_ones_the_cli_checks() -> None:
    from tooltree_cli.common import config_sections

    assert sorted(SECTIONS_BY_DEFAULT) == sorted(config_sections())


def test_load_config_checks_the_sections_of_a_file_too(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("servers: {}\nsandbox:\n  timout: 2\nagnet:\n  mode: code\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}:4: agnet: unknown key (did you mean 'agent'?)"
    from tooltree_cli.common import config_sections

    path.write_text("servers: {}\nsandbox:\n  timout: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, sections=config_sections())  # every key at once, as the CLI checks them
    assert str(info.value) == f"{path}:3: sandbox.timout: unknown key (did you mean 'timeout'?)"


def test_sandbox_section_is_read_and_checked_by_the_sandbox_package() -> None:
    from sandbox.config import SandboxConfig
    from tooltree_cli.common import config_sections

    text = "servers: {}\nsandbox:\n  memory: 1g\n  timeout: 60\n  pip_packages: [pandas==2.2.3]\n"
    config = parse_config(text, environ={})
    settings = SandboxConfig.from_config(config)
    assert (settings.memory, settings.timeout, settings.pip_packages) == ("1g", 60.0, ("pandas==2.2.3",))
    e = error_of("servers: {}\nsandbox:\n  memroy: 1g\n", sections=config_sections())
    assert str(e) == "tooltree.yaml:3: sandbox.memroy: unknown key (did you mean 'memory'?)"
    e = error_of("servers: {}\nsandbox:\n  cpus: lots\n", sections=config_sections())
    expected = "expected a positive number (a CPU limit; fractions allowed), got 'lots'"
    assert str(e) == f"tooltree.yaml:3: sandbox.cpus: {expected}"


def test_agent_section_is_read_and_checked_by_the_agent_package() -> None:
    from agent.defaults import agent_settings
    from tooltree_cli.common import config_sections

    text = "servers: {}\nagent:\n  mode: code\n  pinned: [crm.update_record]\n  max_turns: 12\n"
    config = parse_config(text, environ={})
    assert agent_settings(config) == {"mode": "code", "pinned": ("crm.update_record",), "max_turns": 12}
    assert agent_settings(parse_config("servers: {}\n", environ={})) == {}
    e = error_of("servers: {}\nagent:\n  pin: [crm.update_record]\n", sections=config_sections())
    assert str(e) == "tooltree.yaml:3: agent.pin: unknown key (did you mean 'pinned'?)"
    e = error_of("servers: {}\nagent:\n  max_turns: 0\n", sections=config_sections())
    assert str(e) == (
        "tooltree.yaml:3: agent.max_turns: expected a whole number, at least 1 (the most requests per run), got 0"
    )
    e = error_of("servers: {}\nagent:\n  mode: fast\n", sections=config_sections())
    assert str(e) == "tooltree.yaml:3: agent.mode: expected one of code, direct, tool-search, filtered, got 'fast'"
    e = error_of("servers: {}\nagent:\n  prefilter_threshold: 1.5\n", sections=config_sections())
    assert str(e) == "tooltree.yaml:3: agent.prefilter_threshold: a probability above 0 and at most 1, got 1.5"
    e = error_of("servers: {}\nagent:\n  batch_max: 21\n", sections=config_sections())
    assert str(e) == "tooltree.yaml:3: agent.batch_max: at most 20 (the calls of one reply), got 21"
    for key, most in [("max_turns", 100_000), ("max_tokens", 1_000_000), ("token_budget", 10_000_000_000)]:
        e = error_of(f"servers: {{}}\nagent:\n  mode: code\n  {key}: {most * 10}\n", sections=config_sections())
        assert str(e) == f"tooltree.yaml:4: agent.{key}: at most {most:,}, got {most * 10:,}"  # before: taken
    assert agent_settings(parse_config("servers: {}\nagent:\n  max_tokens: 1000000\n", environ={})) == {
        "max_tokens": 1_000_000
    }


def test_relative_command_and_args_resolve_against_the_config_folder(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "tooltree.yaml"
    path.parent.mkdir()
    path.write_text("servers:\n  a: {command: ./bin/srv, args: [s.py]}\n  b: {command: python}\n", encoding="utf-8")
    a, b = load_config(path, environ={}).servers
    assert a.command == str(path.parent.resolve() / "bin" / "srv")
    assert a.cwd == b.cwd == str(path.parent.resolve())  # so relative args open beside the config
    assert a.args == ("s.py",) and b.command == "python"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("servers:\n", "tooltree.yaml:1: servers: expected a mapping of server names, got nothing"),
        ("servers:\n\n\n", "tooltree.yaml:1: servers: expected a mapping of server names, got nothing"),
        ("servers:\n  a:\n", "tooltree.yaml:2: servers.a: expected a mapping with `command` or `url`, got nothing"),
        (
            "servers:\n  a:\n    command: x\n    env:\n",
            "tooltree.yaml:4: servers.a.env: expected a mapping of strings, got nothing",
        ),
        (
            "servers:\n  a:\n    command: x\n    timeout:\n",
            "tooltree.yaml:4: servers.a.timeout: expected a positive number of seconds, got nothing",
        ),
        ("servers: {}\nagent:\n", "tooltree.yaml:2: agent: expected a mapping of agent settings, got nothing"),
        ("servers: {}\ntool:\n  name:\n", "tooltree.yaml:3: tool.name: expected a name, got nothing"),
        (  # docker compose passes such a name on (before: "expected a string, got nothing", and no more)
            "servers:\n  a:\n    command: x\n    env:\n      GITHUB_TOKEN:\n",
            "tooltree.yaml:5: servers.a.env.GITHUB_TOKEN: expected a string, got nothing: a server is given only the "
            "variables its `env` sets (and PATH, HOME and a few more); to pass on tooltree's own GITHUB_TOKEN write "
            'GITHUB_TOKEN: "${GITHUB_TOKEN}", for an empty value GITHUB_TOKEN: ""',
        ),
    ],
)
def test_a_key_with_no_value_names_file_line_and_key(text: str, expected: str) -> None:
    assert str(error_of(text, sections=SECTIONS | {"agent": {}})) == expected


@pytest.mark.parametrize(
    ("source", "text", "written"),
    [
        ("tooltree.yaml", "servers:\n  a:\n    command: x\n    env:\n      - TOKEN=s3cret\n", "TOKEN: …"),
        ("mcp.json", '{"mcpServers": {"a": {"command": "x", "env": ["TOKEN=s3cret"]}}}', '"TOKEN": "…"'),
    ],
)
def test_env_written_as_docker_compose_s_list_says_how_to_write_it_without_its_values(
    source: str, text: str, written: str
) -> None:
    # Before: "expected a mapping of strings, got a list", and no more.
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=source, environ={})
    assert str(info.value).endswith(
        f"a.env: expected a mapping of strings, got a list of NAME=value: write each as a key of `env`, {written}, "
        "not TOKEN=…"
    )
    assert "s3cret" not in str(info.value)


def test_an_env_variable_of_null_in_a_json_file_says_how_to_pass_tooltrees_own_on_in_json() -> None:
    text = '{"mcpServers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": null}}}}'
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="mcp.json", environ={})
    e = info.value
    assert str(e).startswith("mcp.json:1: mcpServers.gh.env.GITHUB_TOKEN: expected a string, got nothing: a server is")
    assert str(e).endswith('write "GITHUB_TOKEN": "${GITHUB_TOKEN}", for an empty value "GITHUB_TOKEN": ""')


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!foo x", "invalid YAML: could not determine a constructor for the tag '!foo'"),
        ("!!int soon", "invalid YAML: 'soon' is not a valid !!int"),
        ("!!float x", "invalid YAML: 'x' is not a valid !!float"),
        ("!!timestamp x", "invalid YAML: 'x' is not a valid !!timestamp"),
        ("!!bool maybe", "invalid YAML: 'maybe' is not a valid !!bool"),
        ("{a: 1}", "expected a positive number of seconds, got a mapping"),
        ("[1]", "expected a positive number of seconds, got a list"),
    ],
)
def test_a_value_the_loader_cannot_take_names_file_line_and_key(value: str, expected: str) -> None:
    e = error_of(f"servers:\n  a:\n    command: x\n    timeout: {value}\n")
    assert str(e) == f"tooltree.yaml:4: servers.a.timeout: {expected}"


def test_plain_values_keep_their_yaml_types() -> None:
    text = "servers: {}\ntool:\n  name: ~\n  tags: [1, 0x1f, .5, yes, null, '', 2020-01-02]\n"
    values = parse_config(text, environ={}, sections=UNREAD).section("tool").values
    assert values["name"] is None
    assert values["tags"][:6] == [1, 31, 0.5, True, None, ""]
    assert str(values["tags"][6]) == "2020-01-02"


def test_a_settings_own_check_names_file_line_and_key() -> None:
    def even(value: object) -> str | None:
        return None if isinstance(value, int) and value % 2 == 0 else f"expected an even number, got {value!r}"

    sections = {"tool": {"count": Setting(int, "a count", check=even), "rate": Setting(float, "a rate")}}
    config = parse_config("servers: {}\ntool:\n  count: 4\n", environ={}, sections=sections)
    assert config.section("tool").read(sections["tool"]) == {"count": 4}
    e = error_of("servers: {}\ntool:\n  rate: 1\n  count: 3\n", sections=sections)
    assert str(e) == "tooltree.yaml:4: tool.count: expected an even number, got 3"
    assert (e.file, e.line, e.key) == ("tooltree.yaml", 4, "tool.count")


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf", "0"])
def test_a_float_setting_must_be_positive_and_finite(value: str) -> None:
    sections = {"tool": {"rate": Setting(float, "a rate")}}
    e = error_of(f"servers: {{}}\ntool:\n  rate: {value}\n", sections=sections)
    assert str(e).startswith("tooltree.yaml:3: tool.rate: expected a positive number (a rate), got ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("servers:\n  a:\n    command: x\n    timeout: .inf\n", "4: servers.a.timeout: expected a positive number"),
        ("servers:\n  a: {command: ''}\n", "2: servers.a.command: expected the program to start, got an empty string"),
        ("servers:\n  a: {command: '${EMPTY}'}\n", "servers.a.command: expected the program to start"),
        ("servers:\n  a: {url: 'http://'}\n", "2: servers.a.url: expected a URL with a host"),
        ("servers:\n  a: {url: 'https:///mcp'}\n", "2: servers.a.url: expected a URL with a host"),
        ("servers:\n  a: {url: 'http://h:99999/mcp'}\n", "2: servers.a.url: not a valid URL (Port out of range"),
        ("servers:\n  a: {url: 'http://[::1/mcp'}\n", "2: servers.a.url: not a valid URL"),
        ("servers:\n  a: {url: 'http://ex ample.com/mcp'}\n", "2: servers.a.url: expected a URL without spaces"),
        ('{"mcpServers": {"a": {"url": "http://"}}}', "1: mcpServers.a.url: expected a URL with a host"),
        ("servers:\n  a: {command: x}\n  b: {command: y}\n  a: {command: z}\n", "4: servers.a: duplicate key"),
        (
            "servers:\n  a:\n    command: x\n    protocol: old\n",
            "4: servers.a.protocol: expected auto (the default) or legacy (for a server that never answers requests it "
            "does not know), got 'old'",
        ),
    ],
)
def test_a_value_that_could_never_work_is_refused_while_loading(text: str, expected: str) -> None:
    e = error_of(text.replace("${EMPTY}", "${EMPTY:-}"))
    assert expected in str(e)


def test_a_good_url_with_port_and_variables_is_accepted() -> None:
    config = parse_config("servers:\n  a: {url: 'http://${HOST}:8765/mcp'}\n", environ={"HOST": "127.0.0.1"})
    assert config.servers[0].url == "http://127.0.0.1:8765/mcp"


def test_nested_aliases_that_expand_past_the_limit_are_refused_not_built() -> None:
    # Nine levels of ten: 10**9 values if expanded (a "billion laughs"); refused after a million.
    lines = ["a0: &a0 [" + ", ".join(["x"] * 10) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    e = error_of("\n".join(lines) + "\nservers: {}\n")
    assert "more than 1,000,000 values once its YAML aliases (*name) are expanded" in str(e)
    assert e.file == "tooltree.yaml" and e.line is not None


def test_an_alias_bomb_under_an_x_key_is_refused_before_any_of_it_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: its first million values were built, one by one (3 s of CPU), before the count passed the bound.
    from tool_tree.config_read import Reader

    built = 0
    to_node = Reader.to_node

    def counted(self: Reader, *args: Any, **kwargs: Any) -> Any:
        nonlocal built
        built += 1
        return to_node(self, *args, **kwargs)

    monkeypatch.setattr(Reader, "to_node", counted)
    lines = ["servers: {}", "x-bomb:", "  a0: &a0 [" + ", ".join(["x"] * 10) + "]"]
    lines += [f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    e = error_of("\n".join(lines) + "\n")
    assert "more than 1,000,000 values once its YAML aliases (*name) are expanded" in e.message
    assert (e.line, e.key) == (3, "x-bomb.a5[7][8][8][8][8]")  # the value at which the count passes the bound
    assert built < 100


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        ("servers: {}\nx-a: &a {<<: *a}\n", 2, "x-a"),  # before: RecursionError
        ("servers: {}\nx-a: &a [1, *a]\n", 2, "x-a[1]"),
        ("servers:\n  a: &a\n    command: x\n    args: [*a]\n", 2, "servers.a.args[0]"),
    ],
)
def test_an_alias_used_inside_its_own_anchor_is_refused_naming_where(text: str, line: int, key: str) -> None:
    e = error_of(text)
    assert (e.line, e.key) == (line, key)
    assert e.message.endswith("names, which would nest without end")


def test_a_chain_of_merge_keys_deeper_than_the_bound_is_refused_as_too_deep() -> None:
    # Before: 600 mappings each merging the one before were a RecursionError (a merge was read at its own level).
    lines = ["servers: {}", "x-0: &m0 {a: 1}"] + [f"x-{i}: &m{i} {{<<: *m{i - 1}}}" for i in range(1, 600)]
    e = error_of("\n".join(lines) + "\n")
    assert "nested too deep: more than 64 levels" in e.message


def test_a_few_aliases_are_fine() -> None:
    config = parse_config("servers:\n  a: &s {command: x, args: [y]}\n  b: *s\n", environ={})
    assert [(s.name, s.args) for s in config.servers] == [("a", ("y",)), ("b", ("y",))]


def test_a_file_that_is_not_utf8_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "tooltree.yaml"
    path.write_bytes(b"servers:\n  a:\n    command: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{path}:3: not UTF-8 text: byte 0xe9 in column 17 (save the file as UTF-8)"


def test_a_folder_given_as_the_config_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={})
    assert str(info.value) == f"{tmp_path}: is a folder, not a configuration file"  # the CLI adds its option


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${SET:-d}", "set"),
        ("${EMPTY:-d}", "d"),  # before: "" (the shell and docker compose use the default)
        ("${UNSET:-d}", "d"),
        ("${SET-d}", "set"),
        ("${EMPTY-d}", ""),  # `-` alone: the default only when unset, as in the shell
        ("${UNSET-d}", "d"),  # before: "${UNSET-d}", left as written
        ("${UNSET:-}", ""),
        ("a${EMPTY}b", "ab"),
    ],
)
def test_a_default_applies_when_unset_or_empty_with_colon_dash_and_only_when_unset_with_dash(
    value: str, expected: str
) -> None:
    text = f"servers:\n  a: {{command: x, args: ['{value}']}}\n"
    config = parse_config(text, environ={"SET": "set", "EMPTY": ""})
    assert config.servers[0].args == (expected,)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Before: `}` (with A set but empty), or the text left as written.
        ("${A:-${B}}", "a default may not hold a brace or another ${...}: '${A:-${B}}'"),
        ("${A:-{}}", "a default may not hold a brace or another ${...}: '${A:-{}}'"),
        ("x ${A:?set A} y", "not a variable reference: '${A:?set A}'"),
        ("${1}", "not a variable reference: '${1}'"),
        ("${A", "not a variable reference: '${A'"),
    ],
)
def test_a_variable_reference_of_another_form_is_an_error_naming_it(value: str, expected: str) -> None:
    e = error_of(f"servers:\n  a:\n    command: x\n    args: ['{value}']\n")
    forms = "(use ${VAR}, ${VAR:-default} or ${VAR-default}, and $$ for a literal $)"
    assert str(e) == f"tooltree.yaml:4: servers.a.args[0]: {expected} {forms}"


def test_yaml_merge_keys_merge_mappings_and_keys_written_beside_them_win() -> None:
    # Before: "could not determine a constructor for the tag 'tag:yaml.org,2002:merge'".
    text = """\
servers:
  crm: &base
    command: python
    args: [crm.py]
    env: {LEVEL: info}
  crm2:
    <<: *base
    args: [crm2.py]
  both:
    <<: [{command: node, timeout: 5}, *base]
"""
    crm, crm2, both = parse_config(text, environ={}).servers
    assert (crm2.command, crm2.args, crm2.env) == ("python", ("crm2.py",), {"LEVEL": "info"})
    assert (both.command, both.args, both.timeout) == ("node", ("crm.py",), 5.0)  # the first mapping merged wins
    assert crm.args == ("crm.py",)


def test_a_merge_key_naming_something_other_than_mappings_is_an_error_with_its_line() -> None:
    e = error_of("servers:\n  a:\n    command: x\n  b:\n    <<: [x]\n")
    assert str(e) == (
        "tooltree.yaml:5: servers.b: a merge key (<<) takes a mapping or a list of mappings, such as <<: *common"
    )


def test_other_clients_tool_lists_in_a_json_config_keep_their_tools_out_and_their_keys_are_not_misspellings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: Gemini CLI's `excludeTools` was "not a key tooltree reads; ignored (did you mean 'exclude'?)", and the
    # tools it excluded were in the tree.
    text = """{"mcpServers": {
  "fs": {"command": "x", "exclude": ["write_*"], "excludeTools": ["delete_file"],
         "includeTools": ["read_file", "delete_file"], "envFile": ".env", "networkTimeout": 5, "trust": true},
  "git": {"command": "y", "disabledTools": ["git_reset", "odd*name"]}
}}"""
    fs, git = parse_config(text, source="gemini.json", environ={}).servers
    assert fs.exclude == ("write_*", "delete_file") and fs.include == ("read_file", "delete_file")
    assert fs.leaves_out("delete_file") == "exclude" and fs.leaves_out("read_file") is None
    assert fs.leaves_out("list_dir") == "include"
    assert git.exclude == ("git_reset", "odd[*]name")  # a name, not a pattern: `*` is itself
    assert git.leaves_out("odd*name") == "exclude" and git.leaves_out("odd_name") is None
    assert caplog.messages == []


def test_a_name_of_another_clients_tool_list_that_matches_no_tool_is_said_as_written(tmp_path: Path) -> None:
    # Before: the generator's warning could only say "include pattern 'get_[*]' matches no tool", a pattern the user
    # never wrote: the config did not keep which patterns stand for a name of `includeTools` and the like.
    path = tmp_path / "gemini.json"
    path.write_text(
        '{"mcpServers": {"fs": {"command": "x", "include": ["read_*"], "includeTools": ["get_*", "read_*"], '
        '"disabledTools": ["rm"]}}}',
        encoding="utf-8",
    )
    (fs,) = load_config(path, environ={}).servers
    assert fs.include == ("read_*", "get_[*]", "read_[*]") and fs.exclude == ("rm",)
    assert [unmatched_filter("include", p, fs.named) for p in fs.include] == [
        "include pattern 'read_*' matches no tool",
        "includeTools lists exact tool names; 'get_*' matches none (use include: in tooltree.yaml for patterns)",
        "includeTools lists exact tool names; 'read_*' matches none (use include: in tooltree.yaml for patterns)",
    ]
    assert unmatched_filter("exclude", "rm", fs.named) == (
        "disabledTools lists exact tool names; 'rm' matches none (use exclude: in tooltree.yaml for patterns)"
    )


def test_a_json_servers_name_with_escapes_reaches_a_warning_cleaned(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        '{"mcpServers": {"evil\\u001b[2J\\nFAKE": {"type": "sse", "url": "http://h/"}, '
        '"b\\u001b]0;x\\u0007": {"command": "x", "arsg": []}}}'
    )
    parse_config(text, source="c.json", environ={})
    assert all("\x1b" not in m and "\n" not in m for m in caplog.messages) and len(caplog.messages) == 2


def test_client_capabilities_are_read_and_roots_or_unknown_names_are_errors_on_their_line() -> None:
    text = "servers:\n  a:\n    command: x\n    client_capabilities: [sampling, elicitation, sampling]\n"
    assert parse_config(text, source="tooltree.yaml", environ={}).servers[0].client_capabilities == (
        "sampling",
        "elicitation",
    )
    default = parse_config("servers:\n  a: {command: x}\n", source="t.yaml", environ={})
    assert default.servers[0].client_capabilities == ()
    roots = error_of("servers:\n  a:\n    command: x\n    client_capabilities:\n      - elicitation\n      - roots\n")
    assert str(roots).startswith("tooltree.yaml:6: servers.a.client_capabilities[1]: roots are never passed on: ")
    other = error_of("servers:\n  a:\n    command: x\n    client_capabilities: [elicit]\n")
    assert str(other) == (
        "tooltree.yaml:4: servers.a.client_capabilities[0]: expected one of elicitation, sampling, got 'elicit'"
    )
    json_entry = parse_config('{"mcpServers": {"a": {"command": "x", "client_capabilities": ["elicitation"]}}}',
                              source="claude.json", environ={})  # fmt: skip
    assert json_entry.servers[0].client_capabilities == ("elicitation",)


def test_a_yes_or_no_setting_given_something_else_says_true_or_false() -> None:
    from agent.serve.settings import ServeSettings

    config = parse_config(
        'servers:\n  a: {command: x}\nserve:\n  asks_from_scripts: "yes"\n', source="t.yaml", environ={}
    )
    with pytest.raises(ConfigError) as e:
        ServeSettings.from_config(config)
    # Before: "expected pass the elicitations a server asks …, got 'yes'".
    assert str(e.value).startswith("t.yaml:4: serve.asks_from_scripts: expected true or false (pass the elicitations")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("prefilter: off", 'got False (YAML reads an unquoted off as a boolean: write "off" for the text)'),
        ("mode: Yes", 'got True (YAML reads an unquoted Yes as a boolean: write "Yes" for the text)'),
        ("model: 2025-01-01", '(YAML reads an unquoted 2025-01-01 as a date: write "2025-01-01" for the text)'),
    ],
)
def test_a_text_setting_yaml_read_as_a_boolean_or_a_date_says_to_quote_it(line: str, expected: str) -> None:
    from tooltree_cli.common import config_sections

    # Before: `prefilter: off`, the README's own word for it, was "expected …, or off; …, got False", and no more.
    e = error_of(f"servers: {{}}\nagent:\n  {line}\n", sections=config_sections())
    assert (e.line, e.key) == (3, f"agent.{line.partition(':')[0]}")
    assert expected in e.message
    assert parse_config("servers: {}\nagent:\n  prefilter: 'off'\n", environ={}, sections=config_sections())
    with pytest.raises(ConfigError) as info:  # a JSON file's false is one on purpose: nothing to quote
        parse_config('{"servers": {}, "agent": {"prefilter": false}}', environ={}, sections=config_sections())
    assert info.value.message.endswith("got False")


@pytest.mark.parametrize("written", ["0x10", "010", "12:30", "1_000", "1.10", "1e3", "0o17", "42"])
def test_a_text_setting_written_as_a_number_is_taken_as_written(written: str) -> None:
    from agent.defaults import agent_settings
    from tooltree_cli.common import config_sections

    # Before: YAML 1.1 read `model: 0x10` as 16, `010` as 8 and `12:30` as 750, and the setting got "16", "8", "750".
    config = parse_config(f"servers: {{}}\nagent:\n  model: {written}\n", environ={}, sections=config_sections())
    assert agent_settings(config)["model"] == written


@pytest.mark.parametrize(
    ("key", "odd"), [("comm\u200band", "U+200B"), ("c\u043emmand", "U+043E"), ("time\u00a0out", "U+00A0")]
)
def test_an_unknown_key_that_looks_like_a_known_one_names_the_characters_that_are_not_ascii(key: str, odd: str) -> None:
    # Before: "servers.a.command: unknown key (did you mean 'command'?)": the zero-width space is cleaned out of the
    # error, and a Cyrillic о looks like a Latin o, so the key named and the one suggested looked the same.
    e = error_of(f"servers:\n  a:\n    {key}: x\n")
    assert (e.line, e.key) == (3, f"servers.a.{key}")
    assert e.message.endswith(f"? it holds {odd}, which is not ASCII)")
    assert error_of("servers:\n  a:\n    comand: x\n").message == "unknown key (did you mean 'command'?)"


def test_a_key_indented_with_a_no_break_space_names_it() -> None:
    # Before: "tooltree.yaml:2:   a: unknown key", the no-break space looking like the spaces around it.
    e = error_of("servers:\n\u00a0 a:\n    command: x\n")
    assert (e.line, e.key, e.message) == (2, "\u00a0 a", "unknown key (it holds U+00A0, which is not ASCII)")
    assert error_of("servers:\n  a:\n    mystery: x\n").message == "unknown key"


def test_a_sections_unset_variable_is_an_error_only_for_the_command_that_reads_the_section() -> None:
    from agent.defaults import agent_settings
    from sandbox.config import SandboxConfig
    from tooltree_cli.common import config_sections

    # Before: `agent: {model: "${MODEL}"}` with MODEL unset refused the file while it loaded, so generate-tree and
    # exec, which never read `agent:`, could not run.
    text = 'servers: {}\nagent:\n  model: "${MODEL}"\n  mode: "${MODE:-code}"\nsandbox:\n  memory: 1g\n'
    config = parse_config(text, source="tooltree.yaml", environ={}, sections=config_sections())
    assert SandboxConfig.from_config(config).memory == "1g"
    with pytest.raises(ConfigError) as info:
        agent_settings(config)
    assert str(info.value) == "tooltree.yaml:3: agent.model: environment variable ${MODEL} is not set"
    set_ = parse_config(text, environ={"MODEL": "claude-x"}, sections=config_sections())
    assert agent_settings(set_) == {"model": "claude-x", "mode": "code"}
    # Its key and, once it is set, its value are still checked while the file loads.
    assert error_of(text.replace("model:", "modle:"), sections=config_sections()).key == "agent.modle"
    with pytest.raises(ConfigError, match=r"agent\.mode: expected one of code"):
        parse_config(text, environ={"MODEL": "m", "MODE": "fast"}, sections=config_sections())


@pytest.mark.parametrize(
    ("source", "text", "written"),
    [
        ("tooltree.yaml", "servers:\n  a:\n    command: x\n    include: []\n", "`enabled: false`"),
        (".mcp.json", '{"mcpServers": {"a": {"command": "x",\n "include": []}}}', '`"disabled": true`'),
    ],
)
def test_an_empty_include_is_refused_saying_what_to_write(source: str, text: str, written: str) -> None:
    # Before: `include: []` offered every tool, while an empty `includeTools` leaves the server out.
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=source, environ={})
    e = info.value
    assert (e.file, e.key) == (source, "servers.a.include" if source.endswith("yaml") else "mcpServers.a.include")
    assert e.line == (4 if source.endswith("yaml") else 2)
    assert "leave `include` out to offer them all" in e.message and written in e.message


def test_an_empty_exclude_excludes_nothing() -> None:
    config = parse_config("servers:\n  a: {command: x, exclude: []}\n", environ={})
    assert config.servers[0].leaves_out("any") is None


def test_a_variable_in_a_description_is_kept_as_written_and_said(caplog: pytest.LogCaptureFixture) -> None:
    # A description is copied into the tree, which is the same in every environment: before, its ${TEAM} was kept
    # without a word, while the same reference in `args` was expanded.
    text = "servers:\n  a:\n    command: x\n    args: ['${TEAM}']\n    description: Jira of ${TEAM} ($5 a seat)\n"
    config = parse_config(text, source="tooltree.yaml", environ={"TEAM": "ops"})
    assert (config.servers[0].args, config.servers[0].description) == (("ops",), "Jira of ${TEAM} ($5 a seat)")
    assert caplog.messages == [
        "tooltree.yaml:5: servers.a.description: ${TEAM} is not expanded: a description is copied into the tree as "
        "written"
    ]
    caplog.clear()
    parse_config("servers:\n  a: {command: x, description: costs $5}\n", environ={})
    assert caplog.messages == []


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "type: http",
            "a tooltree.yaml tells a stdio server by its `command` and an HTTP one by its `url`: leave `type` out",
        ),
        ("disabled: true", "write `enabled: false`"),
        (
            "envFile: .env",
            'a tooltree.yaml reads none: set the variables in `env`, "${VAR}" passing on tooltree\'s own',
        ),
        ("httpUrl: https://a.example/mcp", "Gemini CLI's name of it: write `url`"),
        ("serverUrl: https://a.example/mcp", "Windsurf's name of it: write `url`"),
        ("includeTools: [search]", "another client's list of tool names: write `include`, of patterns"),
        ("autoApprove: [search]", "another client's key, which tooltree does not read: leave it out"),
        ("sandbox: {memory: 1g}", ""),  # a section indented under a server: not another client's
    ],
)
def test_a_key_of_another_clients_file_in_a_tooltree_yaml_says_what_to_write_instead(line: str, said: str) -> None:
    # Before: "unknown key" alone (`type`, `httpUrl`, `autoApprove`), or a guess: "(did you mean 'env'?)" of envFile.
    e = error_of(f"servers:\n  a:\n    command: x\n    {line}\n")
    key = line.partition(":")[0]
    assert str(e) == f"tooltree.yaml:4: servers.a.{key}: unknown key" + (f" ({said})" if said else "")


@pytest.mark.parametrize(
    ("servers", "said"),
    [
        ("\n  - name: docs\n    command: x\n", "2: servers: expected a mapping of server names, got a list (write each "
         "server as its name and a colon, `docs:`, its settings indented under it)"),
        (" [a, b]", "1: servers: expected a mapping of server names, got a list (write each server as its name and a "
         "colon, `a:`, its settings indented under it)"),
        (" []", "1: servers: expected a mapping of server names, got a list (write `servers: {}` for none yet)"),
    ],
)  # fmt: skip
def test_servers_written_as_a_list_says_how_to_write_them(servers: str, said: str) -> None:
    # Before: "expected a mapping of server names, got a list", and no more.
    assert str(error_of(f"servers:{servers}\n")) == f"tooltree.yaml:{said}"


def test_a_server_with_both_command_and_url_says_what_each_is() -> None:
    # Before: "server has both `command` and `url`", and not which to keep.
    assert str(error_of("servers:\n  a:\n    command: x\n    url: http://h/mcp\n")) == (
        "tooltree.yaml:3: servers.a: server has both `command` and `url`: `command` starts the server (stdio), `url` "
        "reaches one already running (HTTP); keep the one it is"
    )
