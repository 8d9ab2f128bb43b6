"""`generate-tree` end to end: real sample servers over stdio and HTTP, raw fault servers, the CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import generator.generate
import generator.previous
import generator.write_over
from generator.generate import generate
from tests.generator.work import lines_run
from tests.support import alive, sample_config_yaml
from tool_tree.config import load_config
from tool_tree.pool import BackgroundPool
from tool_tree.runtime import set_transport
from tool_tree.tree import TreeError
from tooltree_cli.main import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples" / "sample_servers"
RAW = REPO / "tests" / "servers" / "raw_server.py"


def sample_config(tmp: Path, *names: str) -> Path:
    path = tmp / "tooltree.yaml"
    path.write_text(sample_config_yaml(*names), encoding="utf-8")
    return path


def raw_server(tmp: Path, name: str, spec: dict[str, Any], timeout: float = 10) -> str:
    spec_path = tmp / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    return (
        f"  {name}:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(RAW))}, {json.dumps(str(spec_path))}]\n    timeout: {timeout}\n"
    )


def tool(name: str, **props: Any) -> dict[str, Any]:
    return {"name": name, "description": f"Does {name}.", "inputSchema": {"type": "object", "properties": props}}


def run_cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["generate-tree", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.fixture(scope="module")
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    tmp = tmp_path_factory.mktemp("sample")
    config = sample_config(tmp, "docs", "crm", "media")
    out = tmp / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out)]) == 0
    yield config, out


def test_every_sample_tool_gets_a_stub_listed_in_manifest_readme_and_index(sample_tree: tuple[Path, Path]) -> None:
    _, out = sample_tree
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    by_server: dict[str, list[str]] = {}
    for t in manifest["tools"]:
        assert (out / t["path"]).is_file()
        assert t["schema_hash"].startswith("sha256:")
        by_server.setdefault(t["server"], []).append(t["tool"])
    assert set(by_server) == {"docs", "crm", "media"}
    assert {"list_leads", "update_record", "get_record"} <= set(by_server["crm"])
    index = (out / "servers" / "INDEX.md").read_text(encoding="utf-8")
    for s in manifest["servers"]:
        line = next(ln for ln in index.splitlines() if ln.startswith(f"- {s['package']} ("))
        assert f"({s['tool_count']} tools)" in line
    readme = (out / "servers" / "crm" / "README.md").read_text(encoding="utf-8")
    assert "- list_leads — " in readme
    snapshot = json.loads((out / "snapshots" / "crm.json").read_text(encoding="utf-8"))
    assert {t["name"] for t in snapshot["tools"]} == set(by_server["crm"])
    assert all("inputSchema" in t for t in snapshot["tools"])


def test_rerun_with_nothing_changed_writes_nothing(
    sample_tree: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sample_tree
    copy = tmp_path / "tree"
    shutil.copytree(out, copy)
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.rglob("*") if p.is_file()}
    code, summary = run_cli("--from-snapshot", "--out", str(copy), capsys=capsys)
    assert code == 0 and summary["written"] == 0 and summary["deleted"] == 0
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in copy.rglob("*") if p.is_file()}
    assert after == before


def test_check_is_clean_then_reports_an_edited_stub(
    sample_tree: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = sample_tree
    copy = tmp_path / "tree"
    shutil.copytree(out, copy)
    code, summary = run_cli("--from-snapshot", "--out", str(copy), "--check", capsys=capsys)
    assert (code, summary["drift"]) == (0, [])
    stub = copy / "servers" / "crm" / "list_leads.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    (copy / "servers" / "crm" / "stray.py").write_text("x = 1\n", encoding="utf-8")
    code, summary = run_cli("--from-snapshot", "--out", str(copy), "--check", capsys=capsys)
    assert code == 1
    assert summary["drift"] == ["servers/crm/list_leads.py"]  # a file tooltree did not write is never deleted
    assert stub.read_text(encoding="utf-8").endswith("# edited\n")


def test_check_reports_a_missing_search_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, out = _svc_config(tmp_path), tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    assert run_cli("--config", str(config), "--out", str(out), "--check", capsys=capsys)[1]["drift"] == []
    (out / "search_index.json").unlink()  # what an interrupted embedding leaves
    code, summary = run_cli("--config", str(config), "--out", str(out), "--check", capsys=capsys)
    assert code == 1 and summary["drift"] == ["search_index.json"]


def test_generation_is_byte_identical_across_runs(
    sample_tree: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, out = sample_tree
    fresh = out.parent / "fresh"  # beside it, from the same config: the manifest records it relative to the tree
    code, _ = run_cli(
        "--from-snapshot", str(out / "snapshots"), "--config", str(config), "--out", str(fresh), capsys=capsys
    )
    assert code == 0
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert files == sorted(p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file())
    for rel in files:
        assert (out / rel).read_bytes() == (fresh / rel).read_bytes(), rel


def test_generated_tree_type_checks_and_mypy_catches_misuse(sample_tree: tuple[Path, Path], tmp_path: Path) -> None:
    _, out = sample_tree
    tree = tmp_path / "tree"
    shutil.copytree(out, tree)
    (tree / "good.py").write_text(
        "from servers.crm import list_leads, log_activity\n"
        "from servers.media import get_image_info\n"
        "rows = list_leads(status='qualified').json()\n"
        "log_activity(type='call', related_to={'object_type': 'lead', 'id': 'x'}, subject='Hi', from_='a@b.c')\n"
        "info = get_image_info(source={'kind': 'gallery', 'image_id': 'img_q3_forecast'})\n"
        "width: int = info['width']\n",
        encoding="utf-8",
    )
    (tree / "bad.py").write_text(
        "from servers.crm import list_leads, log_activity\n"
        "list_leads(stat='qualified')\n"
        "log_activity(type='fax', related_to={'object_type': 'lead', 'id': 'x'}, subject='Hi')\n",
        encoding="utf-8",
    )
    env = {**os.environ, "MYPYPATH": str(REPO)}
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", os.devnull]
    good = subprocess.run([*cmd, "-p", "servers", "-m", "good"], cwd=tree, env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stdout
    bad = subprocess.run([*cmd, "bad.py"], cwd=tree, env=env, capture_output=True, text=True)
    assert bad.returncode == 1
    assert 'Unexpected keyword argument "stat" for "list_leads"' in bad.stdout
    assert 'Argument "type" to "log_activity" has incompatible type "Literal[\'fax\']"' in bad.stdout


def test_from_snapshot_without_config_keeps_the_recorded_tool_filters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "servers:\n"
        + raw_server(tmp_path, "svc", {"pages": [[tool("keep_a"), tool("keep_b"), tool("drop_c")]]})
        + "    exclude: [drop_*]\n",
        encoding="utf-8",
    )
    out = tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    code, summary = run_cli("--from-snapshot", "--out", str(out), capsys=capsys)
    assert code == 0 and summary["written"] == 0 and summary["servers"][0]["tools"] == 2
    assert not (out / "servers/svc/drop_c.py").exists()


def test_removed_tools_lose_their_files_and_new_ones_appear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    snap = {"server": "svc", "info": {}, "tools": [tool("alpha"), tool("beta")]}
    (snaps / "svc.json").write_text(json.dumps(snap), encoding="utf-8")
    out = tmp_path / "tree"
    assert run_cli("--from-snapshot", str(snaps), "--out", str(out), capsys=capsys)[0] == 0
    assert (out / "servers/svc/beta.py").is_file()
    snap["tools"] = [tool("alpha"), tool("gamma")]
    (snaps / "svc.json").write_text(json.dumps(snap), encoding="utf-8")
    code, summary = run_cli("--from-snapshot", str(snaps), "--out", str(out), capsys=capsys)
    assert code == 0 and summary["deleted"] == 1 and summary["deleted_paths"] == ["servers/svc/beta.py"]
    assert not (out / "servers/svc/beta.py").exists()
    assert (out / "servers/svc/gamma.py").is_file()
    assert "gamma" in (out / "servers/svc/__init__.py").read_text(encoding="utf-8")


_SCRIPT = """\
import json
from tool_tree.runtime import set_transport
sent = []
set_transport(lambda server, tool, arguments: sent.append([server, tool, arguments]) or {"content": []})
from servers.svc import get_item
get_item(user_id="u")
print(json.dumps(sent))
"""


def _run_script(tree: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)])}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def _generate_from_snapshot(
    tmp: Path, server: str, tools: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """Write ``server``'s snapshot under ``tmp/snaps``, regenerate ``tmp/tree`` from the snapshots; the manifest."""
    snaps = tmp / "snaps"
    snaps.mkdir(exist_ok=True)
    (snaps / f"{server}.json").write_text(json.dumps({"server": server, "info": {}, "tools": tools}), encoding="utf-8")
    assert run_cli("--from-snapshot", str(snaps), "--out", str(tmp / "tree"), capsys=capsys)[0] == 0
    manifest: dict[str, Any] = json.loads((tmp / "tree" / "manifest.json").read_text(encoding="utf-8"))
    return manifest


def test_a_colliding_tool_or_property_added_later_renames_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tree"

    def generate(*tools: dict[str, Any]) -> dict[str, Any]:
        manifest = _generate_from_snapshot(tmp_path, "svc", list(tools), capsys)
        return {t["tool"]: (t["function"], t["parameters"]) for t in manifest["tools"]}

    assert generate(tool("get-item", **{"user-id": {"type": "string"}})) == {
        "get-item": ("get_item", {"user-id": "user_id"})
    }
    assert _run_script(out) == [["svc", "get-item", {"user-id": "u"}]]
    # A tool really called get_item, and a property really called user_id, arrive later.
    both = {"user-id": {"type": "string"}, "user_id": {"type": "string"}}
    assert generate(tool("get-item", **both), tool("get_item")) == {
        "get-item": ("get_item", {"user-id": "user_id", "user_id": "user_id_2"}),
        "get_item": ("get_item_2", {}),
    }
    assert _run_script(out) == [["svc", "get-item", {"user-id": "u"}]]  # the old import and call still work
    # A tree generated afresh gives the exact names to the exact matches.
    shutil.rmtree(out)
    assert generate(tool("get-item", **both), tool("get_item")) == {
        "get-item": ("get_item_2", {"user-id": "user_id_2"}),
        "get_item": ("get_item", {}),
    }


def test_a_server_keeps_its_package_when_a_colliding_server_is_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _generate_from_snapshot(tmp_path, "my-crm", [tool("a")], capsys)
    manifest = _generate_from_snapshot(tmp_path, "my_crm", [tool("a")], capsys)
    assert {s["name"]: s["package"] for s in manifest["servers"]} == {"my-crm": "my_crm", "my_crm": "my_crm_2"}


def test_a_stub_sends_null_for_none_and_leaves_out_what_is_not_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A real MCP server over stdio (raw JSON-RPC) that answers a call with the arguments it received.
    props = {"id": {"type": "string"}, "owner": {"type": ["string", "null"]}, "limit": {"type": "integer"}}
    edit = {**tool("edit", **props), "inputSchema": {"type": "object", "properties": props, "required": ["id"]}}
    config = tmp_path / "c.yaml"
    config.write_text("servers:\n" + raw_server(tmp_path, "echo", {"pages": [[edit]]}), encoding="utf-8")
    out = tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    source = (out / "servers/echo/edit.py").read_text(encoding="utf-8")
    assert "owner: str | None | NotGiven = NOT_GIVEN, limit: int | NotGiven = NOT_GIVEN)" in source
    spec = importlib.util.spec_from_file_location("generated_echo_edit", out / "servers/echo/edit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with BackgroundPool(load_config(config).enabled_servers) as pool:
        previous = set_transport(pool.call)
        try:
            cleared = module.edit(id="r1", owner=None).json()
            untouched = module.edit(id="r1").json()
        finally:
            set_transport(previous)
    assert cleared == {"id": "r1", "owner": None}
    assert untouched == {"id": "r1"}


def test_pagination_is_followed_and_unknown_fields_are_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = [[{**tool(f"t{p}_{i}"), "x-vendor": {"page": p}} for i in range(3)] for p in range(4)]
    config = tmp_path / "c.yaml"
    config.write_text("servers:\n" + raw_server(tmp_path, "paged", {"pages": pages}), encoding="utf-8")
    code, summary = run_cli("--config", str(config), "--out", str(tmp_path / "tree"), capsys=capsys)
    assert code == 0 and summary["servers"][0]["tools"] == 12
    snapshot = json.loads((tmp_path / "tree/snapshots/paged.json").read_text(encoding="utf-8"))
    assert [t["x-vendor"]["page"] for t in snapshot["tools"]] == [p for p in range(4) for _ in range(3)]


@pytest.mark.parametrize(
    ("behavior", "error", "stderr"),
    [
        ("exit_at_start", "the server exited during start-up", "starting up"),
        ("crash_on_list", "the server exited while listing tools", "starting up\nfatal: tools database is corrupt"),
        ("hang_on_list", "timed out after 2 s", "starting up"),
        ("garbage", "timed out after 2 s", "starting up"),
        ("loop_cursor", "pagination repeats", ""),
        ("big_cursor", "a cursor must be a string of at most 65,536 characters; got 'p1xxxx", ""),
    ],
)
def test_a_failing_server_is_reported_with_its_stderr_and_others_still_generate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], behavior: str, error: str, stderr: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "servers:\n"
        + raw_server(tmp_path, "good", {"pages": [[tool("ping_me")]]})
        + raw_server(
            tmp_path, "bad", {"behavior": behavior, "stderr": "starting up", "pages": [[tool("x")]]}, timeout=2
        ),
        encoding="utf-8",
    )
    code = main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")])
    err = capsys.readouterr().err
    assert code == 3
    assert (tmp_path / "tree/servers/good/ping_me.py").is_file()
    assert not (tmp_path / "tree/servers/bad").exists()
    bad_line = next(ln for ln in err.splitlines() if ln.startswith("bad "))
    assert "failed" in bad_line and error in bad_line
    if stderr:
        assert f"--- last lines of bad's stderr ---\n{stderr}" in err


def test_a_server_that_fails_keeps_its_previous_stubs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("servers:\n" + raw_server(tmp_path, "flaky", {"pages": [[tool("keep_me")]]}), encoding="utf-8")
    out = tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    config.write_text("servers:\n" + raw_server(tmp_path, "flaky", {"behavior": "exit_at_start"}), encoding="utf-8")
    code, summary = run_cli("--config", str(config), "--out", str(out), capsys=capsys)
    assert code == 3 and summary["servers"][0]["status"] == "failed"
    assert (out / "servers/flaky/keep_me.py").is_file()
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["tools"][0]["tool"] == "keep_me"


def test_a_run_in_which_every_server_failed_makes_no_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: it wrote a tree of 0 tools, which `tooltree serve` then served at once as if it were fine.
    config = tmp_path / "c.yaml"
    config.write_text("servers:\n" + raw_server(tmp_path, "down", {"behavior": "exit_at_start"}), encoding="utf-8")
    out = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out)]) == 3
    assert f"\n{out}: nothing written: every server failed (see above)\n" in capsys.readouterr().err
    assert not out.exists()


def test_a_run_in_which_every_server_failed_leaves_the_tree_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, out = _svc_config(tmp_path), tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    config.write_text("servers:\n" + raw_server(tmp_path, "svc", {"behavior": "exit_at_start"}), encoding="utf-8")
    code, summary = run_cli("--config", str(config), "--out", str(out), capsys=capsys)
    assert code == 3 and summary["written"] == 0 and summary["servers"][0]["status"] == "failed"
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()} == before


def test_server_option_regenerates_one_server_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "servers:\n"
        + raw_server(tmp_path, "one", {"pages": [[tool("a1")]]})
        + raw_server(tmp_path, "two", {"pages": [[tool("b1")]]}),
        encoding="utf-8",
    )
    out = tmp_path / "tree"
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    config.write_text(
        "servers:\n"
        + raw_server(tmp_path, "one", {"pages": [[tool("a2")]]})
        + raw_server(tmp_path, "two", {"pages": [[tool("b2")]]}),
        encoding="utf-8",
    )
    code, summary = run_cli("--config", str(config), "--out", str(out), "--server", "one", capsys=capsys)
    assert code == 0 and [s["name"] for s in summary["servers"]] == ["one"]
    assert (out / "servers/one/a2.py").is_file() and not (out / "servers/one/a1.py").exists()
    assert (out / "servers/two/b1.py").is_file()
    index = (out / "servers/INDEX.md").read_text(encoding="utf-8")
    assert "- one (1 tool) — " in index and "- two (1 tool) — " in index


def test_unknown_server_name_and_bad_config_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("servers:\n  crm: {command: x}\n", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--server", "cmr"]) == 2
    assert capsys.readouterr().err.strip() == f"tooltree: error: {config}: no server named 'cmr' (did you mean 'crm'?)"
    config.write_text("servers:\n  crm: {comand: x}\n", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"tooltree: error: {config}:2: servers.crm.comand: unknown key (did you mean 'command'?)"


def _svc_config(tmp: Path) -> Path:
    config = tmp / "c.yaml"
    config.write_text("servers:\n" + raw_server(tmp, "svc", {"pages": [[tool("ping")]]}), encoding="utf-8")
    return config


@pytest.mark.parametrize(
    ("files", "held"),
    [
        (
            {"manifest.json": '{"manifest_version": 3}', "servers/app.py": "def main(): pass\n"},
            "manifest.json, servers",
        ),
        ({"snapshots/mine.json": "{}"}, "snapshots"),
        # another program's manifest naming a generator and a version (before: replaced without a copy or a word)
        ({"manifest.json": '{"generator": "site-builder 2.1", "version": "2.1", "pages": []}'}, "manifest.json"),
        ({"search_index.json": "[]"}, "search_index.json"),
    ],
)
def test_out_holding_files_tooltree_did_not_write_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], held: str
) -> None:
    config, out = _svc_config(tmp_path), tmp_path / "project"
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    for check in ([], ["--check"]):
        # --check refuses the folder the run it checks for refuses (before: it listed drift, exit 1)
        assert main(["generate-tree", "--config", str(config), "--out", str(out), *check]) == 2
        err = capsys.readouterr().err
        # the refusal is all it says (before: "listing tools from 1 server(s) …" came first)
        assert err.startswith(f"tooltree: error: {out}: holds {held} but no tooltree manifest"), err
        assert "choose a new or empty folder" in err and err.count("\n") == 1
        damaged = "manifest.json is there but is not one tooltree wrote, or is damaged: if this is a tree"
        assert (damaged in err) == ("manifest.json" in files)
        assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == set(files)
        assert all((out / rel).read_text(encoding="utf-8") == text for rel, text in files.items())


def test_out_may_hold_other_files_or_a_tree_of_another_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, out = _svc_config(tmp_path), tmp_path / "project"
    out.mkdir()
    (out / "NOTES.md").write_text("mine\n", encoding="utf-8")
    assert run_cli("--config", str(config), "--out", str(out), capsys=capsys)[0] == 0
    assert (out / "NOTES.md").read_text(encoding="utf-8") == "mine\n" and (out / "servers/svc/ping.py").is_file()
    # a manifest of another tooltree release (another version) is regenerated in place
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    (out / "manifest.json").write_text(json.dumps({**manifest, "version": 0}), encoding="utf-8")
    (out / "servers/svc/old_tool.py").write_text("# from an older release\n", encoding="utf-8")
    # A file the user made from a stub (it says "Generated by tooltree"): before, deleted and not copied.
    made = (out / "servers/svc/ping.py").read_text(encoding="utf-8").replace("def ping(", "def my_ping(")
    (out / "servers/svc/my_ping.py").write_text(made, encoding="utf-8")
    # A stub edited since, which that manifest's record shows (before: overwritten, not copied).
    edited = (out / "servers/svc/ping.py").read_text(encoding="utf-8") + "# my edit\n"
    (out / "servers/svc/ping.py").write_text(edited, encoding="utf-8")
    code, summary = run_cli("--config", str(config), "--out", str(out), capsys=capsys)
    assert code == 0 and summary["deleted"] == 2 and not (out / "servers/svc/old_tool.py").exists()
    # not marked as generated, marked but deleted, or edited by the record: a copy is kept (a stub marked as
    # generated and replaced as the record has it is not copied)
    kept = sorted(p.relative_to(out).as_posix() for p in (out / ".tooltree-kept").rglob("*") if p.is_file())
    assert kept == [
        ".tooltree-kept/servers/svc/my_ping.py",
        ".tooltree-kept/servers/svc/old_tool.py",
        ".tooltree-kept/servers/svc/ping.py",
    ]
    assert (out / ".tooltree-kept/servers/svc/my_ping.py").read_text(encoding="utf-8") == made
    assert (out / ".tooltree-kept/servers/svc/ping.py").read_text(encoding="utf-8") == edited
    assert "# my edit" not in (out / "servers/svc/ping.py").read_text(encoding="utf-8")


def test_out_that_is_a_file_is_refused_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "started"
    script = f"open({str(marker)!r}, 'w')"
    config = tmp_path / "c.yaml"
    config.write_text(
        f"servers:\n  svc:\n    command: {json.dumps(sys.executable)}\n    args: [-c, {json.dumps(script)}]\n",
        encoding="utf-8",
    )
    out = tmp_path / "afile.txt"
    out.write_text("keep me\n", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"tooltree: error: --out: {out} is a file, not a folder\n"
    with pytest.raises(TreeError, match="not a folder; --out names the folder of the tree"):
        generate(load_config(config), out)  # the same refusal for a caller of the Python API
    assert out.read_text(encoding="utf-8") == "keep me\n" and not marker.exists()


def test_streamable_http_server_generates_the_same_stubs_as_stdio(
    sample_tree: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sample_http_server: Callable[[str], str],
) -> None:
    _, stdio_tree = sample_tree
    config = tmp_path / "c.yaml"
    config.write_text(f"servers:\n  crm:\n    url: {sample_http_server('crm')}\n", encoding="utf-8")
    code, _ = run_cli("--config", str(config), "--out", str(tmp_path / "tree"), capsys=capsys)
    assert code == 0
    for stub in (stdio_tree / "servers/crm").glob("*.py"):
        assert (tmp_path / "tree/servers/crm" / stub.name).read_bytes() == stub.read_bytes()


@pytest.mark.parametrize(
    ("sent", "code", "said"),
    [(signal.SIGINT, 130, "tooltree: interrupted"), (signal.SIGTERM, 143, "tooltree: terminated")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_or_sigterm_stops_generation_and_leaves_no_server_running(
    tmp_path: Path, sent: signal.Signals, code: int, said: str
) -> None:
    # Before, SIGTERM ended generate-tree at once (-15) and a server that did not stop at the end of its
    # stdin ran on.
    pid_file = tmp_path / "server.pid"
    config = tmp_path / "c.yaml"
    config.write_text(
        "servers:\n"
        + raw_server(tmp_path, "slow", {"behavior": "hang_on_list", "pid_file": str(pid_file)}, timeout=120),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tooltree_cli.main",
            "generate-tree",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "tree"),
        ],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline and proc.poll() is None, "the server never started"
        time.sleep(0.02)
    server_pid = int(pid_file.read_text(encoding="utf-8"))
    proc.send_signal(sent)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert said in err and not (tmp_path / "tree" / "manifest.json").exists()
    deadline = time.monotonic() + 10
    while alive(server_pid):
        assert time.monotonic() < deadline, "the server process outlived generate-tree"
        time.sleep(0.02)


def test_a_large_catalog_renders_in_workers_and_writes_while_rendering(tmp_path: Path) -> None:
    from generator.generate import generate
    from generator.workers import PARALLEL_THRESHOLD

    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    count = PARALLEL_THRESHOLD + 50
    for s in range(3):
        tools = [
            {
                "name": f"tool_{s}_{n}",
                "description": f"Tool {n} of server {s}.",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            }
            for n in range(count // 3)
        ]
        (snapshots / f"s{s}.json").write_text(json.dumps({"server": f"s{s}", "tools": tools}), encoding="utf-8")
    out = tmp_path / "tree"
    assert generate(None, out, snapshots=snapshots, check=True).drift != []
    assert not out.exists()  # --check writes nothing, not even early
    first = generate(None, out, snapshots=snapshots, embeddings="off")
    assert first.report is not None
    stubs = sorted(p.relative_to(out).as_posix() for p in out.glob("servers/*/tool_*.py"))
    assert len(stubs) == 3 * (count // 3) and set(stubs) <= set(first.report.written)
    assert len(first.report.written) == len(set(first.report.written))
    assert "def tool_1_7(*, q: str) -> ToolResult:" in (out / "servers/s1/tool_1_7.py").read_text(encoding="utf-8")
    assert generate(None, out, snapshots=snapshots, check=True).drift == []
    second = generate(None, out, snapshots=snapshots, embeddings="off")
    assert second.report is not None and second.report.written == []


def test_many_servers_are_generated_and_counted_in_work_linear_in_their_number(tmp_path: Path) -> None:
    # Each server's tool count used to be looked up among all servers: quadratic (0.3 s at 3,000 servers).
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    for n in range(300):
        snap = {"server": f"s{n:03d}", "tools": [tool("get_record"), tool("list_records")]}
        (snapshots / f"s{n:03d}.json").write_text(json.dumps(snap), encoding="utf-8")
    with lines_run(generator.generate, generator.previous, generator.write_over) as lines:
        result = generate(None, tmp_path / "tree", snapshots=snapshots, embeddings="off")
    assert [(s.name, s.status, s.tools) for s in result.servers] == [(f"s{n:03d}", "ok", 2) for n in range(300)]
    assert lines.count < 100 * len(result.servers)  # was 200 per server at 300 servers, and growing with them


def test_a_rerun_counts_every_file_of_the_tree_unchanged_the_search_index_too(tmp_path: Path) -> None:
    # Before: a first run wrote 13 files and a rerun said "0 written, 0 deleted, 12 unchanged" (the index uncounted).
    config = load_config(sample_config(tmp_path, "crm"))
    first = generate(config, tmp_path / "tree", embeddings="off").report
    again = generate(config, tmp_path / "tree", embeddings="off").report
    assert first is not None and again is not None and "search_index.json" in first.written
    assert (again.written, again.deleted, again.unchanged) == ([], [], len(first.written))
