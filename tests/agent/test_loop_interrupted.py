"""Ctrl-C in the middle of `Agent.run`: the interrupt goes on to the caller, carrying the run so far.

The real SDK against the fake API, the real sample servers (direct mode: no container needed), a real SIGINT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import Agent, read_transcript
from agent.errors import interrupted_result
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.test_loop_api_edges import interrupting

USAGE = {"input_tokens": 900, "output_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def test_ctrl_c_goes_on_as_a_keyboard_interrupt_that_carries_the_run_so_far(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: only the transcript's run_end held the summary; a caller (the CLI's --json) had nothing to print.
    interrupt = interrupting()
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([reply(tool_use("media__list_gallery"), usage=USAGE), interrupt]) as api:
        agent = Agent(project.config, tree=project.tree, mode="direct", client=api.client(timeout=2.0),
                      runtime=live, transcript=transcript)  # fmt: skip
        with pytest.raises(KeyboardInterrupt) as caught:
            agent.run("List the gallery")
    assert type(caught.value) is KeyboardInterrupt  # as it came: a caller's `except KeyboardInterrupt` stops
    result = interrupted_result(caught.value)
    assert result is not None and result.stop_reason == "interrupted" and result.transcript == transcript
    s = result.summary
    assert (s.turns, s.tool_calls, s.usage.input_tokens, s.usage.output_tokens) == (2, 1, 900, 40)
    assert read_transcript(transcript)[-1]["summary"] == s.to_json()  # the same numbers, the duration too
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user"]
    assert result.messages[-1]["content"][0]["type"] == "tool_result"
    assert interrupted_result(KeyboardInterrupt()) is None  # an interrupt from elsewhere carries no run


def test_ctrl_c_while_the_prefilter_decides_is_no_turn(project: Project, live: Runtime) -> None:
    # Before: 1 turn, though no request had gone to the Messages API (what `RunSummary.turns` counts).
    from agent.prefilter import ClaudeFilter

    with FakeMessagesAPI([interrupting()]) as judge_api, FakeMessagesAPI([reply("never")]) as api:
        agent = Agent(project.config, tree=project.tree, mode="filtered", client=api.client(max_retries=0),
                      runtime=live, prefilter=ClaudeFilter(judge_api.client(max_retries=0)))  # fmt: skip
        with pytest.raises(KeyboardInterrupt) as caught:
            agent.run("read the onboarding document")
        assert len(judge_api.requests) == 1 and api.requests == []
    result = interrupted_result(caught.value)
    assert result is not None and result.stop_reason == "interrupted" and result.summary.turns == 0
