"""Filesystem attacks: host secrets stay unreadable, the image and kernel interfaces unwritable, and
whatever a script plants in its workspace comes out (if at all) as plain files and directories.

Covered elsewhere: writes to the tree, ``/etc`` and ``/usr/bin``, and executing from ``/tmp``
(tests/sandbox/test_sandbox_session.py::test_the_tree_root_and_tmp_are_not_writable_or_executable);
``read_file`` not following a symlink and refusing ``../etc/passwd``
(…::test_files_are_read_out_without_following_symlinks); hostile paths sent by the container while
saving (tests/sandbox/test_sandbox_workspace.py); the image has no setuid files
(tests/sandbox/test_sandbox_image.py::test_the_image_runs_as_the_sandbox_user_without_setuid_files).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig, SessionError, WorkspaceError
from tests.docker_cli import EngineWithCLI
from tests.security.probes import probe, run_ok
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker

READ_NOTHING = """\
def read_nothing(path):
    with open(path, 'rb') as f:
        if f.read(16):
            raise RuntimeError('read something')
"""

CASES = {
    # name: (expression, expected outcome)
    "read_etc_shadow": ("open('/etc/shadow', 'rb').read()", "EACCES"),
    "read_docker_socket": ("os.stat('/var/run/docker.sock')", "ENOENT"),
    "read_run_docker_socket": ("os.stat('/run/docker.sock')", "ENOENT"),
    "read_containerd_socket": ("os.stat('/run/containerd/containerd.sock')", "ENOENT"),
    "read_supervisor_environ": ("open('/proc/1/environ', 'rb').read()", "EACCES"),
    "read_supervisor_fds": ("os.listdir('/proc/1/fd')", "EACCES"),
    "write_new_file_in_root": ("open('/evil', 'w')", "EROFS"),
    "append_etc_passwd": ("open('/etc/passwd', 'a')", "EACCES"),
    "write_proc_sys": ("open('/proc/sys/kernel/hostname', 'w').write('x')", "EROFS"),
    "write_proc_sys_vm": ("open('/proc/sys/vm/drop_caches', 'w').write('3')", "EROFS"),
    "write_sys_kernel": ("open('/sys/kernel/mm/transparent_hugepage/enabled', 'w').write('never')", "EROFS"),
    "raise_memory_cgroup_limit": ("open('/sys/fs/cgroup/memory/memory.limit_in_bytes', 'w').write('-1')", "EROFS"),
    "raise_pids_cgroup_limit": ("open('/sys/fs/cgroup/pids/pids.max', 'w').write('max')", "EROFS"),
    "make_char_device": ("os.mknod('/workspace/mem', stat.S_IFCHR | 0o666, os.makedev(1, 1))", "EPERM"),
    "make_block_device": ("os.mknod('/workspace/sda', stat.S_IFBLK | 0o666, os.makedev(8, 0))", "EPERM"),
    "hard_link_a_host_file": ("os.link('/etc/shadow', '/workspace/shadow')", "EXDEV"),
    "hard_link_the_interpreter": ("os.link(sys.executable, '/workspace/py')", "EXDEV"),
    "exec_from_workspace": (
        "(open('/workspace/run.sh', 'w').write('#!/bin/sh\\necho ran\\n'), os.chmod('/workspace/run.sh', 0o755), "
        "subprocess.run(['/workspace/run.sh']))",
        "EACCES",
    ),
    "exec_from_dev_shm": (
        "(open('/dev/shm/run.sh', 'w').write('#!/bin/sh\\necho ran\\n'), os.chmod('/dev/shm/run.sh', 0o755), "
        "subprocess.run(['/dev/shm/run.sh']))",
        "EACCES",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_filesystem_attack_fails_inside_the_container(shared: Sandbox, name: str) -> None:
    expression, expected = CASES[name]
    assert probe(shared, name, expression) == f"{name}: {expected}"


def test_kernel_memory_is_not_readable(shared: Sandbox) -> None:
    # /proc/kcore is absent on some kernels and masked with an empty file by the engine on others.
    assert probe(shared, "kcore", "read_nothing('/proc/kcore')", setup=READ_NOTHING) in ("kcore: ENOENT", "kcore: OK")


PLANT = r"""
import os, socket
os.makedirs('planted', exist_ok=True)
os.chdir('planted')
open('normal.txt', 'w').write('plain')
os.symlink('/etc/passwd', 'link_to_file')
os.symlink('/', 'link_to_root')
os.symlink('..', 'link_to_parent')
os.mkfifo('fifo')
socket.socket(socket.AF_UNIX).bind('sock')
open('suid', 'w').write('suid')
os.chmod('suid', 0o6755)
open('hard_a', 'w').write('shared inode')
os.link('hard_a', 'hard_b')
for name in ['a\nb', '..\\..\\evil', ' ', '\u202etxt.exe', '-rf', 'x' * 255]:
    open(name, 'w').write('odd')
os.chdir('..')
print(sorted(os.listdir('planted')) == sorted(%r))
"""
PLANTED_REGULAR = [
    "normal.txt",
    "suid",
    "hard_a",
    "hard_b",
    "a\nb",
    "..\\..\\evil",
    " ",
    "\u202etxt.exe",
    "-rf",
    "x" * 255,
]
PLANTED = [*PLANTED_REGULAR, "link_to_file", "link_to_root", "link_to_parent", "fifo", "sock"]


@pytest.fixture(scope="module")
def planted(bare_backend: DockerBackend) -> Iterator[Sandbox]:
    with Sandbox(bare_backend) as sb:
        assert run_ok(sb, PLANT % PLANTED) == "True\n"
        yield sb


@pytest.mark.parametrize(
    "path",
    [
        "planted/link_to_file",
        "planted/link_to_root/etc/passwd",
        "planted/link_to_parent/planted/normal.txt",
        "planted/fifo",
        "planted/sock",
        "../etc/passwd",
        "planted/../../etc/passwd",
        "/workspace/../etc/passwd",
        "/etc/passwd",
        "planted/\x00",
        "planted/" + "y" * 300,
    ],
)
def test_reading_out_a_planted_or_traversing_path_is_an_error_never_the_target(planted: Sandbox, path: str) -> None:
    with pytest.raises(SessionError):
        planted.read_file(path)


def test_listing_shows_planted_links_and_specials_for_what_they_are(planted: Sandbox) -> None:
    kinds = {e["name"]: e["type"] for e in planted.list_files("planted")}
    assert kinds == {
        **dict.fromkeys(PLANTED_REGULAR, "file"),
        **dict.fromkeys(["link_to_file", "link_to_root", "link_to_parent"], "symlink"),
        "fifo": "other",
        "sock": "other",
    }
    with pytest.raises(SessionError):
        planted.list_files("planted/link_to_root")


def test_saving_copies_only_plain_files_and_directories_with_no_setuid_bits(planted: Sandbox, tmp_path: Path) -> None:
    dest = tmp_path / "out" / "ws"
    planted.save_workspace(dest)
    out = dest / "planted"
    assert sorted(os.listdir(out)) == sorted(PLANTED_REGULAR)
    for entry in out.iterdir():
        info = entry.lstat()
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o644, entry
    assert (out / "normal.txt").read_text(encoding="utf-8") == "plain"
    assert (out / "hard_a").stat().st_ino != (out / "hard_b").stat().st_ino
    # Nothing was written beside the destination (only the staging directory came and went).
    assert sorted(os.listdir(tmp_path / "out")) == ["ws"]


def test_a_huge_sparse_file_is_refused_by_the_size_cap_and_keeps_the_old_copy(
    docker_engine: EngineWithCLI, tmp_path: Path
) -> None:
    config = SandboxConfig(owner=TEST_OWNER, workspace_max_bytes=8 << 20)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("previous save", encoding="utf-8")
    sb = Sandbox(DockerBackend(config, docker=docker_engine), workspace=workspace)
    with sb:
        run_ok(sb, "import os\nwith open('sparse', 'wb') as f:\n    f.truncate(1 << 40)\n")
        (entry,) = [e for e in sb.list_files() if e["name"] == "sparse"]
        assert entry["size"] == 1 << 40
        assert sb.read_file("sparse", max_bytes=4096) == bytes(4096)
        with pytest.raises(WorkspaceError, match="more than 8388608 bytes"):
            sb.save_workspace()
        run_ok(sb, "import os\nos.remove('sparse')")
    assert sorted(os.listdir(workspace)) == ["kept.txt", "skills"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]
