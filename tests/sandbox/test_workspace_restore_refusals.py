"""How a workspace folder that cannot be restored is refused: before any data is read, and with advice that fits."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox
from sandbox.errors import WorkspaceError
from sandbox.workspace import iter_restore_batches


def test_a_folder_over_the_cap_by_its_files_sizes_is_refused_before_any_file_is_read(tmp_path: Path) -> None:
    # Before: the files were read and sent batch by batch until the cap (or the sandbox's disk) refused them: a 10 GB
    # sparse file cost the host about 4 s reading 256 MB first. The first batch (4 MiB, under the 64 MiB cap here)
    # came out before the refusal.
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(10 << 30)
    batches = iter_restore_batches(tmp_path, max_bytes=64 << 20)
    with pytest.raises(WorkspaceError, match=r"^more than 67108864 bytes") as info:
        next(batches)
    assert not info.value.unreadable


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to read the folder as another user")
def test_an_entry_the_user_cannot_read_is_refused_as_unreadable_not_as_too_big() -> None:
    # Before: every restore failure advised making the folder fit within workspace_size, a file without read
    # permission too. The reader runs in a child as nobody (root reads every file); the folder is outside pytest's
    # root-only temporary folder so that nobody may enter it.
    import pwd

    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        os.chmod(root, 0o755)
        (root / "ok.txt").write_text("fine", encoding="utf-8")
        secret = root / "secret.txt"
        secret.write_text("no", encoding="utf-8")
        os.chmod(secret, 0o000)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop to nobody, restore, say what was raised
            said = b"nothing raised"
            try:
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                list(iter_restore_batches(root, max_bytes=1 << 20))
            except WorkspaceError as e:
                said = f"{e.unreadable} {e}".encode()
            except BaseException as e:  # anything else, said
                said = repr(e).encode()
            finally:
                os.write(write, said)
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            said = pipe.read().decode()
        os.waitpid(pid, 0)
    assert said == "True cannot read 'secret.txt': Permission denied"


@pytest.mark.docker
def test_a_session_keeps_the_latest_notes_of_its_saves_and_counts_them_all(
    backend: DockerBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a session kept every note of every save (one per read-only host file a script deleted, up to the entry
    # cap's worth of paths each time) and logged each one.
    from sandbox import session_files

    monkeypatch.setattr(session_files, "NOTES_KEPT", 5)
    ws = tmp_path / "ws"
    (ws / "ro").mkdir(parents=True)
    for n in range(8):
        (ws / "ro" / f"{n}.txt").write_text("kept", encoding="utf-8")
        (ws / "ro" / f"{n}.txt").chmod(0o444)
    with Sandbox(backend, workspace=ws) as sb:
        assert sb.execute("import shutil\nshutil.rmtree('ro')").ok
        sb.save_workspace_if_changed()
        assert sb.workspace_notes_total == 8 and len(sb.workspace_notes) == 5
        assert sb.workspace_notes == [
            f"ro/{n}.txt: read-only on the host, so it is kept (the sandbox deleted it)" for n in range(3, 8)
        ]
        assert sb.execute("open('new.txt', 'w').write('x')").ok
        sb.save_workspace_if_changed()
        assert sb.workspace_notes_total >= 8 and len(sb.workspace_notes) == 5
    assert sorted(p.name for p in (ws / "ro").iterdir()) == [f"{n}.txt" for n in range(8)]


@pytest.mark.docker
def test_a_file_a_script_made_unreadable_fails_the_save_with_what_to_do(backend: DockerBackend, tmp_path: Path) -> None:
    # Before: "the workspace cannot be saved: 'x.txt': Permission denied", and nothing said what would fix it.
    ws = tmp_path / "ws"
    ws.mkdir()
    with Sandbox(backend, workspace=ws) as sb:
        assert sb.execute("import os\nopen('x.txt', 'w').write('a')\nos.chmod('x.txt', 0)").ok
        with pytest.raises(WorkspaceError) as info:
            sb.save_workspace_if_changed()
        assert "'x.txt': Permission denied (a script made it unreadable: make it readable again, " in str(info.value)
        assert sb.execute("import os\nos.chmod('x.txt', 0o644)").ok
        sb.save_workspace_if_changed()
    assert (ws / "x.txt").read_text(encoding="utf-8") == "a"
