"""Helpers shared by subcommands: finding the config, sandbox settings from it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tool_tree.config import Config, load_config

if TYPE_CHECKING:
    from sandbox.config import SandboxConfig

DEFAULT_CONFIG = "tooltree.yaml"


def load_optional_config(path: str | None) -> Config | None:
    """The config at ``path``; with no path, ./tooltree.yaml when it exists, else None.

    Raises:
        ConfigError: the file is invalid (or ``path`` does not exist).
    """
    if path is not None:
        return load_config(path)
    if Path(DEFAULT_CONFIG).exists():
        return load_config(DEFAULT_CONFIG)
    return None


def sandbox_config(config: Config | None, **overrides: object) -> SandboxConfig:
    """`SandboxConfig` from the config's ``sandbox:`` section, with command-line overrides."""
    from sandbox.config import SandboxConfig

    settings = dict(config.sandbox) if config is not None else {}
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return SandboxConfig(**settings)
