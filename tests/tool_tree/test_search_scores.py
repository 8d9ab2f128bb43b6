"""``score_tools``: every tool's lexical score and cosine for each query, in index order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tool_tree.test_search import tiny_model  # noqa: F401 - a fixture
from tool_tree.search import EMBEDDINGS_ENV, SearchDoc, SearchError, build_index, score_tools


def docs() -> list[SearchDoc]:
    def doc(server: str, tool: str, description: str) -> SearchDoc:
        return SearchDoc(server, server, tool, tool, f"servers/{server}/{tool}.py", description)

    return [
        doc("mail", "send_email", "Send an email to a person."),
        doc("cal", "move_event", "Move a calendar event."),
        doc("files", "read_file", "Read a file."),
    ]


def test_every_tool_gets_a_lexical_score_in_index_order() -> None:
    index = build_index(docs())
    (result,) = score_tools(index, ["send the email"])
    assert result.tools == [("cal", "move_event"), ("files", "read_file"), ("mail", "send_email")]
    assert result.lexical[2] > 0.0 and result.lexical[0] == result.lexical[1] == 0.0
    assert result.meaning is None


@pytest.mark.usefixtures("tiny_model")
def test_with_embeddings_every_tool_also_gets_its_cosine_for_each_query() -> None:
    index = build_index(docs(), embeddings=True)
    first, second = score_tools(index, ["send the email", "move the event"])
    assert first.meaning is not None and second.meaning is not None
    assert len(first.meaning) == len(second.meaning) == 3
    assert all(-1.0001 <= c <= 1.0001 for c in first.meaning) and first.meaning != second.meaning
    assert score_tools(index, ["send"], meaning=False)[0].meaning is None


@pytest.mark.usefixtures("tiny_model")
def test_embeddings_turned_off_or_another_model_installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    index = build_index(docs(), embeddings=True)
    monkeypatch.setenv(EMBEDDINGS_ENV, "0")
    assert score_tools(index, ["send"])[0].meaning is None
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    index.dense.model = "another-model@0"  # type: ignore[union-attr]
    with pytest.raises(SearchError, match="embedded with another-model@0"):
        score_tools(index, ["send"])
