"""The admitted set: grow-only, in admission order, persisted atomically, never overwritten when unreadable."""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import threading
import time
from pathlib import Path

import pytest

from agent.prefilter import AdmittedSet, FilterError, PreFilter, load_state, save_state
from agent.prefilter.state import MAX_STATE_BYTES, update_state
from tests.agent.conftest import Project
from tests.agent.prefilter_support import HELD, ScriptedFilter, catalog, user


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
        # Before: true and 1.0 were taken as version 1 (True == 1.0 == 1 in Python)
        ('{"format": "tooltree-prefilter-state", "version": true, "admitted": []}', r"\(version true\)"),
        ('{"format": "tooltree-prefilter-state", "version": 1.0, "admitted": []}', r"\(version 1\.0\)"),
        ('{"format": "tooltree-prefilter-state", "version": "1", "admitted": []}', r'\(version "1"\)'),
        ('{"format": "tooltree-prefilter-state", "admitted": []}', r"\(no version\)"),
    ],
)
def test_an_unreadable_file_is_a_corrupt_state(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FilterError, match=problem) as caught:
        load_state(path)
    assert caught.value.kind == "corrupt_state" and str(path) in str(caught.value)


@pytest.mark.parametrize("version", ["true", "1.0"])
def test_a_state_whose_version_is_not_the_integer_1_fails_open_and_is_kept(
    project: Project, tmp_path: Path, version: str
) -> None:
    path = tmp_path / "state.json"
    text = f'{{"format": "tooltree-prefilter-state", "version": {version}, "admitted": ["crm.get_record"]}}'
    path.write_text(text, encoding="utf-8")
    scripted = ScriptedFilter([{"docs.get_document": 0.9}])
    prefilter = PreFilter(scripted, catalog(project.tree), state=path)
    prefilter.start()
    step = prefilter.decide([user("read the doc")])
    assert step.fail_kind == "corrupt_state" and f"(version {version})" in step.fail_open
    assert len(prefilter.offered()) == len(prefilter.catalog) and scripted.texts == []
    assert path.read_text(encoding="utf-8") == text


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


def test_top_level_entries_this_version_does_not_know_are_kept_by_a_save(tmp_path: Path) -> None:
    # Before: a save wrote back only format, version and admitted: a later version's entries, or a note a user
    # put there, were dropped in silence.
    path = tmp_path / "s.json"
    data = {"format": "tooltree-prefilter-state", "version": 1, "admitted": ["a.b"], "note": "team profile",
            "later": {"weights": [1, 2]}}  # fmt: skip
    path.write_text(json.dumps(data), encoding="utf-8")
    assert update_state(path, ["c.d"]).keys() == ["a.b", "c.d"]
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved == {**data, "admitted": ["a.b", "c.d"]}
    save_state(path, load_state(path).copy())
    assert json.loads(path.read_text(encoding="utf-8")) == saved


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


NESTED = "[" * 100_000 + "]" * 100_000  # deeper than the JSON parser recurses


def test_a_file_nested_too_deep_to_parse_is_a_corrupt_state_and_is_kept(tmp_path: Path) -> None:
    # Before: the parser's RecursionError escaped (only ValueError was caught): the run died.
    path = tmp_path / "s.json"
    path.write_text(NESTED, encoding="utf-8")
    for attempt in (lambda: load_state(path), lambda: update_state(path, ["a.b"])):
        with pytest.raises(FilterError, match="nested too deep to parse") as caught:
            attempt()
        assert caught.value.kind == "corrupt_state"
    assert path.read_text(encoding="utf-8") == NESTED


def test_a_save_writes_compact_json_and_never_what_a_load_would_refuse(tmp_path: Path) -> None:
    # Before: written with indent=1, a set of 4,125,062 bytes became a 4,950,205-byte file every later run
    # refused (and never rewrote).
    name = "srv." + "t" * 96  # keys of 107 characters: 110 bytes each in compact JSON, 113 with indent=1
    fits = AdmittedSet(f"{name}{i:07d}" for i in range(MAX_STATE_BYTES // 112))
    path = tmp_path / "s.json"
    save_state(path, fits)
    assert path.stat().st_size <= MAX_STATE_BYTES and load_state(path).keys() == fits.keys()
    assert json.dumps(json.loads(path.read_bytes()), ensure_ascii=False, separators=(",", ":")) + "\n" == (
        path.read_text(encoding="utf-8")
    )
    before = path.read_bytes()
    too_many = AdmittedSet([*fits, *(f"{name}{i:07d}" for i in range(MAX_STATE_BYTES // 112, MAX_STATE_BYTES // 90))])
    with pytest.raises(FilterError, match=f"over the {MAX_STATE_BYTES:,} a state file may hold") as caught:
        update_state(path, too_many)
    assert caught.value.kind == "error" and "the file was kept as it was" in str(caught.value)
    assert path.read_bytes() == before and not list(tmp_path.glob(".*.tmp"))


def test_a_save_waits_for_a_held_lock_only_so_long_then_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    # Before: a blocking lock with no timeout: another process holding it stalled a run for as long as it held it.
    path = tmp_path / "s.json"
    save_state(path, AdmittedSet(["a.b"]))
    holder = os.open(tmp_path, os.O_RDONLY)  # another open of the folder: its lock conflicts, as another process's
    fcntl.flock(holder, fcntl.LOCK_EX)
    release = threading.Timer(HELD, fcntl.flock, (holder, fcntl.LOCK_UN))  # so that a wait without limit ends
    release.start()
    try:
        started = time.monotonic()
        with pytest.raises(FilterError, match=re.escape("held the lock on its folder for more than 0.05 s")) as caught:
            update_state(path, ["c.d"], lock_wait=0.05)
        assert time.monotonic() - started < HELD / 2 and caught.value.kind == "error"  # not until the holder lets go
        assert load_state(path).keys() == ["a.b"]
    finally:
        release.cancel()
        os.close(holder)
    assert update_state(path, ["c.d"]).keys() == ["a.b", "c.d"]  # free again: the next save goes through


def test_a_save_keeps_the_permission_bits_of_the_file_and_a_new_file_gets_the_umasks(tmp_path: Path) -> None:
    shared = tmp_path / "team.json"
    save_state(shared, AdmittedSet(["a.b"]))
    shared.chmod(0o664)  # a profile a group shares
    save_state(shared, AdmittedSet(["a.b", "c.d"]))
    assert load_state(shared).keys() == ["a.b", "c.d"] and stat.S_IMODE(shared.stat().st_mode) == 0o664
    old = os.umask(0o027)
    try:
        save_state(tmp_path / "new.json", AdmittedSet(["a.b"]))
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert not list(tmp_path.glob(".*.tmp"))
