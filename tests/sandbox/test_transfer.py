"""The workspace transfer format: items checked on arrival, batches under a frame, counts that add up."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

from sandbox._supervisor import transfer
from sandbox._supervisor.fswalk import PathError
from sandbox._supervisor.transfer import BATCH_BYTES, CHUNK_BYTES, TreeReader, TreeWriter, read_item

LONG = "x" * 250


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("a", "must be an object"),
        ({"path": "../a", "dir": True}, "refused path"),
        ({"path": "a"}, "base64 data or dir"),
        ({"path": "a", "data": "!!"}, "not base64"),
    ],
)
def test_an_item_that_is_not_a_folder_or_a_file_piece_is_refused(item: Any, reason: str) -> None:
    with pytest.raises(PathError, match=reason):
        read_item(item)


def test_items_read_back_as_folders_and_file_pieces() -> None:
    assert read_item({"path": "a/b", "dir": True}) == ([b"a", b"b"], None, False)
    assert read_item({"path": "f", "data": "eA==", "append": True}) == ([b"f"], b"x", True)


def test_batches_stay_under_a_frame_however_many_and_long_the_paths(tmp_path: Path) -> None:
    for top in range(300):
        deep = tmp_path.joinpath(f"{top}", *[LONG] * 14)
        deep.mkdir(parents=True)
        (deep / "f").write_bytes(b"y" * 1000)
    (tmp_path / "big").write_bytes(b"z" * (3 * CHUNK_BYTES))
    reader = TreeReader(tmp_path, skip=frozenset(), max_bytes=1 << 30, max_entries=10_000)
    batches = list(reader.batches())
    sizes = [len(json.dumps(batch, ensure_ascii=False).encode()) for batch in batches]
    assert len(batches) >= 3 and max(sizes) <= BATCH_BYTES
    items = [item for batch in batches for item in batch]
    assert len([i for i in items if i.get("dir")]) == 300 * 15
    assert sum(len(base64.b64decode(i.get("data", ""))) for i in items) == 300 * 1000 + 3 * CHUNK_BYTES
    assert reader.counts == {"files": 301, "same": 0, "dirs": 4500, "bytes": 300 * 1000 + 3 * CHUNK_BYTES, "skipped": 0}


def test_batches_hold_at_most_their_item_count_however_small_the_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "BATCH_ITEMS", 10)
    for n in range(25):
        (tmp_path / f"d{n}").mkdir()
    reader = TreeReader(tmp_path, skip=frozenset(), max_bytes=1 << 30, max_entries=100)
    assert [len(batch) for batch in reader.batches()] == [10, 10, 5]


def test_a_fresh_save_refuses_a_file_twice_and_a_restore_overwrites_it(tmp_path: Path) -> None:
    with TreeWriter(tmp_path, exclusive=True) as writer:
        writer.write([b"d"], None, append=False)
        writer.write([b"d", b"f"], b"one", append=False)
        writer.write([b"d", b"f"], b"two", append=True)
        with pytest.raises(FileExistsError):
            writer.write([b"d", b"f"], b"again", append=False)
    assert (tmp_path / "d" / "f").read_bytes() == b"onetwo"
    with TreeWriter(tmp_path, exclusive=False) as writer:
        writer.write([b"d", b"f"], b"new", append=False)
        writer.write([b"e"], None, append=False)
    assert (tmp_path / "d" / "f").read_bytes() == b"new" and os.path.isdir(tmp_path / "e")


@pytest.mark.parametrize("exclusive", [True, False])
def test_an_item_whose_folder_was_not_written_before_it_is_refused_and_no_folder_is_made(
    tmp_path: Path, exclusive: bool
) -> None:
    # Before: the folders on the way were made, so an item 63 folders deep made 62 folders no item had sent.
    with TreeWriter(tmp_path, exclusive=exclusive) as writer:
        for parts, data in (([b"d", *[b"a"] * 61, b"f"], b""), ([b"d", b"a"], None)):
            with pytest.raises(FileNotFoundError, match="the folder it is in was not sent before it"):
                writer.write(parts, data, append=False)
        writer.write([b"d"], None, append=False)
        writer.write([b"d"], None, append=False)  # a folder that is there already is no error
        writer.write([b"d", b"f"], b"x", append=False)
        with pytest.raises(NotADirectoryError):
            writer.write([b"d", b"f", b"g"], b"x", append=False)
    assert [(d, sorted(f)) for d, _, f in os.walk(tmp_path)] == [(str(tmp_path), []), (str(tmp_path / "d"), ["f"])]
