"""`tooltree agent`: the real CLI against the fake API (direct mode: no container needed)."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

from agent import read_transcript
from agent.calls import MAX_TOOL_USES
from agent.testing import ApiError, CutStream, FakeMessagesAPI, reply, tool_use
from agent.transcript import Transcript
from tests.agent.conftest import Project
from tooltree_cli.agent_cmd import MAX_TASK_BYTES
from tooltree_cli.main import main


def argv(project: Project, *extra: str) -> list[str]:
    return ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree),
            "--mode", "direct", *extra]  # fmt: skip


def test_without_an_api_key_it_says_so_in_one_line(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(argv(project)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ANTHROPIC_API_KEY is not set" in err[0]


def test_without_an_api_key_a_mistake_in_the_command_line_is_said_first(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "ANTHROPIC_API_KEY is not set" for `tooltree agent ""`; once the key was set, "the task is empty".
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["agent", "", "--config", str(project.config_path), "--tree", str(project.tree)]) == 2
    assert capsys.readouterr().err == "tooltree: error: the task is empty\n"
    assert main([*argv(project), "--compare", "code,code"]) == 2
    assert (
        capsys.readouterr().err
        == "tooltree: error: --compare takes distinct modes (e.g. code,direct) and replaces --mode\n"
    )
    # A task to read from standard input: the key is said before it is read (a task typed there would be lost).
    monkeypatch.setattr(sys, "stdin", None)  # read, it would raise
    assert main(["agent", "-", "--config", str(project.config_path), "--tree", str(project.tree)]) == 2
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err


def test_a_run_shows_a_live_view_and_prints_the_summary_as_json(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    api.add(
        reply(tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})),
        reply("It is in Negotiation."),
    )
    transcript = tmp_path / "run.jsonl"
    assert main(argv(project, "--json", "--transcript", str(transcript))) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["answer"] == "It is in Negotiation." and summary["stop_reason"] == "end_turn"
    assert summary["turns"] == 2 and summary["tool_calls"] == 1 and summary["mode"] == "direct"
    assert summary["usage"]["sent"] > 0 and summary["transcript"] == str(transcript)
    assert "[turn 1] tool_use · in " in err and "  crm__get_record [ok] · " in err
    assert "[turn 2] end_turn" in err and "tooltree: end_turn after 2 turn(s)" in err
    assert transcript.is_file()


def test_a_server_whose_variable_is_unset_is_said_at_start_and_fails_its_calls_while_the_others_work(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: "tooltree: error: …: environment variable ${DOCS_TOKEN} is not set", exit 2, before any request:
    # one server's unset token stopped every run, even one whose task needs only the other servers.
    monkeypatch.delenv("DOCS_TOKEN", raising=False)
    text = project.config_path.read_text(encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(text.replace("  docs:\n", '  docs:\n    env: {TOKEN: "${DOCS_TOKEN}"}\n', 1), encoding="utf-8")
    api.add(
        reply(
            tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}),
            tool_use("docs__list_documents", {}),
        ),
        reply("It is in Negotiation."),
    )
    assert main([*argv(project, "--json"), "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    said = f"{config}:3: servers.docs.env.TOKEN: environment variable ${{DOCS_TOKEN}} is not set"
    assert (
        f"tooltree agent: warning: server 'docs' cannot start until this is set: {said}; its tool calls fail\n" in err
    )
    assert json.loads(out)["answer"] == "It is in Negotiation."
    results = [b for b in api.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [r.get("is_error", False) for r in results] == [False, True]
    assert f"server 'docs' is unavailable: {said}" in json.dumps(results[1]["content"])


def test_the_answer_goes_to_stdout_and_an_unfinished_run_exits_1(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(reply("Half an answer", stop_reason="max_tokens"))
    assert main(argv(project, "--quiet")) == 1
    out, err = capsys.readouterr()
    assert out == "Half an answer\n"
    assert err.startswith("tooltree: the model's last reply reached max_tokens") and len(err.splitlines()) == 1


def test_an_api_failure_exits_3_with_one_line_and_what_to_do(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(ApiError(401, "invalid x-api-key"))
    assert main(argv(project, "--quiet")) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "tooltree: error: the Messages API answered 401: invalid x-api-key",
        "tooltree: what to do: check ANTHROPIC_API_KEY (or the client's api_key): the key was not accepted",
    ]


def test_an_api_failure_under_json_prints_what_ran_and_why_it_stopped_on_stdout(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: stdout was empty, so a caller reading the JSON had nothing to parse.
    api.add(reply(tool_use("crm__get_record", {"object_type": "lead", "record_id": "L-1"})))
    api.add(ApiError(401, "invalid x-api-key"))
    assert main(argv(project, "--quiet", "--json")) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["error"] == "the Messages API answered 401: invalid x-api-key" and out["status_code"] == 401
    assert out["advice"].startswith("check ANTHROPIC_API_KEY")
    assert out["mode"] == "direct" and out["tool_calls"] == 1 and out["stop_reason"] == "api_error"


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--pin", "crm.nope"], "pinned tool 'crm.nope' is not in the tree"), (["--tree", "/nonexistent"], "no manifest")],
)
def test_setup_errors_exit_2(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(argv(project, *extra)) == 2
    assert message in capsys.readouterr().err


def test_a_pinned_tool_of_the_config_that_is_not_in_the_tree_names_file_line_and_key(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "tooltree.yaml"
    text = project.config_path.read_text(encoding="utf-8")
    config.write_text(text + "agent:\n  pinned: [crm.nope]\n", encoding="utf-8")
    base = ["agent", "Read the Northwind deal", "--config", str(config), "--tree", str(project.tree), "--quiet"]
    assert main(base) == 2
    line = text.count("\n") + 2
    assert (
        capsys.readouterr()
        .err.strip()
        .startswith(
            f"tooltree: error: {config}:{line}: agent.pinned: pinned tool 'crm.nope' is not in the tree: its server "
            "listed no such tool when the tree was generated; if it offers it now"
        )
    )  # its server is in the tree: regenerate, it says
    assert main([*base, "--pin", "nope.crm"]) == 2  # given as an option: no line of the config; no such server
    assert (
        capsys.readouterr().err.strip()
        == "tooltree: error: pinned tool 'nope.crm' is not in the tree: the tree has no server 'nope' (a server that "
        "failed when the tree was generated, or one added to the config since, is in it once it is regenerated: "
        f"`tooltree generate-tree --config {config} --out {project.tree}`, or `tooltree serve --regenerate-first`)"
    )


def test_the_configs_agent_section_sets_defaults_and_options_override_them(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "tooltree.yaml"
    agent_section = "agent:\n  mode: tool-search\n  model: claude-test-1\n  pinned: [crm.get_record]\n"
    agent_section += "  max_tokens: 900\n"
    config.write_text(project.config_path.read_text(encoding="utf-8") + agent_section, encoding="utf-8")
    base = ["agent", "Read the Northwind deal", "--config", str(config), "--tree", str(project.tree), "--quiet"]
    api.add(reply("From the config."), reply("From the options."))
    assert main(base) == 0
    assert main([*base, "--model", "claude-test-2", "--pin", "docs.get_document"]) == 0
    first, second = api.requests
    assert (first["model"], first["max_tokens"], second["model"]) == ("claude-test-1", 900, "claude-test-2")

    def loaded(request: dict[str, object]) -> set[str]:
        tools = request["tools"]
        assert isinstance(tools, list)
        return {t["name"] for t in tools if "__" in t["name"] and not t.get("defer_loading")}

    assert loaded(first) == {"crm__get_record"}  # tool-search mode from the config, pinned tool not deferred
    assert loaded(second) == {"docs__get_document"}  # --pin replaces the configured pins
    assert capsys.readouterr().out.splitlines() == ["From the config.", "From the options."]


def test_a_bad_agent_section_names_file_line_and_key(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(project.config_path.read_text(encoding="utf-8") + "agent:\n  mode: fast\n", encoding="utf-8")
    line = len(config.read_text(encoding="utf-8").splitlines())
    assert main(["agent", "Hi", "--config", str(config), "--tree", str(project.tree)]) == 2
    err = capsys.readouterr().err
    assert f"tooltree.yaml:{line}: agent.mode: expected one of code, direct, tool-search, filtered, got 'fast'" in err
    assert api.requests == []


def test_compare_runs_the_task_in_each_mode_and_tabulates_the_tokens(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    search = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}
    api.add(
        reply(tool_use("crm__get_record", search)),
        reply("Negotiation (direct)."),
        reply("Negotiation (tool-search)."),
    )
    transcript = tmp_path / "run.jsonl"
    base = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree)]
    assert main([*base, "--compare", "direct,tool-search", "--transcript", str(transcript)]) == 0
    out, err = capsys.readouterr()
    assert "== direct" in err and "== tool-search" in err
    lines = out.splitlines()
    assert lines[0].split() == ["mode", "stop", "turns", "sent", "cache", "read", "cache", "write", "received",
                                "pre-filter", "total", "cost", "units", "of", "direct", "tool", "calls", "errors", "in",
                                "sandbox", "to", "model"]  # fmt: skip
    direct, tool_search = lines[2].split(), lines[3].split()
    assert direct[:3] == ["direct", "end_turn", "2"] and direct[7] == "-" and direct[10:12] == ["100.0", "%"]
    assert tool_search[:3] == ["tool-search", "end_turn", "1"]
    assert float(tool_search[10]) < 10  # one turn with every tool deferred: a small share of direct
    assert "[direct] Negotiation (direct)." in out and "[tool-search] Negotiation (tool-search)." in out
    assert (tmp_path / "run.direct.jsonl").is_file() and (tmp_path / "run.tool-search.jsonl").is_file()
    assert [r["tools"][0].get("defer_loading", False) for r in api.requests] == [False, False, True]

    api.add(reply("A."), reply("B."))
    assert main([*base, "--compare", "direct,tool-search", "--json", "--quiet"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["mode"], r["answer"]) for r in runs] == [("direct", "A."), ("tool-search", "B.")]


def test_under_compare_a_mode_whose_sandbox_fails_is_reported_and_the_other_modes_still_run(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # Before: exit 4 with nothing on stdout (not even under --json), and the modes after the failed one never ran.
    # Then: the failed mode was left out of the table, and {"mode", "error"} under --json, after a paid request.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    api.add(reply("Negotiation (direct)."))
    base = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree)]
    assert main([*base, "--compare", "code,direct", "--json", "--quiet"]) == 4
    out, err = capsys.readouterr()
    runs = json.loads(out)["runs"]
    assert [(r["mode"], r["stop_reason"], r["answer"]) for r in runs] == [
        ("code", "sandbox_error", ""), ("direct", "end_turn", "Negotiation (direct).")
    ]  # fmt: skip
    assert runs[0]["error"].startswith("the sandbox failed: no Docker engine answers at")
    assert (runs[0]["turns"], runs[0]["spent"], runs[0]["status_code"]) == (0, 0, None)  # found before its request
    assert "tooltree: error: code: the sandbox failed: no Docker engine answers at" in err
    assert "--compare: the sandbox failed in code (see above); the other modes ran" in err
    assert len(api.requests) == 1  # direct's: code mode sent none

    assert main([*base, "--mode", "code", "--json", "--quiet"]) == 4  # one mode: its summary, with the failure
    out = json.loads(capsys.readouterr().out)
    assert (out["mode"], out["stop_reason"], out["turns"]) == ("code", "sandbox_error", 0)
    assert out["error"].startswith("the sandbox failed: ")
    assert len(api.requests) == 1


@pytest.mark.parametrize("extra", [["--compare", "direct,direct"], ["--compare", "direct", "--mode", "code"]])
def test_compare_needs_distinct_modes_without_mode(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    assert main(["agent", "Hi", "--config", str(project.config_path), "--tree", str(project.tree), *extra]) == 2
    assert "--compare takes distinct modes" in capsys.readouterr().err
    assert api.requests == []


def test_an_unknown_mode_in_compare_names_the_option(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    argv_ = [
        "agent",
        "Hi",
        "--config",
        str(project.config_path),
        "--tree",
        str(project.tree),
        "--compare",
        "code,bogus",
    ]
    assert main(argv_) == 2
    assert capsys.readouterr().err.strip() == (
        "tooltree: error: --compare: unknown mode 'bogus'; use some of code, direct, tool-search, filtered"
    )
    assert api.requests == []


def test_a_dry_run_needs_no_key_and_prints_each_modes_first_request(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    base = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree)]
    assert main([*base, "--compare", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[2:6]}
    assert list(rows) == ["code", "direct", "tool-search", "filtered"]
    assert (
        rows["code"][1:3] == ["4", "0"]
        and rows["direct"][1:3] == ["19", "0"]  # 18 tools and batch_tool
        and rows["tool-search"][1:3] == ["20", "18"]
    )
    assert 1 < int(rows["filtered"][1]) < 19 and float(rows["filtered"][-2]) < 100  # the pre-filter narrowed it
    assert rows["direct"][-2:] == ["100.0", "%"] and float(rows["code"][-2]) < 30
    assert lines[-1].startswith("tokens: local approximation")

    assert main([*base, "--dry-run", "--json", "--pin", "crm.update_record"]) == 0
    (pinned,) = json.loads(capsys.readouterr().out)["modes"]
    assert main([*base, "--dry-run", "--json"]) == 0
    (plain,) = json.loads(capsys.readouterr().out)["modes"]
    assert pinned["mode"] == plain["mode"] == "code"
    assert pinned["system_tokens"] > plain["system_tokens"] + 20  # the pinned signature is in the prompt
    assert plain["first_request_tokens"] > plain["system_tokens"] + plain["tools_tokens"]  # and the task


def test_a_dry_run_with_no_config_says_it_counts_the_tree_without_the_configs_agent_settings(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: from a folder with no tooltree.yaml (the checkout, after `make demo`), the README's
    # `tooltree agent "..." --compare --dry-run` counted the code-mode prompt without the pinned signatures in silence.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    # A copy of the tree: the file its manifest records is not beside it (tests/cli/test_tree_config_file.py).
    tree = shutil.copytree(project.tree, tmp_path / "tree")
    assert main(["agent", "Read the Northwind deal", "--tree", str(tree), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[2].split()[0] == "code"
    assert err == (
        "tooltree: no tooltree.yaml here: the dry run counts the tree alone, without a config's `agent:` settings (its"
        " pinned tools, mode, model, pre-filter); pass --config PATH to count them\n"
    )
    argv_ = ["agent", "Read the Northwind deal", "--tree", str(tree), "--dry-run"]
    assert main([*argv_, "--config", str(project.config_path)]) == 0
    assert capsys.readouterr().err == ""


def test_filtered_mode_with_the_claude_prefilter_reports_its_cost_and_keeps_the_state(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    verdicts = {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}
    api.add(reply(tool_use("record_tool_verdicts", verdicts)), reply("Negotiation."))
    state = tmp_path / "admitted.json"
    extra = ["--prefilter", "claude", "--prefilter-state", str(state), "--prefilter-model", "claude-judge", "--json"]
    assert main([*argv(project)[:-1], "filtered", *extra]) == 0
    judge, run = api.requests
    assert judge["model"] == "claude-judge" and judge["tool_choice"]["name"] == "record_tool_verdicts"
    assert [t["name"] for t in run["tools"]][:2] == ["batch_tool", "crm__get_record"]
    out = json.loads(capsys.readouterr().out)
    p = out["prefilter"]
    assert (p["classifier"], p["requests"], p["fail_open"]) == ("claude", 1, [])
    assert p["usage"]["input_tokens"] > 0 and p["admitted"] < p["catalog"]
    assert json.loads(state.read_text(encoding="utf-8"))["admitted"][0] == "crm.get_record"


def test_no_batch_and_a_prefilter_in_a_mode_without_one(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(reply("ok"))
    assert main([*argv(project), "--no-batch", "--quiet"]) == 0
    assert "batch_tool" not in [t["name"] for t in api.requests[0]["tools"]]
    assert main([*argv(project), "--prefilter", "local"]) == 2
    assert "--prefilter works in code and filtered modes, not in direct" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("transcript", "extra", "expected"),
    [
        ("folder", [], "--transcript: {tmp}/folder is a folder, not a file"),
        ("notes.txt/run.jsonl", [], "--transcript: {tmp}/notes.txt is a file, not a folder"),
        (
            "notes.txt/sub/run.jsonl",
            [],
            "--transcript: cannot create {tmp}/notes.txt/sub: {tmp}/notes.txt is a file, not a folder",
        ),
        # The second mode's transcript is refused before the first mode runs.
        (
            "run.jsonl",
            ["--compare", "direct,tool-search"],
            "--transcript: {tmp}/run.tool-search.jsonl is a folder, not a file",
        ),
    ],
)
def test_a_transcript_path_mistake_exits_2_before_any_request(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    transcript: str,
    extra: list[str],
    expected: str,
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "run.tool-search.jsonl").mkdir()
    (tmp_path / "notes.txt").write_text("mine\n", encoding="utf-8")
    base = ["agent", "Hi", "--config", str(project.config_path), "--tree", str(project.tree), "--quiet"]
    assert main([*base, *extra, "--transcript", str(tmp_path / transcript)]) == 2
    assert capsys.readouterr().err == f"tooltree: error: {expected.format(tmp=tmp_path)}\n"
    assert api.requests == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "notes.txt", "run.tool-search.jsonl"]
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-tokens", "-5"], "argument --max-tokens: expected at least 1, got -5"),
        (["--token-budget", "0"], "argument --token-budget: expected at least 1, got 0"),
        (["--max-turns", "two"], "argument --max-turns: expected a whole number, got 'two'"),
        (["--prefilter-timeout", "nan"], "argument --prefilter-timeout: expected a positive number of seconds"),
        # Before: accepted; past a thread's longest wait every decision failed open on an OverflowError.
        (["--prefilter-timeout", "1e10"], "argument --prefilter-timeout: expected at most 3600 seconds, got '1e10'"),
        (["--prefilter-threshold", "7"], "argument --prefilter-threshold: expected a probability above 0"),
    ],
)
def test_bad_numbers_are_refused_when_the_arguments_are_parsed(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["agent", "a task", "--dry-run", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_prefilter_state_that_is_a_folder_exits_2_before_any_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*argv(project)[:-1], "filtered", "--prefilter-state", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"tooltree: error: --prefilter-state: {tmp_path} is a folder, not a file"
    assert api.requests == []


@pytest.mark.parametrize("quiet", [[], ["--quiet"]], ids=["summary", "quiet"])
def test_a_prefilter_state_that_cannot_be_saved_is_said_in_the_summary(
    quiet: list[str],
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def full_disk(*_: object) -> tuple[int, str]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("agent.prefilter.state._temporary", full_disk)  # root ignores an unwritable folder
    verdicts = {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}
    api.add(reply(tool_use("record_tool_verdicts", verdicts)), reply("Negotiation."))
    state = tmp_path / "admitted.json"
    filtered = [*argv(project)[:-1], "filtered", "--prefilter", "claude", "--prefilter-state", str(state)]
    assert main([*filtered, *quiet]) == 0
    err = capsys.readouterr().err
    assert f"pre-filter state not saved: {state}: cannot write the pre-filter state" in err  # a file asked for
    assert ("tokens" in err) is not bool(quiet)  # the summary line, or with --quiet only the warning
    assert not state.exists()


def test_the_summary_says_how_big_the_prefilter_state_has_grown(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "admitted.json"
    saved = {"format": "tooltree-prefilter-state", "version": 1, "admitted": ["other.tool"]}  # another catalog's
    state.write_text(json.dumps(saved), encoding="utf-8")
    verdicts = {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}
    api.add(reply(tool_use("record_tool_verdicts", verdicts)), reply("Negotiation."))
    assert main([*argv(project)[:-1], "filtered", "--prefilter", "claude", "--prefilter-state", str(state)]) == 0
    held = json.loads(state.read_text(encoding="utf-8"))["admitted"]
    assert held[0] == "other.tool" and "crm.get_record" in held  # siblings of get_record too
    assert f"· the state file holds {len(held)} tool(s)" in capsys.readouterr().err


def test_a_comparison_starts_each_mode_from_the_state_file_as_it_is_and_leaves_it_so(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: every mode of --compare read and grew the one file, so a mode started with the tools the modes
    # before it had admitted, and the comparison wrote them into the user's profile.
    state = tmp_path / "admitted.json"
    saved = {"format": "tooltree-prefilter-state", "version": 1, "admitted": ["other.tool"]}
    state.write_text(json.dumps(saved), encoding="utf-8")
    before = state.read_bytes()
    api.add(reply("Negotiation (direct)."), reply("Negotiation (filtered)."))
    base = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree)]
    args = ["--compare", "direct,filtered", "--prefilter", "local", "--prefilter-state", str(state), "--json"]
    assert main([*base, *args, "--quiet"]) == 0
    filtered = json.loads(capsys.readouterr().out)["runs"][1]
    assert filtered["mode"] == "filtered" and filtered["prefilter"]["admitted"] > 0
    assert state.read_bytes() == before


@pytest.mark.parametrize("given", ["", "notes.txt/admitted.json"])
def test_a_prefilter_state_that_cannot_be_a_file_exits_2_before_any_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path, given: str
) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    state = str(tmp_path / given) if given else ""
    assert main([*argv(project)[:-1], "filtered", "--prefilter-state", state]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tooltree: error: --prefilter-state: ")
    assert ("the path is empty" if not given else "notes.txt is a file, not a folder") in err[0]
    assert api.requests == [] and (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_an_agent_prefilter_state_under_a_file_names_file_line_and_key(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    text = project.config_path.read_text(encoding="utf-8")
    config.write_text(f"{text}agent:\n  prefilter_state: {tmp_path / 'notes.txt' / 'state.json'}\n", encoding="utf-8")
    line = len(text.splitlines()) + 2
    args = ["agent", "task", "--config", str(config), "--tree", str(project.tree), "--mode", "filtered"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tooltree: error: {config}:{line}: agent.prefilter_state: cannot keep ")
    assert api.requests == []


@pytest.mark.parametrize("below_a_file", [False, True])
def test_a_workspace_that_cannot_be_a_folder_exits_2_before_any_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path, below_a_file: bool
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    workspace = notes / "ws" if below_a_file else notes
    assert main([*argv(project, "--quiet"), "--workspace", str(workspace)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tooltree: error: --workspace: ")
    assert f"{notes} is a file, not a folder" in err[0]
    assert api.requests == [] and notes.read_text(encoding="utf-8") == "mine"


def test_an_address_that_answers_200_with_a_web_page_exits_3_with_one_line(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree: error: AssertionError: (run with --debug ...)", exit 1 (which means "a limit ended it").
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Page(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = b"<html><body>Welcome to the proxy</body></html>"
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        assert main(argv(project, "--quiet")) == 3
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "tooltree: error: the Messages API sent no message (its answer was text/html, not an event stream: "
        "is ANTHROPIC_BASE_URL the Messages API?)"
    ]


EVIL = "\x1b]52;c;Y3VybCBldmlsfHNo\x07\x1b[2K\r\x9b8m\u202e"
"""OSC 52 (writes the clipboard), erase the line, a carriage return, an 8-bit CSI, a bidi override."""


def test_what_the_model_wrote_reaches_the_terminal_cleaned(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a tool name, a note and the answer went to the terminal raw: the model could set the user's
    # clipboard, erase lines and forge the live view.
    api.add(reply(tool_use("crm__get_record" + EVIL + "x" * 500, {})), reply(f"Line one{EVIL}\nLine two"))
    assert main(argv(project)) == 0
    out, err = capsys.readouterr()
    assert not any(c in out + err for c in "\x1b\x07\x9b\u202e")
    assert out == "Line one\n\nLine two\n"  # the answer's text and lines kept (a carriage return ends a line)
    (tool_line,) = [line for line in err.splitlines() if line.startswith("  crm__get_record")]
    assert len(tool_line) < 300 and "…" in tool_line  # one line, the name and the note cut

    api.add(reply(f"Done{EVIL}"))
    assert main(argv(project, "--json", "--quiet")) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b\u202e") and "\\u009b" in out and "\\u202e" in out
    assert json.loads(out)["answer"] == f"Done{EVIL}"  # JSON keeps the answer as it was, escaped


def test_a_reply_the_sdk_cannot_read_exits_3_with_a_short_error_and_the_runs_summary(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: exit 1 (which means a limit, a refusal or max_tokens) and the SDK's error quoting the input.
    deep: dict[str, object] = {}
    for _ in range(300):  # deeper than the SDK's parser goes
        deep = {"a": deep}
    api.add(reply(tool_use("crm__get_record", {"object_type": "lead", "record_id": "x", "extra": deep})))
    transcript = tmp_path / "run.jsonl"
    assert main(argv(project, "--transcript", str(transcript))) == 3
    captured = capsys.readouterr().err
    assert '{"a": {"a"' not in captured
    # The fake API's thread may report on stderr that the client closed the stream it was still writing.
    err = [line for line in captured.splitlines() if line.startswith("tooltree")]
    assert len(err) == 2 and err[0].startswith("tooltree: error: the model's reply could not be read: ")
    assert len(err[0]) < 400 and err[0].endswith("the run stopped there, run the task again")
    assert err[1].startswith("tooltree: unreadable_reply after 1 turn(s)")
    assert read_transcript(transcript)[-1]["summary"]["stop_reason"] == "unreadable_reply"


def test_the_summary_says_how_many_calls_of_a_reply_were_not_run(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(reply(*[tool_use("media__list_gallery") for _ in range(MAX_TOOL_USES + 2)]), reply("Listed."))
    assert main(argv(project)) == 0
    err = capsys.readouterr().err
    assert f"· {MAX_TOOL_USES} tool call(s) (2 more not run: too many in one reply), " in err


def test_a_prefilter_timeout_of_the_config_past_the_longest_names_file_line_and_key(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "tooltree.yaml"
    text = project.config_path.read_text(encoding="utf-8")
    config.write_text(text + "agent:\n  mode: filtered\n  prefilter_timeout: 1.0e+10\n", encoding="utf-8")
    assert main(["agent", "Hi", "--config", str(config), "--tree", str(project.tree), "--quiet"]) == 2
    line = text.count("\n") + 3
    assert capsys.readouterr().err.strip() == (
        f"tooltree: error: {config}:{line}: agent.prefilter_timeout: at most 3600 seconds, got 10000000000.0"
    )
    assert api.requests == []


@pytest.mark.parametrize("key", ["model", "prefilter_model", "prefilter_state"])
def test_an_empty_model_or_state_in_the_config_names_file_line_and_key(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str
) -> None:
    # Before: `model: ''` failed only at the API, and `prefilter_state: ''` silently kept no state.
    config = tmp_path / "tooltree.yaml"
    text = project.config_path.read_text(encoding="utf-8")
    config.write_text(text + f"agent:\n  mode: filtered\n  {key}: ' '\n", encoding="utf-8")
    assert main(["agent", "Hi", "--config", str(config), "--tree", str(project.tree), "--quiet"]) == 2
    line = text.count("\n") + 3
    assert capsys.readouterr().err.strip() == (
        f"tooltree: error: {config}:{line}: agent.{key}: an empty string; leave the key out for the default"
    )
    assert api.requests == []


def test_a_full_disk_stops_the_transcript_not_the_run_and_it_is_said_even_when_quiet(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the tool had run, then the OSError ended the run: exit 1, no answer, half a line in the file.
    real_write, calls = os.write, [0]

    def write(fd: int, data: bytes | memoryview) -> int:
        calls[0] += 1
        if calls[0] > 3:  # run_start, request and response fit; the disk is full from the tool's record on
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr("agent.transcript.os.write", write)
    api.add(reply(tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})),
            reply("It is in Negotiation."))  # fmt: skip
    transcript = tmp_path / "run.jsonl"
    assert main(argv(project, "--quiet", "--transcript", str(transcript))) == 0
    out, err = capsys.readouterr()
    assert out == "It is in Negotiation.\n" and len(api.requests) == 2
    assert err == (
        f"tooltree: warning: transcript incomplete: {transcript}: the transcript stopped after 3 record(s), the run "
        "went on: No space left on device\n"
    )
    assert [r["type"] for r in read_transcript(transcript)] == ["run_start", "request", "response"]


def test_a_transcript_that_is_the_prefilter_state_or_the_config_exits_2_and_keeps_the_file(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: the transcript emptied the state file (or the config) and wrote its records over it.
    state = tmp_path / "admitted.json"
    text = '{"format":"tooltree-prefilter-state","version":1,"admitted":["crm.get_record"]}\n'
    state.write_text(text, encoding="utf-8")
    filtered = [*argv(project)[:-1], "filtered", "--quiet", "--prefilter-state", str(state)]
    assert main([*filtered, "--transcript", str(state)]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: the transcript {state} is the pre-filter state file; writing it would empty that file, "
        "give the transcript a path of its own\n"
    )
    config_text = project.config_path.read_text(encoding="utf-8")
    assert main(argv(project, "--quiet", "--transcript", str(project.config_path))) == 2
    assert "is the config file; writing it would empty that file" in capsys.readouterr().err
    assert state.read_text(encoding="utf-8") == text and api.requests == []
    assert project.config_path.read_text(encoding="utf-8") == config_text


def test_a_prefilter_state_that_is_the_config_exits_2_and_keeps_the_file(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the run read the config as a corrupt state, sent every tool and told the user to "fix or delete" the file.
    config_text = project.config_path.read_text(encoding="utf-8")
    filtered = [*argv(project)[:-1], "filtered", "--quiet"]
    assert main([*filtered, "--prefilter-state", str(project.config_path)]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: the pre-filter state {project.config_path} is the config file; the run would read it as "
        "its state and find it corrupt: give the state a path of its own\n"
    )
    assert api.requests == [] and project.config_path.read_text(encoding="utf-8") == config_text


def test_a_workspace_holding_the_tree_exits_2_before_any_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: its script could rewrite the tree's manifest through the workspace, saved back into the tree.
    workspace = project.tree.parent
    code = [*argv(project)[:-1], "code", "--quiet", "--workspace", str(workspace)]
    assert main(code) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: the workspace {workspace} holds the tree {project.tree}: a script could rewrite the tree "
        "(its manifest lists the tools the bridge allows), and the workspace saved back would put its copy in place; "
        "give the workspace a folder of its own\n"
    )
    assert api.requests == []


def test_a_transcript_another_run_is_writing_exits_2_and_its_records_stay(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: the second run truncated the first one's transcript and interleaved its records with it.
    transcript = tmp_path / "run.jsonl"
    with Transcript(transcript) as other:
        other.write("run_start", task="the other run")
        assert main(argv(project, "--quiet", "--transcript", str(transcript))) == 2
        other.write("run_end", summary={})
    assert capsys.readouterr().err == (
        f"tooltree: error: another run is writing the transcript {transcript}; give each run a file of its own\n"
    )
    assert [r["type"] for r in read_transcript(transcript)] == ["run_start", "run_end"] and api.requests == []


def test_a_reply_cut_short_on_every_try_exits_3(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the half sentence was printed as the answer and the run exited 0.
    monkeypatch.setattr("agent.request.STREAM_RETRY_DELAY", 0.0)
    api.add(*[CutStream(reply("The deal is in"), events=2)] * 5)
    assert main(argv(project, "--quiet")) == 3
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "tooltree: error: the Messages API failed: the stream ended before the reply did (after 1 content block(s))\n"
        "tooltree: what to do: check the connection to the API (a proxy that cuts long answers?), then run the task "
        "again\n"
    )
    assert len(api.requests) == 5  # the first try and the CLI's 4 retries


def test_sigterm_stops_a_run_as_ctrl_c_does_and_exits_143(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: SIGTERM ended the process at once: no run_end, the workspace's new files never saved back.
    def terminated(request: dict[str, object]) -> dict[str, object]:
        os.kill(os.getpid(), signal.SIGTERM)  # handled on the main thread, which waits for this answer
        return reply("never read")

    caught: list[int] = []

    def guard(signum: int, frame: object) -> None:  # the test session's own: where the command set none
        caught.append(signum)

    before = signal.signal(signal.SIGTERM, guard)
    try:
        api.add(terminated)
        transcript = tmp_path / "run.jsonl"
        code = main(argv(project, "--quiet", "--transcript", str(transcript)))
        assert signal.getsignal(signal.SIGTERM) is guard  # put back once the run is over
    finally:
        signal.signal(signal.SIGTERM, before)
    out, err = capsys.readouterr()
    assert (code, out, err, caught) == (143, "", "tooltree: terminated\n", [])
    records = read_transcript(transcript)
    assert records[-1]["type"] == "run_end" and records[-1]["summary"]["turns"] == 1


@pytest.mark.parametrize(
    ("option", "inside", "what"),
    [("--transcript", "run.jsonl", "transcript"), ("--prefilter-state", "profiles/admitted.json", "pre-filter state")],
)
def test_a_transcript_or_prefilter_state_inside_the_workspace_exits_2_before_any_request(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    option: str,
    inside: str,
    what: str,
) -> None:
    # Before: a script could rewrite the file; the workspace saved back then put the script's copy in its place
    # (the run's own transcript went on into run.jsonl.host).
    workspace = tmp_path / "ws"
    workspace.mkdir()
    path = workspace / inside
    base = ["agent", "Hi", "--config", str(project.config_path), "--tree", str(project.tree), "--quiet"]
    assert (
        main([*base, "--mode", "code", "--prefilter", "local", "--workspace", str(workspace), option, str(path)]) == 2
    )
    assert capsys.readouterr().err == (
        f"tooltree: error: the {what} {path} is inside the workspace {workspace}: a script could rewrite it, and the "
        "workspace saved back would replace it; keep it outside\n"
    )
    assert api.requests == [] and list(workspace.iterdir()) == []


def stdin_of(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_a_task_on_standard_input_is_read_as_utf8_text(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin_of(monkeypatch, "Read the Northwind deal — qu’il soit\n".encode())
    api.add(reply("Negotiation."))
    base = ["agent", "-", "--config", str(project.config_path), "--tree", str(project.tree), "--mode", "direct"]
    assert main([*base, "--quiet"]) == 0
    assert api.requests[0]["messages"][0]["content"][0]["text"] == "Read the Northwind deal — qu’il soit\n"


@pytest.mark.parametrize(
    ("task", "data", "expected"),
    [
        ("-", b"\xff\xfe a task", "the task on standard input is not UTF-8 text (byte 0 cannot be read)"),
        ("a\udcffb", b"", "the task given is not UTF-8 text (byte 1 cannot be read)"),  # argv's undecodable byte
        (
            "-",
            b"a" * (MAX_TASK_BYTES + 1),
            f"the task on standard input is larger than {MAX_TASK_BYTES:,} bytes (the API's request limit)",
        ),
    ],
)
def test_a_task_that_is_not_utf8_text_or_too_large_exits_2_before_any_request(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    task: str,
    data: bytes,
    expected: str,
) -> None:
    # Before: "UnicodeEncodeError: ... surrogates not allowed" and exit 1; standard input was read whole.
    stdin_of(monkeypatch, data)
    base = ["agent", task, "--config", str(project.config_path), "--tree", str(project.tree), "--mode", "direct"]
    assert main([*base, "--quiet"]) == 2
    assert capsys.readouterr().err == f"tooltree: error: {expected}\n" and api.requests == []


@pytest.mark.docker
def test_prefilter_reaches_the_mode_of_the_config_or_the_default_code_mode(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path, docker_engine: object
) -> None:  # code mode starts its sandbox before its first request
    # Before: --prefilter went only to a run given --mode: `tooltree agent TASK --prefilter local` (the README's
    # example) ran code mode without a pre-filter, and a config's filtered mode kept its local classifier.
    base = ["agent", "Read the Northwind opportunity record", "--tree", str(project.tree), "--quiet"]
    transcript = tmp_path / "code.jsonl"
    api.add(reply("Negotiation."))
    assert (
        main([*base, "--config", str(project.config_path), "--prefilter", "local", "--transcript", str(transcript)])
        == 0
    )
    steps = [r for r in read_transcript(transcript) if r["type"] == "prefilter"]
    assert [(r["classifier"], r["asked"]) for r in steps] == [("local", True)]
    assert read_transcript(transcript)[0]["mode"] == "code"

    config = tmp_path / "tooltree.yaml"
    text = project.config_path.read_text(encoding="utf-8")
    config.write_text(text + "agent:\n  mode: filtered\n", encoding="utf-8")
    verdicts = {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]}
    api.add(reply(tool_use("record_tool_verdicts", verdicts)), reply("Negotiation."))
    assert main([*base, "--config", str(config), "--prefilter", "claude"]) == 0
    assert api.requests[1]["tool_choice"] == {"type": "tool", "name": "record_tool_verdicts"}
    assert "crm__get_record" in [t["name"] for t in api.requests[2]["tools"]]  # with its siblings
    assert len(api.requests[2]["tools"]) < 18  # narrowed by the claude classifier, not the catalog of 18 tools

    config.write_text(text + "agent:\n  mode: direct\n", encoding="utf-8")
    assert main([*base, "--config", str(config), "--prefilter", "local"]) == 2
    assert capsys.readouterr().err == "tooltree: error: --prefilter works in code and filtered modes, not in direct\n"
    assert len(api.requests) == 3


@pytest.mark.parametrize(
    ("extra", "modes"),
    [
        (["--mode", "direct", "--prefilter-state", "admitted.json"], "direct"),
        (["--prefilter-threshold", "0.3"], "code"),  # code mode without --prefilter
        (
            ["--compare", "direct,tool-search", "--prefilter-model", "m", "--prefilter-timeout", "5"],
            "direct or tool-search",
        ),
    ],
)
def test_a_prefilter_option_where_no_prefilter_runs_exits_2_before_any_request(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    modes: str,
) -> None:
    # Before: taken and ignored: a --prefilter-state never kept anything, and nothing said so.
    monkeypatch.chdir(tmp_path)
    base = ["agent", "Hi", "--config", str(project.config_path), "--tree", str(project.tree), "--quiet"]
    assert main([*base, *extra]) == 2
    given = ", ".join(a for a in extra if a.startswith("--prefilter-"))
    assert capsys.readouterr().err == (
        f"tooltree: error: {given}: no pre-filter runs in {modes} mode (it runs in filtered mode, and in code mode "
        "with --prefilter local or claude)\n"
    )
    assert api.requests == [] and list(tmp_path.iterdir()) == []


def test_prefilter_under_a_compare_of_modes_none_of_which_runs_it_exits_2_before_any_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: accepted, and neither mode ran a pre-filter, unsaid (alone, either mode refused it).
    api.add(reply("Done."), reply("Done."))
    base = ["agent", "Hi", "--config", str(project.config_path), "--tree", str(project.tree), "--quiet"]
    assert main([*base, "--compare", "direct,tool-search", "--prefilter", "local"]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: --prefilter works in code and filtered modes, not in direct or tool-search\n"
    )
    assert api.requests == []
    assert main([*base, "--compare", "direct,tool-search", "--prefilter", "off", "--dry-run"]) == 0  # off: none asked


def test_the_transcript_files_the_readme_names_are_those_a_run_and_a_compare_write(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before, the README said neither: a user of `--compare --transcript run.jsonl` looked for run.jsonl, and a second
    # run into the same file was not known to replace the first one's records.
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    said = re.search(r"the command's `--transcript (\S+)` replaces what the\s+file held, and under `--compare` each "
                     r"mode writes its own beside it \(`(\S+)`, `(\S+)`, …\)", readme)  # fmt: skip
    assert said is not None, "the README says where --transcript and --compare write"
    name, code_file, direct_file = said.groups()
    base = ["agent", "Hi", "--config", str(project.config_path), "--tree", str(project.tree), "--quiet"]
    transcript = tmp_path / name
    for answer in ("Answer-one.", "Answer-two."):
        api.add(reply(answer))
        assert main([*base, "--mode", "direct", "--transcript", str(transcript)]) == 0
    assert [r["task"] for r in read_transcript(transcript) if r["type"] == "run_start"] == ["Hi"]
    assert [r["type"] for r in read_transcript(transcript)][-1] == "run_end"
    text = transcript.read_text(encoding="utf-8")
    assert "Answer-two." in text and "Answer-one." not in text
    transcript.unlink()
    api.add(reply("A."), reply("B."))
    assert main([*base, "--compare", "direct,tool-search", "--transcript", str(transcript)]) == 0
    assert (tmp_path / direct_file).is_file() and not transcript.exists()
    assert code_file == name.replace(".jsonl", ".code.jsonl")
    capsys.readouterr()


def test_the_help_prints_where_standard_output_takes_only_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: "probability ≥ P" in --prefilter-threshold's help: a UnicodeEncodeError's traceback instead of the help
    # under an encoding without "≥" (PYTHONIOENCODING=ascii, a Latin-1 locale).
    written = io.BytesIO()
    out = io.TextIOWrapper(written, encoding="ascii")
    monkeypatch.setattr("sys.stdout", out)
    with pytest.raises(SystemExit) as ended:
        main(["agent", "--help"])
    out.flush()
    assert ended.value.code == 0
    assert "--prefilter-threshold P" in written.getvalue().decode("ascii")


@pytest.mark.parametrize("where", ["full_disk", "ascii_only"])
def test_an_answer_that_cannot_be_printed_says_why_and_where_it_is_and_exits_4(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    where: str,
) -> None:
    # Before: "unexpected … OSError: [Errno 28] No space left on device" (or a UnicodeEncodeError) and exit 70, as if
    # a bug, after a paid run, with no word of the transcript that has the answer.
    api.add(reply("Ação concluída."))
    transcript = tmp_path / "run.jsonl"

    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = FullDisk() if where == "full_disk" else io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr("sys.stdout", out)
    assert main(argv(project, "--quiet", "--transcript", str(transcript))) == 4
    err = capsys.readouterr().err
    why = "No space left on device" if where == "full_disk" else "'ascii' codec can't encode"
    assert err.startswith(f"tooltree: error: the answer could not be printed: {why}")
    assert err.rstrip().endswith(f"; it is in {transcript}") and "unexpected" not in err
    assert ("set PYTHONIOENCODING=utf-8" in err) == (where == "ascii_only")
    records = [json.loads(line) for line in transcript.read_text(encoding="utf-8").splitlines()]
    assert "Ação concluída." in json.dumps(records, ensure_ascii=False)
