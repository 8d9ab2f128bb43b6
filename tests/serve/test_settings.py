"""The ``serve:`` section: read by `ServeSettings`, checked by the CLI's config loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.serve.settings import DEFAULT_IDLE_TIMEOUT, ServeSettings
from tool_tree.config import ConfigError
from tooltree_cli.common import load


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tooltree.yaml"
    path.write_text("servers: {}\n" + text, encoding="utf-8")
    return path


def test_the_serve_section_and_the_agents_pinned_tools_are_read(tmp_path: Path) -> None:
    text = "serve:\n  passthrough: [crm.get_record]\n  idle_timeout: 60\nagent:\n  pinned: [a.b]\n"
    config = load(write(tmp_path, text))
    settings = ServeSettings.from_config(config)
    assert settings.passthrough == ("crm.get_record",) and settings.idle_timeout == 60.0
    assert settings.pinned == ("a.b",) and settings.warm == 1


def test_an_agent_setting_whose_variable_is_unset_does_not_stop_serve_which_reads_pinned_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `tooltree serve` refused to start: "agent.model: environment variable ${MODEL} is not set".
    from agent.defaults import agent_settings

    monkeypatch.delenv("MODEL", raising=False)
    config = load(write(tmp_path, 'agent:\n  model: "${MODEL}"\n  pinned: [a.b]\n'))
    assert ServeSettings.from_config(config).pinned == ("a.b",)
    with pytest.raises(ConfigError) as info:  # the agent, which reads the model, still needs it
        agent_settings(config)
    assert str(info.value) == f"{tmp_path / 'tooltree.yaml'}:3: agent.model: environment variable ${{MODEL}} is not set"


def test_command_line_values_win_and_none_keeps_the_config(tmp_path: Path) -> None:
    config = load(write(tmp_path, "serve:\n  warm: 3\n"))
    settings = ServeSettings.from_config(config, warm=0, idle_timeout=None)
    assert settings.warm == 0 and settings.idle_timeout == DEFAULT_IDLE_TIMEOUT


def test_an_unknown_serve_key_names_file_line_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "serve:\n  passthru: [crm.get_record]\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:3: serve.passthru: unknown key")
    assert "passthrough" in str(caught.value)


def test_warm_zero_in_the_config_means_no_sandbox_started_ahead(tmp_path: Path) -> None:
    assert ServeSettings.from_config(load(write(tmp_path, "serve:\n  warm: 0\n"))).warm == 0
    assert ServeSettings.from_config(load(write(tmp_path, "serve:\n  warm: 3\n"))).warm == 3


@pytest.mark.parametrize("value", ["-1", "1.5", "many", "[1]"])
def test_a_warm_that_is_not_a_count_names_file_line_and_key(tmp_path: Path, value: str) -> None:
    path = write(tmp_path, f"serve:\n  warm: {value}\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}:3: serve.warm: expected ")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # Each would start (or allow) that many containers, or spin the host on notifications.
        ("warm: 1000", "serve.warm: expected at most 16 sandboxes (each is a started container), got 1000"),
        ("max_sessions: 100000", "serve.max_sessions: expected at most 256, got 100000"),
        ("progress_interval: 0.000001", "serve.progress_interval: expected at least 0.1 s, got 1e-06"),
    ],
)
def test_a_number_past_its_bound_names_file_line_key_and_the_bound(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, f"serve:\n  {line}\n")
    with pytest.raises(ConfigError) as caught:
        load(path)
    assert str(caught.value) == f"{path}:3: {message}"


def test_the_bounds_themselves_are_accepted(tmp_path: Path) -> None:
    config = load(write(tmp_path, "serve:\n  warm: 16\n  max_sessions: 256\n  progress_interval: 0.1\n"))
    settings = ServeSettings.from_config(config)
    assert (settings.warm, settings.max_sessions, settings.progress_interval) == (16, 256, 0.1)
