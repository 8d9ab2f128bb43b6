"""The JSONL transcript of a run: one JSON object per line, in order.

Each run's records go from its ``run_start`` to its ``run_end``, and are complete on their own: its conversation is
rebuilt by concatenating the ``messages`` of its ``request`` records, then the results of a ``tool_results`` or
``tools_interrupted`` record at its end. A run that goes on from ``history`` holds that history too: its first
``request`` record carries every message sent (``run_start``'s ``history`` says how many came from earlier runs).
Before, that record held only the new user turn, and the earlier runs' records were gone (see below).

The runs of one `agent.Agent` go into one file, one after the other (each from its ``run_start``); the file is
emptied when the agent's first run starts, so a new `Agent` (or a new ``tooltree agent``) given the same path starts
it afresh. Before, each run emptied it: a conversation's second run erased the first's records.

Records (``type``):

- ``run_start``: mode, model, task, the system prompt and the tools array as they are at the start, and
  ``history``: how many messages of earlier runs the run goes on from (0 for a new conversation);
- ``prefilter``: turn, what the pre-filter decided before that request (tools added, the highest
  probabilities, why it failed open, seconds, tokens);
- ``tools_grew``: turn, the tool definitions appended to the tools array and the system prompt
  when it changed (a pre-filter grew the set);
- ``request``: turn, the request parameters other than system and tools, a fingerprint of the tools
  array and of the system prompt as sent (``tools_sha256``, ``system_sha256``: equal in every request
  after the last growth), and the messages added since the previous request (the conversation is
  rebuilt by concatenating them): the images of tool results are in them once, whole, as base64 (the results of
  one reply hold at most `agent.budget.IMAGE_DATA` characters of it, about 11 MB);
- ``response``: turn, the message as returned (content, stop reason, usage incl.
  ``cache_creation_input_tokens`` and ``cache_read_input_tokens``), seconds;
- ``tool``: turn, tool name, input, seconds, ``is_error``, bytes to the model, what the reply's shared
  budget left out of its result (``left_out``: characters and images, only when something was), calls
  from the script (``script_calls``: each with the fields of a call in ``tooltree exec --json``, and ``bytes``,
  its ``response_bytes``) and the bytes of results the script received;
- ``tool_results``: turn, the results of the last reply's calls when the turn limit or token budget stopped the
  run after they ran, or ``on_event`` raised (``results``): no ``request`` record carries them (before, they were in
  no record);
- ``tools_refused``: turn, how many ``tool_use`` blocks of the reply were not run (past
  `agent.calls.MAX_TOOL_USES`, or repeating an earlier ``tool_use`` id), how many ran, and what each refused one
  was answered;
- ``api_error``: status and message of a failed request (each attempt, the retried ones too: ``retry_in``, the
  seconds waited before the retry), or of a reply that could not be read, and what it cost (``usage``: a reply cut
  short or unreadable was billed for its input) when it cost something;
- ``reply_interrupted``: turn, and what a reply Ctrl-C stopped after it began cost as far as its start said
  (``usage``: its input tokens; the output it streamed until then is not known). Before, it was in no record and
  no count. The ``usage`` of the responses and of the ``api_error`` and ``reply_interrupted`` records sums to the
  summary's (a Ctrl-C before a reply began leaves its tokens unknown, not counted);
- ``run_end``: the run summary (its ``stop_reason`` ``interrupted`` when Ctrl-C stopped the run); with
  ``prefilter_unanswered`` when pre-filter requests got no answer (their tokens are unknown, not counted).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from agent.errors import AgentSetupError


class Transcript:
    """Appends records to a JSONL file; with no path, records nothing.

    The file is emptied when opened, unless ``append`` (the next run of the same `agent.Agent`). It is locked while
    a run writes it: a second run given the same file is refused (`AgentSetupError`) rather than truncating the
    first one's records and interleaving its own.
    A write that fails (a full disk) stops the transcript, never the run: the file keeps the whole
    records written before it (never half a line) and `error` says why.

    Raises:
        AgentSetupError: the file cannot be opened, or another run is writing it.
    """

    def __init__(self, path: str | Path | None, *, append: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.error = ""
        """Why the transcript stopped before the run ended (empty while every record was written)."""
        self._fd: int | None = None
        self._regular = False
        self._written = 0
        self._records = 0
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as e:
            raise AgentSetupError(f"cannot write the transcript {self.path}: {e.strerror or e}") from None
        try:
            self._regular = stat.S_ISREG(os.fstat(fd).st_mode)
            if self._regular:  # locked before it is emptied: another run's records are not cut from under it
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if append:
                    self._written = os.lseek(fd, 0, os.SEEK_END)  # a failed write cuts back to here
                else:
                    os.ftruncate(fd, 0)
        except BlockingIOError:
            os.close(fd)
            raise AgentSetupError(
                f"another run is writing the transcript {self.path}; give each run a file of its own"
            ) from None
        except OSError as e:
            os.close(fd)
            raise AgentSetupError(f"cannot write the transcript {self.path}: {e.strerror or e}") from None
        self._fd = fd

    def write(self, kind: str, **fields: Any) -> None:
        """Append one record as ASCII JSON (every other character a ``\\u`` escape, nothing lost), as the audit log
        does: a transcript shown in a terminal (``cat``, ``tail -f``) carries none of the characters it acts on.

        Before, it was UTF-8 with only what JSON escapes itself escaped (the C0 controls): a server's 8-bit CSI
        (U+009B), bidi override (U+202E) or tag characters, in a tool's description in direct mode or in its
        error, went into the file raw.
        """
        if self._fd is None:
            return
        record = {"type": kind, "ts": round(time.time(), 3), **fields}
        data = (json.dumps(record, default=str) + "\n").encode("ascii")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            self._stop(e)
            return
        self._written += len(data)
        self._records += 1

    def _stop(self, e: OSError) -> None:
        """Stop writing after a failed write: cut the partial record off, say why, close."""
        assert self._fd is not None
        self.error = (
            f"{self.path}: the transcript stopped after {self._records:,} record(s), the run went on: {e.strerror or e}"
        )
        if self._regular:
            try:
                os.ftruncate(self._fd, self._written)
            except OSError:
                self.error += " (its last line may be cut)"
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the lock
            self._fd = None

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def check_paths(
    transcript: Path | None,
    *,
    state: Path | None,
    config: Path,
    workspace: str | os.PathLike[str] | None,
    tree: Path | None = None,
) -> None:
    """Check where a run's files go before it starts.

    Raises:
        AgentSetupError: the transcript is the pre-filter ``state`` or the ``config`` file (opening it for
            the run would empty that file), or the transcript or the state is inside the ``workspace`` (a
            script could rewrite it, and the workspace saved back would put the script's copy in its place),
            or the transcript is inside the ``tree`` (opening it would empty the tree's file of that name: before,
            ``--transcript tree/manifest.json`` emptied the manifest, and the run then failed on the tree), or the
            ``state`` is the ``config`` file (before: read as a corrupt state, every tool sent, and the user told to
            "fix or delete" the config), or the ``workspace`` holds the ``tree`` or lies inside it.
    """
    if (
        transcript is not None
        and tree is not None
        and Path(os.path.realpath(transcript)).is_relative_to(os.path.realpath(tree))
    ):
        raise AgentSetupError(
            f"the transcript {transcript} is inside the tree {tree}: writing it would empty the tree's file of that "
            "name (its manifest, a stub) or add one to the tree; keep it outside"
        )
    if workspace is not None and tree is not None:
        from sandbox.session_args import tree_in_workspace

        if (problem := tree_in_workspace(workspace, tree)) is not None:
            raise AgentSetupError(f"the workspace {workspace} {problem}")
    if workspace is not None:
        folder = os.path.realpath(workspace)
        for what, path in (("transcript", transcript), ("pre-filter state", state)):
            if path is not None and Path(os.path.realpath(path)).is_relative_to(folder):
                raise AgentSetupError(
                    f"the {what} {path} is inside the workspace {workspace}: a script could rewrite it, and the "
                    "workspace saved back would replace it; keep it outside"
                )
    if state is not None and config.is_file() and _same_file(state, config):
        raise AgentSetupError(
            f"the pre-filter state {state} is the config file; the run would read it as its state and find it "
            "corrupt: give the state a path of its own"
        )
    others = {"the pre-filter state file": state, "the config file": config if config.is_file() else None}
    for what, other in others.items():
        if transcript is not None and other is not None and _same_file(transcript, other):
            raise AgentSetupError(
                f"the transcript {transcript} is {what}; writing it would empty that file, give the transcript a "
                "path of its own"
            )


def _same_file(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one file (through links), or would be once made."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def fingerprint(value: Any) -> str:
    """A short SHA-256 of a JSON value as sent (cache markers included): equal values, equal prints."""
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()[:16]


def read_transcript(path: str | Path) -> list[dict[str, Any]]:
    """All records of a transcript file.

    A last line without its newline that is not whole JSON is a record its writer was stopped in the middle of (the
    process killed, the machine down: every record `Transcript` writes ends with a newline), and is left out. Before,
    that half line made the whole file unreadable (``json.JSONDecodeError``). A line cut anywhere else still raises.

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not a JSON object, naming the file and the line. Before, a line that was not JSON
            raised ``json.JSONDecodeError`` naming neither ("Expecting value: line 1 column 1 (char 0)" of line 57),
            and one that held another JSON value (``[1]``) was returned as a record.
    """
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                if not line.endswith("\n"):  # the last line: half a record is left out
                    continue
                where = f"{os.fspath(path)}, line {number}"
                raise ValueError(f"{where}: not a whole JSON record ({e.msg} at column {e.colno})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{os.fspath(path)}, line {number}: not a record (a JSON object): {line[:80]!r}")
            records.append(record)
    return records
