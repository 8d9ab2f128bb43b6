"""Workspace attacks from a script: each is bounded, and a save is complete or fails loudly keeping the previous copy.

Every test goes through a real container and a real host folder: a session restores the folder
at start and saves it back at close (`Sandbox(workspace=...)`). Covered elsewhere: symlinks, FIFOs,
``..`` and setuid bits on save (test_attack_filesystem.py), the byte quota
(test_attack_resources.py::test_filling_the_workspace_stops_at_its_quota_and_what_fits_is_saved).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, WorkspaceError
from sandbox.hardening import SESSION_LABEL
from sandbox.workspace import ENTRY_BYTES, MAX_ENTRIES, TMPFS_INODES
from tests.docker_cli import EngineWithCLI
from tests.security.probes import run_ok
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker

MKDIR_UNTIL_FULL = """\
import errno, os
made = 0
try:
    for i in range(200_000):
        os.mkdir(f'd{i}')
        made += 1
except OSError as e:
    print(errno.errorcode[e.errno], made)
else:
    print('none', made)
"""

# 8,190 folders of a binary tree 12 deep, then a chain of 4 below each of its 4,096 leaves: 24,574
# folders, names of 254 characters, paths up to 4,079 bytes; about 84 MB of paths in all, more than
# the 64 MiB a single frame to the container may hold.
GROW_TREE = """\
import os
made = 0
def grow(path, level):
    global made
    if level == 16:
        return
    for branch in range(2 if level < 12 else 1):
        child = path + '/' + 'x' * 253 + str(branch)
        os.mkdir(child)
        made += 1
        grow(child, level + 1)
grow('/workspace', 0)
print(made)
"""
TREE_FOLDERS = 24_574

COUNT_TREE = """\
import os
folders = longest = 0
for root, dirs, files in os.walk('/workspace/' + 'x' * 253 + '0'):
    folders += len(dirs)
    longest = max([longest] + [len(os.path.join(root, d)) - len('/workspace/') for d in dirs])
print(folders + 1, longest)
"""


def snapshot(root: Path) -> dict[bytes, bytes | None]:
    """Every path below ``root`` (as bytes) and its content (None for a folder)."""
    found: dict[bytes, bytes | None] = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames:
            found[os.path.relpath(os.path.join(dirpath, name), base)] = None
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as f:
                found[os.path.relpath(os.path.join(dirpath, name), base)] = f.read()
    return found


def disk_bytes(root: Path) -> int:
    """What the folder takes on the host's disk (allocated blocks)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        total += sum(os.lstat(os.path.join(dirpath, n)).st_blocks * 512 for n in dirnames + filenames)
    return total


@pytest.fixture
def saved_before(tmp_path: Path) -> Path:
    """A workspace folder holding one file from an earlier save."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kept.txt").write_bytes(b"previous save")
    return workspace


def test_empty_folders_count_against_the_workspace_cap_and_bound_the_hosts_disk(
    bare_backend: DockerBackend, saved_before: Path
) -> None:
    # Before: 200,000 folders made, saved as 786 MB and 200k inodes on the host for 0 bytes of data.
    workspace = saved_before
    with Sandbox(bare_backend, workspace=workspace) as sb:
        code, made = run_ok(sb, MKDIR_UNTIL_FULL).split()
        assert code == "ENOSPC" and MAX_ENTRIES - 16 < int(made) < TMPFS_INODES
        # A few more entries than a save takes: the save says so and keeps the previous copy.
        with pytest.raises(WorkspaceError, match=f"more than {MAX_ENTRIES} files and folders"):
            sb.save_workspace()
        assert snapshot(workspace) == {b"kept.txt": b"previous save"}
        run_ok(sb, "import os\nfor i in range(100):\n    os.rmdir(f'd{i}')\n")
    saved = snapshot(workspace)
    assert len(saved) <= MAX_ENTRIES and b"d100" in saved and b"d99" not in saved
    assert disk_bytes(workspace) <= bare_backend.config.workspace_bytes
    assert len(saved) * ENTRY_BYTES <= bare_backend.config.workspace_bytes
    # A later session restores all of it.
    sb = Sandbox(bare_backend, workspace=workspace).start()
    try:
        assert run_ok(sb, "import os\nprint(sum(n.startswith('d') for n in os.listdir('.')))") == f"{int(made) - 100}\n"
    finally:
        sb.kill()  # not saved again: the host copy was checked above


def test_many_long_nested_folders_that_were_saved_are_restored(bare_backend: DockerBackend, tmp_path: Path) -> None:
    # Before: the restore sent every folder in one request, a frame over the container's 64 MiB cap,
    # and every later session failed with "the sandbox closed its channel".
    workspace = tmp_path / "ws"
    with Sandbox(bare_backend, workspace=workspace) as sb:
        assert run_ok(sb, GROW_TREE) == f"{TREE_FOLDERS}\n"
    sb = Sandbox(bare_backend, workspace=workspace).start()
    try:
        assert run_ok(sb, COUNT_TREE) == f"{TREE_FOLDERS // 2} {16 * 254 + 15}\n"
    finally:
        sb.kill()


@pytest.mark.parametrize("shape", ["too_many_entries", "too_deep"])
def test_a_workspace_that_cannot_be_restored_says_why_and_is_left_as_it_was(
    bare_backend: DockerBackend, docker_engine: EngineWithCLI, tmp_path: Path, shape: str
) -> None:
    workspace = tmp_path / "ws"
    (workspace / "skills").mkdir(parents=True)
    (workspace / "skills" / "top_leads.py").write_text("def top_leads(): ...\n", encoding="utf-8")
    (workspace / "notes.txt").write_text("the user's notes", encoding="utf-8")
    if shape == "too_many_entries":
        (workspace / "bulk").mkdir()
        for i in range(MAX_ENTRIES):
            (workspace / "bulk" / f"{i}").mkdir()
        reason = f"more than {MAX_ENTRIES} files and folders"
    else:
        (workspace / "deep").joinpath(*["d"] * 70).mkdir(parents=True)
        reason = "nested deeper than 64 folders"
    before = snapshot(workspace)
    sb = Sandbox(bare_backend, workspace=workspace)
    try:
        with pytest.raises(WorkspaceError, match=reason) as raised:
            sb.start()
    finally:
        sb.kill()  # a no-op when the restore failed as it should
    assert "Nothing in it was changed" in str(raised.value)
    assert snapshot(workspace) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    label = f"label={SESSION_LABEL}={sb.session_id}"
    assert docker_engine.text(["ps", "--all", "--quiet", "--filter", label]) == ""


FOLDERS_OF_ONE_FILE = """\
import os
for i in range(1500):
    os.mkdir(f'f{i:04}')
    open(f'f{i:04}/x.txt', 'w').write(str(i))
"""


def test_every_file_of_many_folders_is_saved(bare_backend: DockerBackend, tmp_path: Path) -> None:
    # Before: 1,012 of 1,500 saved without a word (the walk held one descriptor per pending folder).
    workspace = tmp_path / "ws"
    with Sandbox(bare_backend, workspace=workspace) as sb:
        run_ok(sb, FOLDERS_OF_ONE_FILE)
    saved = sorted(workspace.glob("f*/x.txt"))
    assert len(saved) == 1500
    assert [p.read_text(encoding="utf-8") for p in saved] == [str(i) for i in range(1500)]


def test_a_file_the_save_cannot_read_fails_it_loudly_and_keeps_the_previous_copy(
    bare_backend: DockerBackend, saved_before: Path
) -> None:
    # Before: the unreadable file was skipped in silence and the previous copy replaced.
    workspace = saved_before
    with Sandbox(bare_backend, workspace=workspace) as sb:
        run_ok(
            sb, "import os\nopen('new.txt', 'w').write('new')\nopen('locked', 'w').write('x')\nos.chmod('locked', 0)\n"
        )
        with pytest.raises(WorkspaceError, match="'locked': Permission denied"):
            sb.save_workspace()
        assert snapshot(workspace) == {b"kept.txt": b"previous save"}
        run_ok(sb, "import os\nos.chmod('locked', 0o644)\n")
    assert snapshot(workspace)[b"locked"] == b"x"
    assert sorted(p.name for p in workspace.parent.iterdir()) == ["ws"]


def test_names_that_are_not_utf8_are_saved_and_restored_byte_for_byte_with_the_output_kept(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: "surrogates not allowed" failed the whole save; the session's files were lost.
    workspace = tmp_path / "ws"
    code = (
        "import os\n"
        "open(b'/workspace/caf\\xe9.txt', 'wb').write(b'latin-1 name')\n"
        "os.mkdir(b'/workspace/d\\xff')\n"
        "open(b'/workspace/d\\xff/\\x80', 'wb').write(b'deeper')\n"
        "open('fresh.txt', 'w').write('new')\n"
        "print('the script printed this')\n"
    )
    with Sandbox(bare_backend, workspace=workspace) as sb:
        result = sb.execute(code)
        assert result.error is None and result.stdout == "the script printed this\n"
        assert {e["name"] for e in sb.list_files()} >= {"caf\ufffd.txt", "d\ufffd", "fresh.txt"}
    saved = snapshot(workspace)
    assert saved[b"caf\xe9.txt"] == b"latin-1 name"
    assert saved[b"d\xff/\x80"] == b"deeper"
    assert saved[b"fresh.txt"] == b"new"
    with Sandbox(bare_backend, workspace=workspace) as sb:
        out = run_ok(sb, "import os\nprint(sorted(os.listdir(b'/workspace')), os.listdir(b'/workspace/d\\xff'))")
    assert out == "[b'caf\\xe9.txt', b'd\\xff', b'fresh.txt', b'skills'] [b'\\x80']\n"
    assert snapshot(workspace) == saved


def test_two_sessions_of_one_folder_and_the_user_lose_nothing(bare_backend: DockerBackend, tmp_path: Path) -> None:
    # Before: each save replaced the folder with the sandbox's copy, so the last session to close
    # deleted what the other session and the user had written meanwhile, and the links.
    workspace, outside = tmp_path / "ws", tmp_path / "data.csv"
    workspace.mkdir()
    outside.write_bytes(b"a,b\n")
    (workspace / "link.csv").symlink_to(outside)
    (workspace / "shared.txt").write_bytes(b"v1")
    first = Sandbox(bare_backend, workspace=workspace).start()
    try:
        run_ok(first, "open('from_first.txt', 'w').write('1')\nimport os\nos.remove('shared.txt')\n")
        (workspace / "by_user.txt").write_bytes(b"user")
        with Sandbox(bare_backend, workspace=workspace) as second:
            run_ok(second, "open('from_second.txt', 'w').write('2')\n")
    finally:
        first.close()
    assert snapshot(workspace) == {
        b"by_user.txt": b"user",
        b"from_first.txt": b"1",
        b"from_second.txt": b"2",
        b"link.csv": b"a,b\n",  # the link, followed by the snapshot's read
        b"skills": None,
        **{k: v for k, v in snapshot(workspace).items() if k.startswith(b"skills/")},
    }
    assert (workspace / "link.csv").is_symlink() and first.workspace_notes == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv", "ws"]


def test_a_linked_workspace_is_saved_into_its_folder_and_stays_a_link(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    real, link = tmp_path / "real", tmp_path / "ws"
    real.mkdir()
    (real / "in.txt").write_bytes(b"in")
    link.symlink_to(real)
    with Sandbox(bare_backend, workspace=link) as sb:
        run_ok(sb, "open('out.txt', 'w').write(open('in.txt').read() + ' and out')\n")
    assert link.is_symlink() and (real / "out.txt").read_bytes() == b"in and out"


def test_a_workspace_that_is_a_file_is_refused_before_anything_starts(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes")
    with pytest.raises(WorkspaceError, match="not a folder"):
        Sandbox(bare_backend, workspace=notes)
    assert notes.read_bytes() == b"my notes"


SWAP_AND_GROW = """\
import os, shutil
shutil.rmtree('notes')
open('notes', 'w').write('a file now')
path = '/workspace'
for level in range(15):
    path += '/' + 'x' * 250
    os.mkdir(path)
open(path + '/f.txt', 'w').write('deep')
"""


def test_a_folder_swapped_for_a_file_and_paths_past_path_max_on_the_host_are_saved_again_and_again(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: the first save failed ("Not a directory": a restored folder became a file), and once paths of
    # 3,800 bytes were saved under a host folder with a long path, every later save failed over PATH_MAX.
    workspace = tmp_path / ("p" * 200) / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "a.txt").write_bytes(b"v1")
    with Sandbox(bare_backend, workspace=workspace) as sb:
        run_ok(sb, SWAP_AND_GROW)
    assert (workspace / "notes").read_bytes() == b"a file now"
    with Sandbox(bare_backend, workspace=workspace) as sb:
        run_ok(sb, "open('second.txt', 'w').write('2')\n")
    assert sb.workspace_notes == [] and (workspace / "second.txt").read_bytes() == b"2"
    with Sandbox(bare_backend, workspace=workspace) as sb:
        out = run_ok(sb, "import os\nprint(sum(len(d) for _, d, _ in os.walk('/workspace/' + 'x' * 250)))\n")
    assert out == "14\n"
    assert sorted(p.name for p in workspace.parent.iterdir()) == ["ws"]


WORK_FOLDER_NAME = """\
import os
os.makedirs('/workspace/.tooltree-save/sub', exist_ok=True)
open('/workspace/.tooltree-save/sub/blob', 'wb').write(os.urandom(1 << 20))
open('/workspace/work.txt', 'w').write('the work')
"""


def test_a_tooltree_save_folder_made_by_a_script_is_never_saved_and_leaves_no_copy_beside_the_folder(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: the sandbox's `.tooltree-save/` (the work folder's name) was received and moved into the host folder,
    # and every later save left a full copy of it beside the folder in `.ws.unmerged-*`, never removed, with a note
    # that another process had taken the name (100 MB a session: 101M, 201M, 301M); a host folder of that name
    # made every save do so.
    workspace = tmp_path / "ws"
    (workspace / ".tooltree-save").mkdir(parents=True)
    (workspace / ".tooltree-save" / "mine.txt").write_bytes(b"the user's own")
    note = (
        "the sandbox's .tooltree-save (3 entries) was not saved: that name at the top of a workspace is tooltree's "
        "own (where saves are received); give it another name to keep it"
    )
    with Sandbox(bare_backend, workspace=workspace) as sb:
        run_ok(sb, WORK_FOLDER_NAME)
        sb.save_workspace()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
    assert sb.workspace_notes == [note]  # the close saves only what changed since the save above: nothing
    with Sandbox(bare_backend, workspace=workspace) as sb:  # never restored: the script's copy is gone with it
        assert run_ok(sb, "import os\nprint(os.path.exists('.tooltree-save'))\n") == "False\n"
    assert sb.workspace_notes == []
    assert snapshot(workspace) == {
        b".tooltree-save": None,
        b".tooltree-save/mine.txt": b"the user's own",
        b"work.txt": b"the work",
        **{k: v for k, v in snapshot(workspace).items() if k.startswith(b"skills")},
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]


FILES_OVER_THE_WORKSPACE = {
    # 24 MiB of data in a 16 MiB workspace: one sparse file (a page of it written), or a 6 MiB file and three links.
    "sparse_file": "with open('big', 'wb') as f:\n    f.truncate(24 << 20)\n    f.write(b'x')\n",
    "hard_links": (
        "import os\nopen('big', 'wb').write(os.urandom(6 << 20))\nfor i in range(3):\n    os.link('big', f'big{i}')\n"
    ),
}


@pytest.mark.parametrize("script", FILES_OVER_THE_WORKSPACE.values(), ids=FILES_OVER_THE_WORKSPACE.keys())
def test_files_a_restore_could_not_write_back_are_refused_and_the_folder_still_starts_sessions(
    docker_engine: EngineWithCLI, saved_before: Path, script: str
) -> None:
    # Before: saved whole (24 MiB on the host's disk; a 370 MiB sparse file in the default 256 MiB workspace took
    # 370 MiB), and every later session of the folder failed to start: "cannot restore 'big': No space left on
    # device".
    workspace = saved_before
    backend = DockerBackend(SandboxConfig(owner=TEST_OWNER, workspace_size="16m"), docker=docker_engine)
    with Sandbox(backend, workspace=workspace) as sb:
        run_ok(sb, script)
        with pytest.raises(WorkspaceError, match="more than the sandbox's workspace can"):
            sb.save_workspace()
        assert snapshot(workspace) == {b"kept.txt": b"previous save"}
        assert sorted(p.name for p in workspace.parent.iterdir()) == ["ws"]
        run_ok(sb, "import glob, os\nos.truncate('big', 4096)\nfor name in glob.glob('big?'):\n    os.remove(name)\n")
        run_ok(sb, "open('new.txt', 'w')")
    assert snapshot(workspace)[b"new.txt"] == b""
    sb = Sandbox(backend, workspace=workspace).start()  # the folder as saved is restored
    try:
        assert run_ok(sb, "import os\nprint(sorted(os.listdir('.')))") == "['big', 'kept.txt', 'new.txt', 'skills']\n"
    finally:
        sb.kill()


def test_a_workspaces_git_repositories_are_never_restored_nor_changed_by_a_save(
    bare_backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: .git was restored and saved like any folder: a script appended `[core] fsmonitor = "<command>"` to
    # .git/config, and the next `git status` in the folder (a shell prompt showing the branch runs one) ran it.
    workspace = tmp_path / "ws"
    for repo in (workspace, workspace / "proj"):
        (repo / ".git" / "hooks").mkdir(parents=True)
        (repo / ".git" / "config").write_text("[core]\n\tbare = false\n", encoding="utf-8")
    (workspace / "notes.txt").write_text("draft", encoding="utf-8")
    (workspace / "proj" / "main.py").write_text("print(1)", encoding="utf-8")
    script = (
        "import os, shutil\nprint(sorted(os.listdir('.')), sorted(os.listdir('proj')))\n"
        "for repo in ('.', 'proj', 'new'):\n"
        "    os.makedirs(f'{repo}/.git/hooks', exist_ok=True)\n"
        "    open(f'{repo}/.git/config', 'w').write('[core]\\n\\tfsmonitor = \"touch pwned\"\\n')\n"
        "    open(f'{repo}/.git/hooks/pre-commit', 'w').write('touch pwned')\n"
        "os.makedirs('wt')\nopen('wt/.git', 'w').write('gitdir: ../new/.git')\n"
        "open('notes.txt', 'w').write('final')\nos.remove('proj/main.py')\n"
    )
    with Sandbox(bare_backend, workspace=workspace) as sb:
        assert run_ok(sb, script) == "['notes.txt', 'proj', 'skills'] ['main.py']\n"
        sb.save_workspace()
        why = "a workspace's .git is never restored nor saved (a git repository, whose config and hooks git runs as "
        assert sb.workspace_notes == [
            f"the sandbox's {name} ({count} entries) was not saved: {why}commands on the host)"
            for name, count in ((".git", 4), ("new/.git", 4), ("proj/.git", 4))
        ] + ["the sandbox's wt/.git (1 entry) was not saved: " + why + "commands on the host)"]
        run_ok(sb, "open('later.txt', 'w')")  # a save that continues the first: still nothing of .git
    assert (workspace / "notes.txt").read_text(encoding="utf-8") == "final"
    assert not (workspace / "proj" / "main.py").exists()
    for repo in (workspace, workspace / "proj"):
        assert (repo / ".git" / "config").read_text(encoding="utf-8") == "[core]\n\tbare = false\n"
        assert sorted(p.name for p in (repo / ".git").iterdir()) == ["config", "hooks"]
        assert list((repo / ".git" / "hooks").iterdir()) == []
    assert sorted(p.name for p in workspace.iterdir()) == [
        ".git",
        "later.txt",
        "new",
        "notes.txt",
        "proj",
        "skills",
        "wt",
    ]
    assert list((workspace / "new").iterdir()) == [] and list((workspace / "wt").iterdir()) == []
