"""`redact`: the secrets of a server's configuration replaced by markers; `StderrLog.tail` applies it."""

from __future__ import annotations

import sys

from tool_tree.config import ServerConfig
from tool_tree.redact import MIN_SECRET_CHARS, redact, secrets
from tool_tree.stderr_log import StderrLog

SECRET = "sk-live-0123456789abcdefghijkl"


def stdio(**env: str) -> ServerConfig:
    return ServerConfig(name="s", command=sys.executable, env=env)


def test_each_env_value_is_replaced_by_a_marker_naming_its_variable() -> None:
    server = stdio(API_KEY=SECRET, DB_PASSWORD="hunter22")
    text = f"401 for key {SECRET}\nlogin with hunter22 failed ({SECRET})"
    assert redact(text, server) == (
        "401 for key [redacted API_KEY]\nlogin with [redacted DB_PASSWORD] failed ([redacted API_KEY])"
    )


def test_values_too_short_to_be_secrets_are_left_alone() -> None:
    server = stdio(DEBUG="1", MODE="fast", REGION="eu-1")
    assert MIN_SECRET_CHARS == 6
    assert secrets(server) == {}
    assert redact("DEBUG=1 MODE=fast REGION=eu-1 in 1 s", server) == "DEBUG=1 MODE=fast REGION=eu-1 in 1 s"


def test_a_secret_that_holds_another_is_replaced_whole_and_a_marker_is_not_rescanned() -> None:
    server = stdio(TOKEN="abcdef", LONG_TOKEN="abcdef-ghijkl", NAME="redacted")
    assert redact("abcdef-ghijkl and abcdef", server) == "[redacted LONG_TOKEN] and [redacted TOKEN]"


def test_a_value_of_several_lines_is_also_matched_line_by_line() -> None:
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
    text = "cannot parse key line MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
    assert redact(text, stdio(PEM=key)) == "cannot parse key line [redacted PEM]"


def test_a_header_value_and_the_credential_after_its_scheme_are_redacted() -> None:
    server = ServerConfig(
        name="h",
        url="https://mcp.example.com/mcp",
        headers={"Authorization": "Bearer tok-9f8e7d6c", "X-Api-Key": SECRET},
    )
    text = f"sent 'Authorization: Bearer tok-9f8e7d6c'; token tok-9f8e7d6c expired; key {SECRET}"
    assert redact(text, server) == (
        "sent 'Authorization: [redacted header Authorization]'; token [redacted header Authorization] expired; "
        "key [redacted header X-Api-Key]"
    )


def test_the_urls_password_and_query_values_are_redacted_as_written_and_decoded() -> None:
    server = ServerConfig(name="h", url="https://bob:p%40ssw0rd!@mcp.example.com/mcp?api_key=k3y%2Fvalue&v=2")
    text = (
        "GET https://bob:p%40ssw0rd!@mcp.example.com/mcp?api_key=k3y%2Fvalue&v=2 failed; "
        "password p@ssw0rd! rejected; key k3y/value unknown"
    )
    assert redact(text, server) == (
        "GET https://bob:[redacted url password]@mcp.example.com/mcp?api_key=[redacted url query api_key]&v=2 "
        "failed; password [redacted url password] rejected; key [redacted url query api_key] unknown"
    )


def test_a_url_user_without_a_password_is_redacted_as_a_token() -> None:
    server = ServerConfig(name="h", url="https://ghp_abcdef123456@mcp.example.com/mcp")
    assert redact("bad credentials ghp_abcdef123456", server) == "bad credentials [redacted url user]"


def test_the_stderr_tail_is_redacted_and_a_secret_cut_by_its_window_leaves_no_piece() -> None:
    log = StderrLog(stdio(API_KEY=SECRET))
    try:
        # 190 bytes of two-byte characters after the secret: the 200-byte window starts 20 characters into
        # the secret, and the last 100 characters shown would include the rest of it.
        log.file.write(f"{SECRET}{'é' * 95}")
        tail = log.tail(max_chars=100)
        assert tail.endswith("é" * 50)
        assert not any(SECRET[i : i + 4] in tail for i in range(len(SECRET) - 3))
        log.file.write(f"\nfailed with {SECRET}\n")
        assert log.tail().endswith("failed with [redacted API_KEY]")
    finally:
        log.close()


def test_a_value_is_also_matched_trimmed_and_as_a_python_repr_quotes_it() -> None:
    server = ServerConfig(
        name="h", url="https://mcp.example.com/mcp", headers={"Authorization": "Bearer tok\\9f8e'7d\r"}
    )
    assert redact('Illegal header value b"Bearer tok\\\\9f8e\'7d\\r"', server) == (
        'Illegal header value b"[redacted header Authorization]"'
    )
    assert redact("invalid key sk-live-0123", stdio(KEY="sk-live-0123\r\n")) == "invalid key [redacted KEY]"
