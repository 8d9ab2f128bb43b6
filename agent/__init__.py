"""The agent: Claude works through a generated tree — browse stubs, run scripts, measure tokens.

::

    from agent import Agent
    from tool_tree.config import load_config

    result = Agent(load_config("tooltree.yaml"), tree="tree").run("Which five hot leads are worth most?")
    print(result.answer, result.summary.usage.total)

Modes: ``code`` (four tools: ``list_files``, ``read_file``, ``search_tools``, ``execute_python``),
the baselines ``direct`` (every MCP tool as a native tool) and ``tool-search`` (every MCP tool
deferred behind the API's BM25 tool search), and ``filtered`` (native tools narrowed before each
request by the pre-filter, `agent.prefilter`; `PrefilterOptions` sets it up). `agent.testing` has a
fake Messages API for tests.

Names are imported on first use, so ``import agent`` costs nothing until one is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tool_tree.lazy import lazy_exports

if TYPE_CHECKING:
    from agent.defaults import DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_MODEL, MODES
    from agent.errors import AgentError, AgentSetupError, EventHandlerError, ModelAPIError
    from agent.events import Event, ModelReplied, RunFinished, ToolFinished
    from agent.files import FileAccessError, FileView
    from agent.loop import Agent
    from agent.prefilter.options import PrefilterOptions
    from agent.summary import RunResult, RunSummary, TokenUsage
    from agent.toolsets import TOOL_SEARCH_NAME, TOOL_SEARCH_TYPE, make_toolset
    from agent.transcript import read_transcript
    from sandbox.host import Runtime

_EXPORTS = {
    "DEFAULT_MAX_TOKENS": "agent.defaults",
    "DEFAULT_MAX_TURNS": "agent.defaults",
    "DEFAULT_MODEL": "agent.defaults",
    "MODES": "agent.defaults",
    "AgentError": "agent.errors",
    "AgentSetupError": "agent.errors",
    "EventHandlerError": "agent.errors",
    "ModelAPIError": "agent.errors",
    "Event": "agent.events",
    "ModelReplied": "agent.events",
    "RunFinished": "agent.events",
    "ToolFinished": "agent.events",
    "FileAccessError": "agent.files",
    "FileView": "agent.files",
    "Agent": "agent.loop",
    "PrefilterOptions": "agent.prefilter.options",
    "Runtime": "sandbox.host",
    "RunResult": "agent.summary",
    "RunSummary": "agent.summary",
    "TokenUsage": "agent.summary",
    "TOOL_SEARCH_NAME": "agent.toolsets",
    "TOOL_SEARCH_TYPE": "agent.toolsets",
    "make_toolset": "agent.toolsets",
    "read_transcript": "agent.transcript",
}

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_MODEL",
    "MODES",
    "TOOL_SEARCH_NAME",
    "TOOL_SEARCH_TYPE",
    "Agent",
    "AgentError",
    "AgentSetupError",
    "Event",
    "EventHandlerError",
    "FileAccessError",
    "FileView",
    "ModelAPIError",
    "ModelReplied",
    "PrefilterOptions",
    "RunFinished",
    "RunResult",
    "RunSummary",
    "Runtime",
    "TokenUsage",
    "ToolFinished",
    "make_toolset",
    "read_transcript",
]

if not TYPE_CHECKING:  # a type checker sees the imports above, and refuses a name that is not one (`agent.Nope`)
    __getattr__, __dir__ = lazy_exports("agent", _EXPORTS, globals(), __all__)
