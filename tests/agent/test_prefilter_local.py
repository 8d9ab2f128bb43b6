"""The ``local`` classifier: calibrated probabilities from the tree's search index, offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.prefilter import FilterError, LocalFilter
from agent.prefilter.local import FEATURES, HYBRID, HYBRID_STATIC, LEXICAL, features, probabilities, probability
from tests.agent.conftest import Project
from tests.agent.prefilter_support import catalog
from tool_tree.search import ToolScores


def test_each_tool_gets_a_probability_and_the_needed_ones_rank_first(project: Project) -> None:
    verdicts = LocalFilter(project.tree).classify(
        "Render a bar chart of some values as an image", catalog(project.tree)
    )
    p = verdicts.probabilities
    assert set(p) == {t.key for t in catalog(project.tree)} and all(0.0 <= v <= 1.0 for v in p.values())
    assert max(p, key=p.__getitem__) == "media.render_chart"
    assert verdicts.threshold is not None and p["media.render_chart"] >= verdicts.threshold
    assert verdicts.usage.total == 0 and verdicts.requests == 0


def test_several_tools_can_be_likely_at_once(project: Project) -> None:
    text = "Copy the text of the meeting transcript document into the description of the CRM opportunity record"
    p = LocalFilter(project.tree).classify(text, catalog(project.tree)).probabilities
    assert p["docs.get_document"] > 0.005 and p["crm.update_record"] > 0.005  # not a choice that sums to one
    assert sum(p.values()) != pytest.approx(1.0)


def test_without_embeddings_it_decides_on_words_with_its_own_calibration(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLTREE_SEARCH_EMBEDDINGS", "0")
    verdicts = LocalFilter(project.tree).classify("list the leads of the CRM", catalog(project.tree))
    assert verdicts.note == "lexical only" and verdicts.threshold == LEXICAL.threshold
    assert max(verdicts.probabilities, key=verdicts.probabilities.__getitem__) == "crm.list_leads"


def test_a_tree_without_index_is_a_missing_model(project: Project, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    (tree / "search_index.json").unlink()
    with pytest.raises(FilterError, match="no search index") as caught:
        LocalFilter(tree).classify("anything", catalog(tree))
    assert caught.value.kind == "missing_model"


def test_a_request_of_two_needs_judged_whole_admits_a_tool_for_each(project: Project) -> None:
    text = "Render a bar chart of some values as an image. List the leads of the CRM."
    verdicts = LocalFilter(project.tree).classify(text, catalog(project.tree))
    assert verdicts.threshold is not None
    assert verdicts.probabilities["media.render_chart"] >= verdicts.threshold
    assert verdicts.probabilities["crm.list_leads"] >= verdicts.threshold


def test_with_a_clause_splitter_each_tool_keeps_its_best_probability_over_the_clauses(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent.prefilter import local

    chart, leads = "Render a bar chart of some values as an image.", "List the leads of the CRM."
    whole = LocalFilter(project.tree).classify(f"{chart} {leads}", catalog(project.tree)).probabilities
    monkeypatch.setattr(local, "CLAUSES", "sentences")
    both = LocalFilter(project.tree).classify(f"{chart} {leads}", catalog(project.tree)).probabilities
    alone = [LocalFilter(project.tree).classify(t, catalog(project.tree)).probabilities for t in (chart, leads)]
    for key, p in both.items():
        assert p == pytest.approx(max(whole[key], alone[0][key], alone[1][key]), abs=1e-12)
    assert any(both[k] > whole[k] for k in both)  # a clause judged alone raised some tool


def test_features_are_relative_to_the_catalog_and_the_best_tool() -> None:
    scores = ToolScores("q", [("a", "x"), ("b", "y"), ("c", "z")], [4.0, 2.0, 0.0], [0.6, 0.2, 0.1])
    rows = features(scores)
    f = {name: i for i, name in enumerate(FEATURES)}
    assert [r[f["lex_rel"]] for r in rows] == [1.0, 0.5, 0.0]
    assert [r[f["lex_on"]] for r in rows] == [1.0, 1.0, 0.0]
    assert rows[0][f["cos_gap"]] == 0.0 and rows[1][f["cos_gap"]] == pytest.approx(0.4)
    assert sum(r[f["cos_z"]] for r in rows) == pytest.approx(0.0)
    p = [probability(r, HYBRID.weights) for r in rows]
    assert p[0] > p[1] > p[2]


def test_the_calibration_is_shipped_with_a_weight_per_feature() -> None:
    for calibration in (HYBRID, HYBRID_STATIC, LEXICAL):
        assert len(calibration.weights) == len(FEATURES) and 0.0 < calibration.threshold < 1.0


@pytest.fixture
def embedded_tree(project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sample tree with an index that stores vectors of a tiny random BERT (installed)."""
    from tests.support import write_tiny_bert
    from tool_tree.search import _dense, write_index

    root = write_tiny_bert(tmp_path / "model", ["chart", "render", "record", "lead", "the", "a"])
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(root))
    monkeypatch.setenv("TOOLTREE_EMBEDDING_STATIC", "0")  # MiniLM's place alone: the HYBRID calibration
    monkeypatch.setenv("TOOLTREE_SEARCH_EMBEDDINGS", "auto")
    monkeypatch.setattr(_dense, "_encoder", None)
    monkeypatch.setattr(_dense, "_encoder_error", None)
    tree = tmp_path / "tree"
    shutil.copytree(project.tree, tree)
    write_index(tree, embeddings="on")
    return tree


def test_with_embeddings_it_uses_both_kinds_of_evidence(embedded_tree: Path) -> None:
    verdicts = LocalFilter(embedded_tree).classify("render a chart", catalog(embedded_tree))
    assert verdicts.note == "lexical + embeddings" and verdicts.threshold == HYBRID.threshold
    assert len(verdicts.probabilities) == 18


def test_vectors_made_with_the_static_companion_get_their_own_calibration(
    embedded_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support import write_tiny_static
    from tool_tree.search import _dense, write_index

    monkeypatch.syspath_prepend(str(write_tiny_static(tmp_path / "site", ["chart", "render", "record", "lead"])))
    monkeypatch.delenv("TOOLTREE_EMBEDDING_STATIC")
    monkeypatch.setattr(_dense, "_encoder", None)
    text = "render a chart"
    # the tree was embedded by the sentence encoder alone: still its calibration, though the companion is here
    before = LocalFilter(embedded_tree).classify(text, catalog(embedded_tree))
    assert before.threshold == HYBRID.threshold
    write_index(embedded_tree, embeddings="on")
    after = LocalFilter(embedded_tree).classify(text, catalog(embedded_tree))
    assert after.note == "lexical + embeddings" and after.threshold == HYBRID_STATIC.threshold
    assert after.probabilities != before.probabilities


def test_an_index_whose_embedding_model_is_gone_is_a_missing_model(
    embedded_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tool_tree.search import _dense

    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(tmp_path / "nowhere"))
    monkeypatch.setattr(_dense, "_encoder", None)
    monkeypatch.setattr(_dense, "_encoder_error", None)
    with pytest.raises(FilterError, match="cannot use the index's embeddings") as caught:
        LocalFilter(embedded_tree).classify("render a chart", catalog(embedded_tree))
    assert caught.value.kind == "missing_model"


@pytest.mark.parametrize("with_cosines", [True, False])
def test_the_fast_path_gives_exactly_the_models_probabilities(with_cosines: bool) -> None:
    import random

    rng = random.Random(3)
    tools = [("s", str(i)) for i in range(50)]
    lexical = [rng.random() * 5 if rng.random() < 0.3 else 0.0 for _ in tools]
    cosines = [rng.uniform(-0.2, 0.8) for _ in tools] if with_cosines else None
    scores = ToolScores("q", tools, lexical, cosines)
    for calibration in (HYBRID, HYBRID_STATIC, LEXICAL):
        fast = probabilities(scores, calibration.weights)
        slow = [probability(row, calibration.weights) for row in features(scores)]
        assert fast == pytest.approx(slow, abs=1e-12)
