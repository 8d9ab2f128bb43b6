"""`generate-tree` (and `--check`) say what a regeneration changes for the scripts that call the stubs.

Before, a server that removed a tool, removed a parameter, made one required or narrowed its type changed the stubs'
Python API without a word: the user learnt it from the scripts that failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import generator.api_changes as api_changes
import generator.stub_signature as stub_signature
from generator.generate import generate
from tests.support import REPO
from tool_tree.config import load_config
from tool_tree.tree import MANIFEST_FILE, content_hash
from tooltree_cli import serve_cmd
from tooltree_cli.main import main

EVOLVING = REPO / "tests" / "servers" / "evolving_server.py"

BREAKING = [
    "  crm.archive_record: new required parameter `reason`",
    "  crm.delete_record: removed (tool 'delete_record' is no longer in the tree)",
    "  crm.update_record: parameter `note` removed",
    "  crm.update_record: parameter `status` is now required",
    "  crm.update_record: parameter `limit`: int → Literal[10, 20]",
]
NOT_BREAKING = (
    "  not breaking: crm.export_records: added; crm.update_record: new optional parameter `tags`; "
    'crm.update_record: parameter `mode`: Literal["a", "b"] → Literal["a", "b", "c"] (wider)'
)


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A config of the evolving server as ``crm``, the file that says its release (1), and the tree of release 1."""
    version = tmp_path / "version"
    version.write_text("1", encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  crm:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(version))}]\n    timeout: 30\n",
        encoding="utf-8",
    )
    out = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    return config, version, out


def run(config: Path, out: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def block(err: str) -> list[str]:
    """The lines of the API summary in ``err``."""
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if "the stubs' API:" in line)
    return lines[start : next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))]


def test_check_and_a_run_say_per_stub_what_breaks_callers(
    project: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, version, out = project
    version.write_text("2", encoding="utf-8")
    before = (out / MANIFEST_FILE).read_bytes()
    code, _, err = run(config, out, capsys, "--check")
    assert code == 1
    assert block(err) == [
        "a run would change the stubs' API: 5 change(s) break calls scripts make, 3 break nothing:",
        *BREAKING,
        NOT_BREAKING,
    ]
    assert (out / MANIFEST_FILE).read_bytes() == before  # --check wrote nothing
    # --check --json lists each change, marked breaking or not
    code, stdout, _ = run(config, out, capsys, "--check", "--json")
    changes = json.loads(stdout)["api_changes"]
    assert code == 1 and [c["text"] for c in changes if c["breaking"]] == [line.strip() for line in BREAKING]
    limit = next(c for c in changes if c["parameter"] == "limit")
    assert limit == {
        "server": "crm",
        "tool": "update_record",
        "stub": "crm.update_record",
        "change": "type changed",
        "breaking": True,
        "parameter": "limit",
        "old": "int",
        "new": "Literal[10, 20]",
        "text": "crm.update_record: parameter `limit`: int → Literal[10, 20]",
    }
    assert sorted(c["change"] for c in changes if not c["breaking"]) == ["added", "new optional", "type widened"]
    # the run that writes them says the same, once (not again among the warnings)
    code, _, err = run(config, out, capsys)
    assert code == 0
    assert block(err) == [
        "this run changed the stubs' API: 5 change(s) break calls scripts make, 3 break nothing:",
        *BREAKING,
        NOT_BREAKING,
    ]
    assert "warning:" not in err
    # and the next run, nothing changed, says nothing of it
    code, _, err = run(config, out, capsys)
    assert code == 0 and "the stubs' API" not in err


def test_changes_that_break_no_call_are_not_reported_as_breaking(
    project: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, version, out = project
    version.write_text("3", encoding="utf-8")
    code, stdout, _ = run(config, out, capsys, "--check", "--json")
    changes = json.loads(stdout)["api_changes"]
    assert code == 1 and [c["text"] for c in changes] == [
        "crm.export_records: added",
        "crm.update_record: new optional parameter `tags`",
        'crm.update_record: parameter `mode`: Literal["a", "b"] → Literal["a", "b", "c"] (wider)',
    ]
    assert not any(c["breaking"] for c in changes)
    # get_record's stub changed (its description), its API did not: not a change
    assert not any(c["tool"] == "get_record" for c in changes)
    code, _, err = run(config, out, capsys)
    assert code == 0 and block(err) == [
        "this run changed the stubs' API: 0 change(s) break calls scripts make, 3 break nothing",
        NOT_BREAKING,
    ]
    assert "warning:" not in err


def test_the_warnings_of_a_run_carry_one_line_counting_breaking_changes(
    project: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # `tooltree serve` logs the warnings of each refresh of the tree: this line is what it says of them.
    config, version, out = project
    version.write_text("2", encoding="utf-8")
    result = generate(load_config(config), out, embeddings="off")
    (line,) = [w for w in result.warnings if "break calls" in w]
    assert line == (
        "5 change(s) to the stubs break calls scripts make (crm.archive_record: new required parameter `reason` and "
        "4 more); `tooltree generate-tree --check --json` lists such changes before a run writes them"
    )
    assert len(result.api_changes) == 8
    # as `tooltree serve` logs a refresh of the tree (its warnings, one line each)
    version.write_text("1", encoding="utf-8")
    capsys.readouterr()
    code, read = serve_cmd._regenerate(load_config(config), out)
    assert code == 0 and read is not None  # the tree changed: its new manifest is served
    said = capsys.readouterr().err
    assert (
        "tooltree serve: warning: 4 change(s) to the stubs break calls scripts make (crm.archive_record: parameter "
        "`reason` removed and 3 more); `tooltree generate-tree --check --json` lists such changes before a run writes "
        "them\n"
    ) in said


def test_a_server_removed_from_the_config_is_one_change(
    project: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, _, out = project
    text = config.read_text(encoding="utf-8")
    config.write_text(text + text.replace("servers:\n  crm:", "  billing:", 1), encoding="utf-8")
    code, _, err = run(config, out, capsys)
    assert code == 0 and block(err) == [
        "this run changed the stubs' API: 0 change(s) break calls scripts make, 1 break nothing",
        "  not breaking: billing: server added (4 stubs)",
    ]
    config.write_text(text.replace("crm:", "billing:", 1), encoding="utf-8")
    code, _, err = run(config, out, capsys)
    assert code == 0 and block(err)[:2] == [
        "this run changed the stubs' API: 1 change(s) break calls scripts make, 0 break nothing:",
        "  crm: server removed (4 stubs)",
    ]


# ── from snapshots: what a real server would not easily do ─────────────────────────────────


def snapshot_tree(tmp: Path, tools: list[dict[str, Any]], *args: str) -> int:
    """Generate ``tmp/tree`` from a snapshot of server ``svc`` listing ``tools``; the exit code."""
    snaps = tmp / "snaps"
    snaps.mkdir(exist_ok=True)
    (snaps / "svc.json").write_text(json.dumps({"server": "svc", "info": {}, "tools": tools}), encoding="utf-8")
    out = tmp / "tree"
    code = main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off", *args])
    return code


def tool(name: str, properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties or {}, "required": list(required)}
    return {"name": name, "description": f"Does {name}.", "inputSchema": schema}


def test_a_parameter_an_older_tree_named_format_underscore_reads_as_renamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An older release named the parameter `format_` and its manifest records no renamed parameter: this one names
    # it `format`, which breaks `render(format_=…)`.
    snapshot_tree(tmp_path, [tool("render", {"format": {"type": "string"}, "title": {"type": "string"}})])
    out = tmp_path / "tree"
    stub = out / "servers/svc/render.py"
    old = (
        stub.read_text(encoding="utf-8").replace("format:", "format_:").replace('"format": format', '"format": format_')
    )
    stub.write_text(old, encoding="utf-8")
    manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    manifest["generator"] = "0.0.1+older"
    manifest["tools"][0]["stub_hash"] = content_hash(old.encode())
    (out / MANIFEST_FILE).write_text(json.dumps(manifest), encoding="utf-8")
    capsys.readouterr()
    assert snapshot_tree(tmp_path, [tool("render", {"format": {"type": "string"}, "title": {"type": "string"}})]) == 0
    err = capsys.readouterr().err
    assert block(err) == [
        "this run changed the stubs' API: 1 change(s) break calls scripts make, 0 break nothing:",
        "  svc.render: parameter `format_` renamed `format`",
    ]


def test_a_stub_that_took_another_name_reads_as_renamed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot_tree(tmp_path, [tool("get list")])
    out = tmp_path / "tree"
    # The tree as an older naming left it: the tool's stub was `list`, a name this release does not give (a builtin).
    stub = (out / "servers/svc/get_list.py").read_text(encoding="utf-8").replace("def get_list(", "def list(")
    (out / "servers/svc/get_list.py").unlink()
    (out / "servers/svc/list.py").write_text(stub, encoding="utf-8")
    data = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    data["tools"][0].update(function="list", path="servers/svc/list.py", stub_hash=content_hash(stub.encode()))
    (out / MANIFEST_FILE).write_text(json.dumps(data), encoding="utf-8")
    capsys.readouterr()
    assert snapshot_tree(tmp_path, [tool("get list")], "--check", "--json") == 1
    changes = json.loads(capsys.readouterr().out)["api_changes"]
    assert [c["text"] for c in changes] == ["svc.list: renamed svc.get_list"]


def test_types_of_typed_dicts_returns_and_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    person = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
    open_ = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": True}
    v1 = [
        tool("who", {"person": person}),
        tool("look", {"q": {"type": "string"}, "n": {"type": "integer"}}, ("q",)),
        {**tool("find"), "inputSchema": open_},
    ]
    snapshot_tree(tmp_path, v1)
    wider = {**person, "properties": {**person["properties"], "email": {"type": "string"}}}
    v2 = [
        tool("who", {"person": {**wider, "required": ["email"]}}),
        tool("look", {"q": {"type": ["string", "null"]}, "n": {"type": "integer"}}),  # q: optional, and wider
        {**tool("find"), "inputSchema": {**open_, "additionalProperties": False}},
    ]
    capsys.readouterr()
    assert snapshot_tree(tmp_path, v2, "--check", "--json") == 1
    changes = json.loads(capsys.readouterr().out)["api_changes"]
    assert [(c["text"], c["breaking"]) for c in changes] == [
        ("svc.find: no longer takes other keyword arguments (**arguments)", True),
        ("svc.who: parameter `person`: Person: Person.email added (required)", True),
        ("svc.look: parameter `q` is now optional", False),
        ("svc.look: parameter `q`: str → str | None (wider)", False),
    ]
    # a key that is not required breaks no call
    v3 = [tool("who", {"person": wider}), *v1[1:]]
    assert snapshot_tree(tmp_path, v3, "--check", "--json") == 1
    changes = json.loads(capsys.readouterr().out)["api_changes"]
    assert [(c["text"], c["breaking"]) for c in changes] == [
        ("svc.who: parameter `person`: Person: Person.email added", False)
    ]


def test_hostile_text_is_cleaned_and_the_list_is_capped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = "wipe\x1b[2J\u202edisk"
    many = [tool(f"t{i:02}") for i in range(30)]
    mode = {"mode": {"enum": ["a\x1b]0;pwned\x07", "b"]}}
    snapshot_tree(tmp_path, [tool(evil), tool("pick", mode), *many])
    capsys.readouterr()
    assert snapshot_tree(tmp_path, [tool("pick", {"mode": {"enum": ["b"]}})]) == 0
    err = capsys.readouterr().err
    lines = block(err)
    assert lines[0] == "this run changed the stubs' API: 32 change(s) break calls scripts make, 0 break nothing:"
    assert len(lines) == 1 + api_changes.BREAKING_SHOWN + 1
    assert lines[-1] == "  … and 12 more (--json lists them all)"
    assert "\x1b" not in err and "\u202e" not in err and "\x07" not in err
    assert "  svc.pick: parameter `mode`: Literal[" in err


def test_only_stubs_whose_hash_changed_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bounded: a rerun over a big catalog where one tool changed parses two stubs (its old and its new), not all.
    tools = [tool(f"t{i}", {"x": {"type": "string"}}) for i in range(300)]
    snapshot_tree(tmp_path, tools)
    parsed: list[str] = []
    signature = api_changes.signature

    def counted(source: bytes | None, function: str) -> stub_signature.Signature | None:
        parsed.append(function)
        return signature(source, function)

    monkeypatch.setattr(api_changes, "signature", counted)
    tools[7] = tool("t7", {"x": {"type": "integer"}})
    capsys.readouterr()
    assert snapshot_tree(tmp_path, tools) == 0
    assert parsed == ["t7", "t7"]
    assert block(capsys.readouterr().err)[1:] == ["  svc.t7: parameter `x`: str → int"]
