"""What `generate-tree` says a regeneration changes for callers, on the changes real servers make to their schemas
and on trees users edited: each breaking change said, nothing else said breaking, no stub able to stop the run.

Before: a stub edited by hand and saved with ``\\r`` line ends stopped the run (exit 70, an IndexError); a limit
added or tightened (``maxLength``, ``pattern``, ``maximum``, ``format``, ``uniqueItems``) refused calls the server took
and was not said at all; a key of a parameter's TypedDict that became optional (or of a returned one that is now
always given) was said to break calls; a server of one stub was "(1 stubs)"; the README did not say what
``--json`` gives of each change.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

import generator.workers as workers
from generator.api_changes import ApiChange
from tests.generator.test_api_changes import block, snapshot_tree, tool
from tests.support import REPO
from tool_tree.tree import MANIFEST_FILE


def changes(tmp: Path, tools: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> list[tuple[bool, str]]:
    """What ``--check --json`` says a run from a snapshot listing ``tools`` would change: (breaking, line) each."""
    capsys.readouterr()
    assert snapshot_tree(tmp, tools, "--check", "--json") == 1
    return [(c["breaking"], c["text"]) for c in json.loads(capsys.readouterr().out)["api_changes"]]


def test_a_limit_added_or_tightened_breaks_calls_and_one_loosened_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # As fetch's and filesystem's schemas write them: the stub's signature reads the same, the server refuses calls.
    v1 = {
        "url": {"type": "string", "format": "uri"},
        "max_length": {"type": "integer", "maximum": 100},
        "paths": {"type": "array", "items": {"type": "string"}},
        "name": {"type": "string", "description": "Who it is. Maximum: 5."},  # a description's words are no limit
        "ratio": {"enum": [1.5, 2.5]},
        "start": {"type": "integer", "minimum": 0},
    }
    snapshot_tree(tmp_path, [tool("fetch", v1)])
    v2 = {
        **v1,
        "url": {"type": "string", "format": "email"},
        "max_length": {"type": "integer", "maximum": 10},
        "paths": {**v1["paths"], "uniqueItems": True},
        "name": {**v1["name"], "pattern": "^[a-z. ]+$", "maxLength": 8},
        "ratio": {"enum": [1.5, 2.5, 3.5]},
        "start": {"type": "integer"},
    }
    assert changes(tmp_path, [tool("fetch", v2)], capsys) == [
        (True, "svc.fetch: parameter `max_length`: Maximum: 100 → Maximum: 10"),
        (True, "svc.fetch: parameter `name`: no max length → Max length: 8"),
        (True, "svc.fetch: parameter `name`: no pattern → Pattern: ^[a-z. ]+$"),
        (True, "svc.fetch: parameter `paths`: items may repeat → items must be unique"),
        (True, "svc.fetch: parameter `url`: Format: uri → Format: email"),
        (False, "svc.fetch: parameter `ratio`: One of: 1.5, 2.5 → One of: 1.5, 2.5, 3.5 (wider)"),
        (False, "svc.fetch: parameter `start`: Minimum: 0 → no minimum (wider)"),
    ]
    # a bound moved out, or one that was not there and is not now, is no change of a caller's
    v3 = {**v1, "max_length": {"type": "integer", "maximum": 1000, "description": "How much."}}
    assert changes(tmp_path, [tool("fetch", v3)], capsys) == [
        (False, "svc.fetch: parameter `max_length`: Maximum: 100 → Maximum: 1000 (wider)")
    ]


def test_a_key_a_caller_may_now_leave_out_or_a_reader_now_always_gets_breaks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # memory's create_relations: `relations` items {from, to, relationType}, all required, and the same returned.
    item = {
        "type": "object",
        "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
        "required": ["from", "to"],
    }
    listed = {
        "type": "object",
        "properties": {"relations": {"type": "array", "items": item}},
        "required": ["relations"],
    }

    def create(sent: list[str], returned: list[str]) -> dict[str, Any]:
        relations = {"type": "array", "items": {**item, "required": sent}}
        out = {**listed, "properties": {"relations": {"type": "array", "items": {**item, "required": returned}}}}
        return {**tool("create_relations", {"relations": relations}, ("relations",)), "outputSchema": out}

    snapshot_tree(tmp_path, [create(["from", "to"], ["to"])])
    assert changes(tmp_path, [create(["to"], ["from", "to"])], capsys) == [
        (False, "svc.create_relations: parameter `relations`: list[RelationsItem]: RelationsItem.from now optional"),
        (False, "svc.create_relations: returns CreateRelationsOutput: RelationsItem_2.from now always given"),
    ]
    # the other way round breaks: a caller must send it, a reader may not get it
    assert changes(tmp_path, [create(["from", "to"], [])], capsys) == [
        (True, "svc.create_relations: returns CreateRelationsOutput: RelationsItem_2.to: str → NotRequired[str]"),
    ]
    snapshot_tree(tmp_path, [create(["to"], ["to"])])
    now_required = "RelationsItem.from: NotRequired[str] → str"
    assert changes(tmp_path, [create(["from", "to"], ["to"])], capsys) == [
        (True, "svc.create_relations: parameter `relations`: list[RelationsItem]: " + now_required),
    ]


def test_a_key_that_is_no_identifier_is_named_escaped_as_a_subscript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "GetOutput.x removed" of the key x\u200b while x stayed, "GetOutput.cd" of c\x1bd.
    def get(keys: list[str]) -> dict[str, Any]:
        out = {"type": "object", "properties": {k: {"type": "string"} for k in keys}, "required": keys}
        return {**tool("get", {"q": {"type": "string"}}, ("q",)), "outputSchema": out}

    snapshot_tree(tmp_path, [get(["x", "x\u200b", "a b", "c\x1bd"])])
    removed = "GetOutput['x\\u200b'] removed; GetOutput['a b'] removed; GetOutput['c\\x1bd'] removed"
    assert changes(tmp_path, [get(["x"])], capsys) == [(True, f"svc.get: returns GetOutput: {removed}")]


def test_a_stub_edited_by_hand_with_other_line_ends_is_read_as_python_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = [tool(name, {"x": {"type": "string"}}) for name in ("cr", "stray", "big", "broken")]
    snapshot_tree(tmp_path, tools)
    stubs = tmp_path / "tree" / "servers" / "svc"
    cr = stubs / "cr.py"  # saved by an editor that ends lines with \r alone
    cr.write_bytes(cr.read_bytes().replace(b"\n", b"\r"))
    stray = stubs / "stray.py"  # a \r pasted into its docstring: Python starts a line there
    stray.write_bytes(stray.read_bytes().replace(b"Does stray.", b"Does\rstray.", 1))
    (stubs / "big.py").write_bytes((stubs / "big.py").read_bytes() + b"#" * (8 << 20) + b"\n")
    (stubs / "broken.py").write_bytes(b"def broken(*, x: str\x00 -> (:\n")
    changed = [tool(name, {"x": {"type": "integer"}}) for name in ("cr", "stray", "big", "broken")]
    capsys.readouterr()
    assert snapshot_tree(tmp_path, changed) == 0  # was 70: IndexError
    err = capsys.readouterr().err
    # the stubs it can read say their change; one too big to read or that does not parse says none
    assert block(err) == [
        "this run changed the stubs' API: 2 change(s) break calls scripts make, 0 break nothing:",
        "  svc.cr: parameter `x`: str → int",
        "  svc.stray: parameter `x`: str → int",
    ]
    assert "warning: " in err and ".tooltree-kept" in err  # the edited stubs were copied aside, as before


def test_a_server_of_one_stub_is_counted_in_the_singular(tmp_path: Path) -> None:
    assert ApiChange("svc", "", "svc", "server removed", True, old="1").text == "svc: server removed (1 stub)"
    assert ApiChange("svc", "", "svc", "server added", False, new="3").text == "svc: server added (3 stubs)"


def test_the_readme_says_what_json_gives_of_each_change() -> None:
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    (paragraph,) = re.findall(r"A server that changes its tools .*? in a warning\.", readme)
    keys = ApiChange("s", "t", "s.t", "removed", True).to_json()
    assert [k for k in keys if f"`{k}`" not in paragraph] == []


def test_a_partial_or_failed_run_says_nothing_of_the_servers_it_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for name in ("a", "b"):
        snap = {"server": name, "info": {}, "tools": [tool("t", {"x": {"type": "string"}})]}
        (snaps / f"{name}.json").write_text(json.dumps(snap), encoding="utf-8")
    out = tmp_path / "tree"
    config = tmp_path / "tooltree.yaml"
    config.write_text("servers:\n  a:\n    command: /nonexistent/a\n  b:\n    command: /nonexistent/b\n", "utf-8")
    base = ["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]
    from tooltree_cli.main import main

    assert main([*base, "--from-snapshot", str(snaps)]) == 0
    # `b` alone, from a snapshot where it changed: `a` is kept, and said nothing of
    b = {"server": "b", "info": {}, "tools": [tool("t", {"x": {"type": "integer"}})]}
    (snaps / "b.json").write_text(json.dumps(b), encoding="utf-8")
    capsys.readouterr()
    assert main([*base, "--from-snapshot", str(snaps), "--server", "b", "--json"]) == 0
    assert [c["text"] for c in json.loads(capsys.readouterr().out)["api_changes"]] == ["b.t: parameter `x`: str → int"]
    # both servers fail to start: their stubs are kept, nothing is said removed
    before = (out / MANIFEST_FILE).read_bytes()
    assert main([*base, "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["api_changes"] == []
    assert (out / MANIFEST_FILE).read_bytes() == before


def test_comparing_many_stubs_in_a_thread_never_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    # `tooltree serve` regenerates in a thread: forking a process of several threads may deadlock the child.
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("forked from a process with several threads")

    monkeypatch.setattr(workers, "ProcessPoolExecutor", refused)
    jobs = list(range(workers.PARALLEL_THRESHOLD + 10))
    got: list[int] = []
    thread = threading.Thread(target=lambda: got.extend(workers.forked_map(abs, jobs)))
    thread.start()
    thread.join(timeout=60)
    assert got == jobs


def test_a_tool_the_server_renamed_under_the_same_stub_name_breaks_nothing_and_is_said_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `get-record` and `get.record` are both the stub `get_record`: a script's `svc.get_record(id=…)` works before and
    # after (the stub sends the new name). Before: "removed (tool 'get-record' is no longer in the tree)", breaking,
    # and "added".
    params = {"id": {"type": "string"}, "full": {"type": "boolean"}}
    snapshot_tree(tmp_path, [tool("get-record", params, ("id",)), tool("fetchDocument", {"url": {"type": "string"}})])
    renamed = [tool("get.record", params, ("id",)), tool("fetchDocument", {"url": {"type": "string"}})]
    assert changes(tmp_path, renamed, capsys) == [
        (False, "svc.get_record: the server's tool 'get-record' is now 'get.record' (the stub keeps its name and "
                "sends the new one)"),
    ]  # fmt: skip
    # Its signature is still compared: a parameter made required in the same release breaks calls, and is said.
    changed = [tool("get_record", params, ("id", "full")), renamed[1]]
    assert changes(tmp_path, changed, capsys) == [
        (True, "svc.get_record: parameter `full` is now required"),
        (False, "svc.get_record: the server's tool 'get-record' is now 'get_record' (the stub keeps its name and "
                "sends the new one)"),
    ]  # fmt: skip
    # A rename that changes the stub's name is what a caller sees: the old import gone, a new one.
    assert changes(tmp_path, [tool("read-record", params, ("id",)), renamed[1]], capsys) == [
        (True, "svc.get_record: removed (tool 'get-record' is no longer in the tree)"),
        (False, "svc.read_record: added"),
    ]
    # Written, the stub calls the new name.
    capsys.readouterr()
    assert snapshot_tree(tmp_path, renamed) == 0
    assert block(capsys.readouterr().err)[0].endswith("0 change(s) break calls scripts make, 1 break nothing")
    stub = (tmp_path / "tree" / "servers" / "svc" / "get_record.py").read_text(encoding="utf-8")
    assert '"get.record"' in stub and "get-record" not in stub
    manifest = json.loads((tmp_path / "tree" / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert {t["tool"] for t in manifest["tools"]} == {"get.record", "fetchDocument"}
