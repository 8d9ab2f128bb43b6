"""A save the host gives up while its entries still arrive (Ctrl-C, SIGTERM during `exec`'s save): what the channel
still hands the receiver is dropped, and nothing of the save is left beside the folder.

Before: the channel's reader thread wrote on with the receiver's closed writer and died on an ``IndexError``, whose
traceback reached the user's terminal, or made the staging folder again, left beside the workspace."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sandbox._supervisor.transfer import TreeWriter
from sandbox.workspace import WorkspaceReceiver
from tests.sandbox.test_sandbox_workspace import folder, piece, send, tree_of


def _workspace(tmp_path: Path) -> Path:
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "mine.txt").write_bytes(b"mine")
    return dest


def test_entries_that_arrive_after_the_save_was_discarded_are_dropped(tmp_path: Path) -> None:
    dest = _workspace(tmp_path)
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    send(receiver, folder("d"), piece("d/a.txt", b"a"))
    receiver.discard()  # the host gave the save up; the sandbox still sends the rest
    send(receiver, piece("d/b.txt", b"b"), folder("e"), piece("e/c.txt", b"c"))
    assert tree_of(tmp_path) == {"ws": "dir", "ws/mine.txt": b"mine"}


def test_a_save_discarded_while_an_entry_is_written_waits_for_that_entry_and_drops_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = _workspace(tmp_path)
    receiver = WorkspaceReceiver(dest, max_bytes=100_000)
    writing, go = threading.Event(), threading.Event()
    write = TreeWriter.write

    def slow_write(self: TreeWriter, parts: list[bytes], data: bytes | None, *, append: bool = False) -> None:
        writing.set()
        assert go.wait(30)
        write(self, parts, data, append=append)

    monkeypatch.setattr(TreeWriter, "write", slow_write)
    failed: list[BaseException] = []

    def reader() -> None:  # as the channel's reader thread hands it a batch
        try:
            send(receiver, piece("a.txt", b"a"), piece("b.txt", b"b"))
        except BaseException as e:
            failed.append(e)

    thread = threading.Thread(target=reader)
    thread.start()
    assert writing.wait(30)
    discarding = threading.Thread(target=receiver.discard)
    discarding.start()
    go.set()
    thread.join(30)
    discarding.join(30)
    assert not thread.is_alive() and not discarding.is_alive()
    assert failed == []
    assert tree_of(tmp_path) == {"ws": "dir", "ws/mine.txt": b"mine"}
