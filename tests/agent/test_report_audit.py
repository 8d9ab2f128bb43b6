"""The numbers a user compares the modes by: the ``--compare`` table, the ``--json`` summary and the transcript each
give the tokens the Messages API reported (cache tokens and the ``claude`` pre-filter's included), a reply Ctrl-C
stopped after it began counts what its start reported, and a transcript whose writer was killed in the middle of a
record still reads back. The real CLI and the real ``anthropic`` SDK against the fake API, the real sample servers."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import anthropic
import pytest

from agent import Agent, read_transcript
from agent.errors import interrupted_result
from agent.prefilter.claude import VERDICT_TOOL
from agent.summary import TokenUsage
from agent.testing import FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tooltree_cli.main import main

TASK = "Read the Northwind deal"
GET = tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})
VERDICT = reply(tool_use(VERDICT_TOOL, {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}))
FIELDS = tuple(TokenUsage.__dataclass_fields__)


def usage(value: dict[str, Any]) -> TokenUsage:
    return TokenUsage(**{k: int(value.get(k) or 0) for k in FIELDS})


def summed(values: list[dict[str, Any]]) -> TokenUsage:
    total = TokenUsage()
    for value in values:
        total.add(usage(value))
    return total


def model_usage(records: list[dict[str, Any]]) -> TokenUsage:
    """The model's tokens as the transcript records them: every response, and every attempt that cost some."""
    return summed([r["message"]["usage"] if r["type"] == "response" else r["usage"] for r in records
                   if r["type"] == "response" or (r["type"] != "prefilter" and "usage" in r)])  # fmt: skip


def routed(api: FakeMessagesAPI) -> list[dict[str, Any]]:
    """Script ``api``: the pre-filter's requests get its verdict, the model's the replies put in the list returned, in
    order."""
    model: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return VERDICT if body["tools"][0]["name"] == VERDICT_TOOL else model.pop(0)

    api.add(*[answer] * 20)
    return model


def test_the_table_the_json_and_the_transcripts_give_every_token_the_api_reported_once(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    replies = routed(api)
    replies += [reply(GET), reply("Negotiation."), reply(GET), reply("Negotiation.")]
    base = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--prefilter", "claude"]
    transcript = tmp_path / "run.jsonl"
    assert main([*base, "--compare", "direct,filtered", "--quiet", "--transcript", str(transcript)]) == 0
    out = capsys.readouterr().out
    table = {line.split()[0]: line.split() for line in out.split("\n\n")[0].splitlines()[2:]}
    spent = TokenUsage()
    for mode in ("direct", "filtered"):
        records = read_transcript(tmp_path / f"run.{mode}.jsonl")
        summary = records[-1]["summary"]
        model = model_usage(records)
        prefilter = summed([r["usage"] for r in records if r["type"] == "prefilter"])
        assert usage(summary["usage"]) == model and summary["usage"]["sent"] == model.sent
        assert usage(summary["prefilter"]["usage"] if summary["prefilter"] else {}) == prefilter
        assert summary["spent"] == model.total + prefilter.total
        _, _, turns, sent, read, written, received, by_prefilter, total, *_ = table[mode]
        assert (turns, sent, read, written, received, total) == (
            str(summary["turns"]), f"{model.sent:,}", f"{model.cache_read_input_tokens:,}",
            f"{model.cache_creation_input_tokens:,}", f"{model.output_tokens:,}", f"{summary['spent']:,}"
        )  # fmt: skip
        assert by_prefilter == (f"{prefilter.total:,}" if mode == "filtered" else "-")
        spent.add(model)
        spent.add(prefilter)
    assert spent == summed([r["usage"] for r in api.responses])  # each token the API reported, counted once
    assert spent.cache_read_input_tokens > 0 and spent.cache_creation_input_tokens > 0

    replies += [reply(GET), reply("Negotiation.")]
    assert main([*base, "--mode", "filtered", "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["prefilter"]["requests"] == 1 and summary["prefilter"]["usage"]["output_tokens"] > 0
    assert summary["spent"] == summed([r["usage"] for r in api.responses]).total - spent.total


# ---- Ctrl-C once a reply began ------------------------------------------------------------------------------------


class CtrlCAfterStart:
    """A real SDK client whose ``nth`` reply takes a real SIGINT right after its ``message_start`` was read (the
    input tokens it reports are then known, and billed), as Ctrl-C comes while a long reply streams."""

    def __init__(self, client: anthropic.Anthropic, nth: int) -> None:
        self.client, self.nth = client, nth
        self.max_retries, self.timeout = client.max_retries, client.timeout
        self.messages = self

    def with_options(self, **options: Any) -> CtrlCAfterStart:
        """As the SDK's: the loop asks for a client that makes no retries of its own, and makes them itself."""
        self.client = self.client.with_options(**options)
        return self

    def stream(self, **params: Any) -> _Stream:
        self.nth -= 1
        return _Stream(self.client.messages.stream(**params), interrupt=self.nth == 0)


class _Stream:
    def __init__(self, manager: Any, *, interrupt: bool) -> None:
        self.manager, self.interrupt = manager, interrupt

    def __enter__(self) -> _Stream:
        self.stream = self.manager.__enter__()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.manager.__exit__(t, e, tb)

    def __iter__(self) -> Iterator[Any]:
        for event in self.stream:
            yield event
            if self.interrupt and event.type == "message_start":
                signal.raise_signal(signal.SIGINT)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def test_a_reply_ctrl_c_stopped_after_its_start_counts_the_input_its_start_reported(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # Before: the second request's input (its start said 5,625 tokens, read from the cache and written to it) was in
    # no count: the summary and the transcript said the run had sent only the first request's.
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([reply(GET), reply("Negotiation.")]) as api:
        client = CtrlCAfterStart(api.client(), nth=2)
        agent = Agent(project.config, tree=project.tree, mode="direct", client=client, runtime=live,  # type: ignore[arg-type]
                      transcript=transcript)  # fmt: skip
        with pytest.raises(KeyboardInterrupt) as stopped:
            agent.run(TASK)
    run = interrupted_result(stopped.value)
    assert run is not None and run.stop_reason == "interrupted" and run.summary.turns == 2
    reported = summed([r["usage"] for r in api.responses])
    assert run.summary.usage.sent == reported.sent  # each request's input, the stopped one's too
    records = read_transcript(transcript)
    assert [r["type"] for r in records][-2:] == ["reply_interrupted", "run_end"]
    assert records[-2]["usage"] == {**vars(usage(api.responses[1]["usage"])), "output_tokens": 1}  # as its start said
    assert model_usage(records) == run.summary.usage == usage(records[-1]["summary"]["usage"])


# ---- a transcript cut in its last record --------------------------------------------------------------------------


def test_a_transcript_cut_in_its_last_record_reads_back_its_whole_records(
    project: Project, live: Runtime, tmp_path: Path
) -> None:
    # A writer killed in the middle of a record (the OOM killer, kill -9, a machine going down) leaves half a line at
    # the end. Before: read_transcript raised on it, and not one of the file's whole records could be read.
    transcript = tmp_path / "run.jsonl"
    with FakeMessagesAPI([reply(GET), reply("Negotiation.")]) as api:
        Agent(project.config, tree=project.tree, mode="direct", client=api.client(), runtime=live,
              transcript=transcript).run(TASK)  # fmt: skip
    whole = read_transcript(transcript)
    lines = transcript.read_text(encoding="ascii").splitlines(keepends=True)
    cut = "".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]  # the run_end record, half written
    transcript.write_text(cut, encoding="ascii")
    assert read_transcript(transcript) == whole[:-1]

    transcript.write_text("".join(lines[:-1]) + lines[-1].rstrip("\n"), encoding="ascii")  # whole, its newline lost
    assert read_transcript(transcript) == whole
    transcript.write_text(lines[0][:20] + "\n" + "".join(lines[1:]), encoding="ascii")  # cut inside: not hidden
    with pytest.raises(ValueError, match=r"run\.jsonl, line 1: not a whole JSON record"):
        read_transcript(transcript)


def test_the_prefilters_tokens_that_reach_the_budget_stop_the_run_before_the_next_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    classifier = {
        "input_tokens": 300,
        "output_tokens": 50,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    model = {"input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if body["tools"][0]["name"] == VERDICT_TOOL:
            return {**VERDICT, "usage": classifier}
        return reply("Reading the record.", GET, usage=model)  # its text is new: the classifier is asked again

    api.add(*[answer] * 6)
    transcript = tmp_path / "run.jsonl"
    argv = [
        "agent",
        TASK,
        "--config",
        str(project.config_path),
        "--tree",
        str(project.tree),
        "--mode",
        "filtered",
        "--prefilter",
        "claude",
        "--token-budget",
        "1500",
        "--json",
        "--quiet",
        "--transcript",
        str(transcript),
    ]
    assert main(argv) == 1
    summary = json.loads(capsys.readouterr().out)
    assert [b["tools"][0]["name"] == VERDICT_TOOL for b in api.requests] == [True, False, True]
    assert (summary["stop_reason"], summary["turns"], summary["spent"]) == ("token_budget", 1, 1800)
    records = read_transcript(transcript)
    assert [r["type"] for r in records][-3:] == ["prefilter", "tool_results", "run_end"]
