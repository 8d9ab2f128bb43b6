"""The ``claude`` pre-filter at its limits: an answer cut at ``max_tokens`` or ended by a refusal, and a request given
up on at the timeout or cut off mid-answer (its tokens unknown, not 0). The real SDK against the fake Messages API."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, read_transcript
from agent.prefilter import ClaudeFilter, FilterError, PreFilter
from agent.prefilter.claude import VERDICT_TOOL
from agent.prefilter.options import PrefilterOptions
from agent.testing import CutStream, FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog, user

CUT = reply(tool_use(VERDICT_TOOL, {"verdicts": []}), stop_reason="max_tokens")


def test_an_answer_cut_at_max_tokens_says_what_the_user_can_do(project: Project) -> None:
    # Before: "raise it for a catalog of N tools", though no option or setting raises it.
    tools = catalog(project.tree)
    with FakeMessagesAPI([CUT, CUT]) as api:
        with pytest.raises(FilterError) as default:
            ClaudeFilter(api.client(max_retries=0)).classify("x", tools)
        with pytest.raises(FilterError) as given:
            ClaudeFilter(api.client(max_retries=0), max_tokens=900).classify("x", tools)
    assert str(default.value) == (
        f"the pre-filter model's answer was cut off at max_tokens (4,096), the most it is given for a catalog of "
        f"{len(tools)} tools (32 per tool, 4,096 to 32,000); use --prefilter local (agent.prefilter: local) for this "
        "tree, or from Python a ClaudeFilter(max_tokens=...) with more"
    )
    assert str(given.value) == (
        f"the pre-filter model's answer was cut off at max_tokens (900); give ClaudeFilter(max_tokens=...) more for a "
        f"catalog of {len(tools)} tools"
    )
    assert default.value.usage.output_tokens > 0  # billed, and counted


def held(release: threading.Event) -> Any:
    """A reply that comes only once ``release`` is set (at most 10 s): longer than any timeout here."""

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return reply(tool_use(VERDICT_TOOL, {"verdicts": []}))

    return slow


def test_a_request_given_up_on_at_the_timeout_has_unknown_tokens_not_zero(project: Project) -> None:
    # Before: "tokens count for answers that arrive" and 0 tokens, though the client gave up on the answer at the same
    # deadline (none ever arrives) and the API may have billed the request.
    release = threading.Event()
    with FakeMessagesAPI([held(release)]) as api:
        prefilter = PreFilter(ClaudeFilter(api.client(max_retries=0)), catalog(project.tree), timeout=0.5)
        prefilter.start()
        try:
            step = prefilter.decide([user("read the onboarding document")])
        finally:
            release.set()
    assert step.fail_kind == "timeout" and step.requests == 1 and step.unanswered == 1
    assert step.usage.total == 0 and step.to_json()["unanswered"] == 1
    assert step.fail_open == (
        "the claude classifier took longer than 0.5 s (1 request(s) abandoned unanswered: their tokens are unknown, "
        "not counted; the API may have billed them)"
    )


def test_the_classifiers_own_timeout_says_its_tokens_are_unknown(project: Project) -> None:
    release = threading.Event()
    with FakeMessagesAPI([held(release)]) as api:
        try:
            with pytest.raises(FilterError) as caught:
                ClaudeFilter(api.client(max_retries=0), timeout=0.3).classify("x", catalog(project.tree))
        finally:
            release.set()
    assert caught.value.kind == "timeout" and caught.value.unanswered == 1
    assert str(caught.value) == (
        "the pre-filter model did not answer within 0.3 s (1 request(s) unanswered: their tokens are unknown, not "
        "counted)"
    )


def test_the_run_end_record_says_how_many_prefilter_requests_went_unanswered(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    release = threading.Event()
    path = tmp_path / "t.jsonl"
    with FakeMessagesAPI([held(release)]) as judge_api, FakeMessagesAPI([reply("Done.")]) as api:
        agent = Agent(project.config, tree=project.tree, mode="filtered", client=api.client(max_retries=0),
                      runtime=live, prefilter=ClaudeFilter(judge_api.client(max_retries=0)), transcript=path,
                      prefilter_options=PrefilterOptions(timeout=0.5))  # fmt: skip
        try:
            result = agent.run("read the onboarding document")
        finally:
            release.set()
    records = read_transcript(path)
    (step,) = [r for r in records if r["type"] == "prefilter"]
    assert step["unanswered"] == 1 and step["usage"]["input_tokens"] == 0
    assert records[-1]["type"] == "run_end" and records[-1]["prefilter_unanswered"] == 1
    p = result.summary.prefilter
    assert p is not None and "their tokens are unknown" in p.fail_open[0]


@pytest.mark.parametrize("stop_reason", ["refusal", "model_context_window_exceeded", "pause_turn"])
def test_verdicts_of_an_answer_that_did_not_end_on_its_own_fail_open(project: Project, stop_reason: str) -> None:
    # Before: only max_tokens was caught; a refusal's verdicts (or those of an answer that filled the context) were
    # taken whole, the tools they left out counted as not needed, and what they admitted was saved.
    verdict = {"tool": "docs__get_document", "needed": True, "probability": 0.9}
    cut = reply(tool_use(VERDICT_TOOL, {"verdicts": [verdict]}), stop_reason=stop_reason)
    with FakeMessagesAPI([cut]) as api:
        prefilter = PreFilter(ClaudeFilter(api.client(max_retries=0)), catalog(project.tree))
        prefilter.start()
        step = prefilter.decide([user("read the onboarding document")])
    assert step.fail_kind == "error" and step.fail_open == (
        f"the pre-filter model's answer is not a complete verdict list (stop_reason {stop_reason!r})"
    )
    assert len(prefilter.offered()) == len(prefilter.catalog) and len(prefilter.decided) == 0
    assert step.requests == 1 and step.usage.output_tokens > 0  # the answer's tokens still count


def test_answers_cut_off_mid_body_have_unknown_tokens_not_zero(project: Project) -> None:
    # Before: the requests whose answers broke off (the API had them, and may have billed them) were reported as sent
    # with 0 tokens, and not as unanswered.
    cut = CutStream(reply(tool_use(VERDICT_TOOL, {"verdicts": []})))
    with FakeMessagesAPI([cut, cut]) as api:
        prefilter = PreFilter(ClaudeFilter(api.client(max_retries=1)), catalog(project.tree))
        prefilter.start()
        step = prefilter.decide([user("read the onboarding document")])
    assert len(api.requests) == 2 and step.requests == 2 and step.unanswered == 2 and step.usage.total == 0
    assert step.fail_open.startswith("cannot reach the Messages API for the pre-filter: ")
    assert step.fail_open.endswith(" (2 request(s) unanswered: their tokens are unknown, not counted)")
