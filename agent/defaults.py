"""Defaults of agent runs, the ``agent:`` section of tooltree.yaml and the default client (a leaf module: the CLI reads
these without importing the loop)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection
from typing import Any

from agent.errors import AgentSetupError
from tool_tree.config import Config, Setting

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MAX_TURNS = 30
DEFAULT_MAX_TOKENS = 32_000
DEFAULT_RETRIES = 4
MODES = ("code", "direct", "tool-search", "filtered")
CLASSIFIERS = ("off", "local", "claude")
"""Pre-filter classifiers (``off``: none; ``filtered`` mode needs one)."""
SIBLING_MODES = ("named", "server")
MAX_PREFILTER_TIMEOUT = 3600.0
"""The most seconds the pre-filter may be given (a classifier takes milliseconds, or one small request); past
about 292 years a thread's wait cannot be set, and every decision failed open on the overflow."""
BATCH_MODES = ("direct", "tool-search", "filtered")
"""Modes that offer ``batch_tool``."""
DEFAULT_BATCH_MAX = 10
MAX_TOOL_USES = 20
"""Most tool calls one reply of the model makes (`agent.calls`; each invocation of a ``batch_tool``
counts). An honest parallel reply holds a handful of calls (Claude rarely emits more than five);
twice ``batch_tool``'s default limit leaves room for a reply that reads many stubs at once, while a
hostile reply can start no more work than this. More calls go in the next turn."""


MAXIMUMS = {"max_turns": 100_000, "max_tokens": 1_000_000, "token_budget": 10_000_000_000}
"""The most each count of a run may be, far past any real run (a model's reply is at most 128,000 tokens; a run of
100,000 requests or ten billion tokens is weeks of work and thousands of dollars): a number past one is a typo, an
extra zero or two (before, taken: a max_tokens past the model's own was refused by the API at the first request)."""


def _at_most(name: str) -> Callable[[int], str | None]:
    most = MAXIMUMS[name]
    return lambda v: None if v <= most else f"at most {most:,}, got {v:,}"


def _not_empty(value: str) -> str | None:
    return None if value.strip() else "an empty string; leave the key out for the default"


SETTINGS: dict[str, Setting] = {
    "mode": Setting(str, f"one of {', '.join(MODES)}", choices=MODES),
    "model": Setting(str, "the model id", check=_not_empty),
    "pinned": Setting(list, "a list of tools (server.tool) whose signatures stay in the prompt"),
    "max_turns": Setting(int, "the most requests per run", check=_at_most("max_turns")),
    "max_tokens": Setting(int, "max_tokens of each request", check=_at_most("max_tokens")),
    "token_budget": Setting(int, "tokens (input + output) after which a run stops", check=_at_most("token_budget")),
    "prefilter": Setting(
        str,
        "the pre-filter's classifier: local (default of filtered mode), claude, or off; in code mode local or "
        "claude inlines the admitted tools' signatures",
        choices=CLASSIFIERS,
    ),
    "prefilter_threshold": Setting(
        float,
        "admit a tool whose probability is at least this (0-1; default per classifier)",
        check=lambda v: None if 0 < v <= 1 else f"a probability above 0 and at most 1, got {v}",
    ),
    "prefilter_siblings": Setting(
        str,
        "with a tool, admit the tools of its server it names or that name it (named) or all of them (server)",
        choices=SIBLING_MODES,
    ),
    "prefilter_model": Setting(str, "the model of the claude pre-filter (default claude-haiku-5-5)", check=_not_empty),
    "prefilter_timeout": Setting(
        float,
        "seconds the pre-filter may take before every tool is sent",
        check=lambda v: None if v <= MAX_PREFILTER_TIMEOUT else f"at most {MAX_PREFILTER_TIMEOUT:g} seconds, got {v}",
    ),
    "prefilter_state": Setting(str, "a file the admitted set is kept in between conversations", check=_not_empty),
    "batch": Setting(bool, "offer batch_tool in direct, tool-search and filtered modes (default true)"),
    "batch_max": Setting(
        int,
        f"most invocations in one batch_tool call (default {DEFAULT_BATCH_MAX}, at most {MAX_TOOL_USES})",
        check=lambda v: None if v <= MAX_TOOL_USES else f"at most {MAX_TOOL_USES} (the calls of one reply), got {v}",
    ),
}
"""The ``agent:`` section: defaults of `tooltree agent` and `Agent`; their arguments take precedence."""
PREFILTER_KEYS = {k for k in SETTINGS if k.startswith("prefilter_")}
"""The settings `agent.prefilter.options.PrefilterOptions` holds (given one, an `Agent` reads none of them)."""


def agent_settings(config: Config | None, *, used: Collection[str] | None = None) -> dict[str, Any]:
    """The config's ``agent:`` section, checked. A setting naming a variable that is not set is an error when it is
    one of ``used`` (the keys the caller reads; None: every one), else left out (before: `tooltree serve`, which
    reads ``pinned`` alone, refused to start for ``agent: {model: "${MODEL}"}`` with MODEL unset).

    Raises:
        ConfigError: an unknown key, a value of the wrong type, or a used setting's unset variable (file, line, key).
    """
    if config is None:
        return {}
    section = config.section("agent")
    settings = section.read(SETTINGS, unset_kept=True)
    unset = {k: v for k, v in section.values.items() if k not in settings and (used is None or k in used)}
    if unset:  # read again, strictly: the first one's error, with its file, line and key
        dataclasses.replace(section, values=unset).read(SETTINGS)
    return settings


COUNT_MINIMUMS = {"max_turns": 1, "token_budget": 1, "max_tokens": 1, "max_retries": 0}
"""The least each count of `Agent` may be (as the command line's options take them)."""


def check_arguments(config: object, **counts: object) -> None:
    """Check what `Agent` is given: ``config`` is a `Config`, each of ``counts`` (named as in
    `COUNT_MINIMUMS`) is None or a whole number of at least its minimum and at most its maximum (`MAXIMUMS`).

    Raises:
        TypeError: ``config`` is not a `Config` (a path must be loaded first), or a count is not a whole number.
        AgentSetupError: a count is below its minimum or above its maximum.
    """
    if not isinstance(config, Config):
        raise TypeError(
            f"config: expected a Config, got {type(config).__name__} {config!r:.80}; load the file first: "
            "Agent(load_config(path), ...), with load_config from tool_tree.config"
        )
    for name, value in counts.items():
        low = COUNT_MINIMUMS[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            kind = type(value).__name__
            raise TypeError(f"{name}: expected a whole number, at least {low}, got {kind} {value!r:.40}")
        if value < low:
            raise AgentSetupError(f"{name} must be at least {low}, got {value}")
        if name in MAXIMUMS and value > MAXIMUMS[name]:
            raise AgentSetupError(f"{name} must be at most {MAXIMUMS[name]:,}, got {value:,}")


def check_kinds(
    *,
    model: object,
    client: object,
    transcript: object,
    workspace: object,
    pinned: object = None,
    prefilter: object = None,
    prefilter_options: object = None,
    sandbox_config: object = None,
) -> None:
    """Check the kinds of `Agent`'s ``model``, ``client``, ``transcript``, ``workspace``, ``pinned``, ``prefilter``,
    ``prefilter_options`` and ``sandbox_config`` (each may be None).

    Raises:
        TypeError: one is of another kind (before: ``model=3`` and ``client="x"`` were taken and failed at the first
            request, ``transcript=3`` as ``os.fspath``'s error naming no argument; ``prefilter=3``,
            ``prefilter_options=3`` and ``pinned=b"crm.get"`` as an AttributeError of the run, ``sandbox_config={}``
            as a TypeError of the run).
    """
    from agent.prefilter.options import PrefilterOptions
    from sandbox.config import SandboxConfig

    if isinstance(pinned, bytes | bytearray) or (
        pinned is not None and isinstance(pinned, Collection) and not all(isinstance(p, str) for p in pinned)
    ):
        raise TypeError(f"pinned: expected a list of server.tool names (str), got {type(pinned).__name__}")
    if prefilter is not None and not isinstance(prefilter, str) and not callable(getattr(prefilter, "classify", None)):
        raise TypeError(
            f"prefilter: expected 'local', 'claude', 'off' or a ToolFilter (or None), got {type(prefilter).__name__}"
        )
    for name, value, kind in (
        ("prefilter_options", prefilter_options, PrefilterOptions),
        ("sandbox_config", sandbox_config, SandboxConfig),
    ):
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"{name}: expected a {kind.__name__} (or None), got {type(value).__name__}")
    if model is not None and not isinstance(model, str):
        raise TypeError(f"model: expected a model's name (str), got {type(model).__name__}")
    if client is not None and not hasattr(client, "messages"):  # Anthropic, AnthropicBedrock, AnthropicVertex, …
        raise TypeError(f"client: expected an anthropic client (anthropic.Anthropic()), got {type(client).__name__}")
    for name, value in (("transcript", transcript), ("workspace", workspace)):
        if value is not None and not isinstance(value, str | os.PathLike):
            raise TypeError(f"{name}: expected a path (str or os.PathLike), got {type(value).__name__}")


def default_client(max_retries: int) -> Any:
    """An ``anthropic.Anthropic`` client configured from the environment.

    Raises:
        AgentSetupError: the environment gives no credentials (else found by the SDK at the first request,
            once the servers and the sandbox had started, as a ``TypeError``), or sets ``ANTHROPIC_BASE_URL`` empty
            (the SDK took it for the URL, and every request failed to connect, retried for seconds).
    """
    import anthropic

    if (base_url := os.environ.get("ANTHROPIC_BASE_URL")) is not None and not base_url.strip():
        raise AgentSetupError(
            "ANTHROPIC_BASE_URL is set but empty: unset it (unset ANTHROPIC_BASE_URL) for the Anthropic API, or set "
            "it to the URL of the Messages API"
        )
    client = anthropic.Anthropic(max_retries=max_retries)
    if not any(getattr(client, name, None) for name in ("api_key", "auth_token", "credentials")):
        raise AgentSetupError("no Anthropic API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or pass client=")
    return client
