"""`FileView`: the model's read-only view of the tree and the workspace.

Paths are relative to ``/workspace`` (``/workspace/...`` is accepted too), as a script sees them:
``servers/...`` is the generated tree (read from the host, where it was generated), anything
else is the sandbox's workspace (read through the session, which never follows symlinks).
A path with ``..``, a backslash or a NUL, an absolute path outside ``/workspace``, and a symlink
anywhere under the tree are refused.

Names and contents are untrusted (a script or a server wrote them): a listed name shows its control,
bidi and zero-width characters (and backslashes) escaped as in a Python literal (``\\x1b``, ``\\n``,
``\\u202e``), so it stays on its line and can still be told apart; text read is cleaned line by line
like a script's output (`sandbox.results.clean_text`). Lines end at ``\\n`` only, so their numbers are
the ones ``sed -n``, ``grep -n`` and ``wc -l`` give a script (``\\x0c``, ``\\x1c`` or ``\\u2028`` inside a
line do not split it).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agent.errors import AgentError
from sandbox.results import clean_text
from tool_tree.text import shown_name, size
from tool_tree.tree import hard_linked

WORKSPACE = "/workspace"
TREE_DIR = "servers"
DEFAULT_LINES = 2000
MAX_CHARS = 60_000
MAX_LINE_CHARS = 20_000
"""The most of one line ``read_file`` shows: as much as a script's printed output shows by default (``output_chars``,
20,000), since the rest of the line is read from a script, so a long line is read in steps of one size; and a third
of a read's `MAX_CHARS`, so one long line leaves room for the lines around it. Before: a line was shown up to 60,000
characters and the note sent the model to the next line, so the rest of it could not be read."""
MAX_FILE_BYTES = 8 * 1024 * 1024
"""The most of a file ``read_file`` reads (as much as the sandbox sends, `MAX_READ_BYTES`): its notes send the model to
a script for the lines past it. Before: the lines of those bytes were given as all of the file's ("of 699051"), the
line the read cut in two was shown as whole, and the last note sent the model to an offset "past the end"."""
MAX_ENTRIES = 500
LIST_LIMIT = MAX_ENTRIES + 1
"""Workspace entries asked of the sandbox for one listing: the `MAX_ENTRIES` shown, and one for the workspace's own
``servers`` link, which the root's listing replaces by the tree. The sandbox counts the folder's entries itself
(`sandbox.Sandbox.list_folder`). Before: 32,768 were asked for, to count them, about 2 MB from a big folder."""
_BLOCK = 1 << 16
"""Bytes whose newlines are counted at once when skipping to a line."""
_HIDDEN = {"__pycache__"}


class FileAccessError(AgentError):
    """A path the model asked for was refused or does not exist (the model gets the message)."""


class WorkspaceFiles(Protocol):
    """What `FileView` needs of a sandbox session (`sandbox.Sandbox` has both methods)."""

    def list_folder(self, path: str = "", *, limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
        """The first ``limit`` entries of a folder, folders first, then by name, and how many it holds in all."""
        ...

    def read_file(self, path: str, *, max_bytes: int = 1 << 20) -> bytes: ...


def normalize(path: str) -> tuple[str, ...]:
    """The components of a model-given path, relative to ``/workspace``.

    Raises:
        FileAccessError: the path is not allowed.
    """
    p = path.strip()
    if "\x00" in p or "\\" in p:
        raise FileAccessError(f"{path!r}: backslashes and NUL characters are not allowed in paths")
    if p == WORKSPACE or p.startswith(WORKSPACE + "/"):
        p = p[len(WORKSPACE) :]
    elif p.startswith("/"):
        raise FileAccessError(
            f"{path!r}: only paths under {WORKSPACE} can be read (use servers/... or a relative path)"
        )
    parts = tuple(x for x in p.split("/") if x not in ("", "."))
    if ".." in parts:
        raise FileAccessError(f"{path!r}: '..' is not allowed in paths")
    return parts


def _display(parts: tuple[str, ...]) -> str:
    return "/".join(parts) or "/workspace"


_CHANNEL = " failed in the sandbox: "
"""What the session puts between its operation's name and the sandbox's words (`sandbox.channel`)."""


def _sandbox_refused(parts: tuple[str, ...], error: Exception) -> FileAccessError:
    """The sandbox's refusal of a workspace path, as the model is told it: its words, which name the path (or the part
    of it that failed), without the session's (``workspace.read failed in the sandbox: ``). Before, both, and the
    path twice: "missing.txt: workspace.read failed in the sandbox: missing.txt: No such file or directory"."""
    text = str(error)
    said = text.split(_CHANNEL, 1)[1] if _CHANNEL in text else text
    path = "/".join(parts)
    if said.startswith((f"{path}: ", f"{path!r}: ")):
        return FileAccessError(said)
    return FileAccessError(f"{_display(parts)}: {said}")


def _clean_line(line: str) -> str:
    """One line of a file (up to and with its ``\\n``) cleaned on its own, ending with ``\\n`` if it ended:
    an escape sequence left open cannot take the next lines with it. A CR before the ``\\n`` goes with
    it; one inside the line becomes a space, so the line stays one line."""
    body = line.removesuffix("\n")
    ended = len(body) < len(line)
    if ended:
        body = body.removesuffix("\r")
    return clean_text(body.replace("\r", " ")) + ("\n" if ended else "")


def _read_on(parts: tuple[str, ...], line: int, count: int) -> str:
    """What a note says to read ``count`` lines of a file from its 1-based ``line`` on, past what read_file reads."""
    path = f"{WORKSPACE}/{'/'.join(parts)}"
    return (
        f"read lines {line:,} on from a script in execute_python: import itertools; f = open({path!r}, "
        f"encoding='utf-8', errors='replace', newline='\\n'); print(''.join(itertools.islice(f, {line - 1}, "
        f"{line - 1 + count})), end='')"
    )


def _line_start(data: bytes, line: int) -> int:
    """The offset in ``data`` where its 1-based ``line`` begins, lines ending at ``b"\\n"`` only (as ``wc``,
    ``sed`` and ``grep -n`` count them), found by counting newlines a block at a time: the lines before
    are never split out."""
    pos, skip = 0, line - 1
    while skip > 0 and pos < len(data):
        end = min(len(data), pos + _BLOCK)
        n = data.count(b"\n", pos, end)
        if n < skip:
            pos, skip = end, skip - n
            continue
        for _ in range(skip):
            pos = data.index(b"\n", pos, end) + 1
        skip = 0
    return pos


class FileView:
    """Lists and reads files for the model's ``list_files`` and ``read_file`` tools.

    Args:
        tree: the generated tree on the host (its ``servers/`` folder is what the model sees).
        workspace: returns the session to read workspace files through (started on first use);
            None when there is no workspace (only ``servers/`` can be read).
    """

    def __init__(self, tree: Path, workspace: Callable[[], WorkspaceFiles] | None = None) -> None:
        self.root = (Path(tree) / TREE_DIR).resolve()
        self._workspace = workspace

    # ---- the tree ---------------------------------------------------------------------------

    def _tree_path(self, parts: tuple[str, ...]) -> Path:
        current = self.root
        for part in parts[1:]:
            current = current / part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                raise FileAccessError(f"{_display(parts)}: no such file or folder") from None
            except OSError as e:
                raise FileAccessError(f"{_display(parts)}: cannot read ({e.strerror})") from None
            if stat.S_ISLNK(mode):
                raise FileAccessError(f"{_display(parts)}: symbolic links are not followed")
        if not current.is_relative_to(self.root):
            raise FileAccessError(f"{_display(parts)}: outside the tree")
        return current

    def _list_tree(self, parts: tuple[str, ...]) -> list[tuple[str, bool, int]]:
        folder = self._tree_path(parts)
        if not folder.is_dir():
            raise FileAccessError(f"{_display(parts)}: not a folder (use read_file)")
        out = []
        for entry in os.scandir(folder):
            if entry.name in _HIDDEN or entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            out.append((entry.name, is_dir, 0 if is_dir else entry.stat(follow_symlinks=False).st_size))
        return out

    def _read_tree(self, parts: tuple[str, ...]) -> bytes:
        path = self._tree_path(parts)
        if not path.is_file():
            raise FileAccessError(f"{_display(parts)}: not a file (use list_files)")
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as f:
            if (names := os.fstat(fd).st_nlink) > 1:
                raise FileAccessError(f"{_display(parts)}: {hard_linked(names)}")
            return f.read(MAX_FILE_BYTES)

    # ---- the workspace ----------------------------------------------------------------------

    def _session(self, parts: tuple[str, ...]) -> WorkspaceFiles:
        if self._workspace is None:
            raise FileAccessError(f"{_display(parts)}: this run has no workspace; only servers/ can be read")
        return self._workspace()

    def _list_workspace(self, parts: tuple[str, ...]) -> tuple[list[tuple[str, bool, int]], int]:
        """The first `LIST_LIMIT` entries of a workspace folder and how many it holds (the root's ``servers`` link
        is the tree's, left out of both)."""
        from sandbox.errors import SessionError

        session = self._session(parts)
        try:
            entries, total = session.list_folder("/".join(parts), limit=LIST_LIMIT)
        except SessionError as e:
            if parts and str(e).endswith("Not a directory") and self._is_workspace_file(session, parts):
                # Said as the tree says it (before: "'a.txt': Not a directory", with no word of what to use).
                raise FileAccessError(f"{_display(parts)}: not a folder (use read_file)") from None
            raise _sandbox_refused(parts, e) from None
        listed = [(str(e["name"]), e.get("type") == "dir", int(e.get("size", 0))) for e in entries]
        if parts:
            return listed, total
        own = [e for e in listed if e[0] != TREE_DIR]
        # Not among those listed, ``servers`` may still be among the others: the sandbox links it there (and again
        # when a script removed it, at its next restart), so it is counted out unless the listing shows it cannot
        # be there (all of the folder was listed, or ``servers`` would sort before the last one listed).
        beyond = total > len(listed) and (not listed or (not listed[-1][1], listed[-1][0]) < (True, TREE_DIR))
        return own, total - (1 if len(own) < len(listed) or beyond else 0)

    @staticmethod
    def _is_workspace_file(session: WorkspaceFiles, parts: tuple[str, ...]) -> bool:
        """Whether ``parts`` is a regular file of the workspace (the sandbox reads only those), not a path through
        one (``a.txt/b``), which is no file to read either."""
        from sandbox.errors import SessionError

        try:
            session.read_file("/".join(parts), max_bytes=1)
        except SessionError:
            return False
        return True

    def _read_workspace(self, parts: tuple[str, ...]) -> bytes:
        from sandbox.errors import SessionError

        try:
            return self._session(parts).read_file("/".join(parts), max_bytes=MAX_FILE_BYTES)
        except SessionError as e:
            raise _sandbox_refused(parts, e) from None

    # ---- what the tools call ----------------------------------------------------------------

    def list_files(self, path: str = "") -> str:
        """One line per entry (folders end with ``/``): the first `MAX_ENTRIES`, folders first, then by name, and
        when there are more, how many in all and how to see the others.

        Before: the workspace listing was an arbitrary `MAX_ENTRIES` + 1 entries of a bigger folder, sorted (a
        folder of 3,000 files and a subfolder showed f2499..f2998 and no subfolder), and the note pointed at
        search_tools, which searches tools, not files.

        Raises:
            FileAccessError: the path is refused, missing or not a folder.
        """
        parts = normalize(path)
        if parts and parts[0] == TREE_DIR:
            entries = self._list_tree(parts)
            total = len(entries)
        elif parts or self._workspace is not None:
            entries, total = self._list_workspace(parts)
        else:
            entries, total = [], 0
        if not parts:
            entries, total = [*entries, (TREE_DIR, True, 0)], total + 1
        entries.sort(key=lambda e: (not e[1], e[0]))
        lines = [
            f"{shown_name(name)}/" if is_dir else f"{shown_name(name)}  ({size(n)})"
            for name, is_dir, n in entries[:MAX_ENTRIES]
        ]
        if total > MAX_ENTRIES:
            folder = "/".join((WORKSPACE, *parts))
            lines.append(
                f"[... the first {MAX_ENTRIES} of {total:,} entries (folders first, then by name); "
                f"list a subfolder, or list them from a script in execute_python, such as "
                f"sorted(os.listdir({folder!r}))]"
            )
        return "\n".join(lines) if lines else "(empty folder)"

    def read_file(self, path: str, offset: int = 1, limit: int = DEFAULT_LINES) -> str:
        """Lines ``offset`` .. ``offset + limit - 1`` (1-based) of a text file, with a note when more remain.

        A line longer than `MAX_LINE_CHARS` shows its start and a note with the script that prints the rest
        (before: the note sent the model on to the next line, and the rest could not be read).

        Raises:
            ValueError: ``offset`` or ``limit`` is below 1 (before: taken as 1, although the tool's schema
                says its minimum is 1).
            FileAccessError: the path is refused, missing, not a file, or not text.
        """
        if offset < 1:
            raise ValueError(f"offset must be at least 1 (the first line is line 1), got {offset}")
        if limit < 1:
            raise ValueError(f"limit must be at least 1 (a number of lines), got {limit}")
        parts = normalize(path)
        if not parts:
            raise FileAccessError("/workspace: is a folder (use list_files)")
        data = self._read_tree(parts) if parts[0] == TREE_DIR else self._read_workspace(parts)
        if b"\x00" in data[:8192]:
            raise FileAccessError(f"{_display(parts)}: a binary file ({size(len(data))}); open it from a script")
        reached = len(data) >= MAX_FILE_BYTES  # no more is read: the file may go on
        if reached and (last := data.rfind(b"\n")) >= 0:
            data = data[: last + 1]  # the line the read cut in two is not shown as a whole one
        # Lines end at "\n" only, and only the lines shown are decoded: a file of millions of short lines
        # costs no list of them (8 MiB of "a\n" took 305 MB to split), and b"\n" is never inside a
        # UTF-8 sequence, so each line decodes as it would in the whole text.
        n_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        start = offset
        if n_lines and start > n_lines:
            if reached:
                raise FileAccessError(
                    f"{_display(parts)}: offset {offset} is past the {n_lines:,} lines of the file's first "
                    f"{size(MAX_FILE_BYTES)}, which is all read_file reads; {_read_on(parts, offset, limit)}"
                )
            raise FileAccessError(f"{_display(parts)}: offset {offset} is past the end ({n_lines} lines)")
        shown: list[str] = []
        total = 0
        pos = _line_start(data, start)
        while pos < len(data) and len(shown) < limit:
            nl = data.find(b"\n", pos)
            stop = len(data) if nl < 0 else nl + 1
            line = self._line(parts, start + len(shown), data[pos:stop])
            if shown and total + len(line) > MAX_CHARS:  # whole lines only (one is at most a third of a read)
                break
            shown.append(line)
            total += len(line)
            pos = stop
        out = "".join(shown)
        end = start - 1 + len(shown)
        if reached and end == n_lines:
            out += (
                f"\n[lines {start}–{end}: the last of the file's first {size(MAX_FILE_BYTES)}, which is all read_file "
                f"reads; {_read_on(parts, end + 1, limit)}]"
            )
        elif reached:
            out += (
                f"\n[lines {start}–{end} of the {n_lines} in the file's first {size(MAX_FILE_BYTES)} (all read_file "
                f"reads); call read_file with offset={end + 1} for more]"
            )
        elif end < n_lines:
            out += f"\n[lines {start}–{end} of {n_lines}; call read_file with offset={end + 1} for more]"
        return out

    @staticmethod
    def _line(parts: tuple[str, ...], number: int, raw: bytes) -> str:
        """Line ``number`` of the file at ``parts`` as shown: cleaned, and cut at `MAX_LINE_CHARS` with a note
        that says how long it is and how to read the rest."""
        line = raw.decode("utf-8", errors="replace")
        body = line.removesuffix("\n")
        if len(body) <= MAX_LINE_CHARS:
            return _clean_line(line)
        path, a, b = f"{WORKSPACE}/{'/'.join(parts)}", MAX_LINE_CHARS, 2 * MAX_LINE_CHARS
        the_line = "f.readline()" if number == 1 else f"next(itertools.islice(f, {number - 1}, None))"
        script = (
            f"{'import itertools; ' if number > 1 else ''}"
            f"f = open({path!r}, encoding='utf-8', errors='replace', newline='\\n'); print({the_line}[{a}:{b}])"
        )
        cut = clean_text(body[:MAX_LINE_CHARS].replace("\r", " "))
        return (
            f"{cut}\n[... line {number} is cut at {MAX_LINE_CHARS:,} of its {len(body):,} characters; "
            f"read the rest from a script in execute_python, {MAX_LINE_CHARS:,} at a time: {script}]\n"
        )
