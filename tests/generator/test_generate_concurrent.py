"""Two `generate-tree` runs on one tree at once (real processes): they take turns; the tree is one generation."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from generator.generate import generate
from tests.generator.paused import paused_generate, wait_readable, write_snapshots
from tests.support import REPO

# Reports when it is about to take a lock (or, by ending, that it finished without waiting for one).
_SECOND_RUN = """
import fcntl, os, sys
from tooltree_cli.main import main

report, flock = int(sys.argv[1]), fcntl.flock

def hooked(fd, operation):
    os.write(report, b"l")
    return flock(fd, operation)

fcntl.flock = hooked
raise SystemExit(main(["generate-tree", "--from-snapshot", sys.argv[2], "--out", sys.argv[3], "--json"]))
"""


def stubs_and_manifest(out: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The stubs on disk and the stubs the manifest lists, each as path → hash."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    listed = {t["path"]: t["stub_hash"] for t in manifest["tools"]}
    on_disk = {
        p.relative_to(out).as_posix(): "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (out / "servers" / "alpha").glob("*.py")
        if p.name != "__init__.py"
    }
    return on_disk, listed


@pytest.mark.parametrize("existing", [False, True], ids=["new-tree", "existing-tree"])
def test_a_second_run_waits_for_the_first_and_the_tree_is_whole_after_both(tmp_path: Path, existing: bool) -> None:
    # Before: on a new tree, the second run refused it (it held the first's stubs but no manifest yet); on an
    # existing one, it wrote its tree while the first was halfway, and the first then deleted its stubs as
    # stale and wrote a manifest naming stubs the second had deleted.
    first, second = write_snapshots(tmp_path / "first", "old"), write_snapshots(tmp_path / "second", "new")
    out = tmp_path / "tree"
    if existing:
        generate(None, out, snapshots=write_snapshots(tmp_path / "prior", "prior"))
    report_r, report_w = os.pipe()
    with paused_generate(first, out) as a:
        b = subprocess.Popen(
            [sys.executable, "-c", _SECOND_RUN, str(report_w), str(second), str(out)],
            cwd=REPO, pass_fds=(report_w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(report_w)
        try:
            wait_readable(report_r)  # b"l": it waits for the lock; b"": it ended without waiting
            a_status, a_err = a.resume()
            _, b_err = b.communicate(timeout=60)
        finally:
            os.close(report_r)
            if b.poll() is None:
                b.kill()
                b.communicate()
    assert (a_status, b.returncode) == (0, 0), (a_err[-2000:], b_err.decode()[-2000:])
    on_disk, listed = stubs_and_manifest(out)
    assert on_disk == listed
    assert sorted(listed) == sorted(f"servers/alpha/new_{i}.py" for i in range(200))  # the second run wrote last


def test_the_search_index_is_written_after_the_tree_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Embedding a big catalog takes minutes: sessions starting on the tree (which read it under a shared
    # lock) must not wait for it, only for the stubs and the manifest.
    import fcntl

    import generator.generate

    out = tmp_path / "tree"
    write = generator.generate.write_search_index
    readable: list[bool] = []

    def index_while_trying_to_read(tree: Path, *args: object, **kwargs: object) -> None:
        fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # another open file: conflicts like another process
            readable.append(True)
        except BlockingIOError:
            readable.append(False)
        finally:
            os.close(fd)
        write(tree, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(generator.generate, "write_search_index", index_while_trying_to_read)
    result = generate(None, out, snapshots=write_snapshots(tmp_path / "snap", "one"))
    assert readable == [True] and result.report is not None and "search_index.json" in result.report.written


def test_a_run_that_has_to_wait_for_another_says_so_then_writes_the_tree(tmp_path: Path) -> None:
    # Before: a run waiting for another on the same tree printed nothing while it waited.
    from tool_tree.tree import tree_lock

    snapshots, out = write_snapshots(tmp_path / "snaps", "new"), tmp_path / "tree"
    out.mkdir()
    with tree_lock(out):  # another run writing this tree
        run = subprocess.Popen(
            [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot", str(snapshots),
             "--out", str(out)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert run.stderr is not None
            said = b""
            while "waiting for it to finish …\n".encode() not in said:  # the whole line: print writes its end apart
                byte = wait_readable(run.stderr.fileno())
                assert byte, f"ended without saying it waits: {said.decode()}"
                said += byte
            assert f"another generate-tree is writing {out}".encode() in said
            assert not (out / "manifest.json").exists()  # it waits: nothing written yet
        except BaseException:
            run.kill()
            run.communicate()
            raise
    _, err = run.communicate(timeout=60)
    assert run.returncode == 0, err.decode()[-2000:]
    assert len(json.loads((out / "manifest.json").read_text(encoding="utf-8"))["tools"]) == 200


def test_a_run_that_need_not_wait_says_nothing_of_waiting(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot",
         str(write_snapshots(tmp_path / "snaps", "new")), "--out", str(tmp_path / "tree")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "another generate-tree is writing" not in proc.stderr and " written, 0 deleted" in proc.stderr


# Pauses the run as it builds the search index (its tree written, the tree's lock released) until the parent says go.
_PAUSED_AT_INDEX = """
import os, sys
import tool_tree.search._store as store
from tooltree_cli.main import main

paused, go = int(sys.argv[1]), int(sys.argv[2])
build = store.build_index

def hooked(*args, **kwargs):
    os.write(paused, b"p")
    os.read(go, 1)
    return build(*args, **kwargs)

store.build_index = hooked
raise SystemExit(main(["generate-tree", "--from-snapshot", sys.argv[3], "--out", sys.argv[4], "--json"]))
"""


def test_a_run_that_builds_its_index_while_another_regenerates_the_tree_leaves_the_later_runs_index(
    tmp_path: Path,
) -> None:
    # Before: the first run, paused while it built the index of the tree it wrote, then replaced the second run's
    # index with its own, of a manifest no longer on disk: every search then said the index was built from another
    # manifest and matched by words only, until the next generation.
    from tool_tree.search._store import index_matches_manifest

    first, second = write_snapshots(tmp_path / "first", "old"), write_snapshots(tmp_path / "second", "new")
    out = tmp_path / "tree"
    paused_r, paused_w = os.pipe()
    go_r, go_w = os.pipe()
    a = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_AT_INDEX, str(paused_w), str(go_r), str(first), str(out)],
        cwd=REPO, pass_fds=(paused_w, go_r), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(paused_w)
    os.close(go_r)
    try:
        assert wait_readable(paused_r) == b"p"  # its tree (of old_*) written; its index being built
        b = subprocess.run(
            [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot", str(second),
             "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert b.returncode == 0, b.stderr[-2000:]
        os.write(go_w, b"g")
        _, a_err = a.communicate(timeout=60)
    finally:
        os.close(paused_r)
        os.close(go_w)
        if a.poll() is None:
            a.kill()
            a.communicate()
    assert a.returncode == 0, a_err.decode()[-2000:]
    assert index_matches_manifest(out)  # the index on disk is of the tree on disk, the second run's
    index = (out / "search_index.json").read_text(encoding="utf-8")
    assert "new_199" in index and "old_199" not in index


# Pauses the run as it forgets the copies its warnings named, once it has read the record of them, until told go.
_PAUSED_FORGETTING = """
import os, sys
import generator.generate, generator.kept as kept
from tooltree_cli.main import main

paused, go = int(sys.argv[1]), int(sys.argv[2])
forget, lines, forgetting = kept.forget_unsaid, kept._unsaid_lines, []

def read_then_pause(root):
    read = lines(root)
    if forgetting:
        os.write(paused, b"p")
        os.read(go, 1)
    return read

def forget_hooked(*args):
    forgetting.append(True)
    return forget(*args)

kept._unsaid_lines, generator.generate.forget_unsaid = read_then_pause, forget_hooked
raise SystemExit(main(["generate-tree", "--from-snapshot", sys.argv[3], "--out", sys.argv[4], "--json"]))
"""

# Reports b"w" when it has to wait for the tree's lock, and b"p" once it has written the tree (then waits: killed).
_STOPPED_BEFORE_SAYING = """
import fcntl, os, sys
import tool_tree.search._store as store
from tooltree_cli.main import main

report, flock, build = int(sys.argv[1]), fcntl.flock, store.build_index

def hooked(fd, operation):
    try:
        return flock(fd, operation)
    except BlockingIOError:
        os.write(report, b"w")
        raise

def stop_here(*args, **kwargs):
    os.write(report, b"p")
    os.read(0, 1)

fcntl.flock, store.build_index = hooked, stop_here
raise SystemExit(main(["generate-tree", "--from-snapshot", sys.argv[2], "--out", sys.argv[3]]))
"""


def test_a_copy_aside_by_a_run_stopped_while_another_forgets_its_own_is_still_named_by_the_next_run(
    tmp_path: Path,
) -> None:
    # Before: the first run took the lines of the copies it had named out of .tooltree-kept/.unsaid without the tree's
    # lock, and the second run's line, added between that read and the write, went with the file: the second run,
    # stopped before it could say so, had copied the user's edited stub aside, and no later run named that copy.
    out = tmp_path / "tree"
    generate(None, out, snapshots=write_snapshots(tmp_path / "s0", "old"))
    new, third = write_snapshots(tmp_path / "s1", "new"), write_snapshots(tmp_path / "s2", "third")
    with (out / "servers/alpha/old_1.py").open("a", encoding="utf-8") as f:
        f.write("# my edit\n")
    paused_r, paused_w = os.pipe()
    go_r, go_w = os.pipe()
    report_r, report_w = os.pipe()
    a = subprocess.Popen(
        [sys.executable, "-c", _PAUSED_FORGETTING, str(paused_w), str(go_r), str(new), str(out)],
        cwd=REPO, pass_fds=(paused_w, go_r), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(paused_w)
    os.close(go_r)
    b: subprocess.Popen[bytes] | None = None
    try:
        assert wait_readable(paused_r) == b"p"  # it copied old_1.py aside, said so, and read the record
        with (out / "servers/alpha/new_1.py").open("a", encoding="utf-8") as f:
            f.write("# my edit\n")
        b = subprocess.Popen(
            [sys.executable, "-c", _STOPPED_BEFORE_SAYING, str(report_w), str(third), str(out)],
            cwd=REPO, pass_fds=(report_w,), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(report_w)
        first = wait_readable(report_r)  # b"w": it waits for the first run; b"p": it wrote its tree meanwhile
        os.write(go_w, b"g")
        _, a_err = a.communicate(timeout=60)
        assert a.returncode == 0, a_err.decode()[-2000:]
        if first == b"w":
            while (byte := wait_readable(report_r)) == b"w":
                pass
            assert byte == b"p"
        else:
            assert first == b"p"
        b.kill()  # stopped before it could name its copy of new_1.py
        b.communicate()
    finally:
        os.close(paused_r)
        os.close(go_w)
        os.close(report_r)
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert (out / ".tooltree-kept/servers/alpha/new_1.py").read_text(encoding="utf-8").endswith("# my edit\n")
    check = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot", str(third), "--out", str(out),
         "--check"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        "servers/alpha/new_1.py was edited, or not written by tooltree: a run stopped, or failed, before it could say "
        "so copied it to .tooltree-kept/servers/alpha/new_1.py, to delete it"
    ) in check.stderr


def test_a_run_stopped_while_it_waits_for_another_says_only_that_it_was_interrupted(tmp_path: Path) -> None:
    # Before: it went on "the tree keeps its previous manifest (stubs written before the stop may be new); run
    # `tooltree generate-tree` again to finish it", of the stubs the other run, still writing, had written.
    import signal

    out = tmp_path / "tree"
    generate(None, out, snapshots=write_snapshots(tmp_path / "prior", "prior"))
    with paused_generate(write_snapshots(tmp_path / "first", "old"), out) as a:
        b = subprocess.Popen(
            [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot",
             str(write_snapshots(tmp_path / "second", "new")), "--out", str(out)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert b.stderr is not None
            said = b""
            while "waiting for it to finish …\n".encode() not in said:  # the whole line: print writes its end apart
                byte = wait_readable(b.stderr.fileno())
                assert byte, f"ended without saying it waits: {said.decode()}"
                said += byte
            b.send_signal(signal.SIGINT)
            _, err = b.communicate(timeout=60)
        finally:
            if b.poll() is None:
                b.kill()
                b.communicate()
        a_status, a_err = a.resume()
    assert b.returncode == 130
    assert (said + err).decode().endswith("waiting for it to finish …\ntooltree: interrupted\n")
    assert a_status == 0, a_err[-2000:]
    assert stubs_and_manifest(out)[1].keys() == {f"servers/alpha/old_{i}.py" for i in range(200)}


def test_a_run_stopped_before_its_manifest_says_so_when_another_run_wrote_one_after_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the other run's manifest, newer than this run's start, was taken for this run's own, and only
    # "tooltree: interrupted" was said, though this run had written its stubs beside that manifest.
    import generator.generate as generate_module
    from generator import files, write_over
    from tooltree_cli.main import main

    out = tmp_path / "tree"
    generate(None, out, snapshots=write_snapshots(tmp_path / "prior", "prior"))
    other, mine = write_snapshots(tmp_path / "other", "old"), write_snapshots(tmp_path / "mine", "new")
    read, write_file = generate_module.read_snapshots, files.write_file

    def another_run_meanwhile(*args: Any, **kwargs: Any) -> Any:  # as this run lists its servers
        done = subprocess.run(
            [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--from-snapshot", str(other), "--out",
             str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return read(*args, **kwargs)

    def stopped_at_the_manifest(root: Path, rel: str, *args: Any, **kwargs: Any) -> bool:
        if rel == "manifest.json":
            raise KeyboardInterrupt
        return write_file(root, rel, *args, **kwargs)

    monkeypatch.setattr(generate_module, "read_snapshots", another_run_meanwhile)
    monkeypatch.setattr(files, "write_file", stopped_at_the_manifest)
    monkeypatch.setattr(write_over, "write_file", stopped_at_the_manifest)
    assert main(["generate-tree", "--from-snapshot", str(mine), "--out", str(out), "--embeddings", "off"]) == 130
    assert (out / "servers/alpha/new_1.py").is_file()
    assert stubs_and_manifest(out)[1].keys() == {f"servers/alpha/old_{i}.py" for i in range(200)}
    assert capsys.readouterr().err.endswith(
        "tooltree: interrupted\ntooltree: the tree keeps its previous manifest (stubs written before the stop may be "
        "new); run `tooltree generate-tree` again to finish it\n"
    )


# Reports b"w" when it finds the tree's lock held and waits for it.
_WAITING_RUN = """
import fcntl, os, sys
from tooltree_cli.main import main

report, flock = int(sys.argv[1]), fcntl.flock

def hooked(fd, operation):
    try:
        return flock(fd, operation)
    except BlockingIOError:
        os.write(report, b"w")
        raise

fcntl.flock = hooked
raise SystemExit(main(["generate-tree", *sys.argv[2:]]))
"""


class AnotherRun:
    """`generate-tree` in another process, started when a test's hook says (`start`), once."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None
        self._report = -1

    def start(self) -> None:
        """Start it; return once it has ended or waits for the tree's lock."""
        if self.process is not None:
            return
        report_r, report_w = os.pipe()
        self._report = report_r
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WAITING_RUN, str(report_w), *self.args, "--embeddings", "off"],
            cwd=REPO, pass_fds=(report_w,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(report_w)
        wait_readable(self._report)  # b"w": it waits for the lock; b"": it ended

    def finish(self) -> None:
        """Let it end; fails unless it started and succeeded."""
        assert self.process is not None, "never started"
        _, err = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, err.decode()[-2000:]

    def __enter__(self) -> AnotherRun:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._report >= 0:
            os.close(self._report)
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


@pytest.mark.parametrize("change", ["new-tools", "filter", "filter-of-snapshots-elsewhere"])
def test_a_run_from_snapshots_does_not_undo_a_generation_written_while_it_read_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    # Before: `--from-snapshot` of the tree's own snapshots read them, and the filters the manifest records, with no
    # lock held (of snapshots elsewhere, the filters); another run's generation written meanwhile (new tools, or an
    # exclude added) was then written over with the tree as it was before it, the other run's change silently undone.
    import generator.generate as generate_module

    out = tmp_path / "tree"
    old = write_snapshots(tmp_path / "s0", "old")
    generate(None, out, snapshots=old, embeddings="off")
    if change == "new-tools":
        other = AnotherRun("--from-snapshot", str(write_snapshots(tmp_path / "s1", "new")), "--out", str(out))
        expected = {f"servers/alpha/new_{i}.py" for i in range(200)}
    else:  # the second run's tools, those of the first run's snapshots, or of a copy of them elsewhere
        config = tmp_path / "c.yaml"
        config.write_text(f"servers:\n  alpha:\n    command: {json.dumps(sys.executable)}\n    exclude: ['old_1*']\n",
                          encoding="utf-8")  # fmt: skip
        other = AnotherRun("--config", str(config), "--from-snapshot", str(old), "--out", str(out))
        expected = {f"servers/alpha/old_{i}.py" for i in range(200) if not str(i).startswith("1")}
    read = generate_module.read_snapshots

    def another_run_once_read(*args: Any, **kwargs: Any) -> Any:
        stored = read(*args, **kwargs)
        other.start()
        return stored

    monkeypatch.setattr(generate_module, "read_snapshots", another_run_once_read)
    source = tmp_path / "s0" if change == "filter-of-snapshots-elsewhere" else out / "snapshots"
    with other:
        result = generate(None, out, snapshots=source, embeddings="off")
        other.finish()
    assert not result.failed
    on_disk, listed = stubs_and_manifest(out)
    assert on_disk == listed
    assert listed.keys() == expected  # the other run's generation: it wrote last, or this one re-rendered it


def test_a_run_from_the_trees_own_snapshots_reads_none_that_another_run_removes_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: another run that removed server beta deleted its snapshot between this run's listing of the folder and
    # its reading of the file: 'snapshots/beta.json: unreadable snapshot ([Errno 2] No such file or directory …)'.
    from generator import snapshots

    both = write_snapshots(tmp_path / "s0", "old")
    beta = {"server": "beta", "info": {}, "tools": [{"name": "b", "inputSchema": {"type": "object"}}]}
    (both / "beta.json").write_text(json.dumps(beta), encoding="utf-8")
    out = tmp_path / "tree"
    generate(None, out, snapshots=both, embeddings="off")
    other = AnotherRun("--from-snapshot", str(write_snapshots(tmp_path / "s1", "new")), "--out", str(out))
    read = snapshots._read

    def another_run_before_beta(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.name == "beta.json":
            other.start()
        return read(path, *args, **kwargs)

    monkeypatch.setattr(snapshots, "_read", another_run_before_beta)
    with other:
        result = generate(None, out, snapshots=out / "snapshots", embeddings="off")
        other.finish()
    assert not result.failed
    assert not (out / "servers/beta").exists() and not (out / "snapshots/beta.json").exists()
    assert stubs_and_manifest(out)[1].keys() == {f"servers/alpha/new_{i}.py" for i in range(200)}
