"""Helpers shared by subcommands: finding the config, sandbox settings from it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.config import SandboxConfig
    from tool_tree.config import Config, Setting

DEFAULT_CONFIG = "tooltree.yaml"


def config_sections() -> dict[str, dict[str, Setting]]:
    """Every section tooltree.yaml may have besides ``servers``, with the package that owns its keys."""
    from agent.defaults import SETTINGS as AGENT
    from agent.serve.settings import SETTINGS as SERVE
    from sandbox.config import SETTINGS as SANDBOX
    from tool_tree.starts import SECTION as POOL_SECTION
    from tool_tree.starts import SETTINGS as POOL

    return {"sandbox": SANDBOX, "agent": AGENT, "serve": SERVE, POOL_SECTION: POOL}


def load(path: str | Path) -> Config:
    """The config at ``path``, every section checked (an unknown section or key is an error).

    Raises:
        ConfigError: the file is invalid or missing.
    """
    from tool_tree.config import load_config

    return load_config(path, sections=config_sections())


def load_optional_config(path: str | None) -> Config | None:
    """The config at ``path``; with no path, ./tooltree.yaml when it exists, else None.

    Raises:
        ConfigError: the file is invalid (or ``path`` does not exist).
    """
    if path is not None:
        return load(path)
    if Path(DEFAULT_CONFIG).exists():
        return load(DEFAULT_CONFIG)
    return None


OWNER_ENV = "TOOLTREE_SANDBOX_OWNER"


def sandbox_config(config: Config | None, **overrides: object) -> SandboxConfig:
    """`SandboxConfig` from the config's ``sandbox:`` section, with command-line overrides.

    ``$TOOLTREE_SANDBOX_OWNER`` sets the owner label of containers and volumes (what
    ``tooltree sandbox prune --owner`` selects), so a test run can clean up only its own.
    """
    from sandbox.config import SandboxConfig

    return SandboxConfig.from_config(config, owner=os.environ.get(OWNER_ENV) or None, **overrides)
