"""Review of the 2026-12-05 changes: config files whose numbers or paths Python cannot take are refused as config
errors (the file, line and key), never a traceback (exit 70).

Before: a timeout of 400 digits (an int past a float's range) raised OverflowError in the reader of every format
(tooltree's YAML, Claude's ``.mcp.json``, Gemini CLI's milliseconds, Codex's ``*_timeout_*``), and an ``envFile``
whose path held a NUL or a lone surrogate raised ValueError from ``os.open``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_tree.config import ConfigError, load_config, parse_config

HUGE = "1" + "0" * 400
"""A whole number past the largest float (about 1.8e308)."""


@pytest.mark.parametrize(
    ("source", "text", "line", "key"),
    [
        ("tooltree.yaml", f"servers:\n  a:\n    command: x\n    timeout: {HUGE}\n", 4, "servers.a.timeout"),
        (".mcp.json", f'{{"mcpServers": {{"a": {{"command": "x",\n "timeout": {HUGE}}}}}}}', 2, "mcpServers.a.timeout"),
        (
            "proj/.gemini/settings.json",
            f'{{"mcpServers": {{"a": {{"command": "x",\n "timeout": {HUGE}}}}}}}',
            2,
            "mcpServers.a.timeout",
        ),
        (
            "proj/.codex/config.toml",
            f'[mcp_servers.a]\ncommand = "x"\ntool_timeout_sec = {HUGE}\n',
            3,
            "mcp_servers.a.tool_timeout_sec",
        ),
        (
            "proj/.codex/config.toml",
            f'[mcp_servers.a]\ncommand = "x"\nstartup_timeout_ms = {HUGE}\n',
            3,
            "mcp_servers.a.startup_timeout_ms",
        ),
    ],
)
def test_a_timeout_past_a_floats_range_is_a_config_error(source: str, text: str, line: int, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=source, environ={})
    error = str(info.value)
    assert error.startswith(f"{source}:{line}: {key}: expected a positive number"), error
    assert len(error) < 400  # the number is not written out whole


@pytest.mark.parametrize(
    ("path", "problem"),
    [("a\\u0000b", "cannot read the env file "), ("a\\ud800b", "holds \\ud800, half of a character")],
)
def test_an_env_file_path_python_cannot_open_is_a_config_error(tmp_path: Path, path: str, problem: str) -> None:
    config = tmp_path / ".vscode" / "mcp.json"
    config.parent.mkdir()
    config.write_text(f'{{"servers": {{"a": {{"command": "x",\n "envFile": "{path}"}}}}}}')
    with pytest.raises(ConfigError) as info:
        load_config(str(config), environ={})
    assert str(info.value).startswith(f"{config}:2: servers.a.envFile: {problem}"), info.value


@pytest.mark.parametrize(
    ("source", "text", "field", "expected"),
    [
        ("tooltree.yaml", "servers:\n  a:\n    command: ./loop/x\n", "command", "loop/x"),
        ("tooltree.yaml", "servers:\n  a:\n    command: x\n    cwd: loop\n", "cwd", "loop"),
        (".codex/config.toml", '[mcp_servers.a]\ncommand = "./loop/x"\n', "command", "loop/x"),
    ],
)
def test_a_command_or_cwd_through_a_symlink_loop_is_left_for_the_servers_start_to_fail(
    tmp_path: Path, source: str, text: str, field: str, expected: str
) -> None:
    # Before: Path.resolve()'s RuntimeError on the loop (Python 3.11) was a traceback, exit 70, for every server.
    (tmp_path / "loop").symlink_to("loop")
    config = tmp_path / source
    config.parent.mkdir(exist_ok=True)
    config.write_text(text, encoding="utf-8")
    (server,) = load_config(str(config), environ={}).servers
    assert getattr(server, field) == str(tmp_path / expected)


# --- numbers of any size, in every format ---------------------------------------------------------------------------

DIGITS = "1" * 5000
"""A whole number of more digits than Python reads (``sys.get_int_max_str_digits()``, 4,300)."""
SHOWN = "111111111111111111111111…11111111 (5,000 characters)"


@pytest.mark.parametrize(
    ("source", "text", "line", "key", "shown"),
    [
        (".mcp.json", f'{{"mcpServers": {{"a": {{"command": "x",\n "timeout": {DIGITS}}}}}}}', 2, "mcpServers", SHOWN),
        (
            "proj/.vscode/mcp.json",
            f'{{"servers": {{"a": {{"command": "x", // a comment\n "timeout": -{DIGITS},}}}}}}',
            2,
            "servers",
            "-11111111111111111111111…11111111 (5,001 characters)",
        ),
        (".mcp.json", '{"mcpServers": {"a": {"command": "x",\n "timeout": 1e400}}}', 2, "mcpServers", "1e400"),
        ("tooltree.yaml", f"servers:\n  a:\n    command: x\n    timeout: {DIGITS}\n", 4, "servers", SHOWN),
        (
            "tooltree.yaml",
            f"servers:\n  a:\n    command: x\n    timeout: 0x{'F' * 4000}\n",
            4,
            "servers",
            "0xFFFFFFFFFFFFFFFFFFFFFF…FFFFFFFF (4,002 characters)",
        ),
        (
            "tooltree.yaml",
            f"servers:\n  a:\n    command: x\n    timeout: 1{':59' * 200_000}.5\n",
            4,
            "servers",
            "1:59:59:59:59:59:59:59:5…:59:59.5 (600,003 characters)",
        ),
        (
            "proj/.codex/config.toml",
            f'[mcp_servers.a]\ncommand = "x"\ntool_timeout_sec = {DIGITS}.5\n',
            3,
            "mcp_servers",
            "111111111111111111111111…111111.5 (5,002 characters)",
        ),
        (
            "proj/.codex/config.toml",
            f'[mcp_servers.a]\ncommand = "x"\ntool_timeout_sec = 0x{"f" * 4000}\n',
            3,
            "mcp_servers",
            "0xffffffffffffffffffffff…ffffffff (4,002 characters)",
        ),
    ],
)
def test_a_number_of_any_size_is_refused_as_the_number_written(
    source: str, text: str, line: int, key: str, shown: str
) -> None:
    # Before: a JSON file's 5,000 digits said "invalid YAML: '1111… is not a valid !!int" (Python's int reads 4,300
    # digits; the JSON went through the YAML reader), and YAML's 0xFFF…, 1:59:…:59.5 and TOML's 0xfff… raised
    # ValueError or OverflowError (exit 70).
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=source, environ={})
    timeout = "tool_timeout_sec: expected a positive number" if key == "mcp_servers" else "timeout: expected a positive"
    assert str(info.value).startswith(f"{source}:{line}: {key}.a.{timeout}"), info.value
    assert str(info.value).endswith(f", got {shown}") and "YAML" not in str(info.value)


@pytest.mark.parametrize("source", [".mcp.json", "proj/.gemini/settings.json", "tooltree.yaml"])
def test_a_long_number_where_a_string_goes_is_its_digits_and_one_in_a_key_tooltree_does_not_read_is_no_error(
    source: str,
) -> None:
    # Before: "invalid YAML: '1111… is not a valid !!int" refused a file its client reads.
    if source.endswith(".yaml"):
        text = f"servers:\n  a:\n    command: x\n    args: [{DIGITS}, 2]\n"
    else:
        text = f'{{"mcpServers": {{"a": {{"command": "x", "args": [{DIGITS}, 2], "retries": {DIGITS}}}}}}}'
    (server,) = parse_config(text, source=source, environ={}).servers
    assert server.args == (DIGITS, "2")


def test_a_codex_whole_number_python_cannot_read_names_its_line_and_key_past_strings_and_comments() -> None:
    # Before: the first run of 4,300 digits anywhere was taken for it, in a string or a comment too, and no key named.
    text = (
        f'[mcp_servers.a]\ncommand = "x"\nargs = ["{DIGITS}"] # {DIGITS}\ndescription = """\n{DIGITS}\n"""\n'
        f"env_vars = [\n  {DIGITS},\n]\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="config.toml", environ={})
    assert str(info.value) == (
        "config.toml:8: mcp_servers.a.env_vars: invalid TOML: a whole number of more than 4,300 digits "
        "(Codex reads whole numbers up to 2**63 - 1)"
    )


def test_a_number_where_a_string_goes_reaches_the_server_as_written() -> None:
    # Before: YAML 1.1 read each as a number and its str() reached the server: `010` as "8", `0x1F` as "31", `12:30`
    # (sexagesimal) as "750", `1_000` as "1000", `1.10` as "1.1", `1e3` as "1000.0"; a umask, a version, a time.
    text = (
        "servers:\n  a:\n    command: x\n    args: [--umask, 022, --version, 1.10, 0x1F, 1e3, '7']\n"
        "    env: {AT: 12:30, N: 1_000, PORT: 8080, MODE: 0o755, NEG: -0}\n"
    )
    (server,) = parse_config(text, source="tooltree.yaml", environ={}).servers
    assert server.args == ("--umask", "022", "--version", "1.10", "0x1F", "1e3", "7")
    assert server.env == {"AT": "12:30", "N": "1_000", "PORT": "8080", "MODE": "0o755", "NEG": "-0"}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "servers:\n  a:\n    command: x\n    env: {DEBUG: yes}\n",
            "tooltree.yaml:4: servers.a.env.DEBUG: expected a string, got bool True (YAML reads an unquoted yes as a "
            'boolean: write "yes" for the text)',
        ),
        (
            "servers:\n  off:\n    command: x\n",
            "tooltree.yaml:2: servers: keys must be strings, got False (YAML reads an unquoted off as a boolean: "
            'write "off" for the text)',
        ),
        (
            "servers:\n  a:\n    command: x\n    args: [--since, 2024-01-01]\n",
            "tooltree.yaml:4: servers.a.args[1]: expected a string, got date datetime.date(2024, 1, 1) (YAML reads an "
            'unquoted 2024-01-01 as a date: write "2024-01-01" for the text)',
        ),
        (
            "servers:\n  a:\n    command: x\n    args: [-H, X-Key: 1]\n",
            "tooltree.yaml:4: servers.a.args[1]: expected a string, got a mapping (YAML reads an unquoted item holding "
            '": " as a mapping: write the item in quotes)',
        ),
        (  # before: "got nothing", and no word of why
            "servers:\n  a:\n    command: x\n    cwd: ~\n",
            "tooltree.yaml:4: servers.a.cwd: expected a string, got nothing (YAML reads an unquoted ~ as null: write "
            '"~" for the text, the home folder in `command` and `cwd`)',
        ),
        (  # before: "keys must be strings, got 1", and no word of why
            "servers:\n  1:\n    command: x\n",
            "tooltree.yaml:2: servers: keys must be strings, got 1 (YAML reads an unquoted 1 as a number: write "
            '"1" for the text)',
        ),
    ],
)
def test_a_yaml_boolean_date_or_mapping_where_text_goes_says_to_quote_it(text: str, error: str) -> None:
    # Before: "keys must be strings, got False" for a server named `off`, with no word of why (YAML 1.1's booleans).
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="tooltree.yaml", environ={})
    assert str(info.value) == error


def test_a_key_that_is_a_list_or_a_mapping_is_said_as_one() -> None:
    # Before: "keys must be strings, got [Node(value='a', line=2, text=None), …]", the reader's own objects.
    for written, kind in (("[a, b]", "a list"), ("{a: b}", "a mapping")):
        with pytest.raises(ConfigError) as info:
            parse_config(f"servers:\n  ? {written}\n  : {{command: x}}\n", source="tooltree.yaml", environ={})
        assert str(info.value).startswith(f"tooltree.yaml:2: servers: keys must be strings, got {kind}")
        assert "Node(" not in str(info.value)


def test_a_json_boolean_where_a_string_goes_gives_no_yaml_advice() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('{"mcpServers": {"a": {"command": "x", "env": {"A": true}}}}', source=".mcp.json", environ={})
    assert str(info.value).endswith("expected a string, got bool True")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("servers:\n  a: {command: x, timeout: 1e3}\n", "servers.a.timeout: expected a positive number of seconds"),
        ("servers: {}\nsandbox:\n  timeout: 1.5e3\n", "sandbox.timeout: expected a positive number (seconds"),
        ("servers: {}\nsandbox:\n  pids_limit: 2E2\n", "sandbox.pids_limit: expected a whole number, at least 1"),
    ],
)
def test_a_number_yaml_reads_as_text_for_its_exponent_says_how_to_write_it(text: str, expected: str) -> None:
    from tooltree_cli.common import config_sections

    # Before: "expected a positive number of seconds, got '1e3'", and no word of why: YAML 1.1 takes a number with an
    # exponent only with a dot and a sign (1.0e+3).
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="tooltree.yaml", environ={}, sections=config_sections())
    written = text.rpartition(": ")[2].strip().rstrip("}")
    said = {"1e3": "1000", "1.5e3": "1500", "2E2": "200"}[written]
    assert expected in str(info.value)
    assert str(info.value).endswith(f"got {written!r} (YAML reads {written} as text, not as a number: write {said})")
    assert parse_config(text.replace(written, said), environ={}, sections=config_sections())
    with pytest.raises(ConfigError) as quoted:  # a JSON file's "1e3" is text on purpose
        parse_config('{"mcpServers": {"a": {"command": "x", "timeout": "1e3"}}}', environ={})
    assert quoted.value.message == "expected a positive number of seconds, got '1e3'"


def test_a_yes_or_no_setting_given_a_number_with_an_exponent_is_not_told_to_write_a_number() -> None:
    from tooltree_cli.common import config_sections

    with pytest.raises(ConfigError) as info:
        parse_config("servers: {}\nserve:\n  prompts: 1e3\n", environ={}, sections=config_sections())
    assert info.value.message.startswith("expected true or false") and info.value.message.endswith("got '1e3'")
