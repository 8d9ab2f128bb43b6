"""The arguments of the four code-mode tools, through the agent loop (the real SDK against the fake API): an argument
a tool does not have, or one of the wrong type, is an error that names it, and nothing runs."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from agent import Agent
from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.toolsets import CodeToolset
from agent.toolsets.code import TOOLS
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.test_loop import tool_results


def run_calls(project: Project, runtime: Runtime, *calls: dict[str, Any]) -> list[tuple[bool, str]]:
    """One reply with ``calls``, then an answer: each call's (is_error, text) as the model got it."""
    with FakeMessagesAPI([reply(*calls), reply("done")]) as api:
        result = Agent(project.config, tree=project.tree, mode="code", client=api.client(), runtime=runtime).run("go")
    assert result.completed
    out = []
    for answer in tool_results(api.requests[1]):
        text = "".join(b["text"] for b in answer["content"] if b["type"] == "text")
        out.append((bool(answer.get("is_error")), text))
    return out


def test_an_unknown_argument_is_an_error_naming_it_and_the_tools_arguments(project: Project, live: Runtime) -> None:
    # Before: ignored. read_file {"lines": 5} read the first 2,000 lines, list_files {"recursive": true} listed
    # one level, search_tools {"top_k": 3} gave 5 results: the model believed it got what it asked for.
    hostile = "\x1b[2J" + "k" * 100
    answers = run_calls(
        project,
        live,
        tool_use("read_file", {"path": "servers/INDEX.md", "lines": 5}),
        tool_use("list_files", {"path": "servers", "recursive": True, "depth": 2}),
        tool_use("search_tools", {"query": "export leads", "top_k": 3}),
        tool_use("list_files", {"path": "servers", **{f"x{i}": i for i in range(6)}, hostile: 1}),
        tool_use("read_file", {"path": "servers/INDEX.md", "offset": 1, "limit": 1}),  # what they have: taken
        tool_use("search_tools", {"query": "export leads", "detail": "name", "limit": 1, "regex": False}),
        tool_use("read_file", {"path": "servers/INDEX.md", "offset": None, "limit": None}),  # null: the default
    )
    assert answers[:3] == [
        (True, "read_file has no argument 'lines'; its arguments are: path, offset, limit"),
        (True, "list_files has no arguments 'recursive', 'depth'; its arguments are: path"),
        (True, "search_tools has no argument 'top_k'; its arguments are: query, detail, limit, regex"),
    ]
    assert answers[3] == (True, "list_files has no arguments 'x0', 'x1', 'x2', 'x3', 'x4' and 2 more; its arguments "
                                "are: path")  # fmt: skip
    (read_error, read), (found_error, found), (whole_error, whole) = answers[4:]
    assert not (read_error or found_error or whole_error)
    assert read.startswith("# ") and "call read_file with offset=2" in read and found.startswith("crm.")
    assert whole.startswith("# ") and "offset=" not in whole
    assert not live.sandbox_started


@pytest.mark.docker
def test_execute_python_with_an_unknown_argument_runs_nothing(project: Project, sandboxed: Runtime) -> None:
    # Before: {"timeout": 600} was ignored and the script ran, with the usual time limit.
    answers = run_calls(project, sandboxed, tool_use("execute_python", {"code": "ran = True", "timeout": 600}))
    assert answers == [
        (True, "execute_python has no argument 'timeout'; its arguments are: code; the script was not run")
    ]
    after = run_calls(project, sandboxed, tool_use("execute_python", {"code": "print('ran' in globals())"}))
    assert after == [(False, "False")]


@pytest.mark.docker
def test_an_argument_of_the_wrong_type_is_an_error_naming_it(project: Project, sandboxed: Runtime) -> None:
    # Before: list_files read 0 or false as no path and listed /workspace; search_tools answered a wrong detail or
    # regex with its signature, not saying which argument was wrong; none said what it got.
    from agent.toolsets.code import SEARCH_SIGNATURE

    answers = run_calls(
        project,
        sandboxed,
        tool_use("list_files", {"path": 0}),
        tool_use("list_files", {"path": False}),
        tool_use("read_file", {"path": 5}),
        tool_use("read_file", {"path": "servers/INDEX.md", "limit": "ten"}),
        tool_use("read_file", {"path": "servers/INDEX.md", "offset": 1.5}),
        tool_use("search_tools", {"query": 5}),
        tool_use("search_tools", {"query": "leads", "detail": 5}),
        tool_use("search_tools", {"query": "leads", "regex": "yes"}),
        tool_use("search_tools", {"query": "leads", "limit": "ten"}),
        tool_use("execute_python", {"code": 5}),
        tool_use("read_file", {"path": None}),
        tool_use("search_tools", {}),
        tool_use("execute_python", {"code": " \n"}),
    )
    assert answers == [
        (True, "path must be a string, got int 0"),
        (True, "path must be a string, got bool False"),
        (True, "read_file needs a path (a string), got int 5"),
        (True, "limit must be an integer, got str 'ten'"),
        (True, "offset must be an integer, got float 1.5"),
        (True, f"{SEARCH_SIGNATURE} needs a query (a string), got int 5"),
        (True, "detail must be a string, got int 5"),
        (True, "regex must be true or false, got str 'yes'"),
        (True, "limit must be an integer, got str 'ten'"),
        (True, "execute_python needs code (a string of Python), got int 5"),
        (True, "read_file needs a path (a string); none was given"),
        (True, f"{SEARCH_SIGNATURE} needs a query (a string); none was given"),
        (True, "execute_python needs code (a string of Python), got blank text"),
    ]


def sample(prop: dict[str, Any]) -> object:
    """A value ``prop`` (a property's schema) allows."""
    return prop["enum"][0] if "enum" in prop else {"string": "x", "integer": 1, "boolean": True}[prop["type"]]


@pytest.mark.parametrize("standalone", [False, True])
def test_each_tools_schema_refuses_what_the_tool_refuses(project: Project, standalone: bool) -> None:
    # Every argument the schema names is taken, and any other is refused (before: ignored).
    from agent.toolsets.code import unknown_arguments

    for tool in CodeToolset(project.tree, standalone=standalone, timeout=45).tools():
        schema = tool["input_schema"]
        validator = jsonschema.Draft202012Validator(schema)
        call = {name: sample(p) for name, p in schema["properties"].items()}
        assert validator.is_valid(call) and unknown_arguments(tool["name"], call) is None
        assert unknown_arguments(tool["name"], {**call, "extra": 1})
    assert [t["name"] for t in TOOLS] == ["list_files", "read_file", "search_tools", "execute_python"]
