"""Stub docstrings: summaries cut at a real sentence end, the same in the module and the function."""

import ast
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import generator.docstrings as docstrings
from generator.render import render_stub
from tool_tree.text import first_sentence, one_line


def _docstrings(description: str) -> tuple[str, str]:
    schema = {"type": "object", "properties": {}}
    tool: dict[str, Any] = {"name": "t", "description": description, "inputSchema": schema}
    tree = ast.parse(render_stub(server="s", tool=tool, function="t").source)
    func = tree.body[-1]
    assert isinstance(func, ast.FunctionDef)
    return ast.get_docstring(tree) or "", ast.get_docstring(func) or ""


@pytest.mark.parametrize(
    "description",
    [
        "Search records (e.g. Leads, Contacts) by name. Returns JSON with the matches.",
        "Pick one, i.e. the first. Then go.",
        "Shows the status! More text here.",
        "根据八字获取公历时间列表。返回的时间格式为",
    ],
)
def test_module_and_function_docstrings_start_with_the_same_sentence(description: str) -> None:
    module, function = _docstrings(description)
    sentence = first_sentence(description)
    assert module.split("\n")[0] == f"s.t — {sentence}"
    assert function.split("\n")[0] == sentence
    assert function.split("\n")[1] == ""  # the summary line stands alone


def test_a_summary_is_never_cut_at_an_abbreviation() -> None:
    module, function = _docstrings("Search records (e.g. Leads). Returns JSON.")
    assert module.startswith("s.t — Search records (e.g. Leads).\n")
    assert function.startswith("Search records (e.g. Leads).\n\nReturns JSON.")


@pytest.mark.parametrize("length", [109, 110, 111])
def test_summary_sentence_is_split_off_only_when_it_fits_in_110_characters(length: int) -> None:
    text = "A" * (length - 1) + ".  Then more."
    split = docstrings._split_summary(text)
    assert split.startswith("A" * (length - 1) + ".\n\nThen more.") == (length <= 110)
    assert split == text or length <= 110


def test_a_multi_line_first_paragraph_keeps_its_layout() -> None:
    text = "First line. Second sentence\ncontinues here."
    assert docstrings._split_summary(text) == text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", " ", "\t", "\n", "\x00", "\u3000", "…", "x" * 30]), max_size=30))
def test_a_shorter_cap_of_a_flattened_text_is_the_cap_of_the_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    flat = one_line(text, 200)
    for limit in (1, 2, 5, 60, 80, 199):
        assert docstrings._shorter(flat, limit) == one_line(text, limit)
