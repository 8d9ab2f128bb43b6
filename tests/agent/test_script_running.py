"""What a running script does, in one sentence for `tooltree serve`'s progress and `tooltree agent`'s lines
(`agent.toolsets.script_running.running_said`): before, serve joined its own copy of the sentence, free to drift from
the agent's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from agent.toolsets.script_running import RunningScript, running_said
from sandbox.calls import Waiting


def test_one_sentence_says_how_long_a_script_ran_what_it_waits_on_and_what_it_printed() -> None:
    waiting = "waiting on crm.search_leads for 10 s"
    assert running_said(12.4, waiting, "fetching 500 leads") == (
        "running for 12 s; waiting on crm.search_leads for 10 s; last printed: fetching 500 leads"
    )
    assert running_said(3, None, "step 2") == "running for 3 s; last printed: step 2"
    assert running_said(3, waiting, None) == "running for 3 s; waiting on crm.search_leads for 10 s"
    assert running_said(0.4, None, "") == "running for 0 s"


def test_the_agents_running_script_is_said_in_the_words_serve_says_it() -> None:
    # A sandbox as `RunningScript` asks it (`calls_waiting`, `last_printed`): what a real one answers is the Docker
    # tests' (tests/agent/test_agent_live_script.py, tests/serve/test_progress_printed.py).
    waiting = Waiting(3, "media.slow_echo", 2.0)
    sandbox: Any = SimpleNamespace(calls_waiting=lambda at_least: waiting, last_printed=lambda: "fetching")
    script = RunningScript()
    with script.running(sandbox):
        said = script.said()
    assert said is not None
    seconds = float(said.split()[2])
    assert said == running_said(seconds, waiting.said(), "fetching")
    assert said.endswith("s; 3 calls in flight, the longest media.slow_echo for 2 s; last printed: fetching")
    assert script.said() is None  # no script runs once it ended
