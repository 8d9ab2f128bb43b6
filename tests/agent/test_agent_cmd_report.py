"""What `tooltree agent` reports of a run: the comparison's share of direct, the cost of a run whose sandbox failed,
batch_tool calls in the counts, the bytes scripts received, and what an error, a ``max_tokens`` stop (or any run that
did not finish, under ``--quiet`` too) or an unknown tool says. The real CLI (``main``) and the real ``anthropic`` SDK
against the fake API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import read_transcript
from agent.testing import ApiError, FakeMessagesAPI, reply, tool_use
from sandbox.host import Runtime
from tests.agent.conftest import Project
from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER, wait_until
from tooltree_cli.main import main

TASK = "Read the Northwind deal"
GET = {"object_type": "opportunity", "record_id": "0065e000009Q3PR"}
TOO_LONG = ApiError(400, "prompt is too long: 250000 tokens > 200000 maximum", type="invalid_request_error")
SHARE = 10
"""The index of the "of direct" column in a row of the comparison split on white space."""


def base(project: Project, config: Path | None = None) -> list[str]:
    return ["agent", TASK, "--config", str(config or project.config_path), "--tree", str(project.tree)]


def rows(out: str) -> dict[str, list[str]]:
    """The rows of the comparison table in ``out``, by mode."""
    lines = out.split("\n\n")[0].splitlines()[2:]
    return {line.split()[0]: line.split() for line in lines}


def results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a request's last message."""
    return [b for b in request["messages"][-1]["content"] if b.get("type") == "tool_result"]


# ---- the share of direct -----------------------------------------------------------------------------------------


def test_compare_gives_no_share_of_a_direct_run_that_did_not_complete(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the direct run the API failed on its second request was the baseline: "100.0 %", the others 34 % and
    # 139 % of what direct had spent when it failed.
    api.add(reply(tool_use("crm__get_record", GET)), TOO_LONG, reply("Noon (tool-search)."), reply("Noon."))
    assert main([*base(project), "--compare", "direct,tool-search,filtered", "--quiet"]) == 3
    out = capsys.readouterr().out
    table = rows(out)
    assert [r[SHARE] for r in table.values()] == ["-", "-", "-"]
    assert table["direct"][1] == "api_error"
    assert (
        "of direct: none given: the direct run did not complete (api_error), so its tokens are not what the task "
        "costs in direct mode" in out
    )


def test_compare_gives_no_share_to_a_mode_that_did_not_complete(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a mode cut short by max_tokens was shown as a small share of direct: a saving it never made.
    api.add(reply("Noon."), reply("Half an answ", stop_reason="max_tokens"))
    assert main([*base(project), "--compare", "direct,tool-search", "--quiet"]) == 1
    out = capsys.readouterr().out
    table = rows(out)
    assert table["direct"][SHARE : SHARE + 2] == ["100.0", "%"] and table["tool-search"][SHARE] == "-"
    assert (
        "of direct: each run's cost units as a share of the direct run's, not its tokens; none for tool-search "
        "(max_tokens): a run that did not complete is not compared" in out
    )


# ---- a sandbox that cannot start ----------------------------------------------------------------------------------


def with_sandbox(project: Project, tmp_path: Path, setting: str) -> Path:
    """The project's config with one more ``sandbox:`` setting (its section is the config's last)."""
    config = tmp_path / "tooltree.yaml"
    config.write_text(project.config_path.read_text(encoding="utf-8") + f"  {setting}\n", encoding="utf-8")
    return config


@pytest.mark.docker
def test_a_missing_sandbox_image_is_found_before_the_first_request(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: object,
) -> None:
    # Before: found at the first execute_python, after a paid request; --json printed {"mode", "error"} alone, and
    # --compare left the mode out of its table.
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    config = with_sandbox(project, tmp_path, "image: tooltree-nonexistent:1")
    assert main([*base(project, config), "--mode", "code", "--json", "--quiet"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert api.requests == []
    assert (out["mode"], out["stop_reason"], out["turns"], out["spent"]) == ("code", "sandbox_error", 0, 0)
    line = config.read_text(encoding="utf-8").count("\n")  # the setting is the file's last line
    # Before: "the sandbox image tooltree-nonexistent:1 (sandbox.image) is not there", not saying which file set it.
    assert out["error"] == (
        f"the sandbox failed: {config}:{line}: sandbox.image: the sandbox image tooltree-nonexistent:1 is not there:"
        " pull or build it"
    )

    api.add(reply("Negotiation (direct)."))
    assert main([*base(project, config), "--compare", "code,direct", "--quiet"]) == 4
    out = capsys.readouterr().out
    table = rows(out)
    assert table["code"][1:3] == ["sandbox_error", "0"] and table["direct"][1] == "end_turn"
    assert (
        f"[code] failed: the sandbox failed: {config}:{line}: sandbox.image: the sandbox image tooltree-nonexist" in out
    )
    assert len(api.requests) == 1 and len(api.requests[0]["tools"]) == 19  # direct's request alone


@pytest.mark.docker
@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("memory: 8m", "sandbox.memory: the sandbox failed to start"),
        (
            "runtime: tooltree-no-such-runtime",
            "sandbox.runtime: the engine could not run the sandbox under the runtime",
        ),
    ],
    ids=["memory", "runtime"],
)
def test_a_sandbox_that_cannot_start_under_its_settings_ends_the_run_before_any_request(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: object,
    setting: str,
    said: str,
) -> None:
    # Before: the engine and the image passed the check, and the sandbox failed at the first execute_python: with
    # memory: 8m, exit 4 at turn 4 after 3,977 tokens spent browsing.
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    config = with_sandbox(project, tmp_path, setting)
    line = config.read_text(encoding="utf-8").splitlines().index(f"  {setting}") + 1
    api.add(
        reply(tool_use("list_files", {"path": "servers"})),
        reply(tool_use("read_file", {"path": "servers/crm/README.md"})),
        reply(tool_use("search_tools", {"query": "record"})),
        reply(tool_use("execute_python", {"code": "print(1)"})),
        reply("Done."),
    )
    transcript = tmp_path / "run.jsonl"
    assert main([*base(project, config), "--mode", "code", "--json", "--transcript", str(transcript)]) == 4
    captured = capsys.readouterr()
    assert api.requests == []
    out = json.loads(captured.out)
    assert (out["stop_reason"], out["turns"], out["spent"]) == ("sandbox_error", 0, 0)
    assert out["error"].startswith(f"the sandbox failed: {config}:{line}: {said}")
    assert f"tooltree: error: the sandbox failed: {config}:{line}: {said}" in captured.err
    assert "tooltree: sandbox_error after 0 turn(s) · 0 tokens sent, 0 received" in captured.err
    assert read_transcript(transcript)[-1]["summary"]["stop_reason"] == "sandbox_error"

    with FakeMessagesAPI([reply("Negotiation (direct).")]) as direct:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", direct.base_url)
        assert main([*base(project, config), "--compare", "code,direct", "--quiet"]) == 4
    table = rows(capsys.readouterr().out)
    assert table["code"][1:4] == ["sandbox_error", "0", "0"] and table["direct"][1] == "end_turn"
    assert len(direct.requests) == 1 and len(direct.requests[0]["tools"]) == 19  # direct's request alone


@pytest.mark.docker
def test_a_sandbox_that_fails_mid_run_reports_the_tokens_already_spent(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: EngineWithCLI,
) -> None:
    # The run's sandbox (started before the first request) is killed while the model answers, and no engine answers
    # for the one that would replace it: the first script fails. Before: the 858 tokens of that request were reported
    # nowhere ({"mode", "error"}), and the transcript's run_end said the stop reason "".
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    opened: list[Runtime] = []  # the run's runtime, to find its sandbox (the run makes it)
    open_runtime = Runtime.open

    def recorded(runtime: Runtime) -> Runtime:
        opened.append(runtime)
        return open_runtime(runtime)

    monkeypatch.setattr(Runtime, "open", recorded)
    started: list[bool] = []
    usage = {"input_tokens": 849, "output_tokens": 9}

    def kill_the_sandbox(request: dict[str, Any]) -> dict[str, Any]:
        runtime = opened[-1]
        sandbox = runtime.running_sandbox
        started.append(sandbox is not None)
        if sandbox is not None:
            docker_engine.text(["kill", sandbox.name])
            wait_until(lambda: runtime.running_sandbox is None, "the run's sandbox to see its container end")
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # no replacement can start
        return reply(tool_use("execute_python", {"code": "print(1)"}), usage=usage)

    api.add(kill_the_sandbox)
    transcript = tmp_path / "run.jsonl"
    argv = [*base(project), "--mode", "code", "--json", "--transcript", str(transcript)]
    assert main(argv) == 4
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert started == [True]
    assert (out["stop_reason"], out["turns"], out["spent"]) == ("sandbox_error", 1, 858)
    assert out["error"].startswith("the sandbox failed: ") and "no Docker engine answers at" in out["error"]
    assert out["transcript"] == str(transcript)
    assert read_transcript(transcript)[-1]["summary"]["stop_reason"] == "sandbox_error"
    assert "tooltree: sandbox_error after 1 turn(s) · 849 tokens sent, 9 received" in captured.err

    monkeypatch.delenv("DOCKER_HOST")
    api.add(kill_the_sandbox, reply("Negotiation (direct)."))
    assert main([*base(project), "--compare", "code,direct", "--quiet"]) == 4
    table = rows(capsys.readouterr().out)
    assert started == [True, True]
    assert table["code"][1:4] == ["sandbox_error", "1", "849"] and table["direct"][1] == "end_turn"


# ---- batch_tool in the counts -------------------------------------------------------------------------------------


def test_each_invocation_of_a_batch_is_a_tool_call_and_each_failed_one_an_error(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: "tool_calls": 1, "tool_errors": 0 for a batch of three, two of them failed.
    invocations = [{"name": "crm__get_record", "arguments": GET}, {"name": "crm__nope", "arguments": {}},
                   {"name": "media__nope", "arguments": {}}]  # fmt: skip
    api.add(reply(tool_use("batch_tool", {"invocations": invocations})), reply("Negotiation."))
    transcript = tmp_path / "run.jsonl"
    assert main([*base(project), "--mode", "direct", "--json", "--transcript", str(transcript)]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert (summary["tool_calls"], summary["tool_errors"], summary["batches"]) == (3, 2, 1)
    assert "· 3 tool call(s) (2 failed; 1 batch_tool call(s)), 0 from scripts" in err
    (tool,) = [r for r in read_transcript(transcript) if r["type"] == "tool"]
    assert (tool["name"], tool["invocations"], tool["failed"]) == ("batch_tool", 3, 2)


def test_two_full_batches_and_a_call_count_twenty_calls_and_one_refused(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: "2 tool call(s) (1 more not run: too many in one reply)", and the tools_refused record said 2 ran.
    batch = tool_use("batch_tool", {"invocations": [{"name": "media__list_gallery", "arguments": {}}] * 10})
    api.add(reply(batch, tool_use("batch_tool", batch["input"]), tool_use("media__list_gallery")), reply("Listed."))
    transcript = tmp_path / "run.jsonl"
    assert main([*base(project), "--mode", "direct", "--transcript", str(transcript)]) == 0
    err = capsys.readouterr().err
    assert "· 20 tool call(s) (2 batch_tool call(s); 1 more not run: too many in one reply), 0 from" in err
    (refused,) = [r for r in read_transcript(transcript) if r["type"] == "tools_refused"]
    assert (refused["count"], refused["ran"]) == (1, 20)


def test_the_comparison_counts_batched_calls_and_shows_the_errors(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: direct's batch of three was "1" in the tool calls column, and the table had no errors column.
    good, bad = {"name": "crm__get_record", "arguments": GET}, {"name": "crm__nope", "arguments": {}}
    invocations = [good, bad, good]
    api.add(reply(tool_use("batch_tool", {"invocations": invocations})), reply("Negotiation."), reply("Noon."))
    assert main([*base(project), "--compare", "direct,tool-search", "--quiet"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header[header.index("calls") + 1] == "errors"
    table = rows(out)
    assert table["direct"][SHARE + 2 : SHARE + 7] == ["3", "(0", "from", "scripts)", "1"]
    assert table["tool-search"][SHARE + 2 : SHARE + 7] == ["0", "(0", "from", "scripts)", "0"]


# ---- bytes scripts received ---------------------------------------------------------------------------------------


@pytest.mark.docker
def test_bytes_a_script_received_are_not_said_to_have_stayed_in_the_sandbox(
    project: Project,
    api: FakeMessagesAPI,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    docker_engine: object,
) -> None:
    # Before: a script printing the whole result was "9.8 KB stayed in the sandbox, 8.4 KB reached the model".
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    call = "get_record(object_type='opportunity', record_id='0065e000009Q3PR')"
    code = f"from servers.crm import get_record\nprint({call})"
    api.add(reply(tool_use("execute_python", {"code": code})), reply("Negotiation."))
    assert main([*base(project), "--mode", "code", "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["sandbox_bytes"] > 0 and summary["model_bytes"] > 0 and summary["tool_errors"] == 0
    assert "stayed in the sandbox" not in err and "kept in the sandbox" not in err
    assert "of tool results received in the sandbox, " in err
    assert " · 1 call(s) from the script · " in err and " of results received [ok]" in err


# ---- what an error, a stop or an unknown tool says ----------------------------------------------------------------


def test_an_error_inside_the_stream_has_no_status_code_under_json_but_its_type(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "status_code": 200 for an error.
    api.add(ApiError(400, "tool input not accepted", type="invalid_request_error", in_stream=True))
    assert main([*base(project), "--mode", "direct", "--json", "--quiet"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert (out["status_code"], out["error_type"], out["stop_reason"]) == (None, "invalid_request_error", "api_error")
    assert out["error"] == "the Messages API failed inside its stream (invalid_request_error): tool input not accepted"

    api.add(ApiError(401, "invalid x-api-key"))
    assert main([*base(project), "--mode", "direct", "--json", "--quiet"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert (out["status_code"], out["error_type"]) == (401, "authentication_error")


def test_a_run_that_reached_max_tokens_says_to_raise_it(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree: max_tokens after 1 turn(s) ..." and nothing about what to change.
    api.add(reply("Half an answ", stop_reason="max_tokens"))
    assert main([*base(project), "--mode", "direct", "--max-tokens", "500"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tooltree: the model's last reply reached max_tokens (500 tokens) and was cut there: raise --max-tokens "
        "(or agent.max_tokens in tooltree.yaml) and run the task again"
    )


@pytest.mark.parametrize(
    ("stop", "options", "why"),
    [
        ("max_tokens", ["--max-tokens", "500"], "the model's last reply reached max_tokens (500 tokens) and was cut "
         "there: raise --max-tokens (or agent.max_tokens in tooltree.yaml) and run the task again"),
        ("refusal", [], "the model refused to go on (stop reason refusal) and the run stopped there: rephrase the "
         "task"),
        ("max_turns", ["--max-turns", "1"], "the run reached its turn limit (1 turn(s)) before the model finished: "
         "raise --max-turns (or agent.max_turns in tooltree.yaml) to let a run go further"),
    ],
)  # fmt: skip
def test_a_run_that_did_not_finish_says_why_in_one_line_under_quiet_too(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], stop: str, options: list[str], why: str
) -> None:
    # Before: with --quiet, exit 1 and nothing on stderr (the reason was in the summary line only, which --quiet turns
    # off), where an API error (exit 3) or a sandbox that failed (exit 4) says what failed under --quiet too.
    script = reply(tool_use("crm__get_record", GET)) if stop == "max_turns" else reply("Half an answ", stop_reason=stop)
    api.add(script, script)
    assert main([*base(project), "--mode", "direct", *options, "--quiet"]) == 1
    assert capsys.readouterr().err == f"tooltree: {why}\n"
    assert main([*base(project), "--mode", "direct", *options, "--quiet", "--json"]) == 1
    said = capsys.readouterr()
    assert said.err == f"tooltree: {why}\n" and json.loads(said.out)["stop_reason"] == stop
    if stop != "max_turns":  # the summary line says it too, on a line of its own
        api.add(script)
        assert main([*base(project), "--mode", "direct", *options]) == 1
        assert capsys.readouterr().err.splitlines()[-1] == f"tooltree: {why}"


def test_under_compare_and_quiet_a_mode_that_did_not_finish_is_named_in_why(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(reply("Noon."), reply("No.", stop_reason="refusal"))
    assert main([*base(project), "--compare", "direct,tool-search", "--quiet"]) == 1
    assert capsys.readouterr().err == (
        "tooltree: tool-search: the model refused to go on (stop reason refusal) and the run stopped there: rephrase "
        "the task\n"
    )


def test_no_batch_is_refused_where_no_mode_offers_batch_tool(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: accepted in code mode, where it did nothing (as --prefilter-* options are refused where they do nothing).
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main([*base(project), "--mode", "code", "--no-batch", "--dry-run"]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: --no-batch: batch_tool is not offered in code mode (it is in direct, tool-search, filtered "
        "modes)\n"
    )
    assert main([*base(project), "--compare", "code,direct", "--no-batch", "--dry-run", "--json"]) == 0
    modes = {m["mode"]: m["tools"] for m in json.loads(capsys.readouterr().out)["modes"]}
    assert modes == {"code": 4, "direct": 18}  # direct without batch_tool


def test_an_unknown_tool_is_answered_with_the_closest_names_offered(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "unknown tool 'crm__get-record'" alone; the model had to find the name in the tools array again.
    batch = {"invocations": [{"name": "media__list-gallery", "arguments": {}}]}
    api.add(reply(tool_use("crm__get-record", GET), tool_use("batch_tool", batch)), reply("Done."))
    assert main([*base(project), "--mode", "direct", "--quiet"]) == 0
    single, batched = results(api.requests[1])
    assert single["content"][0]["text"] == "unknown tool 'crm__get-record'; did you mean 'crm__get_record'?"
    assert "unknown tool 'media__list-gallery'; did you mean 'media__list_gallery'?" in json.dumps(batched)

    api.add(reply(tool_use("zzz_unrelated")), reply("Done."))
    assert main([*base(project), "--mode", "direct", "--quiet"]) == 0
    assert results(api.requests[3])[0]["content"][0]["text"] == "unknown tool 'zzz_unrelated'"


def test_filtered_mode_suggests_only_the_tools_it_offers(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.add(reply(tool_use("crm__get-record", GET), tool_use("media__list-gallery")), reply("Done."))
    assert main([*base(project), "--mode", "filtered", "--pin", "crm.get_record", "--quiet"]) == 0
    offered = {t["name"] for t in api.requests[0]["tools"]}
    assert "crm__get_record" in offered and "media__list_gallery" not in offered
    crm, media = (r["content"][0]["text"] for r in results(api.requests[1]))
    assert crm == "unknown tool 'crm__get-record'; did you mean 'crm__get_record'?"
    assert "media__list_gallery" not in media
