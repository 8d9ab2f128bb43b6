"""What one reply of a (possibly prompt-injected) model can make the loop do: how many of its tool calls
run, what their results bring into the conversation together, and a reply the SDK cannot read.

The real SDK against the fake API, the real sample servers (direct mode: no container needed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import Agent, ModelAPIError, read_transcript
from agent.budget import IMAGE_DATA, NOTE_ROOM
from agent.calls import MAX_TOOL_USES, REFUSED_AGAIN, refused_text
from agent.content import MAX_RESULT_CHARS
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox._supervisor.limits import MAX_IMAGES
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.agent.test_loop import tool_results

SHARED = "of this result were left out: the results of one reply share at most 500,000 characters"
"""The cap the README states (before: the note said 510,000, the cap with the room kept for notes)."""


def agent(project: Project, api: FakeMessagesAPI, runtime: Runtime, **kwargs: Any) -> Agent:
    return Agent(project.config, tree=project.tree, mode="direct", client=api.client(max_retries=0), runtime=runtime,
                 **kwargs)  # fmt: skip


def texts(result: dict[str, Any]) -> list[str]:
    return [b["text"] for b in result["content"] if b["type"] == "text"]


def images(result: dict[str, Any]) -> list[str]:
    return [b["source"]["data"] for b in result["content"] if b["type"] == "image"]


def test_a_reply_runs_at_most_max_tool_uses_calls_and_answers_each_other_one_with_an_error(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: every block ran (200 of them brought 100 MB into the next request).
    n = MAX_TOOL_USES + 5
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([reply(*[tool_use("media__list_gallery") for _ in range(n)]), reply("Listed.")]) as api:
        result = agent(project, api, live, transcript=transcript).run("List the gallery")
    answers = tool_results(api.requests[1])
    assert [a["tool_use_id"] for a in answers] == [b["id"] for b in api.responses[0]["content"]]  # each answered
    assert not any(a.get("is_error") for a in answers[:MAX_TOOL_USES])
    # The reason once; the others in a few words (before: the whole reason in each of thousands of answers).
    refused_answers = [(a["is_error"], texts(a)) for a in answers[MAX_TOOL_USES:]]
    assert refused_answers == [(True, [refused_text(n)])] + [(True, [REFUSED_AGAIN])] * 4
    assert len(REFUSED_AGAIN) < len(refused_text(n)) / 2
    assert refused_text(n).startswith(f"not run: one reply may make at most {MAX_TOOL_USES} tool calls")
    s = result.summary
    assert result.completed and s.tool_calls == MAX_TOOL_USES and s.refused_tool_calls == 5 and s.tool_errors == 0
    records = read_transcript(transcript)
    assert sum(r["type"] == "tool" for r in records) == MAX_TOOL_USES
    (refused,) = [r for r in records if r["type"] == "tools_refused"]
    assert refused["count"] == 5 and refused["ran"] == MAX_TOOL_USES and refused["reason"] == refused_text(n)


def gallery_batch(n: int) -> dict[str, Any]:
    return tool_use("batch_tool", {"invocations": [{"name": "media__list_gallery", "arguments": {}}] * n})


def test_each_invocation_of_a_batch_counts_against_the_calls_of_a_reply(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: batches were one call each, so 20 batches of 10 ran 200 calls from one reply.
    transcript = tmp_path / "run.jsonl"
    replies = [
        reply(*[gallery_batch(10) for _ in range(20)]),  # 200 calls asked for: the first two batches run
        reply(*[tool_use("media__list_gallery") for _ in range(15)], gallery_batch(6), tool_use("media__list_gallery")),
        reply(gallery_batch(11), tool_use("media__list_gallery")),  # too long for a batch: one call, one error
        reply("Listed."),
    ]
    with FakeMessagesAPI(replies) as api:
        result = agent(project, api, live, transcript=transcript).run("List the gallery")

    first = tool_results(api.requests[1])
    assert [a.get("is_error", False) for a in first] == [False] * 2 + [True] * 18
    assert [sum(t.endswith(": ok") for t in texts(a)) for a in first[:2]] == [10, 10]
    assert texts(first[2]) == [refused_text(200)]
    assert refused_text(200).startswith(f"not run: one reply may make at most {MAX_TOOL_USES} tool calls (each")
    second = tool_results(api.requests[2])  # 15 + 6 is past 20: the batch and everything after it wait
    assert [a.get("is_error", False) for a in second] == [False] * 15 + [True] * 2
    assert texts(second[15]) == [refused_text(22)] and texts(second[16]) == [REFUSED_AGAIN]
    third = tool_results(api.requests[3])
    assert texts(third[0]) == ["a batch holds at most 10 invocations, got 11; split it"] and "is_error" not in third[1]
    s = result.summary
    # Each invocation that ran is a call (before: a batch was one, 2 + 15 + 2), the batch too long to run one call and
    # one error, and a batch (before: none).
    assert (s.tool_calls, s.tool_errors, s.batches, s.refused_tool_calls) == (20 + 15 + 2, 1, 3, 18 + 2)
    refusals = [(r["ran"], r["count"]) for r in read_transcript(transcript) if r["type"] == "tools_refused"]
    assert refusals == [(20, 18), (15, 2)]  # the calls that ran (before: the blocks, 2 batches)


def test_the_results_of_one_reply_share_the_caps_of_one_result(project: Project, live: Runtime, tmp_path: Path) -> None:
    leads = reply(*[tool_use("crm__list_leads") for _ in range(4)])  # megabytes each, cut to 500,000 on its own
    charts = reply(*[tool_use("media__render_chart", {"title": f"c{i}", "values": [1, 2, i]}) for i in range(10)])
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([leads, charts, reply("Done.")]) as api:
        result = agent(project, api, live, transcript=transcript).run("List every lead, then draw ten charts")

    first = tool_results(api.requests[1])
    assert sum(len(t) for r in first for t in texts(r)) < MAX_RESULT_CHARS + NOTE_ROOM + 4 * 400  # before: 2,000,000+
    assert texts(first[0])[-1].startswith("[the tool returned ")  # the first keeps what its own cap gave it
    assert not any(SHARED in t for t in texts(first[0]))
    for later in first[1:]:  # those after it lost their text to it, and say so
        assert SHARED in texts(later)[-1] and not later.get("is_error")
    assert "characters left out" in texts(first[1])[0]  # the one that crossed the limit keeps head and tail

    second = tool_results(api.requests[2])
    assert sum(len(images(r)) for r in second) == MAX_IMAGES  # before: 10
    assert sum(len(data) for r in second for data in images(r)) <= IMAGE_DATA
    assert [any(SHARED in t for t in texts(r)) for r in second] == [False] * MAX_IMAGES + [True] * (10 - MAX_IMAGES)
    assert "1 image(s) of this result were left out" in texts(second[-1])[-1]

    entered = sum(len(json.dumps(r, ensure_ascii=False)) for r in [*first, *second])
    assert result.summary.model_bytes <= entered
    records = read_transcript(transcript)
    cut = [r for r in records if r["type"] == "tool" and "left_out" in r]
    assert [r["left_out"]["images"] for r in cut[3:]] == [1, 1] and all(r["left_out"]["chars"] > 0 for r in cut[:3])
    # The transcript holds what entered the conversation (once, in the requests), not what the tools returned.
    assert transcript.stat().st_size < entered + len(json.dumps(api.requests[0], ensure_ascii=False)) + 100_000


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def with_long_number(events: Any) -> Any:
    """The fake's stream events with a tool input's ``"limit": 1`` sent as an integer of 5,000 digits (JSON the
    fake cannot write from a Python int, and the SDK cannot read)."""

    def patched(message: dict[str, Any]) -> Any:
        for name, data in events(message):
            delta = data.get("delta", {})
            if delta.get("type") == "input_json_delta":
                delta["partial_json"] = delta["partial_json"].replace('"limit": 1', '"limit": ' + "9" * 5000)
            yield name, data

    return patched


def test_a_batch_cut_by_the_reply_keeps_the_status_of_each_invocation(project: Project, live: Runtime) -> None:
    def batch(n: int) -> dict[str, Any]:
        return tool_use("batch_tool", {"invocations": [{"name": "crm__list_leads", "arguments": {}}] * n})

    with FakeMessagesAPI([reply(tool_use("crm__list_leads"), batch(3)), reply("Done.")]) as api:
        agent(project, api, live).run("List every lead, twice")
    _, batched = tool_results(api.requests[1])
    lines = texts(batched)  # the first result took most of the reply's room: the batch lost text, not its labels
    assert [t for t in lines if t.endswith(": ok")] == [f"[{n}] crm__list_leads: ok" for n in (1, 2, 3)]
    assert sum("the invocations of one batch share" in t for t in lines) == 2  # its own cuts, said as it made them
    assert SHARED in lines[-1]  # and what the reply cut of it
    assert sum(map(len, lines)) < NOTE_ROOM + 4 * 500


@pytest.mark.parametrize("bad", ["nested 300 deep", "an integer of 5,000 digits"])
def test_a_tool_input_the_sdk_cannot_parse_stops_the_run_with_a_short_error_and_its_result(
    project: Project, live: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    # Before: the SDK's bare ValueError quoting the whole input; no result; no stop reason in the transcript.
    from agent.testing import _server

    if bad.startswith("nested"):
        call = tool_use("crm__get_record", {"object_type": "lead", "record_id": "x", "extra": nested(300)})
    else:
        call = tool_use("crm__search_records", {"object_type": "lead", "query": "acme", "limit": 1})
        monkeypatch.setattr(_server, "_events", with_long_number(_server._events))
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([reply(call), reply("never")]) as api, pytest.raises(ModelAPIError) as info:
        agent(project, api, live, transcript=transcript).run("Find the Acme lead")
    message = str(info.value)
    assert message.startswith("the model's reply could not be read: the input of one of its tool calls is JSON ")
    assert message.endswith("; the run stopped there, run the task again")
    assert len(message) < 400 and '"a"' not in message and "999" not in message and "\n" not in message
    run = info.value.result
    assert run is not None and run.stop_reason == "unreadable_reply" and run.summary.stop_reason == "unreadable_reply"
    assert run.summary.turns == 1 and run.summary.tool_calls == 0 and len(api.requests) == 1
    assert run.summary.usage.sent > 0  # the request the reply answered is counted
    records = read_transcript(transcript)
    assert [r["type"] for r in records][-2:] == ["api_error", "run_end"]
    assert records[-2]["message"] == message and records[-1]["summary"]["stop_reason"] == "unreadable_reply"
