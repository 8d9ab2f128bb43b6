"""Test doubles for agent runs, shipped for users' tests too.

::

    from agent.testing import FakeMessagesAPI, reply, tool_use

    with FakeMessagesAPI([
        reply(tool_use("execute_python", {"code": "print(1)"})),
        reply("Done."),
    ]) as api:
        result = Agent(config, tree="tree", client=api.client()).run("print 1")
    assert api.requests[1]["messages"][-1]["content"][0]["type"] == "tool_result"

`FakeMessagesAPI` is a real local HTTP server; the real ``anthropic`` SDK talks to it. It
replays scripted replies (messages, `ApiError` answers, `CutStream` answers that stop before the
message is over, or functions of the request), computes
``usage`` with the approximation in `agent.tokens` and a simulated prompt cache, and records
every request.
"""

from __future__ import annotations

from agent.testing._accounting import PromptCache, Usage, check_request
from agent.testing._replies import (
    ApiError,
    CutStream,
    Reply,
    reply,
    server_tool_use,
    text,
    tool_search_result,
    tool_use,
)
from agent.testing._server import FakeMessagesAPI

__all__ = [
    "ApiError",
    "CutStream",
    "FakeMessagesAPI",
    "PromptCache",
    "Reply",
    "Usage",
    "check_request",
    "reply",
    "server_tool_use",
    "text",
    "tool_search_result",
    "tool_use",
]
