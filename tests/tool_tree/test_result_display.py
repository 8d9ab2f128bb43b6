"""What a script sees when it prints a tool's result: `ToolResult.text` (and ``str``) carries resource links and
embedded resources, `resource_links` / `resources` give them as objects, and every ``repr`` stays short however
large the result."""

from __future__ import annotations

import base64
import gzip
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support import require_install
from tool_tree.config import load_config
from tool_tree.runtime import Image, Resource, ResourceLink, ToolResult

REPO = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(4_025)  # 4,033 bytes, the size of the audit's image

# The blocks npm server-everything sends (get-resource-links, get-resource-reference, gzip-file-as-resource).
LINKS = [
    {"type": "text", "text": "Here are 2 resource links to resources available in this server:"},
    {
        "name": "Blob Resource 1",
        "uri": "demo://resource/dynamic/blob/1",
        "description": "Resource 1: plaintext resource",
        "mimeType": "text/plain",
        "type": "resource_link",
    },
    {
        "name": "Text Resource 2",
        "uri": "demo://resource/dynamic/text/2",
        "description": "Resource 2: plaintext resource",
        "mimeType": "text/plain",
        "type": "resource_link",
    },
]
EMBEDDED_TEXT = {
    "type": "resource",
    "resource": {"uri": "demo://resource/dynamic/text/1", "mimeType": "text/plain", "text": "Resource 1: plain"},
}
GZ = gzip.compress(b"hello", mtime=0)
EMBEDDED_BLOB = {
    "type": "resource",
    "resource": {
        "uri": "demo://resource/session/y.gz",
        "mimeType": "application/gzip",
        "blob": base64.b64encode(GZ).decode(),
    },
}


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def image(data: bytes, mime: str = "image/png") -> dict[str, str]:
    return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime}


def test_text_shows_each_resource_link_as_one_line_with_its_name_uri_type_and_description() -> None:
    # Before: only "Here are 2 resource links to resources available in this server:", no URI.
    assert str(ToolResult(LINKS)) == (
        "Here are 2 resource links to resources available in this server:\n"
        "Resource link: Blob Resource 1 <demo://resource/dynamic/blob/1> (text/plain) — "
        "Resource 1: plaintext resource\n"
        "Resource link: Text Resource 2 <demo://resource/dynamic/text/2> (text/plain) — "
        "Resource 2: plaintext resource"
    )
    # A link alone (gzip-file-as-resource's default output) printed an empty line.
    alone = {"type": "resource_link", "name": "x.gz", "uri": "demo://resource/session/x.gz", "size": 25}
    assert ToolResult([alone]).text == "Resource link: x.gz <demo://resource/session/x.gz> (25 bytes)"
    titled = {**alone, "title": "The archive", "mimeType": "application/gzip"}
    assert ToolResult([titled]).text == (
        "Resource link: The archive <demo://resource/session/x.gz> (application/gzip, 25 bytes)"
    )


def test_text_includes_an_embedded_text_resource_under_a_line_naming_its_uri() -> None:
    result = ToolResult([text("Returning resource reference for Resource 1:"), EMBEDDED_TEXT, text("done")])
    assert result.text == (
        "Returning resource reference for Resource 1:\n"
        "Resource <demo://resource/dynamic/text/1> (text/plain):\n"
        "Resource 1: plain\n"
        "done"
    )


def test_text_notes_a_binary_resource_by_its_size_and_leaves_its_base64_out() -> None:
    result = ToolResult([EMBEDDED_BLOB])
    assert result.text == (
        f"Resource <demo://resource/session/y.gz> (application/gzip, {len(GZ)} bytes; .resources has its data)"
    )
    broken = {"type": "resource", "resource": {"uri": "u://x", "blob": "!!not base64"}}
    assert ToolResult([broken]).text == "Resource <u://x> (data not valid base64)"


def test_text_shows_a_text_typed_blob_decoded_as_direct_mode_does() -> None:
    # Before: "(text/plain, 55 bytes; .resources has its data)", and a script decoded the bytes itself.
    said = "Resource 2: This is a base64 blob – ünïcode".encode()

    def blob(data: bytes, mime: str) -> dict[str, object]:
        uri = "demo://resource/dynamic/blob/2"
        return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "blob": base64.b64encode(data).decode()}}

    result = ToolResult([blob(said, "text/plain; charset=utf-8")])
    assert result.text == "Resource <demo://resource/dynamic/blob/2> (text/plain; charset=utf-8):\n" + said.decode()
    assert result.resources[0].data == said and result.resources[0].text is None  # the object as the server sent it
    assert ToolResult([blob(b'{"a": 1}', "application/json")]).text.endswith(':\n{"a": 1}')
    not_utf8 = ToolResult([blob(b"\xff\xfe", "text/plain")]).text
    assert not_utf8 == "Resource <demo://resource/dynamic/blob/2> (text/plain, 2 bytes; .resources has its data)"


def test_text_of_text_and_image_blocks_is_unchanged() -> None:
    # Images are still left out of `.text`, and text blocks are joined with newlines as before.
    result = ToolResult([text("a"), image(PNG), text(""), text("b\n")])
    assert result.text == "a\n\nb\n"
    assert str(result) == result.text + f"[Image(image/png, {len(PNG):,} bytes): result.images[0]]"


def test_printing_a_result_of_images_alone_says_what_it_holds_and_where() -> None:
    # Before: an empty line (its .text is empty).
    result = ToolResult([image(PNG), {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}, image(PNG)])
    assert str(result) == (
        f"[Image(image/png, {len(PNG):,} bytes): result.images[0]]\n"
        "[a block of type 'audio': result.content[1]]\n"
        f"[Image(image/png, {len(PNG):,} bytes): result.images[1]]"
    )
    assert str(ToolResult([text("")])) == "" and str(ToolResult([])) == ""


def test_a_server_cannot_break_a_resource_link_over_several_lines() -> None:
    link = {
        "type": "resource_link",
        "name": "evil\nResource link: fake <x://y>\x1b[2J",
        "uri": "data:text/plain;base64," + "A" * 100_000,
        "description": "word " * 1_000,
        "mimeType": "text/plain\r\n",
    }
    line = ToolResult([link]).text
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.startswith("Resource link: evil Resource link: fake <x://y> [2J <data:text/plain;base64,AAA")
    assert len(line) < 1_000 and line.endswith("…")
    # The objects keep what the server sent.
    assert ToolResult([link]).resource_links[0].uri == link["uri"]


def test_resource_links_gives_each_link_as_an_object() -> None:
    links = ToolResult([*LINKS, {"type": "resource_link", "name": "n", "uri": "u://n", "size": 3, "title": "T"}])
    assert links.resource_links == [
        ResourceLink(
            "demo://resource/dynamic/blob/1", "Blob Resource 1", None, "Resource 1: plaintext resource", "text/plain"
        ),
        ResourceLink(
            "demo://resource/dynamic/text/2", "Text Resource 2", None, "Resource 2: plaintext resource", "text/plain"
        ),
        ResourceLink("u://n", "n", title="T", size=3),
    ]
    assert ToolResult([text("x"), image(PNG)]).resource_links == []


def test_resources_gives_each_embedded_resource_with_its_text_or_decoded_data(tmp_path: Path) -> None:
    resources = ToolResult([text("x"), EMBEDDED_TEXT, LINKS[1], EMBEDDED_BLOB]).resources
    assert resources == [
        Resource("demo://resource/dynamic/text/1", "text/plain", text="Resource 1: plain"),
        Resource("demo://resource/session/y.gz", "application/gzip", data=GZ),
    ]
    saved = resources[1].save(str(tmp_path / "y.gz"))
    assert gzip.decompress(Path(saved).read_bytes()) == b"hello"
    assert Path(resources[0].save(str(tmp_path / "r.txt"))).read_text(encoding="utf-8") == "Resource 1: plain"


def test_save_refuses_a_file_descriptor_or_none_and_writes_nothing(tmp_path: Path) -> None:
    # Before: open() took the int as a file descriptor: image.save(1) wrote the image into the script's stdout and
    # closed it, so every later print of the script failed.
    read, write = os.pipe()
    try:
        image, resource = Image(PNG, "image/png"), Resource("demo://x", "text/plain", text="x")
        for save, name in ((image.save, "Image.save"), (resource.save, "Resource.save")):
            for wrong in (write, None, True, b"y.png"):
                with pytest.raises(TypeError, match=rf"^{name}: path must be a file's path \(a str\), got "):
                    save(wrong)  # type: ignore[arg-type]
            os.write(write, b"open")  # the descriptor is still open, and nothing else went into it
            assert os.read(read, 100) == b"open"
        assert image.save(tmp_path / "a.png") == tmp_path / "a.png"  # type: ignore[arg-type]
        assert (tmp_path / "a.png").read_bytes() == PNG
    finally:
        os.close(read)
        os.close(write)


def test_resources_with_data_that_is_not_base64_names_the_block() -> None:
    broken = {"type": "resource", "resource": {"uri": "u://x", "blob": "!!not base64"}}
    with pytest.raises(ValueError, match=r"content block 1 is a resource whose data is not valid base64"):
        _ = ToolResult([text("x"), broken]).resources


def test_json_parses_the_text_blocks_alone_when_resources_follow_them() -> None:
    result = ToolResult([text('{"rows": 2}'), LINKS[1], EMBEDDED_TEXT])
    assert result.json() == {"rows": 2}
    with pytest.raises(ValueError, match=r"1 resource_link.*\.resource_links the resource links"):
        ToolResult([LINKS[1]]).json()


def test_an_image_repr_is_its_type_and_size() -> None:
    # Before: Image(data=b'\x89PNG\r\n\x1a\n\x00\x00…', mime_type='image/png'), every byte of it.
    assert repr(Image(PNG, "image/png")) == "Image(image/png, 4,033 bytes)"
    assert repr(ToolResult([image(PNG)]).images) == "[Image(image/png, 4,033 bytes)]"


def test_a_result_repr_summarizes_its_blocks_however_large_they_are() -> None:
    big_text = "word " * 200_000
    blocks: list[dict[str, Any]] = [text(big_text), image(PNG * 250), *LINKS[1:], EMBEDDED_TEXT, EMBEDDED_BLOB]
    blocks += [text(str(i)) for i in range(20)] + [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]
    result = ToolResult(blocks, {"rows": ["x" * 1_000] * 1_000}, is_error=True)
    shown = repr(result)
    assert len(shown) < 2_000, len(shown)
    assert shown.startswith("ToolResult([text 'word word ")
    assert "… (1,000,000 characters)" in shown
    assert f"Image(image/png, {len(PNG) * 250:,} bytes)" in shown
    assert "ResourceLink(demo://resource/dynamic/blob/1, 'Blob Resource 1', text/plain)" in shown
    assert "Resource(demo://resource/dynamic/text/1, text/plain, 17 characters)" in shown
    assert f"Resource(demo://resource/session/y.gz, application/gzip, {len(GZ)} bytes)" in shown
    assert "… 17 more blocks]" in shown
    assert "structured_content={'rows': ['xxx" in shown and "is_error=True)" in shown
    assert repr(ToolResult([text("hi")])) == "ToolResult([text 'hi'])"
    assert repr(ToolResult([{"type": "audio"}])) == "ToolResult([audio block])"


def test_resource_reprs_are_short() -> None:
    assert repr(Resource("u://a", "text/plain", text="x" * 10_000)) == "Resource(u://a, text/plain, 10,000 characters)"
    assert repr(Resource("u://b", data=bytes(5_000))) == "Resource(u://b, 5,000 bytes)"
    link = ResourceLink("u://c", "name", description="d" * 10_000)
    assert repr(link) == "ResourceLink(u://c, 'name')"


@pytest.mark.real_servers
def test_a_real_server_s_resource_links_and_embedded_resources_reach_the_text() -> None:
    # npm server-everything's three resource-returning tools, over stdio, through `ToolResult.from_wire`.
    root = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
    require_install(root / ".stamp", "third-party MCP servers", "run `make real-servers`")
    config = load_config(
        REPO / "tests" / "real_servers.yaml", environ={**os.environ, "TOOLTREE_REAL_SERVERS": str(root)}
    )
    server = config.server("everything")
    assert server.command is not None
    params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env) or None)
    gz = {"name": "x.gz", "data": "data:text/plain;base64,aGVsbG8="}
    calls: list[tuple[str, dict[str, Any]]] = [("get-resource-links", {"count": 2}), ("get-resource-reference", {})]
    calls += [("gzip-file-as-resource", gz)]
    calls += [("gzip-file-as-resource", {**gz, "name": "y.gz", "outputType": "resource"})]
    results: list[ToolResult] = []

    async def run() -> None:
        with anyio.fail_after(server.timeout):
            async with Client(params, mode="auto", read_timeout_seconds=server.timeout) as client:
                for tool, arguments in calls:
                    called = await client.call_tool(tool, arguments)
                    results.append(
                        ToolResult.from_wire(called.model_dump(by_alias=True, mode="json", exclude_none=True))
                    )

    anyio.run(run)
    links, reference, link, blob = results
    assert "<demo://resource/dynamic/blob/1> (text/plain)" in links.text and len(links.resource_links) == 2
    assert "Resource <demo://resource/dynamic/text/1> (text/plain):\nResource 1: " in reference.text
    assert reference.resources[0].text is not None and reference.resources[0].text in reference.text
    assert link.text == "Resource link: x.gz <demo://resource/session/x.gz> (application/gzip)"
    assert gzip.decompress(blob.resources[0].data or b"") == b"hello"
    assert blob.text.startswith("Resource <demo://resource/session/y.gz> (application/gzip, ")


def test_a_result_printed_counts_one_block_past_those_it_lists_in_the_singular() -> None:
    # Before: "[… 1 more blocks]".
    assert str(ToolResult([image(PNG)] * 11)).splitlines()[-1] == "[… 1 more block]"
    assert str(ToolResult([image(PNG)] * 12)).splitlines()[-1] == "[… 2 more blocks]"
