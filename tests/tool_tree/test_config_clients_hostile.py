"""Other clients' config files written carelessly or to hurt: each is read within its bounds, or refused with the
file, line and key, and what reaches the terminal holds no escape.

The reads that must end in time are timed in CPU seconds of the thread that reads (`time.thread_time`): a loaded
machine stretches their wall-clock time tenfold (an 8 MiB file with comments, about 2 s of CPU, took 22 s on one),
never their CPU time, and what each bound catches (a scan again from each quote, backtracking over spaces, 120 MiB
read) costs far more CPU than the bound."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest

from tool_tree.config import SECTIONS, ConfigError, load_config, parse_config
from tool_tree.config_clients import MAX_JSONC_BYTES, without_comments

VSCODE = "proj/.vscode/mcp.json"
CODEX = "proj/.codex/config.toml"


def error_of(text: str, source: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=source, environ=environ or {})
    return str(info.value)


# --- JSON with comments -------------------------------------------------------------------------------------------


def test_a_line_of_escaped_quotes_never_closed_is_refused_at_once() -> None:
    # Before: each quote began a string scanned to the line's end again; 64 KB of `\"` took 15 s (a MiB, hours).
    text = '{"servers": {}, "x": "' + '\\"' * 500_000 + "\n}"
    started = time.thread_time()
    error = error_of(text, VSCODE)
    assert time.thread_time() - started < 5
    assert error.startswith(f"{VSCODE}:1: invalid JSON: Invalid control character at (column ")


def test_comments_are_blanked_in_strings_never() -> None:
    text = (
        '/* lead */ {/*a*/"servers"/*b*/:/*c*/{ // x\r\n'
        '  "a": {"url": "http://h/x//y/*z", "headers": {"K": "a\\\\"}, }, // "not a string\r\n'
        '  "b": {"command": "c\\"//", "args": ["/*", "*/"]},\r\n'
        "},}\r\n"
    )
    blanked = without_comments(text, VSCODE)
    assert len(blanked) == len(text) and blanked.count("\n") == text.count("\n")
    config = parse_config(text, source=VSCODE, environ={})
    a, b = config.servers
    assert (a.url, dict(a.headers)) == ("http://h/x//y/*z", {"K": "a\\"})
    assert (b.command, b.args) == ('c"//', ("/*", "*/"))


def test_a_file_opening_with_a_comment_or_a_byte_order_mark_is_json() -> None:
    # Before: a comment (or Notepad's BOM) before the `{` sent the file to the YAML reader, which refused it as
    # "expected a mapping at the top level, got str …" or read VS Code's `servers` as tooltree's and refused `type`.
    for text in (
        '// the workspace\'s servers\n{"servers": {"a": {"type": "stdio", "command": "x"}}}',
        '\ufeff{"servers": {"a": {"type": "stdio", "command": "x"}}, // c\n}',
    ):
        (server,) = parse_config(text, source=VSCODE, environ={}).servers
        assert server.command == "x"
    (server,) = parse_config('\ufeff[mcp_servers.a]\ncommand = "x"\n', source=CODEX, environ={}).servers
    assert server.command == "x"


def test_a_file_with_comments_is_bounded_in_size_and_time() -> None:
    unit = "/*\n*/"
    head = '{"servers": {"a": {"command": "x"}}, "o": ['
    text = head + unit * ((MAX_JSONC_BYTES - len(head) - 10) // len(unit)) + "1]}"
    started = time.thread_time()
    (server,) = parse_config(text, source=VSCODE, environ={}).servers
    assert server.command == "x"
    assert time.thread_time() - started < 15  # about 2 s of CPU
    # Before: 120 MiB of comments was read (84 s, 1.3 GB).
    error = error_of(text + " " * 100, VSCODE)
    assert error == (
        f"{VSCODE}: too large: {len(text) + 100:,} characters, over the 8 MiB a JSON file with comments may have"
    )


def test_vscode_inputs_count_in_what_the_reader_reads() -> None:
    # Before: `inputs` went to the YAML reader whatever its size (60 MB: 38 s).
    text = '{"servers": {"a": {"command": "x"}}, "inputs": ["' + "a" * 3_000_000 + '"]}'
    error = error_of(text, "proj/mcp.json")
    assert "too large: 3,000," in error and "over the 2 MiB its servers may have" in error


def test_vscode_inputs_that_are_not_a_list_are_said(caplog: pytest.LogCaptureFixture) -> None:
    text = '{"inputs": {"id": "k"}, "servers": {"a": {"command": "x"}}}'
    parse_config(text, source=VSCODE, environ={})
    assert caplog.messages == [
        f"{VSCODE}:1: inputs: expected a list of the values VS Code asks for, got a mapping; ignored"
    ]


def test_tooltree_settings_written_as_json_keep_their_sections() -> None:
    # Before: `servers` was taken for VS Code's, and the `sandbox` section was dropped without a word.
    text = '{"servers": {"a": {"command": "x", "enabled": false}}, "sandbox": {"memory": "1g"}}'
    config = parse_config(text, source="tooltree.json", environ={})
    assert [s.enabled for s in config.servers] == [False]
    assert config.sections["sandbox"].values == {"memory": "1g"}
    assert "sandbox" in SECTIONS


def test_json_numbers_with_an_exponent_are_numbers(caplog: pytest.LogCaptureFixture) -> None:
    # Before: YAML read `1e4` as a string: "expected a positive number of seconds, got '1e4'".
    text = '{"mcpServers": {"a": {"command": "x", "timeout": 1e4}}}'
    (server,) = parse_config(text, source="proj/.gemini/settings.json", environ={}).servers
    assert server.timeout == 10.0
    (server,) = parse_config(text.replace("1e4", "2E+1"), source=".mcp.json", environ={}).servers
    assert server.timeout == 20.0
    # Past a float: refused as the number it is, not taken for milliseconds first.
    caplog.clear()
    error = error_of(text.replace("1e4", "1e309"), "proj/.gemini/settings.json")
    assert error.endswith("mcpServers.a.timeout: expected a positive number of seconds, got 1e309")
    assert caplog.messages == []


def test_an_integer_of_more_digits_than_python_reads_is_an_error_not_a_traceback() -> None:
    # Before: ValueError ("Exceeds the limit (4300 digits)") from the json module and from tomllib: exit 70.
    digits = "9" * 5000
    (server,) = parse_config(
        f'{{"mcpServers": {{"a": {{"command": "x"}}}}, "n": {digits}}}', source=".mcp.json"
    ).servers
    assert server.command == "x"
    error = error_of(f'{{"mcpServers": {{"a": {{"command": "x", "timeout": {digits}}}}}}}', ".mcp.json")
    assert error.startswith(".mcp.json:1: mcpServers.a.timeout: expected a positive number of seconds, got 9999")
    assert len(error) < 200
    error = error_of(f'[mcp_servers.a]\ncommand = "x"\n\nstartup_timeout_sec = {digits}\n', CODEX)
    assert error == (
        f"{CODEX}:4: mcp_servers.a.startup_timeout_sec: invalid TOML: a whole number of more than 4,300 digits "
        "(Codex reads whole numbers up to 2**63 - 1)"
    )


# --- Escapes reaching the terminal -------------------------------------------------------------------------------


def test_keys_and_references_from_the_file_reach_the_terminal_without_escapes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: "servers.a\x1b[31m.args: …", "${env:\x1b[31mred} is not set" and a Codex key's warning at ":None".
    error = error_of('{"mcpServers": {"a\\u001b[31m": {"command": "x", "args": 1}}}', ".mcp.json")
    assert error == ".mcp.json:1: mcpServers.a[31m.args: expected a list of strings, got int 1"
    error = error_of('{"servers": {"a": {"command": "x", "env": {"K": "${env:\\u001b]0;t\\u0007}"}}}}', VSCODE)
    assert error == f"{VSCODE}:1: servers.a.env.K: environment variable ${{env:]0;t}} is not set"
    error = error_of('[mcp_servers."a\\u001b[31m"]\ncommand = "c"\n"bog\\u001bus" = 1\nargs = 2\n', CODEX)
    assert error == f"{CODEX}:4: mcp_servers.a[31m.args: expected a list of strings, got int 2"
    assert caplog.messages == [f"{CODEX}:3: mcp_servers.a[31m.bogus: not a key tooltree reads; ignored"]


def test_an_input_id_of_any_length_is_said_in_a_bounded_message() -> None:
    text = '{"servers": {"a": {"command": "x", "env": {"K": "${input:' + "k" * 100_000 + '}"}}}}'
    error = error_of(text, VSCODE)
    assert "set the environment variable TOOLTREE_INPUT_KKK" in error and len(error) < 600


# --- Codex's config.toml -----------------------------------------------------------------------------------------


def test_a_long_line_of_spaces_is_read_at_once() -> None:
    # Before: the key scanner backtracked over the spaces: 3,000 took 9 s, 2 MiB would never end.
    text = '[mcp_servers.a]\ncommand = "c"\n' + " " * 2_000_000 + "\nargs = 1\n"
    started = time.thread_time()
    error = error_of(text, CODEX)
    assert time.thread_time() - started < 5
    assert error == f"{CODEX}:4: mcp_servers.a.args: expected a list of strings, got int 1"


def test_lines_are_counted_as_toml_counts_them() -> None:
    # Before: a `[table]` line in a multi-line string was taken for a header (the error named line 1), and U+2028
    # in a string was a line end (every line after it off by one).
    text = (
        '[mcp_servers.a]\ncommand = "c"\ndescription = """\n[mcp_servers.b]\nargs = 1\n"""\n'
        'note = "\'\'\'"\nargs = 7\n[mcp_servers.b]\ncommand = "d"\n'
    )
    assert error_of(text, CODEX) == f"{CODEX}:8: mcp_servers.a.args: expected a list of strings, got int 7"
    text = '[mcp_servers.a]\ncommand = "c\u2028\u2028"\n\nargs = 5\n'
    assert error_of(text, CODEX) == f"{CODEX}:4: mcp_servers.a.args: expected a list of strings, got int 5"
    text = "mcp_servers = {a = 1}\n"
    assert error_of(text, CODEX).startswith(f"{CODEX}:1: mcp_servers.a: expected a mapping")


def test_env_vars_that_are_not_a_list_of_names_are_refused() -> None:
    # Before: `env_vars = "TOKEN"` (or a name that is not a string) was dropped without a word.
    for value, shown in (('"TOKEN"', "'TOKEN'"), ('["TOKEN", 1]', "a list")):
        text = f'[mcp_servers.a]\ncommand = "c"\nenv_vars = {value}\n'
        assert error_of(text, CODEX, {"TOKEN": "t"}) == (
            f"{CODEX}:3: mcp_servers.a.env_vars: expected a list of environment variable names, got {shown}"
        )


def test_unknown_keys_are_said_a_bounded_number_of_times(caplog: pytest.LogCaptureFixture) -> None:
    text = '[mcp_servers.a]\ncommand = "c"\n' + "".join(f"k{i} = 1\n" for i in range(1000))
    with caplog.at_level(logging.WARNING):
        parse_config(text, source=CODEX, environ={})
    assert len(caplog.messages) == 21
    assert caplog.messages[-1] == f"{CODEX}: 980 more keys tooltree does not read; ignored"


# --- envFile --------------------------------------------------------------------------------------------------------


def env_file_config(tmp_path: Path, env_file: str) -> Path:
    path = tmp_path / "proj" / ".vscode" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{{"servers": {{"a": {{"command": "x", "envFile": "{env_file}"}}}}}}')
    return path


def test_an_env_file_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path) -> None:
    # Before: a FIFO nobody writes to was opened for reading, and the read never returned.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for env_file in (fifo, Path("/dev/zero")):
        path = env_file_config(tmp_path, str(env_file))
        raised: list[BaseException] = []

        def load(path: Path = path, raised: list[BaseException] = raised) -> None:
            try:
                load_config(path, environ={})
            except BaseException as error:  # handed to the test
                raised.append(error)

        reading = threading.Thread(target=load, daemon=True)
        reading.start()
        reading.join(timeout=10)
        if reading.is_alive():  # the reader is stuck in open(): a writer lets it go
            with open(fifo, "wb"):
                pass
            pytest.fail(f"reading the env file {env_file} did not return")
        assert [str(e) for e in raised] == [
            f"{path}:1: servers.a.envFile: the env file {str(env_file)!r} is not a regular file"
        ]


def test_an_env_file_is_read_as_vs_code_reads_it(tmp_path: Path) -> None:
    # Before: `C="q" # note` kept its quotes, and a form feed or NEL in a value ended a line (the line named
    # in an error was off).
    env = tmp_path / "proj" / ".env"
    env.parent.mkdir(parents=True)
    env.write_bytes(
        b'export A=1\nB="x\\ny" # note\nC=\'q # r\' # note\nD=a # note\nE: `t`\nF=x\x0cy\xc2\x85z\r\nG="open # x\n'
    )
    path = env_file_config(tmp_path, "${workspaceFolder}/.env")
    (server,) = load_config(path, environ={}).servers
    assert dict(server.env) == {
        "A": "1", "B": "x\ny", "C": "q # r", "D": "a", "E": "t", "F": "x\x0cy\x85z", "G": '"open # x'
    }  # fmt: skip
    env.write_bytes(b"A=1\nB=x\x0cy\xc2\x85z\nnot a variable\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == f"{env}:3: expected NAME=value (the envFile of servers.a.envFile)"


def test_a_nul_in_an_env_files_value_names_the_env_file_its_line_and_the_variable(tmp_path: Path) -> None:
    # Before: read, and the server failed to start with "bad response: embedded null byte", naming nothing.
    env = tmp_path / "proj" / ".env"
    env.parent.mkdir(parents=True)
    env.write_bytes(b"A=1\nTOKEN=ab\x00cd\n")
    with pytest.raises(ConfigError) as info:
        load_config(env_file_config(tmp_path, "${workspaceFolder}/.env"), environ={})
    assert str(info.value) == (
        f"{env}:2: TOKEN: the value holds a NUL character, which no program can be given (the envFile of "
        "servers.a.envFile)"
    )


# --- JSON that YAML reads differently, encodings, NUL -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('{"mcpServers": {"a"\n: {"command"\r\n:\n"x", "args": 5}}}', 4),  # a line break before a colon
        ('{"mcpServers": {"' + "k" * 5000 + '": {"command": "x"},\n "a": {"command": "x", "args": 5}}}', 2),
        ('{"mcpServers": {"a": {"command": "x\x7f\x9f\ufffe",\n "args": 5}}}', 2),  # DEL, C1, a noncharacter
    ],
)
def test_valid_json_that_yaml_cannot_read_as_it_is_is_read_as_json(text: str, line: int) -> None:
    # Before: "invalid YAML: while parsing a flow mapping: expected ',' or '}', but got ':'" (a key past 1,024
    # characters, or apart from its colon by a line break), or a ReaderError traceback (DEL), for valid JSON.
    assert error_of(text, ".mcp.json") == f".mcp.json:{line}: mcpServers.a.args: expected a list of strings, got int 5"


def test_tooltree_settings_written_as_json_are_read_as_json() -> None:
    text = '{"servers": {"a"\n: {"command": "x", "timeout": 1e5}}, "sandbox": {}}'
    (server,) = parse_config(text, source="tooltree.json", environ={}).servers
    assert server.timeout == 100_000.0


def test_a_nul_or_control_character_in_a_yaml_file_is_a_config_error_at_its_line() -> None:
    # Before: yaml.reader.ReaderError, a traceback (exit 70).
    error = error_of("servers:\n  a:\n    command: x\x00\n", "tooltree.yaml")
    assert error == "tooltree.yaml:3: invalid YAML: the character U+0000 is not allowed (a NUL, a control character)"


@pytest.mark.parametrize(
    ("name", "data", "said"),
    [
        (".mcp.json", '{"mcpServers": {}}'.encode("utf-16"), "UTF-16 text (byte order mark FF FE"),
        ("config.toml", '[mcp_servers.a]\ncommand = "x"\n'.encode("utf-16-be"), "UTF-16 text (a NUL byte beside"),
        ("settings.json", '{"mcpServers": {}}'.encode("utf-16-le"), "UTF-16 text (a NUL byte beside"),
        ("tooltree.yaml", "servers: {}\n".encode("utf-32"), "UTF-32 text (byte order mark FF FE 00 00)"),
    ],
)
def test_a_utf16_or_utf32_file_is_said_to_be_one(tmp_path: Path, name: str, data: bytes, said: str) -> None:
    # Before: "not UTF-8 text: byte 0xff in column 1", or, without a byte order mark, "invalid JSON: Expecting
    # property name enclosed in double quotes (column 2)".
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value).startswith(f"{path}:1: not UTF-8 text: {said}"), info.value
    assert str(info.value).endswith("(save the file as UTF-8)")


def test_a_codex_file_nested_too_deep_names_the_line_and_key() -> None:
    # Before: tomllib's RecursionError was said without a line.
    text = '[mcp_servers.a]\ncommand = "x"\nargs = ["[", # [\n' + "[" * 5000 + "]" * 5000 + "]\n"
    assert error_of(text, CODEX) == f"{CODEX}:4: mcp_servers.a.args: " + (
        "nested too deep: more than 64 levels of mappings and lists (tooltree's settings go 4 deep)"
    )
