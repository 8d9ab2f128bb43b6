"""`tooltree search` (`tooltree_cli.search_cmd`): what it prints and its exit statuses, on the test catalog's tree."""

from __future__ import annotations

import errno
import io
import os
import re
from pathlib import Path

import pytest

from tests.support import install_tiny_model
from tests.tool_tree.test_search import write_tree
from tooltree_cli.main import main


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("catalog") / "tree")


class _FullDisk(io.StringIO):
    """A standard output on a full disk (`tooltree search … > out.txt`)."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize(("where", "as_json"), [("full_disk", False), ("full_disk", True), ("ascii_only", False)])
def test_results_that_cannot_be_printed_say_why_in_one_line_and_exit_4_as_exec_and_agent(
    tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, where: str, as_json: bool
) -> None:
    # Before: "tooltree: error: OSError: [Errno 28] No space left on device (unexpected: run with --debug for the
    # traceback)", exit 70, as if tooltree had a bug.
    out = _FullDisk() if where == "full_disk" else io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr("sys.stdout", out)
    argv = ["search", "weather forecast", "--tree", str(tree), *(["--json"] if as_json else [])]
    assert main(argv) == 4
    err = capsys.readouterr().err
    why = "No space left on device" if where == "full_disk" else "'ascii' codec can't encode"
    assert err.startswith(f"tooltree: error: the results could not be printed: {why}"), err
    assert len(err.splitlines()) == 1 and "unexpected" not in err
    if where == "ascii_only":  # what to do (before: the codec's words alone)
        assert "(standard output takes only ascii: set PYTHONIOENCODING=utf-8, or a UTF-8 locale, to print it)" in err


@pytest.mark.parametrize("mode", [[], ["--regex"], ["--json"]])
def test_an_unknown_embeddings_setting_is_refused_naming_it_on_an_index_without_vectors(
    tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, mode: list[str]
) -> None:
    # Before: refused only when the index stored vectors; here it was ignored and the search ran.
    from tool_tree.search import EMBEDDINGS_ENV, SearchError, SearchIndex, search_tools

    assert SearchIndex.load(tree).dense is None
    monkeypatch.setenv(EMBEDDINGS_ENV, "bogus")
    assert main(["search", "weather forecast", "--tree", str(tree), *mode]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", "tooltree: error: TOOLTREE_SEARCH_EMBEDDINGS=bogus: expected 1 (on), 0 (off) or auto\n")
    with pytest.raises(SearchError, match=r"^TOOLTREE_SEARCH_EMBEDDINGS=bogus: expected"):
        search_tools(tree, "weather forecast")  # what a script's and the agent's search_tools run


@pytest.mark.parametrize("value", ["false", "no", "2"])
def test_an_unknown_static_embeddings_setting_is_refused_naming_it(
    tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # Before: any value but 0 or off kept WordLlama on, unsaid (TOOLTREE_EMBEDDING_STATIC=false embedded with it).
    from tool_tree.search import EMBEDDINGS_ENV, SearchError, search_tools

    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    monkeypatch.setenv("TOOLTREE_EMBEDDING_STATIC", value)
    assert main(["search", "weather forecast", "--tree", str(tree)]) == 2
    said = f"TOOLTREE_EMBEDDING_STATIC={value}: expected 0 (off: MiniLM alone) or 1 (on, the default)"
    assert capsys.readouterr() == ("", f"tooltree: error: {said}\n")
    with pytest.raises(SearchError, match=f"^{re.escape(said)}$"):
        search_tools(tree, "weather forecast")
    for known in ("0", "1", "OFF", "on", ""):
        monkeypatch.setenv("TOOLTREE_EMBEDDING_STATIC", known)
        assert main(["search", "weather forecast", "--tree", str(tree)]) == 0
    monkeypatch.setenv("TOOLTREE_EMBEDDING_STATIC", "false")
    monkeypatch.setenv(EMBEDDINGS_ENV, "0")  # no embeddings: the setting is not read
    assert main(["search", "weather forecast", "--tree", str(tree)]) == 0


@pytest.mark.parametrize("embeddings", ["off", "on"])
@pytest.mark.parametrize("query", ["???", "the of and", "— it is —"])
def test_a_query_with_no_word_to_search_by_says_so_with_or_without_embeddings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, embeddings: str, query: str
) -> None:
    # Before: with embeddings, five guesses "the nearest by meaning" of nothing; without, "No tools matched.", exit 0.
    from tool_tree.search import EMBEDDINGS_ENV, SearchError, search_records, search_tools

    if embeddings == "on":
        install_tiny_model(tmp_path / "model", ["weather", "forecast", "##s"], monkeypatch)
        monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    words = write_tree(tmp_path / "tree", embeddings=embeddings)
    said = f"no word to search by in {query!r} (punctuation and words as common as 'the' or 'get' are left out)"
    if query == "???":  # of symbols alone: looked for in the tools' names too (test_search_symbol_names.py)
        said += ", and no tool's name holds it"
    capsys.readouterr()
    for json_mode in ([], ["--json"]):
        assert main(["search", query, "--tree", str(words), *json_mode]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"tooltree: error: {said}: say what the tool should do"), err
    for search in (search_tools, search_records):  # a script's, the agent's and serve's search_tools
        with pytest.raises(SearchError, match=re.escape(said)):
            search(words, query)
    assert search_tools(words, "weather forecast", detail="name").startswith("weather.get_forecast\n")


def test_a_query_naming_a_tool_of_common_words_alone_still_finds_it() -> None:
    from tool_tree.search import SearchDoc, build_index

    doc = SearchDoc(server="kv", package="kv", tool="get", function="get", path="servers/kv/get.py", description="")
    index = build_index([doc])
    assert [h.qualified_name for h in index.search("get")] == ["kv.get"]
    assert [h.qualified_name for h in index.search("kv.get")] == ["kv.get"]


def test_a_closed_standard_output_takes_the_results_as_every_command_s_does(
    tree: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tooltree search … >&-`: Python's sys.stdout is None. Before: "AttributeError: 'NoneType' object has no
    # attribute 'write' (unexpected …)", exit 70.
    monkeypatch.setattr("sys.stdout", None)
    assert main(["search", "weather forecast", "--tree", str(tree)]) == 0
    assert capsys.readouterr().err == ""
