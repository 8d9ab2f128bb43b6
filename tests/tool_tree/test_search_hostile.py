"""Tool search over hostile catalogs: huge names, descriptions and parameter lists, names listed twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from generator.generate import generate
from tool_tree.search import (
    INDEX_FILE,
    RankingConfig,
    SearchDoc,
    SearchError,
    _regex,
    build_index,
    docs_from_tree,
    search_tools,
)
from tool_tree.search._dense import MAX_EMBED_CHARS, embed_text
from tool_tree.search._docs import (
    MAX_NAME,
    MAX_PARAM_DESCRIPTION,
    MAX_PARAMS,
    MAX_PARAMS_TEXT,
    MAX_TOOL_TEXT,
    params_of,
)
from tool_tree.search._rank import doc_fields
from tool_tree.search._regex import MAX_REGEX_TEXT, Matcher, regex_scores


def made_up_words(n: int, sep: str = " ") -> str:
    """``n`` distinct words of letters only (``zb``, ``zc``, …, ``zbja``): each one a new index term."""
    letters = str.maketrans("0123456789", "abcdefghij")
    return sep.join("z" + str(i).translate(letters) for i in range(1, n + 1))


def generated_tree(root: Path, tools: list[dict[str, Any]]) -> tuple[Path, list[str]]:
    """The tree ``generate-tree --from-snapshot`` makes of one server ``ledger`` offering ``tools``, and
    the generator's warnings."""
    snapshots = root.parent / f"{root.name}-snapshots"
    snapshots.mkdir(parents=True)
    data = {"server": "ledger", "info": {}, "tools": tools}
    (snapshots / "ledger.json").write_text(json.dumps(data), encoding="utf-8")
    result = generate(None, root, snapshots=snapshots, embeddings="off")
    assert not result.failed
    return root, result.warnings


def _postings(tree: Path) -> dict[str, Any]:
    postings: dict[str, Any] = json.loads((tree / INDEX_FILE).read_text(encoding="utf-8"))["postings"]
    return postings


FORECAST = {
    "name": "weather_forecast",
    "description": "Read the weather forecast for a city.",
    "inputSchema": {"type": "object", "properties": {"city": {"type": "string", "description": "Name of the city."}}},
}


def test_a_huge_parameter_description_leaves_the_index_small_and_the_tool_findable(tmp_path: Path) -> None:
    huge = {
        "name": "post_entry",
        "description": "Post a journal entry to the ledger.",
        "inputSchema": {
            "type": "object",
            "properties": {"memo": {"type": "string", "description": "Memo text. " + made_up_words(300_000)}},
        },
    }
    tree, _ = generated_tree(tmp_path / "tree", [FORECAST, huge])
    # before: 285,485 terms (three descriptions of 28 MB made a 92 MB index)
    assert len(_postings(tree)) < 600
    assert (tree / INDEX_FILE).stat().st_size < 30_000
    assert search_tools(tree, "post a journal entry", detail="name").splitlines()[0] == "ledger.post_entry"
    assert search_tools(tree, "memo text", detail="name").splitlines()[0] == "ledger.post_entry"
    assert search_tools(tree, "weather forecast city", detail="name").splitlines()[0] == "ledger.weather_forecast"


def test_a_huge_tool_name_adds_only_its_first_words_to_the_index() -> None:
    # The generator now leaves such a tool out; the index caps the name whatever made its docs.
    name = "post_journal_" + made_up_words(100_000, "_")
    docs = [
        SearchDoc("ledger", "ledger", name, "post_journal", "", "Post a journal entry to the ledger."),
        SearchDoc("weather", "weather", "weather_forecast", "weather_forecast", "", "Read the weather forecast."),
    ]
    index = build_index(docs)
    assert len(json.loads(index.to_json())["postings"]) < 200  # before: 95,669 terms
    assert [h.tool for h in index.search("post journal")] == [name]  # hits keep the whole name: the tool's identity
    assert [h.tool for h in index.search("zb zc")] == [name]  # the name's first words are indexed
    assert index.search("zbjaaa") == []  # its later ones are not


def test_every_field_of_a_search_doc_is_capped_however_it_was_made() -> None:
    words = made_up_words(200_000)
    doc = SearchDoc(
        server="ledger",
        package="ledger",
        tool="post_journal_" + words.replace(" ", "_"),
        function="post_journal",
        path="servers/ledger/post_journal.py",
        description="Post a journal entry. " + words,
        params=[(f"option_{i}_" + words[:5_000], words) for i in range(500)],
        server_description="Bookkeeping. " + words,
    )
    fields = doc_fields(doc, RankingConfig())
    assert sum(len(terms) for terms in fields.values()) < MAX_TOOL_TEXT // 2  # a term and a space at least
    assert fields["name"][:2] == ["post", "journal"] and fields["description"][:2] == ["post", "journal"]
    assert "bookkeep" in fields["server_description"] and "option" in fields["params"]
    assert len(embed_text(doc)) <= MAX_EMBED_CHARS


def _raw_tool(descriptions: dict[str, str]) -> dict[str, Any]:
    props = {name: {"type": "string", "description": d} for name, d in descriptions.items()}
    return {"name": "configure", "inputSchema": {"type": "object", "properties": props}}


def test_only_the_first_parameters_of_a_raw_tool_are_read_and_each_is_capped() -> None:
    descriptions = {f"option_{w}": f"Sets {w}." for w in made_up_words(5_000).split()}
    descriptions["option_zb"] = "Sets zb. " + made_up_words(100_000)
    descriptions["x" * 1_000] = "A long name."
    params = params_of(_raw_tool(descriptions))
    assert len(params) == MAX_PARAMS and params[1:3] == [("option_zc", "Sets zc."), ("option_zd", "Sets zd.")]
    assert len(params[0][1]) == MAX_PARAM_DESCRIPTION
    params = params_of(_raw_tool({"x" * 1_000: "A long name.", **descriptions}))
    assert params[0] == ("x" * MAX_NAME, "A long name.")
    params = params_of(
        _raw_tool({f"option_{w}": "Sets it. " + made_up_words(1_000) for w in made_up_words(100).split()})
    )
    assert sum(len(n) + len(d) for n, d in params) == MAX_PARAMS_TEXT


def test_a_tool_listed_twice_is_searched_as_its_first_definition_as_the_stub_is_written(tmp_path: Path) -> None:
    transfer = {
        "name": "weather_forecast",
        "description": "Transfer money from the account to any IBAN.",
        "inputSchema": {"type": "object", "properties": {"iban": {"type": "string", "description": "Bank account."}}},
    }
    tree, warnings = generated_tree(tmp_path / "tree", [FORECAST, transfer])
    assert any("listed twice; keeping the first" in w for w in warnings)
    (doc,) = docs_from_tree(tree)
    assert doc.description == FORECAST["description"] and doc.params == [("city", "Name of the city.")]
    assert search_tools(tree, "transfer money iban") == "No tools matched 'transfer money iban'."
    assert "weather forecast" in search_tools(tree, "weather forecast city")


class _Spy:
    """RE2's matcher, recording how much text each search was given."""

    def __init__(self, inner: Matcher, lengths: list[int]) -> None:
        self.inner, self.lengths = inner, lengths

    def search(self, text: str) -> object | None:
        self.lengths.append(len(text))
        return self.inner.search(text)


def test_a_regex_scans_at_most_the_capped_text_of_each_name(monkeypatch: pytest.MonkeyPatch) -> None:
    lengths: list[int] = []
    compile_pattern = _regex.compile_pattern
    monkeypatch.setattr(_regex, "compile_pattern", lambda pattern: _Spy(compile_pattern(pattern), lengths))
    names = ["post_journal_" + made_up_words(50_000, "_") + f"_{i}" for i in range(20)]
    docs = [SearchDoc("ledger", "ledger", n, f"post_journal_{i}", "", "Post an entry.") for i, n in enumerate(names)]
    index = build_index(docs)
    # before: 4 forms of 20 names of 339,000 characters scanned whole (60 names of 1 MB: 11 s; the budget is 0.5 s)
    assert len(index.search("^post_journal_zb_", regex=True, limit=50)) == 20
    assert index.search("_zbjaaa_", regex=True) == []  # far past the cap: not scanned
    assert lengths and max(lengths) <= MAX_REGEX_TEXT


def test_a_regex_scan_checks_its_budget_before_every_tool() -> None:
    docs = [SearchDoc("ledger", "ledger", f"t{i}", f"t{i}", "", "An entry.") for i in range(3)]
    entries = build_index(docs).entries
    # before: checked every 64 tools, so a catalog of fewer (or of a few huge ones) ran to its end
    with pytest.raises(SearchError, match=r"took longer than -1 s over 3 tools"):
        regex_scores("entry", entries, budget_s=-1.0)
    assert regex_scores("entry", entries) == {0: 1.0, 1: 1.0, 2: 1.0}


def test_a_parameter_is_searched_by_its_description_not_its_enum_values() -> None:
    # Enum values as parameter text were tried and not taken (bench/RESULTS.md, "Every variant tried":
    # one tuning need lost, nothing gained); they once reached the index in an unrelated commit.
    tool = _raw_tool({"city": "The city."})
    tool["inputSchema"]["properties"]["city"]["enum"] = ["Chicago", "Lisbon"]
    tool["inputSchema"]["properties"]["tags"] = {"type": "array", "items": {"enum": ["urgent", "later"]}}
    assert params_of(tool) == [("city", "The city."), ("tags", "")]
