"""`Transcript`: whole records only, one run per file, and a failed write stops the transcript, not the run."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from agent import AgentSetupError, read_transcript
from agent.transcript import Transcript


def full_disk_after(monkeypatch: pytest.MonkeyPatch, room: int) -> None:
    """Make the transcript's writes fail with ENOSPC once ``room`` more bytes were written (partly, as a
    filling disk does)."""
    real_write = os.write
    left = [room]

    def write(fd: int, data: bytes | memoryview) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = real_write(fd, bytes(data[: left[0]]))
        left[0] -= n
        return n

    monkeypatch.setattr("agent.transcript.os.write", write)


def test_records_are_one_json_object_per_line_in_order(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with Transcript(path) as log:
        log.write("run_start", task="Hi")
        log.write("run_end", summary={"turns": 1})
    records = read_transcript(path)
    assert [(r["type"], r.get("task"), r.get("summary")) for r in records] == [
        ("run_start", "Hi", None),
        ("run_end", None, {"turns": 1}),
    ]
    assert log.error == ""


def test_a_full_disk_stops_the_transcript_after_its_last_whole_record_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the OSError ended the run (its answer lost after its tools ran) and left half a line in the file.
    path = tmp_path / "run.jsonl"
    log = Transcript(path)
    log.write("run_start", task="Hi")
    full_disk_after(monkeypatch, 10)  # the next record gets 10 bytes in, then the disk is full
    log.write("response", text="x" * 100)
    log.write("run_end", summary={})  # nothing more is written, nothing raised
    log.close()
    assert [r["type"] for r in read_transcript(path)] == ["run_start"]
    assert path.read_bytes().endswith(b"\n")
    assert log.error == f"{path}: the transcript stopped after 1 record(s), the run went on: No space left on device"


def test_a_second_run_on_the_same_transcript_is_refused_and_the_first_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with Transcript(path) as first:
        first.write("run_start", task="first")
        with pytest.raises(AgentSetupError, match="another run is writing the transcript"):
            Transcript(path)
        first.write("run_end", summary={})
    assert [r["type"] for r in read_transcript(path)] == ["run_start", "run_end"]
    with Transcript(path) as again:  # once the first is done, the file is free (and started afresh)
        again.write("run_start", task="again")
    assert [r["task"] for r in read_transcript(path)] == ["again"]


def test_a_lone_surrogate_from_a_model_or_a_server_is_written_escaped(tmp_path: Path) -> None:
    # Before: UTF-8 cannot encode it; the write raised UnicodeEncodeError and ended the run.
    path = tmp_path / "run.jsonl"
    with Transcript(path) as log:
        log.write("tool", input={"id": "a\ud800b"})
    assert "\\ud800" in path.read_text(encoding="utf-8")
    assert read_transcript(path)[0]["input"] == {"id": "a\ud800b"}


def test_a_transcript_that_cannot_be_opened_is_a_setup_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(AgentSetupError, match=r"cannot write the transcript .*notes\.txt/run\.jsonl"):
        Transcript(tmp_path / "notes.txt" / "run.jsonl")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_transcript_to_a_device_is_written_without_truncating_it(tmp_path: Path) -> None:
    with Transcript("/dev/null") as log:
        log.write("run_start", task="Hi")
    assert log.error == ""


def test_a_line_that_is_not_a_record_is_named_by_file_and_line_and_a_half_last_line_is_left_out(
    tmp_path: Path,
) -> None:
    # Before: "Expecting value: line 1 column 1 (char 0)" for the third line, and `[1]` was returned as a record.
    path = tmp_path / "run.jsonl"
    path.write_text('{"type": "run_start"}\n\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}, line 3: not a whole JSON record \(Expecting value at column 1\)$"):
        read_transcript(path)
    path.write_text('{"type": "run_start"}\n[1]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}, line 2: not a record \(a JSON object\): '\[1\]\\n'$"):
        read_transcript(path)
    path.write_text('{"type": "run_start"}\n{"type": "requ', encoding="utf-8")
    assert read_transcript(path) == [{"type": "run_start"}]


def test_a_tool_record_gives_each_script_call_the_fields_exec_json_gives_it(tmp_path: Path) -> None:
    # Before: a script's call in the transcript had server, tool, ok, bytes and ms only: why a failed one failed
    # (its error, in `tooltree exec --json` and the ledger the model read) was in no record.
    from agent.budget import ContentBudget
    from agent.calls import _recorded
    from agent.summary import RunSummary
    from agent.toolsets.base import ToolOutcome
    from sandbox.results import ToolCallRecord

    calls = [
        ToolCallRecord("crm", "list_leads", True, 12, 1103, 8.5),
        ToolCallRecord("crm", "get_record", False, 40, 0, 2.0, "invalid arguments: record_id: required"),
    ]
    outcome = ToolOutcome([{"type": "text", "text": "done"}], script_calls=calls)
    block = {"type": "tool_use", "id": "t1", "name": "execute_python", "input": {"code": "..."}}
    path = tmp_path / "run.jsonl"
    with Transcript(path) as log:
        _recorded(block, outcome, 0.5, ContentBudget(), 1, RunSummary("code", "m"), log, lambda event: None)
    [record] = read_transcript(path)
    assert record["script_calls"] == [
        {**c.to_json(), "bytes": c.response_bytes} for c in calls
    ]  # server, tool, ok, request_bytes, response_bytes, ms, error, and bytes as before
    assert record["script_calls"][1]["error"] == "invalid arguments: record_id: required"
    assert record["script_calls"][0]["bytes"] == 1103 and record["script_calls"][0]["ms"] == 8.5
