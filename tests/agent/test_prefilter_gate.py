"""`PreFilter`: per-tool threshold, siblings, grow-only, fail-open on every failure kind, persisted state."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path

import pytest

from agent.errors import AgentSetupError
from agent.prefilter import FilterError, PreFilter, make_prefilter, request_text
from tests.agent.conftest import Project
from tests.agent.prefilter_support import HELD, ScriptedFilter, catalog, user


def gate(project: Project, answers: list, **kwargs: object) -> PreFilter:
    return PreFilter(ScriptedFilter(answers), catalog(project.tree), **kwargs)  # type: ignore[arg-type]


def test_every_tool_at_or_above_the_threshold_is_admitted_not_only_the_best(project: Project) -> None:
    f = gate(project, [{"docs.get_document": 0.9, "crm.update_record": 0.6, "crm.list_leads": 0.49}], siblings="named")
    f.start()
    step = f.decide([user("copy the transcript into the opportunity")])
    assert step.asked and not step.fail_open
    assert step.added[0] == "docs.get_document" and "crm.update_record" in step.added
    assert "crm.list_leads" not in f.admitted
    assert step.top["docs.get_document"] == 0.9 and step.admitted == len(f.admitted)


def test_the_admitted_set_only_grows_and_new_tools_are_appended(project: Project) -> None:
    f = gate(project, [{"media.list_gallery": 0.8}, {"crm.list_leads": 0.7}, {"media.list_gallery": 0.9}])
    f.start()
    conversation = [user("what images are in the gallery?")]
    f.decide(conversation)
    first = f.admitted.keys()
    conversation += [{"role": "assistant", "content": [{"type": "text", "text": "Three images."}]}, user("and leads?")]
    step = f.decide(conversation)
    assert f.admitted.keys()[: len(first)] == first  # nothing removed or reordered
    assert step.added == ["crm.list_leads"]
    conversation += [{"role": "assistant", "content": [{"type": "text", "text": "Many."}]}, user("the gallery again")]
    third = f.decide(conversation)
    assert third.asked and third.added == [] and "crm.list_leads" in f.admitted


def test_the_classifier_is_asked_again_only_when_the_text_changes(project: Project) -> None:
    scripted = ScriptedFilter([{"media.list_gallery": 0.8}, {"crm.list_leads": 0.8}])
    f = PreFilter(scripted, catalog(project.tree))
    f.start()
    messages = [user("list the gallery")]
    assert f.decide(messages).asked
    messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]}]
    messages += [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]
    assert not f.decide(messages).asked  # a tool result alone adds no text to judge
    assert scripted.texts == ["list the gallery"]


def test_the_text_judged_is_the_latest_user_turn_and_the_models_words_since(project: Project) -> None:
    messages = [
        user("old subject"),
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        user("new subject"),
        {"role": "assistant", "content": [{"type": "text", "text": "I will email it."}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]},
    ]
    assert request_text(messages) == "new subject\nI will email it."


def test_an_admitted_tool_brings_the_tools_of_its_server_that_it_names_or_that_name_it(project: Project) -> None:
    f = gate(project, [{"crm.get_record": 0.9}])
    f.start()
    f.decide([user("read the record")])
    # search_records' description says "Use get_record with an id from the results"
    assert "crm.search_records" in f.admitted
    assert "crm.list_leads" not in f.admitted and not any(k.startswith("docs.") for k in f.admitted)


def test_siblings_can_be_the_whole_server(project: Project) -> None:
    f = gate(project, [{"crm.get_record": 0.9}], siblings="server")
    f.start()
    f.decide([user("read the record")])
    crm = {t.key for t in catalog(project.tree) if t.server == "crm"}
    assert crm <= set(f.admitted) and not any(k.startswith("media.") for k in f.admitted)


def test_whole_server_siblings_follow_the_tool_above_the_threshold_in_catalog_order(project: Project) -> None:
    f = gate(project, [{"crm.search_records": 0.9, "crm.get_record": 0.8}], siblings="server")
    f.start()
    step = f.decide([user("find and read the record")])
    crm = [t.key for t in catalog(project.tree) if t.server == "crm"]
    assert step.added == ["crm.search_records", *(k for k in crm if k != "crm.search_records")]


@pytest.mark.parametrize("kind", ["error", "missing_model"])
def test_a_classifier_that_fails_admits_every_tool_and_says_why(project: Project, kind: str) -> None:
    f = gate(project, [FilterError(f"scripted {kind}", kind=kind)])  # type: ignore[arg-type]
    f.start()
    step = f.decide([user("anything")])
    assert step.fail_open == f"scripted {kind}" and step.fail_kind == kind
    assert set(f.admitted) == {t.key for t in catalog(project.tree)} and f.failed_open


def test_a_classifier_that_takes_too_long_admits_every_tool(project: Project) -> None:
    release = threading.Event()
    f = gate(project, [release], timeout=0.05)
    f.start()
    try:
        step = f.decide([user("anything")])
    finally:
        release.set()
    assert step.fail_kind == "timeout" and "longer than 0.05 s" in step.fail_open
    assert len(f.admitted) == len(f.catalog)


def test_after_failing_open_the_classifier_is_not_asked_and_the_set_stays_whole(project: Project) -> None:
    scripted = ScriptedFilter([FilterError("down"), {"crm.get_record": 0.9}])
    f = PreFilter(scripted, catalog(project.tree))
    f.start()
    f.decide([user("one")])
    step = f.decide([user("one"), {"role": "assistant", "content": [{"type": "text", "text": "two"}]}])
    assert not step.asked and len(scripted.texts) == 1 and len(f.admitted) == len(f.catalog)


def test_the_set_is_persisted_and_carries_over_to_the_next_conversation(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "profile" / "admitted.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"format": "tooltree-prefilter-state", "version": 1, "admitted": ["gone.tool"]}))
    f = gate(project, [{"docs.get_document": 0.9}, {}], state=state)
    f.start()
    f.decide([user("read the doc")])
    saved = json.loads(state.read_text(encoding="utf-8"))["admitted"]
    assert saved[:2] == ["gone.tool", "docs.get_document"]  # an unknown tool is kept (not offered); new ones appended
    f.start()  # the next conversation starts from the file
    assert f.admitted.keys()[0] == "docs.get_document" and "gone.tool" not in f.admitted


def test_a_failure_is_not_persisted_as_a_decision(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "admitted.json"
    f = gate(project, [FilterError("down")], state=state)
    f.start()
    f.decide([user("x")])
    assert not state.exists()


def test_a_corrupt_state_file_admits_every_tool_and_is_left_untouched(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "admitted.json"
    state.write_text("{not json", encoding="utf-8")
    scripted = ScriptedFilter([{"crm.get_record": 0.9}])
    f = PreFilter(scripted, catalog(project.tree), state=state)
    f.start()
    step = f.decide([user("read the record")])
    assert step.fail_kind == "corrupt_state" and "fix or delete the file" in step.fail_open
    assert len(f.admitted) == len(f.catalog) and scripted.texts == []
    assert state.read_text(encoding="utf-8") == "{not json"


def test_a_threshold_outside_zero_to_one_is_refused(project: Project) -> None:
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\]"):
        gate(project, [], threshold=1.5)


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), 1e10])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_up_to_an_hour_is_refused(
    project: Project, timeout: float
) -> None:
    # Before: 1e10 was taken, and every decision failed open ("OverflowError: timestamp out of range").
    with pytest.raises(ValueError, match=r"timeout must be above 0 and at most 3600 s"):
        gate(project, [], timeout=timeout)
    with pytest.raises(AgentSetupError, match=r"timeout must be above 0 and at most 3600 s"):
        make_prefilter(project.tree, "local", timeout=timeout)
    assert gate(project, [{"crm.list_leads": 0.9}], timeout=3600.0).decide([user("leads")]).fail_open == ""


class _Broken:
    """A classifier with a bug: it raises something other than `FilterError`."""

    name = "broken"
    default_threshold = 0.5

    def classify(self, text: str, catalog: object) -> object:
        raise KeyError("no such column")


def test_a_classifier_that_raises_anything_admits_every_tool_and_says_why(project: Project) -> None:
    f = PreFilter(_Broken(), catalog(project.tree))  # type: ignore[arg-type]
    f.start()
    step = f.decide([user("read the deal")])
    assert step.fail_kind == "error" and "KeyError('no such column')" in step.fail_open
    assert len(f.admitted) == len(f.catalog) and f.failed_open


def test_two_runs_sharing_a_state_file_keep_each_others_tools(project: Project, tmp_path: Path) -> None:
    state = tmp_path / "shared.json"
    first = gate(project, [{"crm.list_leads": 0.9}], state=state)
    second = gate(project, [{"media.list_gallery": 0.9}], state=state)
    first.start()
    second.start()  # both loaded the empty set before either saved
    first.decide([user("leads")])
    second.decide([user("gallery")])
    saved = json.loads(state.read_text(encoding="utf-8"))["admitted"]
    assert "crm.list_leads" in saved and "media.list_gallery" in saved


def test_a_state_that_cannot_be_saved_is_reported_in_the_step(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*_: object) -> tuple[int, str]:
        raise OSError(28, "No space left on device")

    # A full disk stands in for an unwritable folder: the tests may run as root, whom permissions do not stop.
    monkeypatch.setattr("agent.prefilter.state._temporary", full_disk)
    f = gate(project, [{"crm.list_leads": 0.9}], state=tmp_path / "state.json")
    f.start()
    step = f.decide([user("leads")])
    assert step.added and not step.fail_open
    assert "cannot write the pre-filter state" in step.state_error and "No space left" in step.state_error


NESTED = "[" * 1000 + "]" * 1000  # deeper than the JSON parser recurses


def test_a_state_file_nested_too_deep_admits_every_tool_and_is_left_untouched(project: Project, tmp_path: Path) -> None:
    # Before: the parser's RecursionError escaped `start` (only FilterError was caught): Agent() raised.
    state = tmp_path / "admitted.json"
    state.write_text(NESTED, encoding="utf-8")
    f = gate(project, [{"crm.get_record": 0.9}], state=state)
    f.start()
    step = f.decide([user("read the record")])
    assert step.fail_kind == "corrupt_state" and "nested too deep to parse" in step.fail_open
    assert len(f.admitted) == len(f.catalog) and state.read_text(encoding="utf-8") == NESTED


def test_a_state_file_rewritten_mid_run_is_not_saved_over_and_the_run_goes_on(project: Project, tmp_path: Path) -> None:
    # Before: the next save raised RecursionError out of `decide`, and the run died.
    state = tmp_path / "admitted.json"
    f = gate(project, [{"crm.list_leads": 0.9}, {"media.list_gallery": 0.9}], state=state)
    f.start()
    f.decide([user("leads")])
    state.write_text(NESTED, encoding="utf-8")  # another program, mid-run
    step = f.decide([user("the gallery")])
    assert "media.list_gallery" in step.added and not step.fail_open
    assert "nested too deep to parse" in step.state_error and state.read_text(encoding="utf-8") == NESTED


def test_a_state_that_raises_anything_on_load_or_save_fails_open_and_says_why(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise MemoryError("out of memory")

    state = tmp_path / "admitted.json"
    monkeypatch.setattr("agent.prefilter.gate.load_state", broken)
    f = gate(project, [{"crm.list_leads": 0.9}], state=state)
    f.start()
    step = f.decide([user("leads")])
    assert step.fail_kind == "corrupt_state" and "cannot load the pre-filter state (MemoryError: out of memory)" in (
        step.fail_open
    )
    monkeypatch.undo()
    monkeypatch.setattr("agent.prefilter.gate.update_state", broken)
    f = gate(project, [{"crm.list_leads": 0.9}], state=state)
    f.start()
    step = f.decide([user("leads")])
    assert step.added and step.state_error.endswith("cannot save the pre-filter state (MemoryError: out of memory)")


def test_a_state_folder_locked_by_another_process_delays_a_decision_at_most_the_timeout(
    project: Project, tmp_path: Path
) -> None:
    # Before: the save waited on the lock without a limit (14.4 s with a 2 s pre-filter timeout).
    state = tmp_path / "admitted.json"
    holder = os.open(tmp_path, os.O_RDONLY)  # another open of the folder: its lock conflicts, as another process's
    fcntl.flock(holder, fcntl.LOCK_EX)
    release = threading.Timer(HELD, fcntl.flock, (holder, fcntl.LOCK_UN))  # so that a wait without limit ends
    release.start()
    try:
        f = gate(project, [{"crm.list_leads": 0.9}], state=state, timeout=0.1)
        f.start()
        started = time.monotonic()
        step = f.decide([user("leads")])
        assert time.monotonic() - started < HELD / 2  # well before the holder lets go: it did not wait for it
    finally:
        release.cancel()
        os.close(holder)
    assert step.added and not step.fail_open and "held the lock on its folder for more than 0.1 s" in step.state_error
    assert not state.exists()


def test_a_continued_conversation_admits_the_tools_it_called_directly_and_in_a_batch_once(project: Project) -> None:
    f = gate(project, [{"crm.list_leads": 0.9}, {}])
    f.start()
    called = {"type": "tool_use", "id": "t1", "name": "media__list_gallery", "input": {}}
    invocations = [{"name": "docs__get_document", "arguments": {}}, {"name": "nope__x"}]
    batch = {"type": "tool_use", "id": "t2", "name": "batch_tool", "input": {"invocations": invocations}}
    history = [user("show the gallery"), {"role": "assistant", "content": [called, batch]}]
    step = f.decide([*history, user("and the leads?")])
    assert step.added[:2] == ["media.list_gallery", "docs.get_document"] and "crm.list_leads" in step.added
    guessed = {"type": "tool_use", "id": "t3", "name": "crm__update_record", "input": {}}  # not offered: refused
    later = [*history, user("and the leads?"), {"role": "assistant", "content": [guessed]}, user("more")]
    assert f.decide(later).added == [] and "crm.update_record" not in f.admitted  # only a conversation's start is read
