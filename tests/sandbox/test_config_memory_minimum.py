"""``sandbox.memory`` below the engine's minimum (6 MiB) is a config error at read time, not at container create."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.config import SandboxConfig
from sandbox.errors import SandboxError
from tool_tree.config import ConfigError, parse_config
from tooltree_cli.common import config_sections
from tooltree_cli.main import main

TOO_SMALL = "expected at least 6m (the engine's least memory limit)"


@pytest.mark.parametrize("value", ["10k", "5m", "6291455"])
def test_a_memory_limit_under_6m_is_refused_naming_file_line_and_key(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            f"servers: {{}}\nsandbox:\n  timeout: 10\n  memory: {value}\n",
            source="tooltree.yaml",
            environ={},
            sections=config_sections(),
        )
    assert str(info.value) == f"tooltree.yaml:4: sandbox.memory: {TOO_SMALL}, got {value!r}"


def test_a_memory_limit_of_a_number_alone_that_reads_as_mib_says_it_is_bytes(tmp_path: Path) -> None:
    # Before: `memory: 512`, meant as 512 MiB, was said too small alone, not that a number alone is bytes.
    with pytest.raises(ConfigError) as info:
        parse_config("servers: {}\nsandbox:\n  memory: 512\n", source="tooltree.yaml", sections=config_sections())
    assert str(info.value) == (
        f"tooltree.yaml:3: sandbox.memory: {TOO_SMALL}, got '512' (a number alone is bytes: write 512m for 512 MiB)"
    )


@pytest.mark.parametrize("value", ["6m", "6291456", "1g"])
def test_a_memory_limit_of_6m_or_more_is_taken(value: str) -> None:
    config = parse_config(f"servers: {{}}\nsandbox:\n  memory: {value}\n", environ={}, sections=config_sections())
    assert SandboxConfig.from_config(config).memory == value


def test_a_memory_override_under_6m_is_refused_by_name() -> None:
    with pytest.raises(SandboxError) as info:
        SandboxConfig(memory="1m")
    assert str(info.value) == f"memory: {TOO_SMALL}, got '1m'"


def test_exec_with_a_memory_limit_under_6m_exits_2_before_any_container(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text("servers: {}\nsandbox:\n  memory: 10k\n", encoding="utf-8")
    assert main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tmp_path / "tree")]) == 2
    assert capsys.readouterr().err == f"tooltree: error: {config}:3: sandbox.memory: {TOO_SMALL}, got '10k'\n"


def test_a_memory_limit_a_cgroup_cannot_show_is_refused_naming_file_line_key_and_the_limit() -> None:
    # Before: taken, and every sandbox start refused as "not confined as required: its cgroup sets no memory limit",
    # naming no setting (the kernel shows a limit from 4 EiB on as none).
    with pytest.raises(ConfigError) as info:
        text = "servers: {}\nsandbox:\n  memory: 8000000000g\n"
        parse_config(text, source="tooltree.yaml", environ={}, sections=config_sections())
    assert str(info.value) == (
        "tooltree.yaml:3: sandbox.memory: expected less than 4294967296g (4 EiB: a cgroup's memory limit from there on "
        "reads as none, so the sandbox could not be shown confined), got '8000000000g'"
    )
    config = parse_config("servers: {}\nsandbox:\n  memory: 4194304g\n", environ={}, sections=config_sections())
    assert SandboxConfig.from_config(config).memory_bytes == 2**52  # 4 PiB, far past any host: taken
