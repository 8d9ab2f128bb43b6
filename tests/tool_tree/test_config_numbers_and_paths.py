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


@pytest.mark.parametrize("path", ["a\\u0000b", "a\\ud800b"])
def test_an_env_file_path_python_cannot_open_is_a_config_error(tmp_path: Path, path: str) -> None:
    config = tmp_path / ".vscode" / "mcp.json"
    config.parent.mkdir()
    config.write_text(f'{{"servers": {{"a": {{"command": "x",\n "envFile": "{path}"}}}}}}')
    with pytest.raises(ConfigError) as info:
        load_config(str(config), environ={})
    assert str(info.value).startswith(f"{config}:2: servers.a.envFile: cannot read the env file "), info.value
