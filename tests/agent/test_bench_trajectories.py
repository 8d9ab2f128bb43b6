"""The ``code+prefilter`` trajectories of the agent benchmark read the stubs the prompt shows no signature for."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def agent_tasks(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))
    import agent_tasks

    return agent_tasks


def body(system: str, last_tools: list[str]) -> dict[str, Any]:
    calls = [{"type": "tool_use", "id": f"t{i}", "name": n, "input": {}} for i, n in enumerate(last_tools)]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
    if calls:
        messages += [{"role": "assistant", "content": calls}, {"role": "user", "content": []}]
    return {"system": [{"type": "text", "text": system}], "messages": messages}


def tools_used(reply: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(b["name"], b["input"]) for b in reply["content"] if b.get("type") == "tool_use"]


def test_a_tool_shown_only_as_a_line_has_its_stub_read_before_the_script_runs(agent_tasks: ModuleType) -> None:
    first, second, _ = agent_tasks.TASKS["leads"].trajectories["code+prefilter"]
    shown_as_line = "Tools picked for this task (...):\n- crm.list_leads — Export leads as JSON rows."
    assert tools_used(first(body(shown_as_line, []))) == [("read_file", {"path": "servers/crm/list_leads.py"})]
    assert tools_used(second(body(shown_as_line, ["read_file"])))[0][0] == "execute_python"


def test_a_tool_whose_signature_is_shown_goes_straight_to_the_script(agent_tasks: ModuleType) -> None:
    first, _, _ = agent_tasks.TASKS["drive_to_crm"].trajectories["code+prefilter"]
    get_document = "docs.get_document — …\n    def get_document(*, document_id: str)\n"
    shown = get_document + "crm.update_record — …\n    def update_record(*, record_id: str)"
    assert [name for name, _ in tools_used(first(body(shown, [])))] == ["execute_python"]
    only_one = get_document + "- crm.update_record — Update fields."
    assert tools_used(first(body(only_one, []))) == [("read_file", {"path": "servers/crm/update_record.py"})]
