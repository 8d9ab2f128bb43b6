"""A first `generate-tree` into a folder, stopped midway (a full disk: RLIMIT_FSIZE, which refuses a write past
it as a full disk does, in a child process; Ctrl-C), leaves the folder as it was, and the next run writes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import generator.generate
from tests.support import REPO
from tooltree_cli.main import main

_LIMITED_RUN = """
import resource, signal, sys
from tooltree_cli.main import main

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
raise SystemExit(main(["generate-tree", "--from-snapshot", sys.argv[1], "--out", sys.argv[2], "--embeddings", "off"]))
"""


def run(snaps: Path, out: Path, limit: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LIMITED_RUN, str(snaps), str(out), str(limit)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_snapshots(snaps: Path) -> None:
    snaps.mkdir()
    small = [{"name": f"t{i}", "description": "Small.", "inputSchema": {"type": "object"}} for i in range(5)]
    big = [{"name": "big", "description": "Long. " + "x" * 20_000, "inputSchema": {"type": "object"}}]
    (snaps / "a.json").write_text(json.dumps({"server": "a", "info": {}, "tools": small}), encoding="utf-8")
    (snaps / "b.json").write_text(json.dumps({"server": "b", "info": {}, "tools": big}), encoding="utf-8")


def test_a_first_generation_the_disk_stops_midway_removes_what_it_made_and_the_next_run_writes_the_tree(
    tmp_path: Path,
) -> None:
    snaps = tmp_path / "snaps"
    write_snapshots(snaps)
    out = tmp_path / "tree"
    out.mkdir()
    (out / "NOTES.md").write_text("mine\n", encoding="utf-8")
    failed = run(snaps, out, 16_000)  # every stub fits; b's snapshot (20 KB) does not
    assert failed.returncode == 2, failed.stderr
    assert "cannot write the tree" in failed.stderr and "File too large; no tree was left there" in failed.stderr
    assert sorted(p.name for p in out.iterdir()) == ["NOTES.md"]  # no half tree, no half-written file
    done = run(snaps, out, 1 << 30)
    assert done.returncode == 0, done.stderr
    assert (out / "servers/b/big.py").is_file() and (out / "manifest.json").is_file()
    assert (out / "NOTES.md").read_text(encoding="utf-8") == "mine\n"


def test_a_first_generation_interrupted_after_its_stubs_were_written_removes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    snaps, out = tmp_path / "snaps", tmp_path / "tree"
    write_snapshots(snaps)
    args = ["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"]

    def interrupted(*args: object, **kwargs: object) -> None:  # Ctrl-C once every stub is written
        assert (out / "servers/a/t0.py").is_file()
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(generator.generate, "write_plan", interrupted)
        assert main(args) == 130
    assert capsys.readouterr().err.endswith("tooltree: interrupted\n")
    assert list(out.iterdir()) == []
    assert main(args) == 0 and (out / "manifest.json").is_file()


def test_a_regeneration_the_disk_stops_midway_keeps_the_previous_manifest_and_says_so(tmp_path: Path) -> None:
    snaps, out = tmp_path / "snaps", tmp_path / "tree"
    write_snapshots(snaps)
    assert run(snaps, out, 1 << 30).returncode == 0
    manifest = (out / "manifest.json").read_bytes()
    data = json.loads((snaps / "a.json").read_text(encoding="utf-8"))
    data["tools"].append({"name": "late", "description": "Long. " + "y" * 40_000, "inputSchema": {"type": "object"}})
    (snaps / "a.json").write_text(json.dumps(data), encoding="utf-8")
    failed = run(snaps, out, 30_000)  # the new snapshot of a (over 40 KB) does not fit
    assert failed.returncode == 2, failed.stderr
    assert failed.stderr.rstrip().endswith(
        "File too large; the tree keeps its previous manifest (stubs written before the error may be new): run it again"
    )
    assert (out / "manifest.json").read_bytes() == manifest
    assert not [p for p in out.rglob("*") if p.name.startswith(".tmp-")]  # no temporary file is left


@pytest.mark.parametrize("stopped_in", ["write_plan", "write_search_index"])
def test_a_copy_kept_by_a_regeneration_that_was_stopped_is_named_by_the_next_check_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stopped_in: str
) -> None:
    # Before: the stopped run copied the edited stub aside and wrote its own over it, and no run ever said so.
    snaps, out = tmp_path / "snaps", tmp_path / "tree"
    write_snapshots(snaps)
    args = ["generate-tree", "--from-snapshot", str(snaps), "--out", str(out), "--embeddings", "off"]
    assert main(args) == 0
    stub = out / "servers/a/t0.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "# my edit\n", encoding="utf-8")
    data = json.loads((snaps / "a.json").read_text(encoding="utf-8"))
    data["tools"][0]["description"] = "Small, and said better."
    (snaps / "a.json").write_text(json.dumps(data), encoding="utf-8")

    def interrupted(*args: object, **kwargs: object) -> None:  # Ctrl-C once the stubs, or the tree, are written
        assert "# my edit" not in stub.read_text(encoding="utf-8")
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(generator.generate, stopped_in, interrupted)
        assert main(args) == 130
    assert (out / ".tooltree-kept/servers/a/t0.py").read_text(encoding="utf-8").endswith("# my edit\n")
    capsys.readouterr()
    said = (
        "warning: servers/a/t0.py was edited, or not written by tooltree: a run stopped, or failed, before it could "
        "say so copied it to .tooltree-kept/servers/a/t0.py, to replace it"
    )
    assert main([*args, "--check"]) == 1
    assert said in capsys.readouterr().err
    assert main(args) == 0
    assert said in capsys.readouterr().err
    assert main(args) == 0
    assert "warning" not in capsys.readouterr().err  # said once the run was not stopped
