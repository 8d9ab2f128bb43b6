"""The wiring of the agent benchmarks: `make eval` (bench/eval_live.py) against the fake API.

The live evaluation cannot reach the real API here; its code path is the same with a client
pointed at the fake Messages API replaying the replication's scripted trajectories.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agent.testing import FakeMessagesAPI
from tests.agent.conftest import Project

BENCH = Path(__file__).resolve().parents[2] / "bench"


def reuse(project: Project) -> list[str]:
    return ["--tree", str(project.tree), "--config", str(project.config_path)]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    import agent_tasks
    import eval_live

    return eval_live, agent_tasks


def test_eval_without_a_key_says_so(
    bench: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_live, _ = bench
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert eval_live.main([]) == 2
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err


def test_eval_runs_checks_and_tabulates_each_mode(
    bench: tuple[ModuleType, ModuleType], project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eval_live, agent_tasks = bench
    task = agent_tasks.TASKS["drive_to_crm"]
    script = [*task.trajectories["direct"], *task.trajectories["tool-search"]]
    out = tmp_path / "eval.json"
    argv = ["--tasks", "drive_to_crm", "--modes", "direct,tool-search", "--quiet", "--out", str(out), *reuse(project)]
    with FakeMessagesAPI(script) as api:
        assert eval_live.main(argv, client=api.client()) == 0
    assert api.remaining == 0
    runs = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert [(r["task"], r["mode"], r["ok"], r["turns"]) for r in runs] == [
        ("drive_to_crm", "direct", True, 3),
        ("drive_to_crm", "tool-search", True, 3),
    ]
    assert all(r["usage"]["output_tokens"] > 50_000 for r in runs)  # the transcript went through the model
    table = capsys.readouterr().out
    assert "Live evaluation" in table and "drive_to_crm  tool-search  ok" in table


def test_a_trajectory_that_does_not_do_the_work_fails_its_check(
    bench: tuple[ModuleType, ModuleType], project: Project, tmp_path: Path
) -> None:
    eval_live, agent_tasks = bench
    from agent.testing import reply

    out = tmp_path / "eval.json"
    argv = ["--tasks", "drive_to_crm", "--modes", "direct", "--quiet", "--out", str(out), *reuse(project)]
    with FakeMessagesAPI([reply("I copied it.")]) as api:  # claims success without calling a tool
        assert eval_live.main(argv, client=api.client()) == 1
    (run,) = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert run["ok"] is False and "not the 200936 of the transcript" in run["problem"]
    assert sys.modules["agent_tasks"] is agent_tasks


def test_a_pinned_variant_runs_with_the_tasks_pinned_tools(
    bench: tuple[ModuleType, ModuleType], project: Project, tmp_path: Path
) -> None:
    eval_live, agent_tasks = bench
    task = agent_tasks.TASKS["drive_to_crm"]
    out = tmp_path / "eval.json"
    argv = ["--tasks", "drive_to_crm", "--modes", "tool-search+pinned", "--quiet", "--out", str(out), *reuse(project)]
    with FakeMessagesAPI(task.trajectories["tool-search+pinned"]) as api:
        assert eval_live.main(argv, client=api.client()) == 0
    (run,) = json.loads(out.read_text(encoding="utf-8"))["runs"]
    assert (run["mode"], run["ok"], run["turns"]) == ("tool-search+pinned", True, 3)
    loaded = {t["name"] for t in api.requests[0]["tools"] if not t.get("defer_loading")}
    assert {"docs__get_document", "crm__update_record"} <= loaded
    assert "crm__get_record" not in loaded


def test_variants_name_a_mode_and_optionally_pinned_or_prefiltered(bench: tuple[ModuleType, ModuleType]) -> None:
    _, agent_tasks = bench
    task = agent_tasks.TASKS["leads"]
    assert agent_tasks.split_variant("code+pinned") == ("code", True)
    assert agent_tasks.split_variant("direct") == ("direct", False)
    assert agent_tasks.split_variant("code+search") == ("code", False)
    assert agent_tasks.split_variant("code+prefilter") == ("code", False)
    assert agent_tasks.prefilter_of("code+prefilter") == agent_tasks.prefilter_of("filtered") == "local"
    assert agent_tasks.prefilter_of("code+pinned") is None
    assert task.pins("code+pinned") == ("crm.list_leads",) and task.pins("code") == ()
    with pytest.raises(ValueError, match="unknown variant 'code\\+fast'"):
        agent_tasks.split_variant("code+fast")


def test_the_replication_counts_with_the_count_tokens_endpoint_when_asked(
    bench: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    import agent_replication

    from agent.testing import reply

    body = {
        "model": "m",
        "system": [{"type": "text", "text": "s" * 400}],
        "messages": [{"role": "user", "content": "x" * 40}],
    }
    with FakeMessagesAPI() as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        counter = agent_replication.ApiCounter("claude-test")
        sent = counter.request(body)
        received = counter.output(body, reply("y" * 80))
    approx = agent_replication.ApproxCounter()
    assert sent == approx.request(body) > 100
    assert received >= approx.output(body, reply("y" * 80)) >= 20  # the reply's 80 characters, at least
    assert "count_tokens endpoint" in counter.method
    assert len(api.count_requests) == 3 and api.count_requests[0]["system"] == body["system"]


def test_the_replications_sandboxes_carry_the_owner_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import agent_replication

    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", "someone-else")
    assert agent_replication.bench_owner() == "someone-else"
    monkeypatch.delenv("TOOLTREE_SANDBOX_OWNER")
    assert agent_replication.bench_owner() == "tooltree-bench"
