"""A server's headers, environment and paths are checked while the config loads: what no HTTP client or program
could be given is a `ConfigError` naming file, line and key (before: an error of the HTTP library or of the
process start, at connect time, naming neither), and ``~`` in ``command`` and ``cwd`` is the home folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_tree.config import ConfigError, Setting, load_config, parse_config


def error_of(text: str, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="tooltree.yaml", environ=environ or {})
    return info.value


def http(header: str) -> str:
    return f"servers:\n  a:\n    url: http://127.0.0.1:8765/mcp\n    headers:\n      {header}\n"


def stdio(line: str) -> str:
    return f"servers:\n  a:\n    command: x\n    {line}\n"


BAD_NAME = "not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~, no spaces)"
BAD_VALUE = "the value holds a line break, a control character or a non-ASCII character, which HTTP cannot send"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        # Before: "LocalProtocolError: Illegal header name b'Bad Name'" for the server, at connect time.
        ('"Bad Name": x', f"tooltree.yaml:5: servers.a.headers.Bad Name: {BAD_NAME}"),
        ('"": x', f"tooltree.yaml:5: servers.a.headers.: {BAD_NAME}"),
        ('X-A: "a\\nb"', f"tooltree.yaml:5: servers.a.headers.X-A: {BAD_VALUE}"),
        ('X-A: "é"', f"tooltree.yaml:5: servers.a.headers.X-A: {BAD_VALUE}"),  # before: "bad response: 'ascii' codec…"
        ('X-A: " x"', "tooltree.yaml:5: servers.a.headers.X-A: the value starts or ends with a space"),
        (
            "Content-Length: '5'",
            "tooltree.yaml:5: servers.a.headers.Content-Length: set by the HTTP client for each request; it cannot be"
            " configured",
        ),
    ],
)
def test_a_header_no_http_client_can_send_names_file_line_and_key(header: str, expected: str) -> None:
    assert str(error_of(http(header))).startswith(expected)


def test_a_token_variable_set_but_empty_is_named_without_showing_the_value() -> None:
    # Before: "LocalProtocolError: Illegal header value b'[redacted header Authorization]'".
    e = error_of(http('Authorization: "Bearer ${TOKEN}"'), {"TOKEN": ""})
    assert str(e) == (
        "tooltree.yaml:5: servers.a.headers.Authorization: the value starts or ends with a space"
        " (is a variable it names empty?)"
    )
    e = error_of(http('Authorization: "Bearer ${TOKEN}"'), {"TOKEN": "s3cret\n"})
    assert "s3cret" not in str(e) and e.key == "servers.a.headers.Authorization"


@pytest.mark.parametrize(
    ("url", "environ", "problem"),
    [
        ("https://${HOST}/mcp?key=${KEY}", {"HOST": "", "KEY": "sk-live-1234"}, "expected a URL with a host"),
        ("https://api.example.com/mcp?key=${KEY}", {"KEY": "sk-live 1234"}, "expected a URL without spaces"),
        ("${SCHEME}://u:${KEY}@h/mcp", {"SCHEME": "ftp", "KEY": "sk-live-1234"}, "expected an http:// or https://"),
        ("https://u:${KEY}@h:${PORT}/mcp", {"PORT": "99999", "KEY": "sk-live-1234"}, "not a valid URL"),
    ],
)
def test_a_url_made_bad_by_its_variables_is_shown_as_written_without_their_values(
    url: str, environ: dict[str, str], problem: str
) -> None:
    # Before: "got 'https:///mcp?key=sk-live-1234'": the key, which headers never show, printed whole.
    e = error_of(f'servers:\n  a:\n    url: "{url}"\n', environ)
    assert e.key == "servers.a.url" and e.line == 3
    assert e.message.startswith(problem) and e.message.endswith(f"{url!r} once its variables are set")
    assert "sk-live" not in str(e)
    assert (
        error_of("servers:\n  a:\n    url: ftp://h\n").message == "expected an http:// or https:// URL, got 'ftp://h'"
    )


def test_good_headers_and_references_not_yet_set_are_accepted() -> None:
    text = http("{Authorization: 'Bearer ${TOKEN}', X-Empty: '', X-Tab: 'a\tb', \"X-Api_Key.1\": '!~'}")
    (server,) = parse_config(text, environ={"TOKEN": "t"}).servers
    assert server.headers == {"Authorization": "Bearer t", "X-Empty": "", "X-Tab": "a\tb", "X-Api_Key.1": "!~"}
    disabled = parse_config(text.replace("headers:", "enabled: false\n    headers:"), environ={}).servers[0]
    assert disabled.headers["Authorization"] == "Bearer ${TOKEN}"  # its variables are not looked up
    unused = parse_config(text + "  b: {command: x}\n", environ={}, using=["b"]).server("b")
    assert unused.name == "b"  # a's unset variable is raised only when a is used


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # Before: "bad response: illegal environment variable name" / "embedded null byte" at start.
        ("env: {'A=B': x}", "tooltree.yaml:4: servers.a.env.A=B: not a valid environment variable name"),
        ("env: {'': x}", "tooltree.yaml:4: servers.a.env.: not a valid environment variable name"),
        ('env: {A: "x\\0y"}', "tooltree.yaml:4: servers.a.env.A: the value holds a NUL character"),
        ('args: [a, "b\\0"]', "tooltree.yaml:4: servers.a.args[1]: holds a NUL character"),
        ('cwd: "d\\0"', "tooltree.yaml:4: servers.a.cwd: holds a NUL character"),
    ],
)
def test_what_no_program_can_be_given_names_file_line_and_key(line: str, expected: str) -> None:
    assert str(error_of(stdio(line))).startswith(expected)


def test_a_tilde_in_command_and_cwd_is_the_home_folder_not_a_folder_beside_the_config(tmp_path: Path) -> None:
    # Before: `command: ~/bin/srv` started <config folder>/~/bin/srv ("no such file").
    path = tmp_path / "conf" / "tooltree.yaml"
    path.parent.mkdir()
    path.write_text(
        "servers:\n  a: {command: ~/bin/srv, cwd: ~/work, args: [~/data]}\n  b: {command: x, cwd: '~'}\n",
        encoding="utf-8",
    )
    a, b = load_config(path, environ={"HOME": "/home/ana"}).servers
    assert (a.command, a.cwd, b.cwd) == ("/home/ana/bin/srv", "/home/ana/work", "/home/ana")
    assert a.args == ("~/data",)  # arguments are the server's to read, as other clients pass them
    root = parse_config("servers:\n  a: {command: x, cwd: ~root/w}\n", environ={}, folder=tmp_path).servers[0]
    assert root.cwd == str(Path("~root").expanduser() / "w")


def test_a_tilde_that_names_no_home_folder_names_file_line_and_key() -> None:
    e = error_of("servers:\n  a:\n    command: x\n    cwd: ~no-such-user-here/w\n")
    assert str(e) == (
        "tooltree.yaml:4: servers.a.cwd: cannot resolve '~no-such-user-here' in '~no-such-user-here/w':"
        " there is no user 'no-such-user-here'"
    )


def test_a_command_line_with_a_slash_is_left_as_written_and_a_path_with_spaces_resolves(tmp_path: Path) -> None:
    # Before: `command: npx -y @scope/server` became <config folder>/npx -y @scope/server.
    (tmp_path / "my tools").mkdir()
    (tmp_path / "my tools" / "srv").touch()
    text = "servers:\n  a: {command: npx -y @scope/server}\n  b: {command: my tools/srv}\n  c: {command: ./no such}\n"
    a, b, c = parse_config(text, environ={}, folder=tmp_path).servers
    assert a.command == "npx -y @scope/server"
    assert b.command == str(tmp_path.resolve() / "my tools" / "srv")
    assert c.command == "./no such"


def test_an_empty_token_of_a_server_the_run_does_not_use_is_raised_only_when_it_is_used() -> None:
    text = http('Authorization: "Bearer ${TOKEN}"') + "  b: {command: x}\n"
    config = parse_config(text, environ={"TOKEN": ""}, using=["b"])
    assert config.server("b").command == "x"
    with pytest.raises(ConfigError, match=r"servers\.a\.headers\.Authorization: the value starts or ends"):
        config.server("a")


HALF = r"holds \ud800, half of a character (a lone UTF-16 surrogate), which no program or file can take"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"mcpServers": {"a": {"command": "x",\n "cwd": "\\ud800"}}}', ".mcp.json:2: mcpServers.a.cwd: "),
        (
            '{"mcpServers": {"a": {"command": "x",\n "args": ["-v", "x\\ud800"]}}}',
            ".mcp.json:2: mcpServers.a.args[1]: ",
        ),
        ('{"mcpServers": {"a": {"command": "x",\n "env": {"K": "\\ud800"}}}}', ".mcp.json:2: mcpServers.a.env.K: "),
        (
            '{"mcpServers": {"a": {"command": "x",\n "env": {"\\ud800": "v"}}}}',
            ".mcp.json:2: mcpServers.a.env.\\ud800: ",
        ),
        ('{"mcpServers": {\n"\\ud800": {"command": "x"}}}', ".mcp.json:2: mcpServers: a server's name "),
        (
            '{"mcpServers": {"a": {"command": "x",\n "description": "\\ud800 notes"}}}',
            ".mcp.json:2: mcpServers.a.description: ",
        ),
    ],
    ids=["cwd", "args", "env-value", "env-name", "server-name", "description"],
)
def test_half_a_character_written_as_an_escape_names_file_line_and_key(text: str, expected: str) -> None:
    # Before: a `cwd` holding one was a UnicodeEncodeError traceback while loading; in `command`, `args` or `env`, the
    # server failed to start with "bad response: 'utf-8' codec can't encode"; a server's name or `description` was a
    # traceback (exit 70) once its tools were listed.
    with pytest.raises(ConfigError) as info:
        parse_config(text, source=".mcp.json", environ={})
    assert str(info.value).startswith(expected + HALF)
    str(info.value).encode()  # the error itself holds none: it can be written anywhere
    # Python reads a variable's byte that is not UTF-8 as half a character (0xff as \udcff); it goes back as that byte.
    server = parse_config('servers:\n  a: {command: x, args: ["${RAW}"]}\n', environ={"RAW": "\udcff"}).servers[0]
    assert server.args == ("\udcff",)


def test_half_a_character_in_a_sections_setting_names_file_line_and_key() -> None:
    sections = {"agent": {"pinned": Setting(list, "a list of tools (server.tool)")}}
    with pytest.raises(ConfigError) as info:
        parse_config('servers: {}\nagent:\n  pinned: ["a.\\udc80"]\n', source="tooltree.yaml", sections=sections)
    assert str(info.value).startswith("tooltree.yaml:3: agent.pinned: " + HALF.replace("ud800", "udc80"))


def test_a_url_whose_scheme_is_in_capitals_is_accepted_as_http_reads_it() -> None:
    # Before: "expected an http:// or https:// URL, got 'HTTPS://drive.example/mcp'" (RFC 3986: a scheme's case does not
    # matter, and the HTTP client connects to it).
    (server,) = parse_config("servers:\n  a: {url: HTTPS://drive.example/mcp}\n", environ={}).servers
    assert server.url == "HTTPS://drive.example/mcp"
    assert error_of("servers:\n  a: {url: HTTPX://drive.example/mcp}\n").message.startswith("expected an http://")


def test_two_headers_whose_names_differ_in_case_alone_are_refused_at_the_second() -> None:
    # Before: both were sent, two Authorization headers in each request, which a server reads as it likes.
    e = error_of(http("{Authorization: 'Bearer a', X-Other: b,\n       authorization: 'Bearer b'}"))
    assert (e.line, e.key) == (6, "servers.a.headers.authorization")
    assert (
        e.message == "the same header as 'Authorization' (HTTP header names are case-insensitive: both would be sent)"
    )
    assert "Bearer" not in str(e)


def test_a_variable_written_without_braces_is_said_to_reach_the_server_as_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Before: `$HOME/notes` reached the server as written, without a word, though ${HOME} is expanded.
    text = (
        "servers:\n  a:\n    command: x\n    args: [--root, $HOME/notes, pa$$HOME, $x1, '${HOME}']\n"
        "    env: {A: $TOKEN}\n  b: {command: y, args: [$HOME], enabled: false}\n"
    )
    config = parse_config(text, source="tooltree.yaml", environ={"HOME": "/home/u", "TOKEN": "t"})
    assert config.servers[0].args == ("--root", "$HOME/notes", "pa$HOME", "$x1", "/home/u")
    assert dict(config.servers[0].env) == {"A": "$TOKEN"}
    said = "is passed on as text, not the variable's value: write"
    assert caplog.messages == [
        f"tooltree.yaml:4: servers.a.args[1]: $HOME {said} ${{HOME}} to have it expanded, or $$HOME to keep the $ "
        "and not be told",
        f"tooltree.yaml:5: servers.a.env.A: $TOKEN {said} ${{TOKEN}} to have it expanded, or $$TOKEN to keep the $ "
        "and not be told",
    ]


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("example.com/mcp", " (write https://example.com/mcp)"),
        ("localhost:8080/mcp", " (write http://localhost:8080/mcp)"),
        ("127.0.0.1:3000", " (write http://127.0.0.1:3000)"),
        ("[::1]:80/mcp", " (write http://[::1]:80/mcp)"),
        ("mcp", ""),
        ("/mcp", ""),
        ("ftp://h", ""),
    ],
)
def test_a_url_without_its_scheme_says_the_url_to_write(url: str, said: str) -> None:
    # Before: "expected an http:// or https:// URL, got 'localhost:8080/mcp'", and no more.
    e = error_of(f'servers:\n  a:\n    url: "{url}"\n')
    assert e.message == f"expected an http:// or https:// URL, got {url!r}{said}"


def test_a_url_made_by_variables_is_not_shown_with_a_scheme() -> None:
    e = error_of('servers:\n  a:\n    url: "${HOST}/mcp"\n', {"HOST": "sk-live.example.com"})
    assert e.message == "expected an http:// or https:// URL, got '${HOST}/mcp' once its variables are set"
