"""Full code-mode runs: the real SDK against the fake API, a real sandbox, the real sample servers.

The three tests share one sandbox session and one set of servers (the ``sandboxed`` fixture).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent import Agent
from agent.budget import IMAGE_DATA
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.test_loop import assert_cache_stable, tool_results
from tests.image_samples import png_expression

COPY_TRANSCRIPT = """\
from servers.docs import get_document
from servers.crm import update_record
text = get_document(document_id="doc_q3r7tx").text
done = update_record(object_type="opportunity", record_id="0065e000009Q3PR", fields={"description": text})
print(len(text), done.json()["updated_fields"])
"""


def code_agent(project: Project, api: FakeMessagesAPI, runtime: Runtime) -> Agent:
    return Agent(project.config, tree=project.tree, mode="code", client=api.client(), runtime=runtime)


def text_of(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


@pytest.mark.docker
def test_a_code_run_lists_reads_searches_and_executes(project: Project, sandboxed: Runtime) -> None:
    script = [
        reply(tool_use("list_files", {"path": "servers/docs"}), tool_use("search_tools", {"query": "update record"})),
        reply(
            tool_use("read_file", {"path": "servers/docs/get_document.py"}),
            tool_use("read_file", {"path": "/workspace/servers/crm/update_record.py"}),
        ),
        reply("I will copy it now.", tool_use("execute_python", {"code": COPY_TRANSCRIPT})),
        reply("The transcript is now the opportunity's description."),
    ]
    with FakeMessagesAPI(script) as api:
        result = code_agent(project, api, sandboxed).run("Copy transcript doc_q3r7tx into opportunity 0065e000009Q3PR")
    assert result.completed and result.summary.turns == 4
    assert_cache_stable(api.requests)
    listing, found = tool_results(api.requests[1])
    assert "get_document.py" in text_of(listing)
    assert text_of(found).startswith("crm.update_record")
    stubs = tool_results(api.requests[2])
    assert "def get_document(*, document_id: str" in text_of(stubs[0])
    assert "def update_record(" in text_of(stubs[1])
    (executed,) = tool_results(api.requests[3])
    printed = text_of(executed)
    assert printed.startswith("200936 ['description']")
    assert "docs.get_document ok" in printed and "crm.update_record ok" in printed
    s = result.summary
    assert s.script_tool_calls == 2 and s.tool_calls == 5 and s.tool_errors == 0
    assert s.sandbox_bytes > 200_000 > 20 * s.model_bytes  # the transcript stayed in the sandbox
    record = sandboxed.call_tool("crm", "get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})
    assert len(record["structuredContent"]["fields"]["description"]) == 200936


@pytest.mark.docker
def test_an_image_shown_by_a_script_arrives_as_an_image_block(project: Project, sandboxed: Runtime) -> None:
    code = "from servers.media import render_chart\nshow_image(render_chart(title='Q3', values=[5, 8]).images[0].data)"
    with FakeMessagesAPI([reply(tool_use("execute_python", {"code": code})), reply("A bar chart.")]) as api:
        result = code_agent(project, api, sandboxed).run("Chart it")
    (executed,) = tool_results(api.requests[1])
    kinds = [b["type"] for b in executed["content"]]
    assert kinds == ["text", "image"] and "media.render_chart ok" in text_of(executed)
    image = executed["content"][1]
    assert image["source"]["media_type"] == "image/png" and image["source"]["data"].startswith("iVBORw0KGgo")
    assert not executed.get("is_error") and result.summary.script_tool_calls == 1


@pytest.mark.docker
def test_a_failing_script_returns_its_traceback_and_long_output_stays_readable(
    project: Project, sandboxed: Runtime
) -> None:
    failing = (
        "from servers.crm import get_record\n"
        "def lookup():\n"
        "    return get_record(object_type='opportunity', record_id='006000000000000')\n"
        "lookup()\n"
    )
    long_output = "for i in range(5000):\n    print(f'row {i:05d}', 'x' * 40)\n"
    script = [
        reply(tool_use("execute_python", {"code": failing})),
        reply(tool_use("execute_python", {"code": long_output})),
        lambda body: reply(tool_use("read_file", {"path": _saved_output(body), "offset": 4999})),
        reply("Read the end."),
    ]
    with FakeMessagesAPI(script) as api:
        result = code_agent(project, api, sandboxed).run("Break things")
    (failed,) = tool_results(api.requests[1])
    assert failed["is_error"] is True
    traceback = text_of(failed)
    assert "line 3, in lookup" in traceback and "ToolError" in traceback and "006000000000000" in traceback
    assert "crm.get_record error" in traceback
    (long,) = tool_results(api.requests[2])
    assert "[... stdout cut: " in text_of(long) and "row 04999" in text_of(long)
    (tail,) = tool_results(api.requests[3])
    assert text_of(tail) == "row 04998 " + "x" * 40 + "\nrow 04999 " + "x" * 40 + "\n"
    assert result.summary.tool_errors == 1


def _saved_output(body: dict[str, Any]) -> str:
    """The workspace file the truncated output names (as the model would read it off the result)."""
    text = json.dumps(body["messages"][-1])
    start = text.index("/workspace/.tooltree/outputs/")
    return text[start : text.index(".txt", start) + 4]


@pytest.mark.docker
def test_the_images_of_one_reply_share_the_caps_of_one_result(project: Project, sandboxed: Runtime) -> None:
    # Before: each execution's images at its own cap, summed (20 such executions: 224 MB of base64, 1 GB RSS).
    png = png_expression(3 * 2**20)  # a whole PNG of 3 MiB
    code = f"for _ in range(2):\n    show_image({png})\nprint('shown')"
    with FakeMessagesAPI([reply(*[tool_use("execute_python", {"code": code})] * 3), reply("Seen.")]) as api:
        result = code_agent(project, api, sandboxed).run("Show them")
    executed = tool_results(api.requests[1])
    shown = [len(b["source"]["data"]) for r in executed for b in r["content"] if b["type"] == "image"]
    assert len(shown) == 2 and sum(shown) <= IMAGE_DATA  # before: 6 images, 25 MB of base64
    assert all(not r.get("is_error") and "shown" in text_of(r) for r in executed)  # every script ran
    cut = "2 image(s) of this result were left out: the results of one reply share"
    assert [cut in text_of(r) for r in executed] == [False, True, True]
    assert result.summary.tool_calls == 3 and result.summary.model_bytes < IMAGE_DATA + 10_000
