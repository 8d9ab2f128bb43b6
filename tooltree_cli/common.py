"""Helpers shared by subcommands: finding the config, sandbox settings from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sandbox.config import SandboxConfig
    from tool_tree.config import Config

DEFAULT_CONFIG = "tooltree.yaml"


def load_optional_config(path: str | None) -> Config | None:
    """The config at ``path``; with no path, ./tooltree.yaml when it exists, else None.

    Raises:
        ConfigError: the file is invalid (or ``path`` does not exist).
    """
    from tool_tree.config import load_config

    if path is not None:
        return load_config(path)
    if Path(DEFAULT_CONFIG).exists():
        return load_config(DEFAULT_CONFIG)
    return None


OWNER_ENV = "TOOLTREE_SANDBOX_OWNER"


def sandbox_config(config: Config | None, **overrides: object) -> SandboxConfig:
    """`SandboxConfig` from the config's ``sandbox:`` section, with command-line overrides.

    ``$TOOLTREE_SANDBOX_OWNER`` sets the owner label of containers and volumes (what
    ``tooltree sandbox prune --owner`` selects), so a test run can clean up only its own.
    """
    from sandbox.config import SandboxConfig

    settings: dict[str, Any] = dict(config.sandbox) if config is not None else {}
    if os.environ.get(OWNER_ENV):
        settings["owner"] = os.environ[OWNER_ENV]
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return SandboxConfig(**settings)
