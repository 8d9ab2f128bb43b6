"""Defaults of agent runs and the ``agent:`` section of tooltree.yaml (a leaf module: the CLI reads
these without importing the loop)."""

from __future__ import annotations

from typing import Any

from tool_tree.config import Config, Setting

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MAX_TURNS = 30
DEFAULT_MAX_TOKENS = 32_000
DEFAULT_RETRIES = 4
MODES = ("code", "direct", "tool-search")

SETTINGS: dict[str, Setting] = {
    "mode": Setting(str, f"one of {', '.join(MODES)}", choices=MODES),
    "model": Setting(str, "the model id"),
    "pinned": Setting(list, "a list of tools (server.tool) whose signatures stay in the prompt"),
    "max_turns": Setting(int, "the most requests per run"),
    "max_tokens": Setting(int, "max_tokens of each request"),
    "token_budget": Setting(int, "tokens (input + output) after which a run stops"),
}
"""The ``agent:`` section: defaults of `tooltree agent` and `Agent`; their arguments take precedence."""


def agent_settings(config: Config | None) -> dict[str, Any]:
    """The config's ``agent:`` section, checked.

    Raises:
        ConfigError: an unknown key or a value of the wrong type (file, line, key).
    """
    return config.section("agent").read(SETTINGS) if config is not None else {}
