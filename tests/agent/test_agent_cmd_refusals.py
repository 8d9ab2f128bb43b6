"""`tooltree agent`: settings that cannot work in the modes run are refused before any request (CLI, fake API)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from agent.testing import FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tests.support import sample_config_yaml
from tooltree_cli.main import main


def base(project: Project) -> list[str]:
    return ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree)]


def test_a_workspace_where_no_script_runs_is_refused_before_the_model_is_asked(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: accepted in direct mode and ignored; the run went on and the folder was never restored nor saved.
    workspace = tmp_path / "ws"
    workspace.mkdir()
    api.add(reply("Done."))
    assert main([*base(project), "--mode", "direct", "--workspace", str(workspace), "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: --workspace: no script runs in direct mode, so no folder is restored or saved (the "
        "workspace is the sandbox's, in code mode)\n"
    )
    assert api.requests == []
    args = [*base(project), "--compare", "direct,filtered", "--workspace", str(workspace), "--dry-run"]
    assert main(args) == 2
    assert "no script runs in direct or filtered mode" in capsys.readouterr().err
    # A comparison with code mode uses it there.
    args = [*base(project), "--compare", "code,direct", "--workspace", str(workspace), "--dry-run", "--json"]
    assert main(args) == 0
    assert [m["mode"] for m in json.loads(capsys.readouterr().out)["modes"]] == ["code", "direct"]


@pytest.mark.parametrize("media", ["left out", "disabled"])
def test_a_tree_of_servers_the_config_lacks_is_refused_before_the_model_is_asked(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path, media: str
) -> None:
    # Before: the run went on; each call of a tool of the missing server was refused ("not_allowed") after paid turns.
    config = tmp_path / "tooltree.yaml"
    yaml = sample_config_yaml("docs", "crm", *(["media"] if media == "disabled" else []))
    config.write_text(yaml + ("    enabled: false\n" if media == "disabled" else ""), encoding="utf-8")
    api.add(reply(tool_use("media__list_gallery", {})), reply("Done."))
    args = ["agent", "List the gallery", "--config", str(config), "--tree", str(project.tree), "--mode", "direct"]
    assert main([*args, "--quiet"]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: the tree {project.tree} has server(s) media that {config} does not have or disables: the "
        f"tree was generated from another configuration; pass the --config it was generated from "
        f"({project.config_path}), or regenerate the tree from this one (`tooltree generate-tree --config {config} "
        f"--out {project.tree}`)\n"
    )
    assert api.requests == []
    # The config the tree was generated from runs.
    assert main(["agent", "List the gallery", "--config", str(project.config_path), "--tree", str(project.tree),
                 "--mode", "direct", "--quiet"]) == 0  # fmt: skip
    assert capsys.readouterr().out == "Done.\n"


def test_a_pin_in_direct_mode_alone_is_refused_before_the_model_is_asked(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: accepted, and it changed nothing (direct mode sends every tool whole), as --no-batch did in code mode.
    api.add(reply("Done."))
    assert main([*base(project), "--mode", "direct", "--pin", "crm.get_record", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: --pin: direct mode sends every tool whole already; pinning matters in code, tool-search and "
        "filtered modes\n"
    )
    assert api.requests == []
    # With another mode it is that mode's: tool-search loads the pinned tool rather than deferring it.
    args = [*base(project), "--compare", "direct,tool-search", "--pin", "crm.get_record", "--dry-run", "--json"]
    assert main(args) == 0
    assert [m["deferred"] for m in json.loads(capsys.readouterr().out)["modes"]] == [0, 17]


def test_a_transcript_to_standard_output_is_refused_rather_than_written_to_a_file_named_dash(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Before: the run wrote its transcript to ./- and said nothing of it.
    monkeypatch.chdir(tmp_path)
    api.add(reply("Done."))
    assert main([*base(project), "--mode", "direct", "--transcript", "-", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: --transcript -: the transcript goes to a file (standard output carries the answer); name "
        "one\n"
    )
    assert api.requests == [] and not (tmp_path / "-").exists()


def test_an_unknown_embeddings_setting_is_refused_before_the_model_is_asked(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the run went on, and each search_tools the model sent failed on it (or, on an index with vectors, the
    # local pre-filter said to install the embeddings extra).
    monkeypatch.setenv("TOOLTREE_SEARCH_EMBEDDINGS", "bogus")
    api.add(reply("Done."))
    assert main([*base(project), "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: TOOLTREE_SEARCH_EMBEDDINGS=bogus: expected 1 (on), 0 (off) or auto\n"
    )
    assert api.requests == []


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("--model=", "argument --model: an empty model name (''); leave the option out for the default"),
        ("--model= ", "argument --model: an empty model name (' '); leave the option out for the default"),
        ("--prefilter-model=", "argument --prefilter-model: an empty model name (''); leave the option out for the"),
        ("--transcript=", "--transcript: the path is empty; name a file, or leave the option out for no transcript"),
    ],
)
def test_an_empty_model_or_transcript_is_refused_before_the_model_is_asked(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], option: str, said: str
) -> None:
    # Before: --model "" was sent (the API refuses it), --prefilter-model "" was the default, and --transcript ""
    # wrote no transcript; each unsaid.
    api.add(reply("Done."))
    with pytest.raises(SystemExit) if option.startswith(("--model", "--prefilter-model")) else nullcontext() as ended:
        assert main([*base(project), "--mode", "filtered", "--prefilter", "claude", option, "--quiet"]) == 2
    if ended is not None:
        assert ended.value.code == 2
    assert said in capsys.readouterr().err
    assert api.requests == []
