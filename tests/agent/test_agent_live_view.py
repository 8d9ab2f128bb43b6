"""The live view of `tooltree agent` (`tooltree_cli.agent_view.live_view`) and the `ToolFinished` events it prints: a
``batch_tool`` call says how many of its invocations failed, as ``--json`` and the summary line count them. The real
CLI (``main``) and the real ``anthropic`` SDK against the fake API, the sample servers over stdio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent import Agent, EventHandlerError, RunFinished, ToolFinished, read_transcript
from agent.events import Event
from agent.testing import FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tooltree_cli.main import main

GET = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}
GOOD = {"name": "crm__get_record", "arguments": GET}
BAD = {"name": "crm__nope", "arguments": {}}
FIVE_TWO_FAILED = [GOOD, BAD, GOOD, {"name": "media__nope", "arguments": {}}, GOOD]


def tool_lines(err: str) -> list[str]:
    """The live view's lines of tool calls in ``err``."""
    return [line for line in err.splitlines() if line.startswith("  ")]


@pytest.mark.parametrize("mode", ["direct", "tool-search", "filtered"])
def test_a_batch_with_failed_invocations_says_how_many_failed_as_the_json_and_summary_count(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    # Before: "  batch_tool 5 call(s), 2 failed [ok] · ...": the batch itself is no error, so the view said ok.
    five = tool_use("batch_tool", {"invocations": FIVE_TWO_FAILED})
    one = tool_use("batch_tool", {"invocations": [GOOD]})
    api.add(reply(five, one, tool_use("crm__nope"), tool_use("crm__get_record", GET)), reply("Negotiation."))
    argv = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree),
            "--mode", mode, "--json"]  # fmt: skip
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert [line.split(" · ")[0] for line in tool_lines(err)] == [
        "  batch_tool 5 call(s), 2 failed [2 of 5 failed]",
        "  batch_tool 1 call(s), 0 failed [ok]",  # a batch none of whose invocations failed, single calls: as before
        "  crm__nope unknown tool 'crm__nope' [error]",
        "  crm__get_record [ok]",
    ]
    summary = json.loads(out)
    assert (summary["tool_calls"], summary["tool_errors"], summary["batches"]) == (8, 3, 2)
    assert "· 8 tool call(s) (3 failed; 2 batch_tool call(s)), 0 from scripts" in err


def test_the_tool_finished_event_of_a_batch_carries_its_invocations_and_failed_ones(
    project: Project, api: FakeMessagesAPI
) -> None:
    # Before: the event had is_error (False for the batch) and no counts.
    api.add(reply(tool_use("batch_tool", {"invocations": FIVE_TWO_FAILED}), tool_use("crm__get_record", GET)),
            reply("Negotiation."))  # fmt: skip
    events: list[Event] = []
    agent = Agent(project.config, tree=project.tree, mode="direct", on_event=events.append)
    result = agent.run("Read the Northwind deal")
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [(e.name, e.is_error, e.invocations, e.failed) for e in finished] == [
        ("batch_tool", False, 5, 2), ("crm__get_record", False, None, 0)
    ]  # fmt: skip
    assert (result.summary.tool_calls, result.summary.tool_errors) == (6, 2)


class _Gone:
    """A stderr whose terminal closed: every write fails with EIO, as after a hang-up."""

    def __init__(self) -> None:
        self.tries = 0

    def write(self, text: str) -> int:
        self.tries += 1
        raise OSError(5, "Input/output error")

    def flush(self) -> None:
        raise OSError(5, "Input/output error")


def test_a_stderr_that_can_no_longer_be_written_ends_the_live_view_not_the_run(
    project: Project, api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the live view's failed write (a terminal closed in the moment before its SIGHUP arrived) ended the run
    # as an unexpected error (exit 70), before its workspace was saved or its transcript ended.
    from tooltree_cli.agent_view import live_view

    api.add(reply(tool_use("crm__get_record", GET)), reply("Negotiation."))
    gone = _Gone()
    monkeypatch.setattr("sys.stderr", gone)
    result = Agent(project.config, tree=project.tree, mode="direct", on_event=live_view).run("Read the Northwind deal")
    assert result.answer == "Negotiation." and result.summary.tool_calls == 1
    assert gone.tries >= 3  # a reply, the call, the last reply: each line tried, none raised


def test_an_on_event_that_raises_ends_the_run_with_a_stop_reason_and_its_exception(
    project: Project, api: FakeMessagesAPI, tmp_path: Path
) -> None:
    # Before: the callback's exception went on out of run() alone, and the transcript's run_end said stop_reason "".
    api.add(reply(tool_use("crm__get_record", GET)), reply("Negotiation."))

    def dashboard(event: Event) -> None:
        if isinstance(event, ToolFinished):
            raise RuntimeError("dashboard down")

    transcript = tmp_path / "run.jsonl"
    agent = Agent(project.config, tree=project.tree, mode="direct", on_event=dashboard, transcript=transcript)
    with pytest.raises(EventHandlerError) as caught:
        agent.run("Read the Northwind deal")
    e = caught.value
    assert str(e) == "on_event raised on ToolFinished: RuntimeError: dashboard down"
    assert isinstance(e.__cause__, RuntimeError)
    assert e.result is not None and (e.result.stop_reason, e.result.summary.turns) == ("on_event_error", 1)
    end = read_transcript(transcript)[-1]
    assert (end["type"], end["summary"]["stop_reason"]) == ("run_end", "on_event_error")
    assert len(api.requests) == 1  # nothing more was sent


def test_an_on_event_that_raises_on_the_run_finishing_keeps_its_stop_reason(
    project: Project, api: FakeMessagesAPI
) -> None:
    api.add(reply("Negotiation."))

    def dashboard(event: Event) -> None:
        if isinstance(event, RunFinished):
            raise ValueError("full")

    with pytest.raises(EventHandlerError, match=r"^on_event raised on RunFinished: ValueError: full$") as caught:
        Agent(project.config, tree=project.tree, mode="direct", on_event=dashboard).run("Read the Northwind deal")
    assert caught.value.result is not None and caught.value.result.answer == "Negotiation."
    assert caught.value.result.stop_reason == "end_turn"
