"""The ``claude`` classifier: the real SDK against the fake Messages API."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from agent.prefilter import ClaudeFilter, FilterError, PreFilter
from agent.prefilter.claude import VERDICT_TOOL
from agent.testing import ApiError, FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog, user


def verdicts(*entries: tuple[str, bool, float]) -> dict[str, Any]:
    items = [{"tool": name, "needed": needed, "probability": p} for name, needed, p in entries]
    return reply(tool_use(VERDICT_TOOL, {"verdicts": items}))


def test_one_request_gives_a_typed_verdict_per_tool_with_the_catalog_cached(project: Project) -> None:
    tools = catalog(project.tree)
    answer = verdicts(("docs__get_document", True, 0.95), ("crm__update_record", True, 0.9), ("nope__x", True, 1.0))
    with FakeMessagesAPI([answer, answer], min_cache_tokens=256) as api:
        classifier = ClaudeFilter(api.client())
        first = classifier.classify("copy the transcript into the opportunity", tools)
        second = classifier.classify("copy the transcript into the opportunity", tools)
    assert first.probabilities == {"docs.get_document": 0.95, "crm.update_record": 0.9}  # unknown names skipped
    body = api.requests[0]
    assert body["model"] == "claude-haiku-5-5"
    assert body["tool_choice"] == {"type": "tool", "name": VERDICT_TOOL}
    assert [t["name"] for t in body["tools"]] == [VERDICT_TOOL]
    catalog_block = body["system"][-1]
    assert catalog_block["cache_control"] == {"type": "ephemeral"}
    assert all(t.name in catalog_block["text"] for t in tools)
    assert "copy the transcript" in body["messages"][0]["content"][0]["text"]
    assert body["tools"] == api.requests[1]["tools"] and body["system"] == api.requests[1]["system"]
    assert first.requests == 1 and first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


def test_needed_decides_and_the_probability_only_ranks_within_it(project: Project) -> None:
    answer = verdicts(("docs__get_document", True, 0.2), ("crm__update_record", False, 0.9))
    with FakeMessagesAPI([answer]) as api:
        result = ClaudeFilter(api.client()).classify("x", catalog(project.tree))
    assert result.probabilities["docs.get_document"] == 0.5
    assert result.probabilities["crm.update_record"] < 0.5


def test_a_missing_model_is_a_missing_model_failure(project: Project) -> None:
    missing = ApiError(404, "model: claude-nope", type="not_found_error")
    with FakeMessagesAPI([missing]) as api, pytest.raises(FilterError, match="'claude-nope' was not found") as caught:
        ClaudeFilter(api.client(max_retries=0), model="claude-nope").classify("x", catalog(project.tree))
    assert caught.value.kind == "missing_model"


def test_a_server_error_is_a_classifier_failure(project: Project) -> None:
    with (
        FakeMessagesAPI([ApiError.server_error()]) as api,
        pytest.raises(FilterError, match=r"failed \(500\)") as caught,
    ):
        ClaudeFilter(api.client(max_retries=0)).classify("x", catalog(project.tree))
    assert caught.value.kind == "error"


def test_a_proxys_error_page_fails_the_classifier_with_its_title_not_the_page(project: Project) -> None:
    # Before: the whole HTML page was the failure's reason, in the run's fail_open list and its --json.
    page = ApiError(502, page="<html><head><title>502 Bad Gateway</title></head><body>" + "<p>x</p>" * 2000)
    with FakeMessagesAPI([page]) as api, pytest.raises(FilterError) as caught:
        ClaudeFilter(api.client(max_retries=0)).classify("x", catalog(project.tree))
    assert str(caught.value).startswith(
        "the pre-filter request failed (502): 502 an HTML page titled '502 Bad Gateway'"
    )
    assert "<p>" not in str(caught.value) and len(str(caught.value)) < 200


def test_a_slow_answer_is_a_timeout(project: Project) -> None:
    release = threading.Event()

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return verdicts()

    with FakeMessagesAPI([slow]) as api:
        try:
            with pytest.raises(FilterError, match=r"did not answer within 0\.2 s") as caught:
                ClaudeFilter(api.client(max_retries=0), timeout=0.2).classify("x", catalog(project.tree))
        finally:
            release.set()
    assert caught.value.kind == "timeout"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (reply("I think you need the docs."), f"without calling {VERDICT_TOOL}"),
        (reply(tool_use(VERDICT_TOOL, {"verdicts": "all of them"})), "not a list"),
        (reply(tool_use(VERDICT_TOOL, {"verdicts": [{"tool": "docs__get_document"}]})), "malformed"),
    ],
)
def test_an_answer_that_is_not_a_verdict_list_is_a_failure(project: Project, answer: Any, problem: str) -> None:
    with FakeMessagesAPI([answer]) as api, pytest.raises(FilterError, match=problem):
        ClaudeFilter(api.client()).classify("x", catalog(project.tree))


def test_max_tokens_leaves_room_for_a_verdict_on_every_tool_of_a_big_catalog(project: Project) -> None:
    # Before: 4,096 for any catalog, about 160 verdicts: an answer on a 527-tool catalog could be cut off, and a cut
    # answer fails open (the whole catalog is sent).
    small = catalog(project.tree)
    big = [replace(small[0], key=f"s.t{i}", name=f"s__t{i}", tool=f"t{i}") for i in range(527)]
    answer = verdicts(("s__t1", True, 0.9))
    with FakeMessagesAPI([answer] * 3) as api:
        ClaudeFilter(api.client()).classify("anything", small)
        ClaudeFilter(api.client()).classify("anything", big)
        ClaudeFilter(api.client(), max_tokens=900).classify("anything", big)
    assert [r["max_tokens"] for r in api.requests] == [4096, 527 * 32, 900]


@pytest.mark.parametrize(
    "entries",
    [
        [("docs__get_document", True, 7), ("crm__get_record", True, "high")],  # the audit's answer
        [("docs__get_document", True, 1.5)],
        [("docs__get_document", False, -0.1)],
        [("docs__get_document", True, True)],  # a bool is not a number
        [("docs__get_document", False, None)],
        [("docs__get_document", True, 0.9), ("nope__x", True, "high")],  # a malformed entry, whatever it names
    ],
)
def test_a_probability_that_is_not_a_number_from_0_to_1_fails_open_with_the_reason(
    project: Project, entries: list[tuple[str, bool, Any]]
) -> None:
    # Before: 7, "high", true and null were replaced by 1.0 or 0.0 from "needed", and the tools admitted (and
    # persisted) as if the model had decided.
    with FakeMessagesAPI([verdicts(*entries)]) as api:
        prefilter = PreFilter(ClaudeFilter(api.client()), catalog(project.tree))
        prefilter.start()
        step = prefilter.decide([user("read the onboarding document")])
    assert step.fail_kind == "error" and "probability is not a number from 0 to 1" in step.fail_open
    assert len(prefilter.offered()) == len(prefilter.catalog) and len(prefilter.decided) == 0
    assert step.requests == 1 and step.usage.output_tokens > 0  # the answer's tokens still count


def test_a_verdict_without_a_probability_is_a_failure(project: Project) -> None:
    answer = reply(tool_use(VERDICT_TOOL, {"verdicts": [{"tool": "docs__get_document", "needed": True}]}))
    with FakeMessagesAPI([answer]) as api, pytest.raises(FilterError, match="not a number from 0 to 1"):
        ClaudeFilter(api.client()).classify("x", catalog(project.tree))
