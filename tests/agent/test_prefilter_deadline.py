"""The pre-filter's deadline: a classifier it gave up on sends no more requests, and what it sent is counted.

The ``claude`` classifier runs the real SDK against the fake Messages API."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agent import Agent
from agent.prefilter import Attempt, CatalogTool, ClaudeFilter, FilterError, PreFilter, Verdicts, current_attempt
from agent.prefilter.base import set_current_attempt
from agent.prefilter.claude import VERDICT_TOOL
from agent.prefilter.options import PrefilterOptions
from agent.summary import TokenUsage
from agent.testing import ApiError, FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog, user


def verdicts(*names: str) -> dict[str, Any]:
    items = [{"tool": n, "needed": True, "probability": 0.9} for n in names]
    return reply(tool_use(VERDICT_TOOL, {"verdicts": items}))


def held(release: threading.Event) -> Any:
    """A reply that comes only once ``release`` is set (at most 10 s): longer than any timeout here."""

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return verdicts("docs__get_document")

    return slow


def join_new_workers(before: set[threading.Thread]) -> None:
    """Wait (at most 10 s each) for the classifier threads started since ``before``: whatever they were going to
    send has been sent once they end."""
    for thread in set(threading.enumerate()) - before:
        if thread.name == "tooltree-prefilter":
            thread.join(10)
            assert not thread.is_alive()


def test_a_claude_prefilter_that_times_out_sends_no_request_after_the_run_went_on(
    project: Project, live: Runtime
) -> None:
    # Before: the default client (``--prefilter claude``) retried twice after its own timeout, while the run had
    # already gone on with every tool: 3 requests reached the API, and the summary counted none of them.
    release = threading.Event()
    with FakeMessagesAPI([held(release)] * 3) as judge_api, FakeMessagesAPI([reply("Done.")]) as api:
        agent = Agent(
            project.config,
            tree=project.tree,
            mode="filtered",
            client=api.client(max_retries=0),
            runtime=live,
            prefilter=ClaudeFilter(judge_api.client()),  # the SDK's default retries (2), as the CLI's client has
            prefilter_options=PrefilterOptions(timeout=1.0),
        )
        before = set(threading.enumerate())
        try:
            result = agent.run("read the onboarding document")
            at_the_end = len(judge_api.requests)
            join_new_workers(before)  # and nothing follows later either
        finally:
            release.set()
    assert at_the_end == 1 and len(judge_api.requests) == 1 and len(api.requests) == 1
    p = result.summary.prefilter
    assert p is not None and p.requests == 1  # what it sent is counted
    assert len(p.fail_open) == 1 and p.fail_open[0].startswith("timeout: ")
    assert "1 request(s) abandoned" in p.fail_open[0]
    assert len(api.requests[0]["tools"]) == len(catalog(project.tree)) + 1  # every tool (and batch_tool)


def test_the_claude_classifier_does_not_retry_past_its_timeout(project: Project) -> None:
    # Before: a client with the SDK's default retries sent 3 requests, each waited for the whole timeout.
    release = threading.Event()
    with FakeMessagesAPI([held(release)] * 3) as api:
        try:
            with pytest.raises(FilterError, match=r"did not answer within 0\.3 s") as caught:
                ClaudeFilter(api.client(max_retries=2), timeout=0.3).classify("x", catalog(project.tree))
        finally:
            release.set()
    assert caught.value.kind == "timeout" and caught.value.requests == 1
    assert len(api.requests) == 1


def test_a_failure_the_sdk_would_retry_is_retried_before_the_deadline_and_each_request_counted(
    project: Project,
) -> None:
    with FakeMessagesAPI([ApiError.overloaded(retry_after=0.01), verdicts("docs__get_document")]) as api:
        result = ClaudeFilter(api.client(max_retries=2), timeout=5).classify("read the doc", catalog(project.tree))
    assert result.probabilities == {"docs.get_document": 0.9}
    assert result.requests == 2 and len(api.requests) == 2


def test_a_retry_that_could_only_come_after_the_deadline_is_not_waited_for(project: Project) -> None:
    # Before: the SDK waited the whole retry-after (5 s) past a 1 s timeout, then sent the request again; then the
    # classifier failed open at once, without saying why.
    with (
        FakeMessagesAPI([ApiError.rate_limited(retry_after=5), verdicts()]) as api,
        pytest.raises(FilterError, match=r"failed \(429\)") as caught,
    ):
        ClaudeFilter(api.client(max_retries=2), timeout=1).classify("x", catalog(project.tree))
    assert caught.value.requests == 1 and len(api.requests) == 1
    assert "; the API asks to wait 5 s before trying again (not retried: it would end after the pre-filter's " in str(
        caught.value
    )


def classify_under(attempt: Attempt, classifier: ClaudeFilter, tools: Sequence[CatalogTool]) -> FilterError:
    """The failure of ``classifier`` asked under ``attempt`` (as the pre-filter's worker asks it), given up on after
    10 s: a classifier still waiting then is abandoned, as the pre-filter abandons it."""

    def ask() -> FilterError:
        set_current_attempt(attempt)
        with pytest.raises(FilterError) as caught:
            classifier.classify("read the doc", tools)
        return caught.value

    bound = threading.Timer(10, attempt.abandon)
    bound.start()
    try:
        return contextvars.copy_context().run(ask)
    finally:
        bound.cancel()


def test_a_retry_after_longer_than_a_minute_fails_open_at_once_saying_so(project: Project) -> None:
    # Before: the classifier kept its own copy of the SDK's rules and waited any retry-after that ended before its
    # deadline (a 15-minute one waited 10 minutes), where the agent's requests wait at most MAX_RETRY_AFTER.
    with FakeMessagesAPI([ApiError(429, "slow down", retry_after=90), verdicts("docs__get_document")]) as api:
        failure = classify_under(Attempt(300), ClaudeFilter(api.client(max_retries=2)), catalog(project.tree))
        assert len(api.requests) == 1
    assert failure.kind == "error" and failure.requests == 1
    assert str(failure).startswith("the pre-filter request failed (429): 429 slow down")
    assert str(failure).endswith("; the API asks to wait 90 s before trying again (not retried: longer than 60 s)")


def test_a_gate_that_gives_up_during_a_backoff_stops_the_retry(project: Project) -> None:
    # The 529's retry-after (0.2 s) ends before the deadline (1.5 s), the retry's answer does not come in time:
    # the gate gives up and no third request follows.
    release = threading.Event()
    replies = [ApiError.overloaded(retry_after=0.2), held(release), held(release)]
    with FakeMessagesAPI(replies) as api:
        prefilter = PreFilter(ClaudeFilter(api.client(max_retries=2)), catalog(project.tree), timeout=1.5)
        prefilter.start()
        before = set(threading.enumerate())
        try:
            step = prefilter.decide([user("read the doc")])
            join_new_workers(before)
        finally:
            release.set()
    assert step.fail_kind == "timeout" and step.requests == 2 and len(api.requests) == 2


class Late:
    """A third-party model-based classifier whose answer comes after the pre-filter gave up on it: it reports its
    request and the answer's tokens to the `Attempt` it runs under."""

    name, default_threshold = "late", 0.5

    def __init__(self) -> None:
        self.reported = threading.Event()

    def classify(self, text: str, tools: Sequence[CatalogTool]) -> Verdicts:
        attempt = current_attempt()
        assert attempt is not None and attempt.send()
        if self.reported.is_set():
            return Verdicts({}, requests=1)
        attempt.abandoned.wait(10)  # the answer arrives once the pre-filter no longer waits for it
        attempt.spent(TokenUsage(input_tokens=100, output_tokens=7))
        assert not attempt.send()  # nothing more may be sent
        self.reported.set()
        return Verdicts({}, usage=TokenUsage(input_tokens=100, output_tokens=7), requests=1)


def test_the_tokens_of_an_answer_that_arrives_after_the_timeout_are_counted_in_the_next_step(
    project: Project,
) -> None:
    classifier = Late()
    prefilter = PreFilter(classifier, catalog(project.tree), timeout=0.5)
    prefilter.start()
    first = prefilter.decide([user("read the doc")])
    assert first.fail_kind == "timeout" and first.requests == 1 and first.usage.total == 0
    assert classifier.reported.wait(10)
    prefilter.start()  # a next conversation: the answer given up on is still paid for
    second = prefilter.decide([user("read the doc")])
    assert second.usage.input_tokens == 100 and second.usage.output_tokens == 7
    third = prefilter.decide([user("read the doc"), user("and the record")])
    assert third.usage.total == 0  # counted once


def test_an_attempt_refuses_requests_past_its_deadline_or_once_abandoned() -> None:
    expired = Attempt(0.0)
    assert not expired.send() and expired.requests == 0
    attempt = Attempt(60)
    assert attempt.send() and attempt.requests == 1
    attempt.spent(TokenUsage(input_tokens=5))
    assert attempt.abandon() == (1, TokenUsage(input_tokens=5))
    assert not attempt.send() and attempt.requests == 1
    assert current_attempt() is None  # only the pre-filter's worker thread runs under one


@pytest.mark.parametrize("retries", [4, 1])
def test_the_claude_pre_filter_of_an_agent_without_a_client_retries_as_its_requests_do(
    project: Project, monkeypatch: pytest.MonkeyPatch, retries: int
) -> None:
    # Before: its client was the SDK's default, with 2 retries, while the agent's own had max_retries (4 by default).
    replies = [ApiError.overloaded(retry_after=0.01)] * 4 + [verdicts("docs__get_document")]
    with FakeMessagesAPI(replies) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-fake")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        bot = (
            Agent(project.config, tree=project.tree, mode="filtered", prefilter="claude")
            if retries == 4
            else Agent(project.config, tree=project.tree, mode="filtered", prefilter="claude", max_retries=retries)
        )
        assert bot.prefilter is not None
        classify = bot.prefilter.classifier.classify
        if retries == 4:  # the default: four retries, the fifth request answered
            assert classify("read the doc", catalog(project.tree)).requests == 5
        else:
            with pytest.raises(FilterError, match=r"failed \(529\)"):
                classify("read the doc", catalog(project.tree))
        assert len(api.requests) == retries + 1
