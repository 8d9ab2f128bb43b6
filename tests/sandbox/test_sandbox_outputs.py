"""What a session leaves in /workspace and in the folder it is saved into, in real containers: saved outputs held
to a budget, no bytecode; and a big folder listed in order."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from agent.files import FileView
from sandbox import DockerBackend, Sandbox, SandboxConfig
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker

MiB = 1 << 20
PRINT_6_MIB = "import sys\nline = 'y' * 1023 + '\\n'\nfor _ in range(6 * 1024):\n    sys.stdout.write(line)\n"


def small_workspace(docker_engine: Any, sample_tree: Path) -> DockerBackend:
    """A 32 MiB workspace: its saved outputs may hold 8 MiB."""
    config = SandboxConfig(owner=TEST_OWNER, workspace_size="32m", output_chars=1000, timeout=60.0)
    return DockerBackend(config, tree=sample_tree, docker=docker_engine)


def outputs(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (folder / ".tooltree" / "outputs").iterdir()}


def test_saved_outputs_keep_the_newest_within_a_quarter_of_the_workspace(
    docker_engine: Any, sample_tree: Path, tmp_path: Path
) -> None:
    # Before: every cut output was saved whole and never deleted: four of 6 MiB took 24 of the 32 MiB, the script
    # writing a 16 MiB file failed "No space left on device", and all four were saved into the user's folder.
    ws = tmp_path / "ws"
    with Sandbox(small_workspace(docker_engine, sample_tree), workspace=ws) as sb:
        for n in range(4):
            result = sb.execute(PRINT_6_MIB)
            assert result.ok and result.stdout_truncated and result.stdout_path is not None
            deleted = " (1 older one deleted)" if n else ""
            kept = f"; saved outputs keep the newest 8 MiB{deleted}; the whole stdout is in {result.stdout_path}"
            assert f"{6 * MiB:,} bytes in all{kept}" in result.stdout
        # The newest is whole; the raw report says how many older ones it deleted, and the budget.
        raw = sb._require_channel().request(  # the report's field `ExecutionResult` does not carry (yet)
            "execute", {"code": PRINT_6_MIB, "timeout": 60, "max_chars": 1000}, timeout=90
        )
        assert raw["outputs"] == {"budget": 8 * MiB, "dropped": 1}
        assert sb.read_file(raw["stdout"]["path"], max_bytes=8 * MiB) == ("y" * 1023 + "\n").encode() * 6 * 1024
        written = sb.execute("open('/workspace/report.bin', 'wb').write(b'r' * (16 << 20))")
        assert written.ok, written.error
    assert outputs(ws) == {os.path.basename(raw["stdout"]["path"]): 6 * MiB}
    assert (ws / "report.bin").stat().st_size == 16 * MiB


def test_one_executions_stdout_stderr_and_traceback_hold_the_budget_together(
    docker_engine: Any, sample_tree: Path, tmp_path: Path
) -> None:
    # Before: each stopped at the budget on its own: 24 MiB of the 32 MiB workspace held by one script's outputs and
    # saved into the user's folder (at the defaults, 192 MiB of 256 MiB), and the next script's 16 MiB write failed.
    ws = tmp_path / "ws"
    script = (
        "import sys\nline = 'y' * 1023 + '\\n'\nfor _ in range(6 * 1024):\n"
        "    sys.stdout.write(line)\n    sys.stderr.write(line)\nraise ValueError('t' * (6 << 20))\n"
    )
    with Sandbox(small_workspace(docker_engine, sample_tree), workspace=ws) as sb:
        result = sb.execute(script)
        assert result.stdout_truncated and result.stderr_truncated and result.traceback is not None
        written = sb.execute("open('/workspace/report.bin', 'wb').write(b'r' * (16 << 20))")
        assert written.ok, written.error
    assert sum(outputs(ws).values()) == 8 * MiB
    assert (ws / "report.bin").stat().st_size == 16 * MiB


def test_a_folder_saved_with_outputs_over_the_budget_is_pruned_at_the_first_execution(
    docker_engine: Any, sample_tree: Path, tmp_path: Path
) -> None:
    # Before: 18 MiB of outputs an older version saved left the script 14 MiB of its 32, and its write of
    # 16 MiB failed "No space left on device", with nothing saying why.
    ws = tmp_path / "ws"
    (ws / ".tooltree" / "outputs").mkdir(parents=True)
    for n in (1, 2, 3):
        path = ws / ".tooltree" / "outputs" / f"{n}-abcdef-stdout.txt"
        path.write_bytes(b"o" * (6 * MiB))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))
    with Sandbox(small_workspace(docker_engine, sample_tree), workspace=ws) as sb:
        written = sb.execute("open('/workspace/report.bin', 'wb').write(b'r' * (16 << 20))")
        assert written.ok, written.error
    assert outputs(ws) == {"3-abcdef-stdout.txt": 6 * MiB}


def test_a_traceback_cut_short_is_saved_whole_with_the_outputs_and_its_line_says_where(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # Before: "[… 80,202 characters of the traceback cut …]", and the middle was nowhere to read.
    from agent.content import execution_blocks
    from sandbox._supervisor.limits import MAX_TRACEBACK_CHARS

    with Sandbox(backend, workspace=tmp_path / "ws") as sb:
        result = sb.execute("def fail():\n    raise ValueError('x' * 100000)\nfail()\n")
        tb = result.traceback
        assert tb is not None and len(tb) <= MAX_TRACEBACK_CHARS
        said = re.search(r"\n\[… [\d,]+ characters of the traceback cut; the whole traceback is in (\S+) …\]\n", tb)
        assert said is not None and said[1].startswith("/workspace/.tooltree/outputs/")
        whole = sb.read_file(said[1], max_bytes=MiB).decode("utf-8")
        assert whole.startswith(tb[: MAX_TRACEBACK_CHARS * 2 // 5]) and whole.endswith(tb[said.end() :])
        assert "line 3, in <module>" in whole and whole.endswith("ValueError: " + "x" * 100000 + "\n")
        assert said[0] in execution_blocks(result)[0]["text"]  # the text the model gets names the file
        short = sb.execute("raise ValueError('short')")
        assert short.traceback is not None and "cut" not in short.traceback
        assert sb.list_files(".tooltree/outputs") == [{"name": said[1].rsplit("/", 1)[1], "type": "file",
                                                        "size": len(whole)}]  # fmt: skip


def test_a_traceback_longer_than_a_saved_output_holds_is_saved_in_part_within_the_outputs_budget(
    docker_engine: Any, sample_tree: Path, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    with Sandbox(small_workspace(docker_engine, sample_tree), workspace=ws) as sb:
        assert sb.execute(PRINT_6_MIB).stdout_truncated
        result = sb.execute("raise ValueError('t' * (10 << 20))")
        tb = result.traceback
        assert tb is not None
        said = re.search(r"cut; its first 8,388,608 bytes are in (\S+) \(a saved output holds at most that\) …\]", tb)
        assert said is not None, tb[7000:8500]
    # The newest output is kept, the older one deleted to make room: the folder holds the budget at most.
    assert outputs(ws) == {said[1].rsplit("/", 1)[1]: 8 * MiB}


def test_a_traceback_longer_than_a_saved_output_may_ever_hold_is_said_saved_in_part(
    backend: DockerBackend, tmp_path: Path
) -> None:
    # The worker sends only what a saved output may hold (64 MiB): its line said "the whole traceback is in" that part.
    with Sandbox(backend) as sb:
        # 120 s, not the config's 20, which this is not about: the 65 MiB traceback made, cut and saved took 3.3 s of
        # them on a loaded machine.
        tb = sb.execute("raise ValueError('t' * (65 << 20))", timeout=120).traceback
        assert tb is not None
        said = re.search(r"cut; its first ([\d,]+) bytes are in (\S+) \(a saved output holds at most that\) …\]", tb)
        assert said is not None, tb[7900:8300]
        listed = sb.list_files(".tooltree/outputs")
        assert listed == [{"name": said[2].rsplit("/", 1)[1], "type": "file", "size": int(said[1].replace(",", ""))}]


def test_importing_a_module_from_the_workspace_leaves_no_bytecode_in_it(backend: DockerBackend, tmp_path: Path) -> None:
    # Before: PYTHONDONTWRITEBYTECODE was ignored under the worker's -I, so skills/__pycache__/ was written and
    # saved into the user's folder.
    ws = tmp_path / "ws"
    (ws / "skills").mkdir(parents=True)
    (ws / "skills" / "helper.py").write_text("def twice(x):\n    return 2 * x\n", encoding="utf-8")
    (ws / "mine.py").write_text("VALUE = 21\n", encoding="utf-8")
    with Sandbox(backend, workspace=ws) as sb:
        code = (
            "import os, sys\nfrom skills.helper import twice\nimport mine\n"
            "print(twice(mine.VALUE), sys.flags.dont_write_bytecode)\n"
            "print([d for d, _, _ in os.walk('/workspace') if d.endswith('__pycache__')])\n"
        )
        assert sb.execute(code).stdout == "42 1\n[]\n"
    assert [p for p in ws.rglob("__pycache__")] == []


def test_a_big_folder_lists_its_first_entries_folders_first_with_their_count(
    backend: DockerBackend, sample_tree: Path
) -> None:
    # Before: the sandbox listed the first entries in directory order: f2499..f2998 and no sub/.
    with Sandbox(backend) as sb:
        made = "import os\nos.makedirs('d/sub')\nfor i in range(3000):\n    open(f'd/f{i}.txt', 'w').write('q')\n"
        assert sb.execute(made).ok
        listed = sb.list_files("d", limit=3)
        assert [(e["name"], e["type"]) for e in listed] == [("sub", "dir"), ("f0.txt", "file"), ("f1.txt", "file")]
        raw = sb._require_channel().request("workspace.list", {"path": "d", "limit": 3}, timeout=30)
        assert raw["total"] == 3001
        lines = FileView(sample_tree, workspace=lambda: sb).list_files("d").splitlines()
    assert lines[:3] == ["sub/", "f0.txt  (1 B)", "f1.txt  (1 B)"] and len(lines) == 501
    assert lines[-1].startswith("[... the first 500 of 3,001 entries (folders first, then by name);")
