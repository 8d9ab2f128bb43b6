"""The ``serve:`` section of tooltree.yaml and the settings of one `tooltree serve` process (a leaf module:
the CLI reads `SETTINGS` without importing the MCP SDK).

::

    serve:
      passthrough: [crm.get_record]   # also offered as ordinary MCP tools, proxied unchanged
      idle_timeout: 900               # seconds without a call before a client's sandbox session ends (default 1800)
      progress_interval: 5            # seconds between progress notifications of a running execution
      warm: 1                         # sandboxes kept started ahead of the next client
      max_sessions: 16                # client sessions at once (more are refused)
      max_listing_values: 10000000    # JSON values the servers' listings of all sessions hold together
      prompts: true                   # offer the servers' prompts (as server__prompt)
      resources: true                 # offer the servers' resources and resource templates
      asks_from_scripts: false        # pass a script's elicitations on to the client (3 per script)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tool_tree.config import Config, Setting
from tool_tree.held_values import MAX_SERVE_HELD_VALUES

DEFAULT_IDLE_TIMEOUT = 1800.0
DEFAULT_PROGRESS_INTERVAL = 5.0
DEFAULT_WARM = 1
DEFAULT_MAX_SESSIONS = 16
MAX_WARM = 16
"""The most sandboxes kept warm: each is a started container (with its memory reserved to the limit)."""
MAX_SESSIONS = 256
"""The most client sessions at once: each may hold a container and its upstream servers."""
MIN_PROGRESS_INTERVAL = 0.1
"""The shortest time between progress notifications (a shorter one floods the client and spins the host)."""

SETTINGS: dict[str, Setting] = {
    "passthrough": Setting(list, "a list of tools (server.tool) also offered as ordinary MCP tools"),
    "idle_timeout": Setting(float, "seconds without a call before a client's sandbox session ends"),
    "progress_interval": Setting(
        float,
        "seconds between progress notifications of a running execution",
        check=lambda v: (
            None if v >= MIN_PROGRESS_INTERVAL else f"expected at least {MIN_PROGRESS_INTERVAL:g} s, got {v:g}"
        ),
    ),
    # Read as text, because the config's whole numbers start at 1 and 0 (start each sandbox on demand) is valid here.
    "warm": Setting(
        str,
        "how many sandboxes to keep started ahead of the next client (0: none)",
        check=lambda v: warm_problem(_count(v), v),
    ),
    "max_sessions": Setting(
        int,
        "the most client sessions at once",
        check=lambda v: None if v <= MAX_SESSIONS else f"expected at most {MAX_SESSIONS}, got {v}",
    ),
    "max_listing_values": Setting(
        int,
        "the most JSON values the servers' listings (tools, prompts, resources) of all client sessions hold together "
        f"(default {MAX_SERVE_HELD_VALUES:,})",
    ),
    "prompts": Setting(bool, "offer the servers' MCP prompts, named server__prompt (default true)"),
    "resources": Setting(bool, "offer the servers' MCP resources and resource templates (default true)"),
    "asks_from_scripts": Setting(
        bool,
        "pass the elicitations a server asks during a script's calls on to the client, at most 3 per script "
        "(default false: only a passthrough call's questions are)",
    ),
}
"""The ``serve:`` section: defaults of `tooltree serve`; its command-line options take precedence."""


@dataclass(frozen=True)
class ServeSettings:
    """How one `tooltree serve` process treats its clients.

    Attributes:
        passthrough: tools (``server.tool``) offered as ordinary MCP tools besides the four.
        idle_timeout: seconds without a call after which a client's sandbox session (its
            container and upstream servers) ends; the client's next call starts a new one. A session whose client
            follows a resource and can be told of a change is not idle (`agent.serve.sessions.SessionRegistry`).
        progress_interval: seconds between progress notifications while a script runs.
        warm: sandboxes kept started ahead of the next client (0: start each one on demand).
        max_sessions: client sessions at once; a new client past this is refused.
        max_listing_values: JSON values the listings of the servers of all client sessions may hold together
            (`tool_tree.held_values`): each session starts its own servers, so without it ``max_sessions`` sessions
            of servers at one run's bound would hold that many times it. A server whose listing would pass it fails
            in that session alone, saying so; a session's servers give theirs back as it ends.
        pinned: tools whose signatures go into the instructions (the ``agent:`` section's ``pinned``).
        prompts: offer the servers' prompts (`agent.serve.upstream_extras`).
        resources: offer the servers' resources and resource templates.
        asks_from_scripts: pass the elicitations a server (``client_capabilities``) asks during a script's calls on
            to the client (`agent.serve.upstream_asks`).
    """

    passthrough: tuple[str, ...] = ()
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    progress_interval: float = DEFAULT_PROGRESS_INTERVAL
    warm: int = DEFAULT_WARM
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_listing_values: int = MAX_SERVE_HELD_VALUES
    pinned: tuple[str, ...] = ()
    prompts: bool = True
    resources: bool = True
    asks_from_scripts: bool = False

    @classmethod
    def from_config(cls, config: Config | None, **overrides: Any) -> ServeSettings:
        """The config's ``serve:`` section (and ``agent: pinned``), then ``overrides`` (None values are ignored).

        Raises:
            ConfigError: an unknown key or a value of the wrong type (file, line, key).
        """
        from agent.defaults import agent_settings

        values: dict[str, Any] = config.section("serve").read(SETTINGS) if config is not None else {}
        pinned = agent_settings(config, used=("pinned",)).get("pinned")
        if pinned:
            values["pinned"] = tuple(pinned)
        if "warm" in values:
            values["warm"] = _count(values["warm"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def warm_problem(count: int | None, given: object) -> str | None:
    """What is wrong with ``count`` warm sandboxes (None when not a whole number), or None."""
    if count is None:
        return f"expected a whole number of sandboxes (0 or more), got {given!r}"
    if count > MAX_WARM:
        return f"expected at most {MAX_WARM} sandboxes (each is a started container), got {count}"
    return None


def _count(text: str) -> int | None:
    """``text`` as a whole number of at least 0, or None."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None
