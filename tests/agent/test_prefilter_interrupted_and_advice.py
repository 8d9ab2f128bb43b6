"""`tooltree agent`'s local pre-filter over an index embedded by another model than the installed one (real CLI, fake
API, tiny real BERT models)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from agent.testing import FakeMessagesAPI, reply
from tests.agent.conftest import Project
from tool_tree.search._encoder import MODELS_REQUIREMENTS
from tooltree_cli.main import main


def test_an_index_embedded_by_another_model_advises_regenerating_the_tree_not_installing_the_extra(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    # Before: "install the embeddings extra (`make embeddings`) or regenerate the tree with --embeddings off", though
    # a model was installed: installing it again changed nothing.
    from tests.support import write_tiny_bert
    from tool_tree.search import _dense, write_index

    def install(root: Path) -> None:
        monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(root))
        monkeypatch.setattr(_dense, "_encoder", None)
        monkeypatch.setattr(_dense, "_encoder_error", None)

    monkeypatch.setenv("TOOLTREE_EMBEDDING_STATIC", "0")
    monkeypatch.setenv("TOOLTREE_SEARCH_EMBEDDINGS", "auto")
    install(write_tiny_bert(tmp_path / "old", ["chart", "render", "record", "lead", "the", "a"]))
    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    write_index(tree, embeddings="on")
    install(write_tiny_bert(tmp_path / "new", ["deal", "opportunity", "stage", "the", "a"]))
    api.add(reply("Done."))
    args = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(tree), "--mode",
            "filtered", "--json", "--quiet"]  # fmt: skip
    assert main(args) == 0
    (reason,) = json.loads(capsys.readouterr().out)["prefilter"]["fail_open"]
    embedded = "missing_model: the local pre-filter cannot use the index's embeddings: the index was embedded with "
    assert reason.startswith(embedded)
    assert reason.endswith("; regenerate the tree (`tooltree generate-tree`) to embed it with the installed model")
    # No model installed: installing one is the advice.
    install(tmp_path / "nowhere")
    api.add(reply("Done."))
    assert main(args) == 0
    (reason,) = json.loads(capsys.readouterr().out)["prefilter"]["fail_open"]
    advice = (
        "; install the embeddings extra (`make embeddings` in a checkout; else "
        "`pip install 'mcp-tooltree[embeddings]'` and "
        f"`pip install --no-deps --require-hashes -r {shlex.quote(str(MODELS_REQUIREMENTS))}`) or regenerate the "
        "tree with --embeddings off"
    )
    assert reason.endswith(advice)


def test_ctrl_c_while_the_claude_prefilter_is_asked_counts_its_request(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: "asked 0 time(s)", "requests": 0, and no word of it in the transcript, though a request had gone out
    # (the API may bill it).
    from agent import read_transcript
    from tests.agent.test_loop_api_edges import interrupting

    api.add(interrupting())
    transcript = tmp_path / "run.jsonl"
    args = ["agent", "Read the Northwind deal", "--config", str(project.config_path), "--tree", str(project.tree),
            "--mode", "filtered", "--prefilter", "claude", "--json", "--transcript", str(transcript)]  # fmt: skip
    assert main(args) == 130
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["stop_reason"] == "interrupted" and summary["turns"] == 0 and len(api.requests) == 1
    prefilter = summary["prefilter"]
    assert (prefilter["asked"], prefilter["requests"], prefilter["classifier"]) == (1, 1, "claude")
    assert "· asked 1 time(s), " in err
    records = read_transcript(transcript)
    assert [r["type"] for r in records] == ["run_start", "prefilter", "run_end"]
    assert records[1]["requests"] == 1 and records[1]["unanswered"] == 1
    assert records[-1]["prefilter_unanswered"] == 1 and records[-1]["summary"]["prefilter"]["requests"] == 1
