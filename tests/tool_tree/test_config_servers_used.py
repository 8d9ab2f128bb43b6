"""A server's ``${VAR}`` matters only when the server is used: a disabled server's are not looked up, and with
``using`` (the servers a run will use) another server's unset one is raised when `Config.server` or
`Config.enabled_servers` picks it, with the file, line and key it would have had."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_tree.config import ConfigError, load_config, parse_config

TWO = """\
servers:
  crm:
    command: python
    args: [crm.py, "--token=${CRM_TOKEN}"]
  drive:
    url: https://drive.example.com/mcp
    headers: {Authorization: "Bearer ${DRIVE_TOKEN}"}
"""


def test_a_server_not_used_needs_its_variables_only_once_it_is_picked(tmp_path: Path) -> None:
    # Before: `using` did not exist, and drive's unset variable refused the file for a run of crm alone.
    path = tmp_path / "tooltree.yaml"
    path.write_text(TWO, encoding="utf-8")
    unset = f"{path}:7: servers.drive.headers.Authorization: environment variable ${{DRIVE_TOKEN}} is not set"
    config = load_config(path, environ={"CRM_TOKEN": "s"}, using=["crm"])
    assert config.server("crm").args == ("crm.py", "--token=s")
    drive = config.servers[1]
    assert drive.headers == {"Authorization": "Bearer ${DRIVE_TOKEN}"}  # kept as written, never sent
    for pick in (lambda: config.server("drive"), lambda: config.enabled_servers):
        with pytest.raises(ConfigError) as info:
            pick()
        assert str(info.value) == unset
        assert (info.value.line, info.value.key) == (7, "servers.drive.headers.Authorization")
    for using in (None, ["crm", "drive"]):  # a server used needs its variables at once, as before
        with pytest.raises(ConfigError) as info:
            load_config(path, environ={"CRM_TOKEN": "s"}, using=using)
        assert str(info.value) == unset


def test_a_disabled_servers_strings_are_kept_as_written_and_its_references_still_checked(tmp_path: Path) -> None:
    # Before: "tooltree.yaml:3: servers.a.command: environment variable ${TOOLS} is not set" for a disabled server.
    text = """\
servers:
  a:
    command: ${TOOLS}/bin/server
    args: ["--key=${KEY:-x}", "$$HOME"]
    cwd: ${WORK}
    protocol: ${PROTOCOL}
    enabled: false
  b:
    url: ${DRIVE_URL}
    enabled: false
"""
    a, b = parse_config(text, source="tooltree.yaml", environ={"KEY": "k"}, folder=tmp_path).servers
    assert (a.command, a.args, a.cwd, a.protocol) == ("${TOOLS}/bin/server", ("--key=${KEY:-x}", "$$HOME"), "${WORK}",
                                                      "${PROTOCOL}")  # fmt: skip
    assert (a.enabled, a.unresolved, b.url, b.enabled) == (False, None, "${DRIVE_URL}", False)
    with pytest.raises(ConfigError) as info:  # a mistake in the file is one whether or not the server is used
        parse_config(text.replace("${KEY:-x}", "${1}"), source="tooltree.yaml", environ={})
    assert str(info.value) == (
        "tooltree.yaml:4: servers.a.args[0]: not a variable reference: '${1}' (use ${VAR}, ${VAR:-default} or "
        "${VAR-default}, and $$ for a literal $)"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text.replace("${DRIVE_URL}", "htp://drive"), source="tooltree.yaml", environ={})
    assert str(info.value) == "tooltree.yaml:9: servers.b.url: expected an http:// or https:// URL, got 'htp://drive'"


def test_using_takes_a_list_of_names_not_one_name() -> None:
    with pytest.raises(TypeError) as info:
        parse_config(TWO, environ={}, using="crm")
    assert str(info.value) == "using: expected a list of server names, got str 'crm'"


def test_a_pool_offers_a_server_whose_variable_is_unset_and_fails_its_calls_with_the_error_starting_nothing(
    tmp_path: Path,
) -> None:
    # Before: `ServerPool(config)` of a config loaded with `using=()` raised the error (`Config.enabled_servers`), so a
    # session of several servers could not start over one server's unset token.
    from tool_tree.pool import BackgroundPool, ServerUnavailable

    path = tmp_path / "tooltree.yaml"
    path.write_text(TWO, encoding="utf-8")
    config = load_config(path, environ={}, using=())
    assert [s.name for s in config.offered_servers] == ["crm", "drive"]
    with BackgroundPool(config) as pool:
        for server, line, key, name in (("crm", 4, "args[1]", "CRM_TOKEN"), ("drive", 7, "headers.Authorization",
                                                                            "DRIVE_TOKEN")):  # fmt: skip
            with pytest.raises(ServerUnavailable) as info:
                pool.call(server, "anything", {})
            said = f"{path}:{line}: servers.{server}.{key}: environment variable ${{{name}}} is not set"
            assert str(info.value) == f"server {server!r} is unavailable: {said}"
