"""A tool with an output schema that sends an image and a resource link beside its structured content
(`tests/servers/structured_server.py`'s ``chart``), through `tooltree serve` as a real subprocess and the official
SDK client over stdio: offered as a passthrough tool, the client gets all of it; in code mode, a script gets it from
the stub's structured result, shows its image and, printing it, learns of the image and the link.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.serve.conftest import Serve, clean_up
from tests.servers.content_server import png
from tests.support import REPO, run_owner
from tooltree_cli.main import main

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

IMAGE = png(100, 80, 200_000)  # as structured_server.py's
WAIT = 120.0


@pytest.fixture
def charts(tmp_path: Path, docker_engine: Any) -> Iterator[Serve]:
    """A serve setup of the structured server (as ``charts``) with ``charts.chart`` passed through."""
    mark = uuid.uuid4().hex[:12]
    server = json.dumps(str(REPO / "tests" / "servers" / "structured_server.py"))
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  charts:\n    command: {json.dumps(sys.executable)}\n    args: [{server}]\n"
        'serve:\n  warm: 1\n  passthrough: ["charts.chart"]\n',
        encoding="utf-8",
    )
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    serve = Serve(config, tree, run_owner(f"serve-{mark}"), mark)
    yield serve
    clean_up(serve, docker_engine)


async def test_a_structured_result_s_image_and_link_reach_a_passthrough_client_and_a_script(charts: Serve) -> None:
    import mcp

    size = {"title": "March", "width": 100, "height": 80}
    async with mcp.Client(charts.stdio_params(), read_timeout_seconds=WAIT) as client:
        direct = await client.call_tool("charts__chart", {"title": "March"})
        assert not direct.is_error
        assert direct.structured_content == size
        kinds = [type(b) for b in direct.content]
        assert kinds == [types.TextContent, types.ImageContent, types.ResourceLink]
        assert direct.content[1].data == IMAGE  # type: ignore[union-attr]
        assert str(direct.content[2].uri) == "file:///charts/data.csv"  # type: ignore[union-attr]

        code = (
            "from servers.charts import chart\n"
            "c = chart(title='March')\n"
            "show_image(c)\n"
            "print(c, c.resource_links[0].uri)\n"
        )
        ran = await client.call_tool("execute_python", {"code": code})
        assert not ran.is_error, ran.content
        images = [b.data for b in ran.content if isinstance(b, types.ImageContent)]
        assert [base64.b64decode(i) for i in images] == [base64.b64decode(IMAGE)]
        printed = "\n".join(b.text for b in ran.content if isinstance(b, types.TextContent))
        assert (
            "{'title': 'March', 'width': 100, 'height': 80}\n"
            f"[Image(image/png, {len(base64.b64decode(IMAGE)):,} bytes): result.images[0]]\n"
            "[ResourceLink(file:///charts/data.csv, 'data.csv', text/csv): result.resource_links[0]] "
            "file:///charts/data.csv"
        ) in printed
