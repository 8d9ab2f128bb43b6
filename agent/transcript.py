"""The JSONL transcript of a run: one JSON object per line, in order.

Records (``type``):

- ``run_start``: mode, model, task, the system prompt and the tools array as they are at the start;
- ``prefilter``: turn, what the pre-filter decided before that request (tools added, the highest
  probabilities, why it failed open, seconds, tokens);
- ``tools_grew``: turn, the tool definitions appended to the tools array and the system prompt
  when it changed (a pre-filter grew the set);
- ``request``: turn, the request parameters other than system and tools, a fingerprint of the tools
  array and of the system prompt as sent (``tools_sha256``, ``system_sha256``: equal in every request
  after the last growth), and the messages added since the previous request (the conversation is
  rebuilt by concatenating them);
- ``response``: turn, the message as returned (content, stop reason, usage incl.
  ``cache_creation_input_tokens`` and ``cache_read_input_tokens``), seconds;
- ``tool``: turn, tool name, input, seconds, ``is_error``, bytes to the model, what the reply's shared
  budget left out of its result (``left_out``: characters and images, only when something was), calls
  from the script and bytes that stayed in the sandbox;
- ``tools_refused``: turn, how many ``tool_use`` blocks of the reply were not run (past
  `agent.calls.MAX_TOOL_USES`), how many ran, and what each refused one was answered;
- ``api_error``: status and message of a failed request, or of a reply that could not be read;
- ``run_end``: the run summary.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any


class Transcript:
    """Appends records to a JSONL file; with no path, records nothing."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._file: IO[str] | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, kind: str, **fields: Any) -> None:
        if self._file is None:
            return
        record = {"type": kind, "ts": round(time.time(), 3), **fields}
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def fingerprint(value: Any) -> str:
    """A short SHA-256 of a JSON value as sent (cache markers included): equal values, equal prints."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]


def read_transcript(path: str | Path) -> list[dict[str, Any]]:
    """All records of a transcript file."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
