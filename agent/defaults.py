"""Defaults of agent runs (a leaf module: the CLI reads these without importing the loop)."""

from __future__ import annotations

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MAX_TURNS = 30
DEFAULT_MAX_TOKENS = 32_000
DEFAULT_RETRIES = 4
MODES = ("code", "direct", "tool-search")
