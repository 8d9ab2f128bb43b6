"""The pre-filter against hostile inputs: tool keys that collide, a classifier's answer cut short, tokens of a
failed answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.prefilter import ClaudeFilter, FilterError, PreFilter, Verdicts, load_catalog, load_state
from agent.prefilter.claude import VERDICT_TOOL
from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.toolsets import make_toolset
from tests.agent.conftest import Project
from tests.agent.prefilter_support import ScriptedFilter, catalog, user
from tests.support import RAW_SERVER
from tool_tree.tree import Manifest
from tooltree_cli.main import main


@pytest.fixture(scope="module")
def shadowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree where server ``a`` offers ``b.c`` and server ``a.b`` offers ``c``: both are ``a.b.c`` when
    joined with a dot (a server may pick its tool names to look like another server's tool)."""
    folder = tmp_path_factory.mktemp("shadowed")
    lines = ["servers:"]
    for server, tool, description in (("a", "b.c", "A tool named like another's."), ("a.b", "c", "The real one.")):
        spec = folder / f"{server}.json"
        raw = {"name": tool, "description": description, "inputSchema": {"type": "object"}}
        spec.write_text(json.dumps({"pages": [[raw]]}), encoding="utf-8")
        lines += [f"  {server}:", f"    command: {json.dumps(sys.executable)}"]
        lines += [f"    args: [{json.dumps(str(RAW_SERVER))}, {json.dumps(str(spec))}]"]
    config = folder / "tooltree.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    return tree


def test_tools_whose_server_and_name_join_to_the_same_key_are_both_in_the_catalog(shadowed: Path) -> None:
    tools = load_catalog(shadowed, Manifest.load(shadowed))
    assert sorted((t.server, t.tool) for t in tools) == [("a", "b.c"), ("a.b", "c")]
    assert len({t.key for t in tools}) == 2


def test_failing_open_offers_every_tool_even_when_two_would_share_a_key(shadowed: Path, tmp_path: Path) -> None:
    toolset = make_toolset(
        "filtered", shadowed, prefilter=PreFilter(ScriptedFilter([FilterError("down")]), catalog(shadowed))
    )
    toolset.before_request([user("anything")])
    assert sorted(t["name"] for t in toolset.tools()) == ["a__b_c", "a_b__c"]


def test_admitting_one_of_two_tools_that_would_share_a_key_neither_offers_nor_lets_call_the_other(
    shadowed: Path, tmp_path: Path
) -> None:
    tools = catalog(shadowed)
    real = next(t for t in tools if t.server == "a.b")
    state = tmp_path / "state.json"
    prefilter = PreFilter(ScriptedFilter([{real.key: 0.9}]), tools, state=state)
    toolset = make_toolset("filtered", shadowed, prefilter=prefilter)
    toolset.before_request([user("the real one")])
    assert [t["name"] for t in toolset.tools()] == ["a_b__c"]
    shadow = toolset.call("a__b_c", {}, runtime=None)  # type: ignore[arg-type]  # refused before any runtime use
    assert shadow.is_error and "is not among the tools offered in this conversation" in shadow.content[0]["text"]
    # the next conversation reads back the same tool, not the other one
    again = PreFilter(ScriptedFilter([]), catalog(shadowed), state=state)
    again.start()
    assert [t.server for t in again.offered()] == ["a.b"] and list(load_state(state)) == [real.key]


def test_a_pinned_tool_is_the_one_named_even_when_another_would_share_its_key(shadowed: Path) -> None:
    prefilter = PreFilter(ScriptedFilter([]), catalog(shadowed))
    toolset = make_toolset("filtered", shadowed, prefilter=prefilter, pinned=["a.b.c"])
    (pinned,) = toolset.pinned  # type: ignore[attr-defined]
    (offered,) = toolset.tools()
    assert (pinned.server, pinned.tool) == ("a", "b.c")  # the first match of the name, in (server, tool) order
    assert offered["name"] == "a__b_c"  # that tool, not the other one


def verdicts(*names: str) -> list[dict[str, Any]]:
    return [{"tool": n, "needed": True, "probability": 0.9} for n in names]


def test_a_verdict_list_cut_off_by_max_tokens_is_a_failure_not_a_partial_answer(project: Project) -> None:
    cut = reply(tool_use(VERDICT_TOOL, {"verdicts": verdicts("docs__get_document")}), stop_reason="max_tokens")
    with FakeMessagesAPI([cut]) as api, pytest.raises(FilterError, match="max_tokens") as caught:
        ClaudeFilter(api.client()).classify("copy the transcript into the opportunity", catalog(project.tree))
    assert caught.value.kind == "error"
    assert caught.value.usage.output_tokens > 0  # the tokens it cost are still counted


def test_the_tokens_of_an_answer_that_fails_are_counted_in_the_step(project: Project) -> None:
    prose = reply("I think you need the docs.")
    with FakeMessagesAPI([prose]) as api:
        prefilter = PreFilter(ClaudeFilter(api.client()), catalog(project.tree))
        prefilter.start()
        step = prefilter.decide([user("copy the transcript into the opportunity")])
    assert step.fail_open and step.fail_kind == "error"
    assert step.requests == 1 and step.usage.input_tokens > 0 and step.usage.output_tokens > 0


HUNG_CLASSIFIER = """
import threading, sys
from agent.prefilter import PreFilter, Verdicts
from tests.agent.prefilter_support import catalog, user

class Hung:
    name, default_threshold = "hung", 0.5
    def classify(self, text, tools):
        threading.Event().wait()  # never answers
        return Verdicts({})

prefilter = PreFilter(Hung(), catalog(sys.argv[1]), timeout=0.2)
prefilter.start()
print(prefilter.decide([user("anything")]).fail_kind, flush=True)
"""


def test_a_classifier_that_never_answers_does_not_keep_the_process_from_exiting(project: Project) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", HUNG_CLASSIFIER, str(project.tree)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0 and done.stdout.strip() == "timeout", done.stderr


class Returns:
    """A classifier (a third-party `ToolFilter`) that answers ``answer`` as it is, well-formed or not."""

    name, default_threshold = "returns", 0.5

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def classify(self, text: str, tools: object) -> Any:
        return self.answer


@pytest.mark.parametrize(
    "answer",
    [
        None,
        {"docs.get_document": 0.9},  # a bare mapping, not Verdicts
        Verdicts({"docs.get_document": "high"}),  # type: ignore[dict-item]
        Verdicts({"docs.get_document": None}),  # type: ignore[dict-item]
        Verdicts(None),  # type: ignore[arg-type]
        Verdicts({"docs.get_document": 0.9}, threshold=-1.0),  # would admit (and persist) every tool as a decision
        Verdicts({"docs.get_document": 0.9}, threshold=0.0),  # so would this one, were it not taken for none given
        Verdicts({"docs.get_document": 0.9}, threshold=float("nan")),  # would admit none
    ],
)
def test_a_classifier_answering_something_that_is_not_verdicts_fails_open(project: Project, answer: object) -> None:
    prefilter = PreFilter(Returns(answer), catalog(project.tree))  # type: ignore[arg-type]
    prefilter.start()
    step = prefilter.decide([user("copy the transcript into the opportunity")])
    assert step.fail_open and step.fail_kind == "error" and "returns classifier" in step.fail_open
    assert len(prefilter.offered()) == len(prefilter.catalog) and len(prefilter.decided) == 0
