"""The admitted set: grow-only, in admission order, persisted atomically, never overwritten when unreadable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.prefilter import AdmittedSet, FilterError, load_state, save_state
from agent.prefilter.state import MAX_STATE_BYTES, update_state


def test_growing_appends_only_new_keys_in_order() -> None:
    s = AdmittedSet(["a", "b"])
    assert s.grow(["b", "c", "a", "d", "c"]) == ["c", "d"]
    assert s.keys() == ["a", "b", "c", "d"] and "c" in s and len(s) == 4


def test_a_saved_set_loads_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "profiles" / "work.json"
    save_state(path, AdmittedSet(["crm.get_record", "docs.get_document"]))
    assert load_state(path).keys() == ["crm.get_record", "docs.get_document"]
    assert not list(path.parent.glob(".*.tmp"))


def test_a_missing_file_is_an_empty_set(tmp_path: Path) -> None:
    assert len(load_state(tmp_path / "none.json")) == 0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{oops", "corrupt pre-filter state"),
        ('{"format": "x", "version": 1, "admitted": []}', "not a version-1 pre-filter state file"),
        ('{"format": "tooltree-prefilter-state", "version": 1, "admitted": [1]}', "must be a list of server.tool"),
        ("[]", "not a version-1"),
    ],
)
def test_an_unreadable_file_is_a_corrupt_state(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FilterError, match=problem) as caught:
        load_state(path)
    assert caught.value.kind == "corrupt_state" and str(path) in str(caught.value)


def test_the_file_format_is_plain_json(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_state(path, AdmittedSet(["a.b"]))
    assert json.loads(path.read_text(encoding="utf-8")) == {
        "format": "tooltree-prefilter-state",
        "version": 1,
        "admitted": ["a.b"],
    }


def test_saving_through_a_symlink_updates_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "dotfiles" / "work.json"
    save_state(target, AdmittedSet(["a.b"]))
    link = tmp_path / "work.json"
    link.symlink_to(target)
    update_state(link, ["c.d"])
    assert link.is_symlink() and load_state(target).keys() == ["a.b", "c.d"]


def test_an_update_keeps_what_another_run_saved_since(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    save_state(path, AdmittedSet(["mine.first"]))
    save_state(path, AdmittedSet(["mine.first", "theirs.tool"]))  # another run saved after this one loaded
    assert update_state(path, ["mine.first", "mine.second"]).keys() == ["mine.first", "theirs.tool", "mine.second"]
    assert load_state(path).keys() == ["mine.first", "theirs.tool", "mine.second"]


def test_a_folder_a_fifo_or_a_huge_file_is_a_corrupt_state_and_nothing_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: reading it would wait forever
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate(MAX_STATE_BYTES + 1)
    for path, problem in [(tmp_path, "is a folder"), (fifo, "not a regular file"), (huge, "larger than")]:
        with pytest.raises(FilterError, match=problem) as caught:
            load_state(path)
        assert caught.value.kind == "corrupt_state"


def test_a_state_that_became_unreadable_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("{half a file", encoding="utf-8")
    with pytest.raises(FilterError) as caught:
        update_state(path, ["a.b"])
    assert caught.value.kind == "corrupt_state" and path.read_text(encoding="utf-8") == "{half a file"
