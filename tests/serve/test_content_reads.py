"""Over HTTP a resource's read and a prompt's messages are cut to one server-sent event as a tool's result is
(`agent.serve.content.fit_read`, applied by serve's HTTP middleware): before, only ``tools/call`` results were, and a
read of a 1.5 MB PNG reached the SDK client as "SSE stream failed: Server-sent event exceeded the 1048576 byte
limit" (the middleware is driven here with the request's method and the handler's answer, as the SDK calls it)."""

from __future__ import annotations

import base64
from typing import Any

import anyio

from agent.serve.http import RESULT_LIMIT, _fit_results

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(1_500_000)).decode()
WHY = "over HTTP one result must fit in 1 MiB, the most the MCP SDK client reads at once"


class Request:
    """What the middleware reads of a request: its method."""

    def __init__(self, method: str) -> None:
        self.method = method


def answered(method: str, result: dict[str, Any]) -> Any:
    async def handler(ctx: Any) -> dict[str, Any]:
        return result

    async def run() -> Any:
        return await _fit_results(Request(method), handler)  # type: ignore[arg-type]  # only its method is read

    return anyio.run(run)


def test_a_resource_read_too_big_for_one_event_has_its_largest_blob_said_in_its_place() -> None:
    small = {"uri": "files://notes.txt", "mimeType": "text/plain", "text": "notes"}
    big = {"uri": "files://chart.png", "mimeType": "image/png", "blob": PNG}
    fitted = answered("resources/read", {"contents": [small, big]})
    assert fitted["contents"] == [
        small,
        {"uri": "files://chart.png", "mimeType": "text/plain",
         "text": f"[image/png content of 1,500,008 bytes left out: {WHY}]"},
    ]  # fmt: skip
    whole = {"contents": [small]}
    assert answered("resources/read", whole) is whole


def test_a_prompt_too_big_for_one_event_has_its_largest_image_said_in_its_place() -> None:
    text = {"role": "user", "content": {"type": "text", "text": "Describe the chart"}}
    shown = {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}}
    fitted = answered("prompts/get", {"description": "a chart", "messages": [text, shown]})
    assert fitted["description"] == "a chart" and fitted["messages"][0] == text
    note = fitted["messages"][1]
    assert note["role"] == "user" and note["content"]["type"] == "text"
    assert note["content"]["text"].startswith("[an image (image/png, 1,500,008 bytes) left out: over HTTP one result")
    assert len(str(fitted)) < RESULT_LIMIT
