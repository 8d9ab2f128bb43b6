"""The tree's search index after a generation stopped between writing the manifest and the index."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import tool_tree.search
from generator.generate import generate
from tool_tree.search import load_index, search_tools

TIME = {"name": "get_current_time", "description": "Get the current time in a timezone.", "inputSchema": {}}
MAIL = {"name": "send_email", "description": "Send an email message.", "inputSchema": {}}


def snapshots(folder: Path, **servers: list[dict[str, object]]) -> Path:
    folder.mkdir()
    for name, tools in servers.items():
        (folder / f"{name}.json").write_text(json.dumps({"server": name, "tools": tools}), encoding="utf-8")
    return folder


def interrupted(*args: object, **kwargs: object) -> None:
    raise KeyboardInterrupt  # Ctrl-C while the index is built (embedding a big catalog takes minutes)


@pytest.fixture
def left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tree whose rerun, adding the ``time`` server, was stopped in its index step."""
    out = tmp_path / "tree"
    generate(None, out, snapshots=snapshots(tmp_path / "a", mail=[MAIL]), embeddings="off")
    with monkeypatch.context() as patch:
        patch.setattr(tool_tree.search, "write_index", interrupted)
        with pytest.raises(KeyboardInterrupt):
            generate(None, out, snapshots=snapshots(tmp_path / "b", mail=[MAIL], time=[TIME]), embeddings="off")
    assert (out / "servers/time/get_current_time.py").is_file()  # the stubs and manifest are the new ones
    return out


def test_search_finds_the_tools_a_run_stopped_in_its_index_step_added_and_warns(
    left_behind: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the old index was used as it was, and found no time tool (exit 0, no word of it).
    with caplog.at_level(logging.WARNING):
        found = search_tools(left_behind, "get current time in a timezone", detail="name", limit=1)
    assert found == "time.get_current_time\n"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "search_index.json: built from another manifest.json than the tree's" in warning
    assert f"rebuild it with `tooltree generate-tree --out {left_behind.resolve()}`" in warning


def test_check_lists_the_index_a_run_stopped_in_its_index_step_left_behind(left_behind: Path, tmp_path: Path) -> None:
    # Before: --check looked only for a missing index, and called this tree up to date.
    again = tmp_path / "b"
    assert generate(None, left_behind, snapshots=again, check=True).drift == ["search_index.json"]
    rerun = generate(None, left_behind, snapshots=again, embeddings="off")
    assert rerun.report is not None and rerun.report.written == ["search_index.json"]
    assert generate(None, left_behind, snapshots=again, check=True).drift == []


def test_the_rerun_after_it_rebuilds_the_index_and_search_uses_it_without_a_warning(
    left_behind: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    generate(None, left_behind, snapshots=tmp_path / "b", embeddings="off")
    with caplog.at_level(logging.WARNING):
        assert search_tools(left_behind, "current time", detail="name", limit=1) == "time.get_current_time\n"
    assert caplog.records == []
    assert load_index(left_behind) is load_index(left_behind)  # loaded once while neither file changes


def test_check_lists_an_index_of_the_word_splitter_that_cut_words_at_letters_outside_ascii(tmp_path: Path) -> None:
    # Before: --check called the tree up to date, though the next run rebuilds such an index.
    found = snapshots(tmp_path / "a", mail=[MAIL])
    out = tmp_path / "tree"
    generate(None, out, snapshots=found, embeddings="off")
    assert generate(None, out, snapshots=found, check=True).drift == []
    index = out / "search_index.json"
    index.write_text(index.read_text(encoding="utf-8").replace(',"words":2}', "}", 1), encoding="utf-8")
    assert generate(None, out, snapshots=found, check=True).drift == ["search_index.json"]
    rerun = generate(None, out, snapshots=found, embeddings="off")
    assert rerun.report is not None and rerun.report.written == ["search_index.json"]
    assert generate(None, out, snapshots=found, check=True).drift == []


def test_check_lists_an_index_a_run_would_embed_otherwise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: after `make embeddings`, --check called a tree generated without them up to date, and the next run
    # rewrote its index with embeddings (and the other way round, under --embeddings off).
    from tests.support import install_tiny_model

    found = snapshots(tmp_path / "a", mail=[MAIL])
    out = tmp_path / "tree"
    generate(None, out, snapshots=found, embeddings="off")
    install_tiny_model(tmp_path / "model", ["send", "email", "message"], monkeypatch)
    assert generate(None, out, snapshots=found, check=True, embeddings="off").drift == []
    assert generate(None, out, snapshots=found, check=True, embeddings="on").drift == ["search_index.json"]
    rerun = generate(None, out, snapshots=found, embeddings="on")
    assert rerun.report is not None and rerun.report.written == ["search_index.json"]
    assert generate(None, out, snapshots=found, check=True, embeddings="on").drift == []
    assert generate(None, out, snapshots=found, check=True, embeddings="off").drift == ["search_index.json"]
