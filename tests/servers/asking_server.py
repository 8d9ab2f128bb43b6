"""An MCP server built with the official SDK (``MCPServer``) whose tools ask the client something during a call.

    python asking_server.py MARK_FOLDER

``ask`` asks on the wire (``sampling/createMessage``, ``elicitation/create`` (``url``: by URL) or ``roots/list``, by
``kind``), as a server of the older protocol revisions does, answers the client's answer as JSON, and lets the client's
error end the call; ``ask_times`` asks ``times`` times, and answers each answer or error, one per line
(``ask_together``: all at once); ``ask_url`` asks to open a URL, then says a URL elicitation was completed;
``ask_input`` asks inside an ``input required`` result (protocol 2026-07-28, SEP-2322; ``ask_pair``: two calls at once),
and answers what came back once asked; ``never_done`` answers ``input required`` with no question, every time;
``capabilities`` answers the client capabilities the session declared, as JSON. ``wait`` writes ``MARK_FOLDER/ran`` (the
request's id), waits ``seconds``, and writes ``cancelled`` when the client cancels it (or ``done``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp.types as mt
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

server = MCPServer("asking", log_level="WARNING")
MARKS = Path(sys.argv[1]) if len(sys.argv) > 1 else None


def _mark(name: str, text: str) -> None:
    if MARKS is not None:
        (MARKS / name).write_text(text + "\n", encoding="utf-8")


def _question(
    kind: str, message: str = "Which name?", max_tokens: int = 50
) -> mt.CreateMessageRequest | mt.ElicitRequest | mt.ListRootsRequest:
    if kind == "sampling":
        said = mt.SamplingMessage(role="user", content=mt.TextContent(type="text", text=message))
        return mt.CreateMessageRequest(
            params=mt.CreateMessageRequestParams(messages=[said], max_tokens=max_tokens, include_context="allServers")
        )
    if kind == "elicitation":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        return mt.ElicitRequest(params=mt.ElicitRequestFormParams(message=message, requested_schema=schema))
    if kind == "url":
        return mt.ElicitRequest(
            params=mt.ElicitRequestURLParams(message=message, url="https://example.com/sign-in", elicitation_id="e1")
        )
    return mt.ListRootsRequest()


_ANSWERS: dict[str, type[mt.Result]] = {
    "sampling": mt.CreateMessageResult,
    "elicitation": mt.ElicitResult,
    "url": mt.ElicitResult,
    "roots": mt.ListRootsResult,
}


async def _asked(ctx: Context, kind: str, message: str, max_tokens: int) -> str:
    question = _question(kind, message, max_tokens)
    result = await ctx.session.send_request(question, _ANSWERS.get(kind, mt.EmptyResult))  # type: ignore[arg-type]
    return result.model_dump_json(by_alias=True, exclude_none=True)


@server.tool(structured_output=False)
async def ask(kind: str, ctx: Context, message: str = "Which name?", max_tokens: int = 50) -> str:
    """Ask the client on the wire (``sampling``, ``elicitation``, ``url`` or ``roots``); its error ends the call."""
    return f"the client answered: {await _asked(ctx, kind, message, max_tokens)}"


@server.tool(structured_output=False)
async def ask_times(kind: str, times: int, ctx: Context) -> str:
    """Ask the client on the wire ``times`` times in a row; each answer, or the client's error, on its own line."""
    said = []
    for i in range(times):
        try:
            said.append(await _asked(ctx, kind, f"Question {i + 1}?", 50))
        except MCPError as e:
            said.append(f"error: {e.message}")
    return "\n".join(said)


@server.tool(structured_output=False)
async def ask_url(elicitation_id: str, completed: str, ctx: Context) -> str:
    """Ask the client on the wire to open a URL (``elicitation_id``), then say URL elicitation ``completed`` was
    completed; the client's answer."""
    asked = mt.ElicitRequestURLParams(
        message="Sign in", url="https://example.com/sign-in", elicitation_id=elicitation_id
    )
    result = await ctx.session.send_request(mt.ElicitRequest(params=asked), mt.ElicitResult)  # type: ignore[arg-type]
    await ctx.session.send_elicit_complete(completed)
    return result.model_dump_json(by_alias=True, exclude_none=True)


@server.tool(structured_output=False)
async def ask_together(kind: str, times: int, ctx: Context) -> str:
    """Ask the client on the wire ``times`` times at once; each answer, or the client's error, on its own line."""
    said: list[str] = [""] * times

    async def one(i: int) -> None:
        try:
            said[i] = await _asked(ctx, kind, f"Question {i + 1}?", 50)
        except MCPError as e:
            said[i] = f"error: {e.message}"

    async with anyio.create_task_group() as tg:
        for i in range(times):
            tg.start_soon(one, i)
    return "\n".join(said)


_pairs: list[anyio.Event] = []


@server.tool(structured_output=False)
async def ask_pair(tag: str, ctx: Context) -> mt.InputRequiredResult | str:
    """Wait for a second call of this tool, then both ask inside an ``input required`` result at once (``for TAG``);
    answer what came back."""
    if ctx.input_responses:
        answers = {k: v.model_dump(by_alias=True, exclude_none=True) for k, v in ctx.input_responses.items()}
        return f"{tag} got: {json.dumps(answers)}"
    if _pairs and not _pairs[-1].is_set():
        _pairs[-1].set()
    else:
        _pairs.append(anyio.Event())
        await _pairs[-1].wait()
    return mt.InputRequiredResult(input_requests={"q": _question("elicitation", f"for {tag}")}, request_state="asked")


@server.tool(structured_output=False)
async def ask_input(kind: str, ctx: Context, message: str = "Which name?") -> mt.InputRequiredResult | str:
    """Ask the client inside an ``input required`` result; answer what came back once asked."""
    if ctx.input_responses:
        answers = {k: v.model_dump(by_alias=True, exclude_none=True) for k, v in ctx.input_responses.items()}
        return f"the client answered: {json.dumps(answers)}"
    return mt.InputRequiredResult(input_requests={"question": _question(kind, message)}, request_state="asked")


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
