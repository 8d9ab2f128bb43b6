"""An MCP server built with the official SDK (``MCPServer``) whose tools ask the client something during a call.

    python asking_server.py MARK_FOLDER

``ask`` asks on the wire (``sampling/createMessage``, ``elicitation/create`` or ``roots/list``, by ``kind``), as a
server of the older protocol revisions does, and lets the client's error end the call; ``ask_input`` asks inside an
``input required`` result (protocol 2026-07-28, SEP-2322), and answers what came back once asked; ``never_done``
answers ``input required`` with no question, every time; ``capabilities`` answers the client capabilities the
session declared, as JSON. ``wait`` writes ``MARK_FOLDER/ran`` (the request's id), waits ``seconds``, and writes
``cancelled`` when the client cancels it (or ``done``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp.types as mt
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("asking", log_level="WARNING")
MARKS = Path(sys.argv[1]) if len(sys.argv) > 1 else None


def _mark(name: str, text: str) -> None:
    if MARKS is not None:
        (MARKS / name).write_text(text + "\n", encoding="utf-8")


def _question(kind: str) -> mt.CreateMessageRequest | mt.ElicitRequest | mt.ListRootsRequest:
    if kind == "sampling":
        message = mt.SamplingMessage(role="user", content=mt.TextContent(type="text", text="Summarise the file."))
        return mt.CreateMessageRequest(params=mt.CreateMessageRequestParams(messages=[message], max_tokens=50))
    if kind == "elicitation":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        return mt.ElicitRequest(params=mt.ElicitRequestFormParams(message="Which name?", requested_schema=schema))
    return mt.ListRootsRequest()


@server.tool(structured_output=False)
async def ask(kind: str, ctx: Context) -> str:
    """Ask the client on the wire (``sampling``, ``elicitation`` or ``roots``); its error ends the call."""
    result = await ctx.session.send_request(_question(kind), mt.EmptyResult)  # type: ignore[arg-type]
    return f"the client answered: {result}"


@server.tool(structured_output=False)
async def ask_input(kind: str, ctx: Context) -> mt.InputRequiredResult | str:
    """Ask the client inside an ``input required`` result; answer what came back once asked."""
    if ctx.input_responses:
        return f"the client answered: {ctx.input_responses}"
    return mt.InputRequiredResult(input_requests={"question": _question(kind)}, request_state="asked")


@server.tool(structured_output=False)
async def never_done(ctx: Context) -> mt.InputRequiredResult | str:
    """Answer ``input required`` with no question, every time."""
    return mt.InputRequiredResult(request_state="not yet")


@server.tool(structured_output=False)
async def capabilities(ctx: Context) -> str:
    """The client capabilities this session declared, as JSON."""
    declared = ctx.client_capabilities
    return json.dumps(declared.model_dump(mode="json", exclude_none=True) if declared is not None else None)


@server.tool(structured_output=False)
async def wait(seconds: float, ctx: Context) -> str:
    """Mark that the call runs, wait ``seconds``, and mark how the wait ended."""
    _mark("ran", str(ctx.request_id))
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _mark("cancelled", str(ctx.request_id))
        raise
    _mark("done", str(ctx.request_id))
    return f"waited {seconds:g} s"


if __name__ == "__main__":
    server.run()
