"""generate-tree records each server's prompts, resources and resource templates in its snapshot
(`tool_tree.snapshot_lists`), which `tooltree serve` offers: listed on the connection the tools are listed on when
the server declares them, bounded, kept by ``--from-snapshot``, counted as a change by ``--check``; a listing of them
that fails leaves them out with a warning and the server's tools in the tree. The manifest says the snapshots record
them (``lists_recorded``), which tells a tree of an earlier release apart.

The servers are tests/servers/prompts_server.py (a real SDK server over stdio) and tests/servers/raw_server.py (tools
only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tool_tree.snapshot_lists
from generator.generate import generate
from tests.support import REPO, raw_server_tree
from tool_tree.config import Config
from tool_tree.snapshot_lists import LIST_KEYS, MAX_PAGES
from tool_tree.tree import Manifest
from tooltree_cli.common import load

PROMPTS_SERVER = REPO / "tests" / "servers" / "prompts_server.py"


def config(folder: Path, *servers: tuple[str, list[str], dict[str, str]]) -> Path:
    """A config of prompts servers: (name, arguments, environment)."""
    text = "servers:\n"
    for name, args, env in servers:
        text += f"  {name}:\n    command: {json.dumps(sys.executable)}\n"
        text += f"    args: {json.dumps([str(PROMPTS_SERVER), *args])}\n    timeout: 30\n"
        text += f"    env: {json.dumps(env)}\n" if env else ""
    path = folder / "tooltree.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def snapshot(tree: Path, server: str) -> dict[str, Any]:
    return json.loads((tree / "snapshots" / f"{server}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_snapshot_records_the_prompts_resources_and_templates_and_from_snapshot_keeps_them(tmp_path: Path) -> None:
    path = config(tmp_path, ("alpha", ["alpha"], {}), ("gamma", ["gamma", "endless"], {}))
    result = generate(load(path), tmp_path / "tree", embeddings="off")
    assert not result.failed
    alpha, gamma = snapshot(tmp_path / "tree", "alpha"), snapshot(tmp_path / "tree", "gamma")
    assert [t["name"] for t in alpha["tools"]] == ["ping"]
    names = [p["name"] for p in alpha["prompts"]]
    assert names[:6] == ["greet", "echo_args", "report", "huge", "crash", "refuse"] and len(names) == 8  # raw: all
    assert alpha["prompts"][0]["arguments"][0] == {"name": "name", "description": "Who to greet", "required": True}
    assert {r["uri"] for r in alpha["resources"]} >= {"alpha://readme", "shared://readme"}
    assert [t["uriTemplate"] for t in alpha["resourceTemplates"]] == ["alpha://items/{id}", "shared://items/{id}"]
    assert len(gamma["resources"]) == MAX_PAGES  # its list never ends: the pages are bounded
    assert any(f"gamma: resources/list: only the first {MAX_PAGES} pages" in w for w in result.warnings)

    again = generate(None, tmp_path / "again", snapshots=tmp_path / "tree" / "snapshots", embeddings="off")
    assert not again.failed
    for server in ("alpha", "gamma"):
        written = (tmp_path / "again" / "snapshots" / f"{server}.json").read_bytes()
        assert written == (tmp_path / "tree" / "snapshots" / f"{server}.json").read_bytes()


def test_a_list_is_recorded_up_to_its_cap_of_json_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real cap (300,000 values) takes 8 MiB of `{}` to reach, which parsed held 200 MB or more a list; a lower one
    # behaves alike. Each of gamma's resources is 3 values (an object, its name and its URI).
    monkeypatch.setattr(tool_tree.snapshot_lists, "MAX_LIST_VALUES", 31)
    result = generate(load(config(tmp_path, ("gamma", ["gamma", "endless"], {}))), tmp_path / "tree", embeddings="off")
    assert not result.failed
    assert [r["uri"] for r in snapshot(tmp_path / "tree", "gamma")["resources"]] == [
        f"gamma://pages/{i}" for i in range(10)
    ]
    assert (
        "gamma: resources/list: only the first 10 items are recorded (at most 1,000 items, 8 MiB and 31 JSON values "
        "of each list)"
    ) in result.warnings


def test_a_failing_prompts_listing_only_warns_and_the_tools_are_kept(tmp_path: Path) -> None:
    path = config(tmp_path, ("alpha", ["alpha"], {"PROMPTS_SERVER_REFUSE_LISTS": "1"}))
    result = generate(load(path), tmp_path / "tree", embeddings="off")
    assert not result.failed and [s.tools for s in result.servers] == [1]
    alpha = snapshot(tmp_path / "tree", "alpha")
    assert [t["name"] for t in alpha["tools"]] == ["ping"]
    assert "prompts" not in alpha and "resourceTemplates" not in alpha  # failed, none recorded before: none
    assert "alpha://readme" in {r["uri"] for r in alpha["resources"]}  # the list that worked is kept
    assert any("alpha: prompts/list failed, so the tree keeps the ones it recorded before, if any: " in w
               and "no prompts today" in w for w in result.warnings)  # fmt: skip
    assert any("alpha: resources/templates/list failed" in w for w in result.warnings)


def test_a_prompts_change_is_a_change_for_check(tmp_path: Path) -> None:
    more = tmp_path / "more.txt"
    path = config(tmp_path, ("alpha", ["alpha"], {"PROMPTS_SERVER_MORE": str(more)}))
    tree = tmp_path / "tree"
    assert not generate(load(path), tree, embeddings="off").failed
    assert generate(load(path), tree, check=True, embeddings="off").drift == []
    more.write_text("added\n", encoding="utf-8")
    checked = generate(load(path), tree, check=True, embeddings="off")
    # the snapshot, and the manifest holding its hash (and so the search index built for that manifest); no stub
    assert set(checked.drift) == {"snapshots/alpha.json", "manifest.json", "search_index.json"}
    assert checked.api_changes == []
    assert not generate(load(path), tree, embeddings="off").failed
    assert "added" in [p["name"] for p in snapshot(tree, "alpha")["prompts"]]


def test_a_server_without_prompts_or_resources_has_a_snapshot_as_before(tmp_path: Path) -> None:
    tree, _ = raw_server_tree(tmp_path, [{"name": "t", "inputSchema": {"type": "object"}}])
    text = (tree / "snapshots" / "raw.json").read_text(encoding="utf-8")
    assert list(json.loads(text)) == ["server", "info", "tools"]
    assert text.endswith(', "tools": [\n{"name": "t", "inputSchema": {"type": "object"}}\n]}\n')


def test_generating_from_snapshots_with_prompts_and_its_no_op_rerun_load_no_mcp_sdk_pydantic_or_asyncio(
    tmp_path: Path,
) -> None:
    """They start no server, so they load no MCP SDK, pydantic or asyncio (~0.45 s together; a no-op run ~0.15 s)."""
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    tool = {"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object", "properties": {}}}
    prompt = {"name": "greet", "arguments": [{"name": "name", "required": True}]}
    recorded = {"server": "alpha", "info": {}, "tools": [tool], "prompts": [prompt]}
    (snapshots / "alpha.json").write_text(json.dumps(recorded), encoding="utf-8")
    argv = ["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree"), "--embeddings", "off"]
    runs = f"[main({argv!r}) for _ in range(2)]"  # a fresh tree, then a no-op rerun
    loaded = "[m for m in ('mcp', 'pydantic', 'asyncio') if m in sys.modules]"
    code = f"import sys; from tooltree_cli.main import main; print({runs}, {loaded})"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120, cwd=REPO
    )
    assert done.stdout.strip().splitlines()[-1] == "[0, 0] []"
    assert snapshot(tmp_path / "tree", "alpha")["prompts"] == [prompt]


def as_an_older_release_wrote_it(tree: Path) -> None:
    """``tree`` as a release before prompts and resources were recorded wrote it: its manifest does not say it
    records them, and its snapshots hold none."""
    manifest = tree / "manifest.json"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace('"lists_recorded": true, ', ""), encoding="utf-8")
    for path in (tree / "snapshots").glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if [data.pop(key) for key, _, _ in LIST_KEYS if key in data]:
            path.write_text(json.dumps(data), encoding="utf-8")


def test_the_manifest_says_the_lists_are_recorded_and_a_tree_of_an_older_release_gets_it_on_its_next_run(
    tmp_path: Path,
) -> None:
    # A server that declares no prompts or resources: its snapshot is the same whichever release wrote it.
    tree, server = raw_server_tree(tmp_path, [{"name": "t", "inputSchema": {"type": "object"}}])
    assert Manifest.load(tree).lists_recorded
    servers = Config(servers=(server,))
    as_an_older_release_wrote_it(tree)
    assert not Manifest.load(tree).lists_recorded
    drift = generate(servers, tree, check=True, embeddings="off").drift
    assert "manifest.json" in drift and set(drift) <= {"manifest.json", "search_index.json"}  # no stub or snapshot
    report = generate(servers, tree, embeddings="off").report
    assert report is not None and "manifest.json" in report.written  # once
    assert Manifest.load(tree).lists_recorded
    assert generate(servers, tree, check=True, embeddings="off").drift == []
    again = generate(servers, tree, embeddings="off").report
    assert again is not None and not again.written and not again.deleted


def test_a_tree_regenerated_from_an_older_releases_own_snapshots_still_says_it_records_none(tmp_path: Path) -> None:
    tree, _ = raw_server_tree(tmp_path, [{"name": "t", "inputSchema": {"type": "object"}}])
    as_an_older_release_wrote_it(tree)
    generate(None, tree, snapshots=tree / "snapshots", embeddings="off")
    assert not Manifest.load(tree).lists_recorded  # serve still says so
    # Snapshots from a folder elsewhere: nothing tells an older release's from those of servers that declare none.
    generate(None, tmp_path / "other", snapshots=tree / "snapshots", embeddings="off")
    assert Manifest.load(tmp_path / "other").lists_recorded
