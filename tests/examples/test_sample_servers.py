"""The sample servers (docs, crm, media) start as real processes and behave like the SaaS tools they imitate."""

from __future__ import annotations

import base64
import json
import re
import socket
import struct
import subprocess
import sys
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import CallToolResult, ImageContent, ListToolsRequest, TextContent
from pydantic import TypeAdapter

from tests.support import stop_process

pytestmark = pytest.mark.anyio

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "examples" / "sample_servers"
TRANSCRIPT_ID = "doc_q3r7tx"
NORTHWIND_ACCOUNT_ID = "0015e000003NWTR"
NORTHWIND_OPPORTUNITY_ID = "0065e000009Q3PR"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_RAW = TypeAdapter(dict[str, Any])


@pytest.fixture(scope="module")
async def docs(sample_server_params: Callable[[str], StdioServerParameters]) -> AsyncIterator[Client]:
    async with Client(sample_server_params("docs"), read_timeout_seconds=30) as client:
        yield client


@pytest.fixture(scope="module")
async def crm(sample_server_params: Callable[[str], StdioServerParameters]) -> AsyncIterator[Client]:
    async with Client(sample_server_params("crm"), read_timeout_seconds=30) as client:
        yield client


@pytest.fixture(scope="module")
async def media(sample_server_params: Callable[[str], StdioServerParameters]) -> AsyncIterator[Client]:
    async with Client(sample_server_params("media"), read_timeout_seconds=30) as client:
        yield client


async def _raw_tools(client: Client) -> dict[str, dict[str, Any]]:
    """tools/list as wire JSON, with every field the typed models might drop."""
    raw = await client.session.send_request(ListToolsRequest(), _RAW)  # type: ignore[type-var]
    return {tool["name"]: tool for tool in raw["tools"]}


def _text(result: CallToolResult) -> str:
    assert not result.is_error, result
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def _json(result: CallToolResult) -> Any:
    return json.loads(_text(result))


def _error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and raw scanlines of an 8-bit RGB PNG, checked chunk by chunk."""
    assert data.startswith(PNG_SIGNATURE)
    pos, idat, header = len(PNG_SIGNATURE), b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])[0] == zlib.crc32(kind + body)
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color_type = struct.unpack(">IIBB", header[:10])
    assert (depth, color_type) == (8, 2)
    raw = zlib.decompress(idat)
    assert len(raw) == height * (1 + 3 * width)
    return width, height, raw


# --- docs --------------------------------------------------------------------------------------------------------


async def test_docs_lists_its_tools_with_enums_refs_and_an_output_schema(docs: Client) -> None:
    tools = await _raw_tools(docs)
    assert sorted(tools) == ["get_document", "get_document_metadata", "list_documents", "search_documents"]
    mime = tools["list_documents"]["inputSchema"]["properties"]["mime_type"]
    assert "application/vnd.google-apps.document" in json.dumps(mime)
    search = tools["search_documents"]["inputSchema"]
    assert "SearchFilters" in search["$defs"]
    assert "#/$defs/SearchFilters" in json.dumps(search["properties"]["filters"])
    output = tools["get_document_metadata"]["outputSchema"]
    assert output["properties"]["sharing"]["type"] == "array"
    assert len(tools["search_documents"]["description"].split(". ")) >= 3


async def test_searching_for_pipeline_review_or_transcript_finds_the_transcript_first(docs: Client) -> None:
    for query in ("pipeline review", "transcript", "Q3 pipeline review transcript"):
        results = _json(await docs.call_tool("search_documents", {"query": query, "limit": 5}))["results"]
        assert results[0]["id"] == TRANSCRIPT_ID, query
        assert "Meeting Transcript" in results[0]["title"]


async def test_the_transcript_is_a_long_varied_meeting_between_named_speakers(docs: Client) -> None:
    text = _text(await docs.call_tool("get_document", {"document_id": TRANSCRIPT_ID}))
    assert len(text) >= 150_000
    turns = re.findall(r"^\[(\d\d:\d\d:\d\d)\] ([A-Z][\w' ]+): (.+)$", text, flags=re.MULTILINE)
    assert len(turns) >= 1000
    assert len({speaker for _, speaker, _ in turns}) >= 8
    assert len({said for _, _, said in turns}) >= 0.6 * len(turns)
    stamps = [stamp for stamp, _, _ in turns]
    assert stamps == sorted(stamps)
    assert "Northwind Traders" in text


async def test_document_metadata_is_structured_and_matches_the_content(docs: Client) -> None:
    text = _text(await docs.call_tool("get_document", {"document_id": TRANSCRIPT_ID}))
    meta = (await docs.call_tool("get_document_metadata", {"document_id": TRANSCRIPT_ID})).structured_content
    assert meta is not None
    assert meta["size_bytes"] == len(text.encode())
    assert meta["owner"]["email"].endswith("@northpeak.io")
    assert meta["sharing"][0]["role"] == "owner"
    assert all({"type", "role", "display_name"} <= set(grant) for grant in meta["sharing"])


async def test_list_documents_pages_through_everything_with_a_cursor(docs: Client) -> None:
    seen: list[str] = []
    cursor: str | None = None
    while True:
        args: dict[str, Any] = {"page_size": 7} | ({"cursor": cursor} if cursor else {})
        page = _json(await docs.call_tool("list_documents", args))
        seen += [doc["id"] for doc in page["documents"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == page["total"] >= 40
    in_folder = _json(await docs.call_tool("list_documents", {"folder": "/Sales/Pipeline Reviews"}))["documents"]
    assert TRANSCRIPT_ID in [doc["id"] for doc in in_folder]
    assert all(doc["folder"] == "/Sales/Pipeline Reviews" for doc in in_folder)


async def test_unknown_document_is_a_tool_error_naming_the_id(docs: Client) -> None:
    message = _error_text(await docs.call_tool("get_document", {"document_id": "doc_nope00"}))
    assert "doc_nope00" in message and "not found" in message


# --- crm ---------------------------------------------------------------------------------------------------------


async def test_crm_schemas_have_refs_enums_and_wire_names_that_are_not_identifiers(crm: Client) -> None:
    tools = await _raw_tools(crm)
    assert {"search_records", "get_record", "update_record", "list_leads", "create_task", "log_activity"} <= set(tools)
    activity = tools["log_activity"]["inputSchema"]
    assert {"from", "reply-to", "type", "related_to"} <= set(activity["properties"])
    assert activity["properties"]["related_to"] == {"$ref": "#/$defs/RecordRef"}
    task = tools["create_task"]["inputSchema"]
    assert {"DueDate", "Assignee", "Reminder", "RecordRef"} <= set(task["$defs"])
    assert task["properties"]["reminders"]["items"] == {"$ref": "#/$defs/Reminder"}
    assert tools["search_records"]["inputSchema"]["properties"]["object_type"]["enum"] == [
        "lead",
        "contact",
        "account",
        "opportunity",
    ]
    assert "outputSchema" in tools["get_record"]
    assert tools["get_record"]["annotations"]["readOnlyHint"] is True


async def test_list_leads_returns_ten_thousand_rows_of_several_megabytes(crm: Client) -> None:
    result = await crm.call_tool("list_leads", {})
    text = _text(result)
    leads = json.loads(text)["leads"]
    assert len(leads) == 10_000
    assert len(text) > 2_000_000
    assert {"id", "name", "company", "email", "status", "estimated_value", "owner", "created", "region"} <= set(
        leads[0]
    )
    assert {lead["status"] for lead in leads} <= {
        "new",
        "working",
        "nurturing",
        "qualified",
        "unqualified",
        "converted",
    }
    assert all(isinstance(lead["estimated_value"], int) for lead in leads)
    qualified = _json(await crm.call_tool("list_leads", {"status": "qualified", "region": "EMEA"}))
    assert 0 < qualified["total"] < 10_000
    assert {(lead["status"], lead["region"]) for lead in qualified["leads"]} == {("qualified", "EMEA")}


async def test_update_record_changes_what_get_record_returns(crm: Client) -> None:
    ref = {"object_type": "opportunity", "record_id": NORTHWIND_OPPORTUNITY_ID}
    before = (await crm.call_tool("get_record", ref)).structured_content
    assert before is not None
    notes = "".join(f"[{i:05d}] line of the meeting transcript\n" for i in range(5000))  # ~200 KB
    update = {"fields": {"notes": notes, "stage": "Negotiation"}}
    updated = _json(await crm.call_tool("update_record", ref | update))
    assert updated["updated_fields"] == ["notes", "stage"]
    after = (await crm.call_tool("get_record", ref)).structured_content
    assert after is not None
    assert after["fields"]["notes"] == notes
    assert after["fields"]["stage"] == "Negotiation"
    assert after["version"] == before["version"] + 1 == updated["version"]


async def test_update_with_an_unknown_field_fails_and_changes_nothing(crm: Client) -> None:
    ref = {"object_type": "account", "record_id": NORTHWIND_ACCOUNT_ID}
    before = (await crm.call_tool("get_record", ref)).structured_content
    message = _error_text(await crm.call_tool("update_record", ref | {"fields": {"description": "x", "colour": "red"}}))
    assert "'colour'" in message and "Writable fields" in message
    assert (await crm.call_tool("get_record", ref)).structured_content == before


async def test_get_record_of_an_unknown_or_mistyped_id_is_a_tool_error(crm: Client) -> None:
    missing = await crm.call_tool("get_record", {"object_type": "lead", "record_id": "00Q5e000NOTHERE"})
    assert "00Q5e000NOTHERE" in _error_text(missing)
    mistyped = await crm.call_tool("get_record", {"object_type": "lead", "record_id": NORTHWIND_OPPORTUNITY_ID})
    assert "'opportunity'" in _error_text(mistyped)


async def test_tasks_and_activities_logged_with_nested_and_renamed_arguments_show_on_the_record(crm: Client) -> None:
    related = {"object_type": "account", "id": NORTHWIND_ACCOUNT_ID}
    task = _json(
        await crm.call_tool(
            "create_task",
            {
                "subject": "Send the Q3 order form",
                "related_to": related,
                "due": {"date": "2026-09-30", "time": "14:00", "time_zone": "Europe/Berlin"},
                "priority": "high",
                "reminders": [{"minutes_before": 60, "channel": "push"}],
            },
        )
    )
    assert task["id"].startswith("00T") and task["time_zone"] == "Europe/Berlin"
    email = {"type": "email", "related_to": related, "subject": "Recap", "from": "ana.moreno@northpeak.io"}
    activity = _json(await crm.call_tool("log_activity", email | {"reply-to": "sales@northpeak.io", "to": ["a@b.c"]}))
    assert (activity["from"], activity["reply-to"]) == ("ana.moreno@northpeak.io", "sales@northpeak.io")
    record = (
        await crm.call_tool("get_record", {"object_type": "account", "record_id": NORTHWIND_ACCOUNT_ID})
    ).structured_content
    assert record is not None
    assert [t["id"] for t in record["open_tasks"]] == [task["id"]]
    assert [a["id"] for a in record["recent_activities"]] == [activity["id"]]
    no_sender = {k: v for k, v in email.items() if k != "from"}
    assert "'from'" in _error_text(await crm.call_tool("log_activity", no_sender))
    bad_zone = await crm.call_tool(
        "create_task", {"subject": "x", "related_to": related, "due": {"date": "2026-09-30", "time_zone": "Mars/Base"}}
    )
    assert "Mars/Base" in _error_text(bad_zone)


# --- media -------------------------------------------------------------------------------------------------------


async def test_render_chart_returns_the_same_real_png_for_the_same_arguments(media: Client) -> None:
    args = {"title": "Q3 by region", "values": [4.1, 3.2, -0.7, 2.5], "kind": "bar"}
    first, second = await media.call_tool("render_chart", args), await media.call_tool("render_chart", args)
    assert not first.is_error
    [block] = first.content
    assert isinstance(block, ImageContent) and block.mime_type == "image/png"
    data = base64.b64decode(block.data)
    width, height, raw = _png_pixels(data)
    assert (width, height) == (200, 120)
    stride = 1 + 3 * width
    colored = sum(1 for y in range(height) for i in range(y * stride + 1, (y + 1) * stride, 3) if raw[i] < 200)
    assert colored > 500  # the bars are drawn, not just a blank canvas
    assert second.content == first.content


async def test_image_info_is_structured_and_thumbnail_returns_an_image_and_a_caption(media: Client) -> None:
    chart = await media.call_tool("render_chart", {"title": "Info", "values": [1, 2, 3], "width": 300, "height": 150})
    assert isinstance(chart.content[0], ImageContent)
    inline = {"kind": "inline", "data": chart.content[0].data}
    info = (await media.call_tool("get_image_info", {"source": inline})).structured_content
    assert info is not None
    assert (info["width"], info["height"], info["color_type"], info["text"]["Title"]) == (300, 150, "rgb", "Info")
    thumb = await media.call_tool("thumbnail", {"source": {"kind": "gallery", "image_id": "img_q3_forecast"}})
    image, caption = thumb.content
    assert isinstance(image, ImageContent) and isinstance(caption, TextContent)
    assert _png_pixels(base64.b64decode(image.data))[:2] == (64, 36)
    assert "64x36" in caption.text


async def test_fail_errors_as_a_tool_error_a_hidden_crash_or_a_protocol_error(media: Client) -> None:
    result = await media.call_tool("fail", {"message": "quota exceeded for project 42"})
    assert "quota exceeded for project 42" in _error_text(result)
    crash = await media.call_tool("fail", {"message": "secret internals", "kind": "unexpected"})
    assert "secret internals" not in _error_text(crash)
    with pytest.raises(MCPError) as raised:
        await media.call_tool("fail", {"message": "rate limited", "kind": "protocol_error"})
    assert raised.value.message == "rate limited"


async def test_long_task_sends_one_progress_notification_per_step(media: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await media.call_tool("long_task", {"steps": 4, "step_seconds": 0}, progress_callback=on_progress)
    assert _text(result) == "long_task finished 4 steps"
    assert seen == [(i, 4, f"step {i} of 4") for i in range(1, 5)]


async def test_concurrent_calls_run_in_parallel_on_the_server(media: Client) -> None:
    replies: dict[int, str] = {}

    async def call(i: int) -> None:
        replies[i] = _text(await media.call_tool("rendezvous", {"group": "parallel-test", "parties": 3}))
        replies[10 + i] = _text(await media.call_tool("slow_echo", {"text": f"echo {i}", "seconds": 0.01}))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(call, i)
    assert [replies[i] for i in range(3)] == ["group 'parallel-test': 3 parties met"] * 3
    assert [replies[10 + i] for i in range(3)] == ["echo 0", "echo 1", "echo 2"]
    alone = await media.call_tool("rendezvous", {"group": "alone", "parties": 2, "timeout": 0.05})
    assert "Only 1 of 2" in _error_text(alone)


# --- Streamable HTTP ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _wait_until_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    delay = 0.01
    with anyio.fail_after(30):
        while True:
            if process.poll() is not None:
                pytest.fail(f"server exited with {process.returncode}: {log.read_text(encoding='utf-8')}")
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.2)
            else:
                await stream.aclose()
                return


async def test_a_sample_server_serves_streamable_http_at_slash_mcp(tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, str(HERE / "media.py"), "--http", "--port", str(port), "--host", "127.0.0.1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        await _wait_until_listening(port, process, log)
        with anyio.fail_after(30):
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert {"render_chart", "slow_echo", "long_task"} <= set(names)
                assert _text(await client.call_tool("slow_echo", {"text": "over http", "seconds": 0})) == "over http"
                chart = await client.call_tool("render_chart", {"title": "http", "values": [1, 2]})
                assert isinstance(chart.content[0], ImageContent)
                assert base64.b64decode(chart.content[0].data).startswith(PNG_SIGNATURE)
    finally:
        stop_process(process, 10)


# --- the sample configuration ------------------------------------------------------------------------------------


def test_example_config_starts_the_three_sample_servers_beside_it() -> None:
    config = yaml.safe_load((REPO / "examples" / "tooltree.yaml").read_text(encoding="utf-8"))
    servers = config["servers"]
    assert list(servers) == ["docs", "crm", "media"]
    for name, server in servers.items():
        assert set(server) <= {"command", "args", "env", "cwd", "timeout", "enabled", "include", "exclude"}, name
        assert server["command"] == "python"
        assert server["args"] == [f"sample_servers/{name}.py"]  # relative to the config file's folder
        assert (REPO / "examples" / server["args"][0]).is_file()
