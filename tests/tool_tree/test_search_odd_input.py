"""`tooltree search` given odd input (a search index edited by hand, a tree file that is not a file, a pattern
that is not text): one error line, exit 2, never a traceback or a hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tests.tool_tree.test_search import write_tree
from tool_tree.search import INDEX_FILE, SearchError, SearchIndex
from tooltree_cli.main import main


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("edited") / "tree")


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("clauses", "nope", "config.clauses is 'nope', not one of and, chains, none, sentences, tasks"),
        ("clauses", None, "config.clauses is None, not a string"),
        ("fusion", "best", "config.fusion is 'best', not one of rrf, max, maxrank"),
        ("expansion", None, "config.expansion is None, not a finite number"),
        ("b", 1e999, "config.b is inf, not a finite number"),
        ("k1", "2", "config.k1 is '2', not a finite number"),
        ("stem", 1, "config.stem is 1, not true or false"),
        ("expansion_terms", 2.5, "config.expansion_terms is 2.5, not a whole number"),
        ("fusion_k", -1.0, "config.fusion_k is -1.0, not from 0 to 1e+06"),  # before: a ZeroDivisionError, exit 70
        ("server_weight", 1e308, "config.server_weight is 1e+308, not from 0 to 1e+06"),  # before: "Infinity"
    ],
)
def test_a_ranking_setting_edited_by_hand_is_a_corrupt_index_and_the_cli_exits_2(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: Any, said: str
) -> None:
    data = json.loads((tree / INDEX_FILE).read_text(encoding="utf-8"))
    data["config"][key] = value
    edited = tmp_path / "tree"
    edited.mkdir()
    (edited / INDEX_FILE).write_text(json.dumps(data), encoding="utf-8")
    assert main(["search", "--tree", str(edited), "list leads"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tooltree: error: {edited / INDEX_FILE}: corrupt search index (ValueError: {said})")
    assert "rebuild it" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (
            lambda data: [data["postings"][t][1].__setitem__(0, 1e308) for t in ("forecast", "weather")],
            "postings of 'forecast' hold impacts out of the range 0 to 1e+06",
        ),
        (
            lambda data: data["postings"]["weather"][1].__setitem__(0, -1.0),
            "postings of 'weather' hold impacts out of the range 0 to 1e+06",
        ),
        (
            lambda data: data["related"].__setitem__("weather", [["forecast", 1e308]]),
            "related terms have scores out of the range 0 to 1",
        ),
    ],
)
def test_an_index_whose_numbers_could_sum_past_a_float_is_corrupt_and_json_never_says_infinity(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, said: str
) -> None:
    # Before: impacts of 1e308 (finite, so loaded) summed to an infinite score: `"score": Infinity` in --json,
    # which no JSON reader takes, and a script's search failed on the way back.
    data = json.loads((tree / INDEX_FILE).read_text(encoding="utf-8"))
    assert data["postings"]["forecast"][0][0] == data["postings"]["weather"][0][0]  # one tool has both words
    edit(data)
    (tmp_path / INDEX_FILE).write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    assert main(["search", "--tree", str(tmp_path), "weather forecast", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"tooltree: error: {tmp_path / INDEX_FILE}: corrupt search index (ValueError: ")
    assert said in err and "rebuild it" in err and len(err.splitlines()) == 1


def test_json_output_holding_nan_is_a_bug_never_invalid_json() -> None:
    from tooltree_cli.output import json_text

    assert json.loads(json_text([{"score": 1e308}])) == [{"score": 1e308}]
    with pytest.raises(ValueError, match="not JSON compliant"):
        json_text([{"score": float("inf")}])


def test_a_whole_number_for_a_float_setting_is_read_as_that_float(tree: Path, tmp_path: Path) -> None:
    data = json.loads((tree / INDEX_FILE).read_text(encoding="utf-8"))
    data["config"]["k1"] = 2
    (tmp_path / INDEX_FILE).write_text(json.dumps(data), encoding="utf-8")
    assert SearchIndex.load(tmp_path).config.k1 == 2.0


@pytest.mark.parametrize("name", [INDEX_FILE, "manifest.json"])
def test_a_fifo_in_place_of_the_index_or_manifest_is_an_error_not_a_hang(tree: Path, tmp_path: Path, name: str) -> None:
    # Before, `tooltree search` waited for ever for a writer to open the FIFO.
    edited = tmp_path / "tree"
    shutil.copytree(tree, edited)
    (edited / name).unlink()
    os.mkfifo(edited / name)
    done = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", "search", "--tree", str(edited), "list leads"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("pattern", ["\udcff", "(\udcff", "a\ud800b"])
def test_a_regex_holding_a_lone_surrogate_is_refused_naming_it(
    tree: Path, capsys: pytest.CaptureFixture[str], pattern: str
) -> None:
    # A byte that is not UTF-8 on a command line (Python gives it as a lone surrogate), or `\ud800` in a
    # script's JSON. Before: "tooltree: error: UnicodeEncodeError: …" and exit 1, and the script got no reason.
    with pytest.raises(SearchError, match=r"is not a character"):
        SearchIndex.load(tree).search(pattern, regex=True)
    assert main(["search", "--tree", str(tree), "--regex", pattern]) == 2
    bad = next(c for c in pattern if 0xD800 <= ord(c) <= 0xDFFF)
    assert capsys.readouterr().err == (
        f"tooltree: error: bad regex {pattern!r}: {bad!r} at {pattern.index(bad)} is not a character\n"
    )


def test_a_regex_holding_a_nul_or_a_line_break_is_echoed_with_it_escaped(tree: Path) -> None:
    # A script's or a client's search_tools(…, regex=True); a command line holds no NUL. Before: "No tools matched
    # 'ab'. (regex mode)", another pattern than the one searched, and RE2's reason held the NUL as it was.
    from tool_tree.search import search_tools

    assert search_tools(tree, "a\x00b", regex=True) == "No tools matched 'a\\x00b'. (regex mode)"
    assert search_tools(tree, "zz\nqq", regex=True) == "No tools matched 'zz\\nqq'. (regex mode)"
    with pytest.raises(SearchError) as refused:
        search_tools(tree, "(a\x00", regex=True)
    assert str(refused.value) == "bad regex '(a\\x00': missing ): (a\\x00"


def test_a_plain_query_holding_a_nul_or_a_control_character_is_echoed_with_it_escaped(tree: Path) -> None:
    # Before: "No tools matched 'ab'." for 'a\x00b', another query than the one searched: control and invisible
    # characters were dropped from the echo. White space is still one space, as the query's words are read.
    from tool_tree.search import search_tools

    assert search_tools(tree, "a\x00b") == "No tools matched 'a\\x00b'."
    assert search_tools(tree, " zz \t\n\u00a0 qq\x07\x1f ") == "No tools matched 'zz qq\\x07\\x1f'."
    assert search_tools(tree, "get\u200bweatherzz") == "No tools matched 'get\\u200bweatherzz'."
    with pytest.raises(SearchError) as refused:
        search_tools(tree, "?\x00 ?")
    assert str(refused.value).startswith("no word to search by in '?\\x00 ?' (punctuation")


@pytest.mark.parametrize(
    ("query", "regex", "message"),
    [
        (None, False, "query: expected a string, got NoneType"),
        (5, False, "query: expected a string, got int"),
        ("crm", "no", "regex: expected True or False, got str 'no'"),
    ],
)
def test_a_query_that_is_not_text_or_a_regex_flag_that_is_not_a_bool_is_a_type_error(
    tree: Path, query: Any, regex: Any, message: str
) -> None:
    # Before: AttributeError ('NoneType' object has no attribute 'strip'), and regex="no" searched as a regex.
    from tool_tree.search import search_records, search_tools

    for search in (search_tools, search_records):
        with pytest.raises(TypeError, match=message):
            search(tree, query, regex=regex)


@pytest.mark.parametrize("tree", [3, None, b"tree"])
def test_a_tree_that_is_not_a_path_is_a_type_error_naming_it(tree: Any) -> None:
    # Before: os.fspath's "expected str, bytes or os.PathLike object, not int", naming no argument.
    from tool_tree.search import search_records, search_tools

    for search in (search_tools, search_records):
        with pytest.raises(
            TypeError, match=f"^tree: expected the tree's folder as a str or a path, got {type(tree).__name__}$"
        ):
            search(tree, "crm")


def test_a_limit_too_long_to_print_or_a_huge_detail_is_refused_in_one_short_line(tree: Path) -> None:
    # Before: a limit of 5,000 digits raised Python's ValueError (its repr exceeds 4,300 digits), and a detail of a
    # million characters came back whole in the error (to a serve client, to the model).
    from tool_tree.search import search_tools

    with pytest.raises(SearchError, match=r"^limit must be an integer from 1 to 50, got \(an integer too long to"):
        search_tools(tree, "crm", limit=10**5000)
    with pytest.raises(SearchError) as refused:
        search_tools(tree, "crm", detail="a" * 1_000_000)
    assert str(refused.value).startswith("detail must be one of name, summary, full, got 'aaa")
    assert len(str(refused.value)) < 100
