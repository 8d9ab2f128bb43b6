"""A rerun of `generate-tree` never loses a file the user wrote or edited in the tree (from snapshots: no servers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.files import TEMP_PREFIX, TEMP_SUFFIX
from generator.kept import KEPT_DIR
from tests.support import REPO
from tool_tree.tree import Manifest, content_hash
from tooltree_cli.generate_cmd import deleted_summary
from tooltree_cli.main import main


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"Does {name}.", "inputSchema": {"type": "object", "properties": {}}}


def generate(tmp: Path, servers: dict[str, list[str]], capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """Regenerate ``tmp/tree`` from snapshots of exactly ``servers`` (name → tool names); the tree and stderr."""
    snaps = tmp / "snaps"
    snaps.mkdir(exist_ok=True)
    for old in snaps.glob("*.json"):
        old.unlink()
    for server, tools in servers.items():
        snapshot = {"server": server, "info": {}, "tools": [tool(t) for t in tools]}
        (snaps / f"{server}.json").write_text(json.dumps(snapshot), encoding="utf-8")
    out = tmp / "tree"
    code = main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"])
    err = capsys.readouterr().err
    assert code == 0, err
    return out, err


def test_files_the_user_added_survive_a_rerun_and_the_removal_of_their_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha", "beta"], "other": ["gamma"]}, capsys)
    mine = {
        "servers/svc/NOTES.md": "what I learnt about svc\n",
        "servers/helpers.py": "def helper() -> int:\n    return 1\n",
        "snapshots/mine.txt": "x\n",
    }
    for rel, text in mine.items():
        (out / rel).write_text(text, encoding="utf-8")
    generate(tmp_path, {"svc": ["alpha", "beta"], "other": ["gamma"]}, capsys)
    assert {rel: (out / rel).read_text(encoding="utf-8") for rel in mine} == mine
    _, err = generate(tmp_path, {"other": ["gamma"]}, capsys)  # svc removed from the configuration
    assert {rel: (out / rel).read_text(encoding="utf-8") for rel in mine} == mine
    assert sorted(p.name for p in (out / "servers/svc").iterdir()) == ["NOTES.md"]  # its stubs are gone
    assert not (out / "snapshots/svc.json").exists()
    # Before: "servers/svc/ (4 files)", as if the folder were gone.
    assert (
        "deleted: 4 files in servers/svc/ (the folder stays: it holds NOTES.md, not tooltree's), snapshots/svc.json"
        in err
    )
    assert not (out / KEPT_DIR).exists()  # nothing was replaced that tooltree did not write


def test_an_edited_stub_and_readme_are_copied_aside_before_they_are_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    stub, readme = out / "servers/svc/alpha.py", out / "servers/svc/README.md"
    generated = stub.read_text(encoding="utf-8")
    stub.write_text(generated + "# my patch\n", encoding="utf-8")
    readme.write_text(readme.read_text(encoding="utf-8") + "my notes\n", encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    assert stub.read_text(encoding="utf-8") == generated
    assert (out / KEPT_DIR / "servers/svc/alpha.py").read_text(encoding="utf-8") == generated + "# my patch\n"
    assert (out / KEPT_DIR / "servers/svc/README.md").read_text(encoding="utf-8").endswith("my notes\n")
    assert (
        "warning: servers/svc/alpha.py was edited, or not written by tooltree: the new tree replaces it; "
        f"a copy of it is in {KEPT_DIR}/servers/svc/alpha.py"
    ) in err
    stub.write_text(generated + "# my second patch\n", encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)  # an earlier copy is never overwritten
    assert (out / KEPT_DIR / "servers/svc/alpha.py").read_text(encoding="utf-8") == generated + "# my patch\n"
    assert (out / KEPT_DIR / "servers/svc/alpha.py.2").read_text(encoding="utf-8").endswith("# my second patch\n")
    _, err = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    assert "warning" not in err  # an ordinary rerun copies nothing


def test_an_edited_stub_of_a_removed_tool_is_copied_aside_before_it_is_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    beta = out / "servers/svc/beta.py"
    beta.write_text(beta.read_text(encoding="utf-8") + "# my patch\n", encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    assert not beta.exists()
    assert (out / KEPT_DIR / "servers/svc/beta.py").read_text(encoding="utf-8").endswith("# my patch\n")
    assert "servers/svc/beta.py was edited, or not written by tooltree: the new tree deletes it" in err


def test_a_file_the_user_wrote_where_a_new_tools_stub_goes_is_copied_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    (out / "servers/svc/gamma.py").write_text("MINE = True\n", encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha", "gamma"]}, capsys)
    assert "def gamma(" in (out / "servers/svc/gamma.py").read_text(encoding="utf-8")
    assert (out / KEPT_DIR / "servers/svc/gamma.py").read_text(encoding="utf-8") == "MINE = True\n"
    assert "servers/svc/gamma.py was edited, or not written by tooltree" in err


def test_a_temporary_file_left_by_a_killed_run_is_deleted_without_a_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    leftover = out / "servers/svc" / f"{TEMP_PREFIX}abc{TEMP_SUFFIX}"
    leftover.write_bytes(b"half a stub")
    generate(tmp_path, {"svc": ["alpha"]}, capsys)
    assert not leftover.exists() and not (out / KEPT_DIR).exists()


def test_the_manifest_records_the_hash_of_every_file_but_the_stubs_and_reads_it_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    manifest = Manifest.load(out)
    assert sorted(manifest.files) == [
        "servers/INDEX.md",
        "servers/__init__.py",
        "servers/svc/README.md",
        "servers/svc/__init__.py",
        "snapshots/svc.json",
    ]
    assert all(digest == content_hash((out / rel).read_bytes()) for rel, digest in manifest.files.items())
    assert Manifest.from_json(manifest.to_json()) == manifest


def test_a_tree_whose_manifest_records_no_file_hashes_is_regenerated_in_place_with_copies_of_those_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An edit to them cannot be told from the earlier release's text: each one replaced or deleted is copied aside,
    # said in one warning (tests/cli/test_upgrade_audit.py). Before, they were replaced without a copy.
    out, _ = generate(tmp_path, {"svc": ["alpha"], "other": ["beta"]}, capsys)
    manifest = Manifest.load(out)
    manifest.files = {}  # as an earlier release wrote it
    (out / "manifest.json").write_text(manifest.to_json(), encoding="utf-8")
    (out / "servers/svc/README.md").write_text("an older README\n", encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    [warning] = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith("warning: an older tooltree wrote ") and "servers/svc/README.md" in warning
    assert (out / KEPT_DIR / "servers/svc/README.md").read_text(encoding="utf-8") == "an older README\n"
    assert not (out / "servers/other").exists() and not (out / "snapshots/other.json").exists()
    assert Manifest.load(out).files


def test_the_deleted_line_names_folders_and_counts_past_its_limit() -> None:
    assert deleted_summary(["snapshots/a.json", "servers/a/x.py", "servers/a/y.py", "servers/b/z.py"]) == (
        "servers/a/ (2 files), servers/b/z.py, snapshots/a.json"
    )
    many = [f"snapshots/s{i:02}.json" for i in range(12)]
    assert deleted_summary(many).endswith("snapshots/s09.json, and 2 more")


def test_a_fifo_where_a_stub_belongs_is_refused_not_waited_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, generate-tree opened it to compare it with the new stub and waited for ever for a writer.
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    (out / "servers/svc/alpha.py").unlink()
    os.mkfifo(out / "servers/svc/alpha.py")
    args = ["generate-tree", "--from-snapshot", str(tmp_path / "snaps"), "--out", str(out), "--embeddings", "off"]
    done = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith(f"refusing to read {out.resolve()}/servers/svc/alpha.py: not a regular file\n")


def test_regenerating_from_the_trees_snapshots_reads_the_manifests_files_and_passes_the_users_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    own = json.loads((out / "snapshots/svc.json").read_text(encoding="utf-8"))
    # Before: a copy the user kept (sorted after svc.json) became svc's snapshot, replacing svc.json and the stubs
    # without a word, and a JSON file of the user's that is no snapshot stopped the run (exit 2).
    older = {**own, "tools": [tool("zeta")]}
    (out / "snapshots/svc_old.json").write_text(json.dumps(older), encoding="utf-8")
    (out / "snapshots/notes.json").write_text('{"todo": []}', encoding="utf-8")
    code = main(["generate-tree", "--from-snapshot", "--out", str(out), "--embeddings", "off"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "snapshots/svc.json").read_text(encoding="utf-8")) == own
    assert [p.name for p in (out / "servers/svc").glob("*.py") if p.name != "__init__.py"] == ["alpha.py"]
    assert (out / "snapshots/svc_old.json").is_file() and (out / "snapshots/notes.json").is_file()


def test_a_folder_of_snapshots_alone_that_holds_a_server_twice_is_an_error_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    for name, tools in (("svc", ["alpha"]), ("svc-copy", ["zeta"])):
        snapshot = {"server": "svc", "info": {}, "tools": [tool(t) for t in tools]}
        (snaps / f"{name}.json").write_text(json.dumps(snapshot), encoding="utf-8")
    out = tmp_path / "tree"
    code = main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"])
    assert code == 2
    assert f"{snaps / 'svc-copy.json'} and {snaps / 'svc.json'} both hold the snapshot of server 'svc'" in (
        capsys.readouterr().err
    )
    assert not out.exists()


def test_a_new_servers_package_never_hides_a_module_the_user_wrote_under_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    (out / "servers/other.py").write_text("def helper() -> int:\n    return 1\n", encoding="utf-8")
    # Before: the server `other` became servers/other/, which Python imports instead of servers/other.py.
    generate(tmp_path, {"svc": ["alpha"], "other": ["gamma"]}, capsys)
    packages = {s.name: s.package for s in Manifest.load(out).servers}
    assert packages == {"svc": "svc", "other": "other_2"} and not (out / "servers/other").exists()
    assert (out / "servers/other.py").read_text(encoding="utf-8").startswith("def helper()")
    (out / "servers/other.py").unlink()
    generate(tmp_path, {"svc": ["alpha"], "other": ["gamma"]}, capsys)
    assert Manifest.load(out).servers[0].package == "other_2"  # a name once given is kept: scripts import it


def test_a_new_tool_is_not_named_after_a_folder_the_user_added_to_its_servers_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `reports.py` was written beside the user's `reports/` package, which wins the import: every stub of the
    # server failed to import ("cannot import name 'reports'"), and the run said the change broke nothing.
    out, _ = generate(tmp_path, {"acme": ["alpha"]}, capsys)
    (out / "servers/acme/reports").mkdir()
    (out / "servers/acme/reports/__init__.py").write_text("def weekly() -> str:\n    return 'my report'\n")
    generate(tmp_path, {"acme": ["alpha", "reports"]}, capsys)
    assert {t.tool: t.function for t in Manifest.load(out).tools} == {"alpha": "alpha", "reports": "reports_2"}
    assert not (out / "servers/acme/reports.py").exists()
    script = (
        "from servers.acme import alpha, reports_2\nfrom servers.acme.reports import weekly\n"
        "print(weekly(), callable(alpha), callable(reports_2))"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=out, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == "my report True True\n", done.stderr


def test_a_tree_whose_manifest_has_another_name_keeps_edits_user_files_and_a_failed_servers_stubs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A tree backed up with `cp -al` (its manifest then has two names, which every reader refuses). Before, the run
    # took every file under servers/ for its own: the edit was overwritten and the file made from a stub deleted,
    # neither copied aside, and the stubs of a server that failed this run were deleted with it.
    from tests.support import sample_config_yaml

    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    out = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    stub = out / "servers/crm/list_leads.py"
    edited = stub.read_text(encoding="utf-8") + "# MY EDIT\n"
    stub.unlink()
    stub.write_text(edited, encoding="utf-8")  # one name: the user's own edit
    mine = out / "servers/crm/my_list_leads.py"
    mine.write_text(edited.replace("def list_leads(", "def my_list_leads("), encoding="utf-8")
    os.link(out / "manifest.json", tmp_path / "manifest.backup.json")
    docs = sorted(p.name for p in (out / "servers/docs").iterdir())
    config.write_text(
        sample_config_yaml("crm")
        + f"  docs:\n    command: {json.dumps(sys.executable)}\n    args: [-c, 'raise SystemExit(3)']\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 3
    err = capsys.readouterr().err
    assert (out / KEPT_DIR / "servers/crm/list_leads.py").read_text(encoding="utf-8") == edited
    assert "# MY EDIT" not in stub.read_text(encoding="utf-8") and "servers/crm/list_leads.py" in err
    assert mine.read_text(encoding="utf-8") == edited.replace("def list_leads(", "def my_list_leads(")
    assert sorted(p.name for p in (out / "servers/docs").iterdir()) == docs  # the failed server's stubs are kept
    assert {s.name for s in Manifest.load(out).servers} == {"crm", "docs"}


def test_stubs_a_run_stopped_before_its_manifest_wrote_are_tooltrees_for_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the next run took them for the user's files: kept for good and still importable once their tools were
    # gone, and `--check` said the tree was up to date.
    import generator.generate as generate_module
    from generator.kept import PENDING_FILE

    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    snaps = tmp_path / "snaps"
    (snaps / "svc.json").write_text(
        json.dumps({"server": "svc", "info": {}, "tools": [tool(t) for t in ("alpha", "beta", "gamma")]}),
        encoding="utf-8",
    )

    def stopped(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C once the stubs are written, before the manifest is

    with monkeypatch.context() as m:
        m.setattr(generate_module, "write_plan", stopped)
        with pytest.raises(KeyboardInterrupt):
            generate_module.generate(None, out, snapshots=snaps, embeddings="off")
    assert (out / "servers/svc/beta.py").is_file() and (out / PENDING_FILE).is_file()
    assert {t.tool for t in Manifest.load(out).tools} == {"alpha"}  # the previous manifest

    (out / "servers/svc/gamma.py").write_text("# my edit of a stub that run wrote\n", encoding="utf-8")
    (snaps / "svc.json").write_text(json.dumps({"server": "svc", "info": {}, "tools": [tool("alpha")]}))
    check = main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--check", "--embeddings", "off"])
    assert check == 1, capsys.readouterr().err  # before: 0, "up to date"
    capsys.readouterr()
    assert main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"]) == 0
    err = capsys.readouterr().err
    assert sorted(p.name for p in (out / "servers/svc").glob("*.py")) == ["__init__.py", "alpha.py"]
    assert (out / KEPT_DIR / "servers/svc/gamma.py").read_text(
        encoding="utf-8"
    ) == "# my edit of a stub that run wrote\n"
    assert "servers/svc/gamma.py was edited" in err and not (out / PENDING_FILE).exists()


def test_a_stub_edited_over_a_manifest_of_another_release_that_records_no_hash_of_it_is_copied_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Another release's manifest (another version) recording its stubs in a form this release does not read: an edit
    # that keeps the stub's "Generated by tooltree" cannot be told from that release's text. Before: the stub was
    # replaced, the edit lost without a copy or a word.
    out, _ = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    stub = out / "servers/svc/alpha.py"
    generated = stub.read_text(encoding="utf-8")
    stub.write_text(generated + "# my patch\n", encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    for t in manifest["tools"]:
        t["hash"] = t.pop("stub_hash")
    manifest.update(version=2, checksums=manifest.pop("files"))
    (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    assert stub.read_text(encoding="utf-8") == generated
    assert (out / KEPT_DIR / "servers/svc/alpha.py").read_text(encoding="utf-8") == generated + "# my patch\n"
    [warning] = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith("warning: another tooltree release wrote servers/svc/alpha.py and its manifest does not")
    assert f"a copy is in {KEPT_DIR}/" in warning
    # beta.py, as this release renders it, was not replaced: no copy
    assert sorted(p.name for p in (out / KEPT_DIR / "servers/svc").iterdir()) == ["alpha.py"]


def test_a_stub_of_another_release_as_its_manifest_records_it_is_deleted_with_its_tool_without_a_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # That manifest records its very bytes: it is no file the user made from a stub (before: copied, with a warning
    # calling it edited, or not written by tooltree).
    out, _ = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    (out / "manifest.json").write_text(json.dumps({**manifest, "version": 2}), encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    assert not (out / "servers/svc/beta.py").exists() and not (out / KEPT_DIR).exists()
    assert "warning" not in err


def test_a_symbolic_link_the_user_put_in_the_tree_is_never_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tooltree writes no link: one in the tree is the user's. Before, a link in a removed tool's stub's place, or any
    # link under servers/ over a tree of another release, was deleted without a copy or a word.
    out, _ = generate(tmp_path, {"svc": ["alpha", "beta"]}, capsys)
    mine = tmp_path / "my_beta.py"
    mine.write_text((out / "servers/svc/beta.py").read_text(encoding="utf-8") + "# mine\n", encoding="utf-8")
    (out / "servers/svc/beta.py").unlink()
    (out / "servers/svc/beta.py").symlink_to(mine)
    (out / "servers/svc/notes.md").symlink_to(tmp_path / "notes.md")
    generate(tmp_path, {"svc": ["alpha"]}, capsys)
    assert os.readlink(out / "servers/svc/beta.py") == str(mine)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    (out / "manifest.json").write_text(json.dumps({**manifest, "version": 2}), encoding="utf-8")
    generate(tmp_path, {"svc": ["alpha"]}, capsys)
    assert os.readlink(out / "servers/svc/beta.py") == str(mine)
    assert os.readlink(out / "servers/svc/notes.md") == str(tmp_path / "notes.md")
    assert [t.tool for t in Manifest.load(out).tools] == ["alpha"]


def test_hidden_files_and_folders_over_a_tree_of_another_release_are_left_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No release writes one: a git repository the user keeps in servers/ is theirs. Before, every file of it was
    # deleted from its place and copied to .tooltree-kept/, a warning for each.
    out, _ = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    mine = {"servers/.git/HEAD": "ref: refs/heads/main\n", "servers/svc/.notes": "mine\n"}
    for rel, text in mine.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    (out / "manifest.json").write_text(json.dumps({**manifest, "version": 2}), encoding="utf-8")
    _, err = generate(tmp_path, {"svc": ["alpha"]}, capsys)
    assert {rel: (out / rel).read_text(encoding="utf-8") for rel in mine} == mine
    assert not (out / KEPT_DIR).exists() and "warning" not in err
