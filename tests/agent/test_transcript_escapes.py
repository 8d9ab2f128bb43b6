"""`Transcript`: what JSON leaves raw and a terminal acts on (8-bit CSI, bidi overrides, tag characters) is written
escaped, as the audit log does, and reads back the same."""

from __future__ import annotations

from pathlib import Path

from agent import read_transcript
from agent.transcript import Transcript

HOSTILE = "desc \x1b]0;t\x07 \x9b2J \u202eevil \U000e0073 日本 😀"


def test_a_transcript_is_ascii_and_reads_back_every_character(tmp_path: Path) -> None:
    # Before: UTF-8 with only the C0 controls escaped: the 8-bit CSI and the bidi override went into the file raw.
    path = tmp_path / "run.jsonl"
    with Transcript(path) as log:
        log.write("run_start", tools=[{"name": "t", "description": HOSTILE}])
        log.write("tool", input={"id": "a\ud800b"})  # a lone surrogate, which UTF-8 cannot write
    data = path.read_bytes()
    assert data.isascii()
    assert b"\\u009b2J \\u202eevil \\udb40\\udc73 \\u65e5\\u672c \\ud83d\\ude00" in data
    start, tool = read_transcript(path)
    assert start["tools"][0]["description"] == HOSTILE and tool["input"] == {"id": "a\ud800b"}
