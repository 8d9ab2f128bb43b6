"""Resource attacks from a script: each is contained by a limit, and the session survives it.

Covered elsewhere (not repeated here): the memory bomb
(tests/sandbox/test_sandbox_session.py::test_running_out_of_memory_kills_the_interpreter_not_the_session),
``sleep`` forever past the wall-clock limit (…::test_a_timeout_kills_the_run_and_the_session_stays_usable),
long output capped with head and tail (…::test_long_output_is_capped_with_head_tail_and_the_full_text_in_a_file),
invalid UTF-8 and colour escapes in stdout (…::test_stdout_and_stderr_are_captured_apart_and_cleaned),
orphans reaped by the supervisor (…::test_orphaned_processes_are_reaped).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from tests.docker_cli import EngineWithCLI
from tests.security.probes import host_rss_bytes, run_ok
from tests.support import TEST_OWNER

pytestmark = pytest.mark.docker

MiB = 1 << 20

# Every process of the sandbox but the supervisor (pid 1) and the probe itself, once zombies are reaped.
OTHER_PROCESSES = """\
import os, time
def others():
    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) not in (1, os.getpid()))
deadline = time.monotonic() + 10
while others() and time.monotonic() < deadline:
    time.sleep(0.05)
print(others())
"""


@pytest.fixture(scope="module")
def runaway_session(bare_backend: DockerBackend) -> Iterator[Sandbox]:
    """A session that runaway scripts are killed in, one after another."""
    with Sandbox(bare_backend) as sb:
        yield sb


FORK_BOMB = """\
import errno, os, time
try:
    while True:
        if os.fork() == 0:
            while True:  # every child forks too, until the pids limit stops it
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.05)
except OSError as e:
    print('fork failed with', errno.errorcode[e.errno], flush=True)
time.sleep(600)
"""

RUNAWAYS = {
    "cpu_loop": ("while True:\n    pass\n", ""),
    "sleep_ignoring_sigterm": (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)\n",
        "",
    ),
    "detached_child_ignoring_sigterm": (
        "import subprocess, sys, time\n"
        "code = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'\n"
        "subprocess.Popen([sys.executable, '-c', code], start_new_session=True)\n"
        "print('spawned', flush=True)\n"
        "time.sleep(600)\n",
        "spawned\n",
    ),
    "endless_output": ("import sys\nwhile True:\n    sys.stdout.write('spam ' * 1000 + '\\n')\n", None),
    "fork_bomb": (FORK_BOMB, "fork failed with EAGAIN\n"),
}
# Each runaway's wall-clock limit: 2 s, but the fork bomb's 15 s, as its stdout is its fork failing first: its 256
# processes were made in 1.5 s on a loaded machine, which a slower one stretches past 2 s (then it printed nothing).
LIMITS = {"fork_bomb": 15}


@pytest.mark.parametrize("name", list(RUNAWAYS))
def test_a_runaway_is_killed_at_the_wall_clock_limit_with_everything_it_started(
    runaway_session: Sandbox, name: str
) -> None:
    code, expected_stdout = RUNAWAYS[name]
    run_ok(runaway_session, "kept = 'state before the runaway'")
    limit = LIMITS.get(name, 2)
    result = runaway_session.execute(code, timeout=limit)
    assert result.timed_out and result.state_reset and result.exit_status == -9
    assert result.error == f"timed out after {limit} s"
    if expected_stdout is not None:
        assert result.stdout == expected_stdout
    else:
        assert result.stdout_truncated and result.stdout.startswith("spam spam")
    # Nothing it started survives, and the session works (with a fresh interpreter).
    assert run_ok(runaway_session, OTHER_PROCESSES) == "[]\n"
    after = runaway_session.execute("print(kept)")
    assert after.error == "NameError: name 'kept' is not defined"


def test_the_pids_limit_is_the_configured_one(shared: Sandbox) -> None:
    assert run_ok(shared, "print(open('/sys/fs/cgroup/pids/pids.max').read().strip())") == "256\n"


FILL = """\
import errno, os
fd = os.open({path!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
chunk = b'x' * (1 << 20)
written = 0
try:
    while True:
        written += os.write(fd, chunk)
except OSError as e:
    print(errno.errorcode[e.errno], written)
os.close(fd)
"""


def test_filling_tmp_stops_at_its_size_and_the_session_goes_on(shared: Sandbox) -> None:
    out = run_ok(shared, FILL.format(path="/tmp/fill"))
    code, written = out.split()
    assert code == "ENOSPC" and 60 * MiB <= int(written) <= 64 * MiB
    assert run_ok(shared, "import os\nos.remove('/tmp/fill')\nprint('freed')") == "freed\n"


def test_filling_dev_shm_stops_at_its_size(shared: Sandbox) -> None:
    out = run_ok(shared, FILL.format(path="/dev/shm/fill") + "os.remove('/dev/shm/fill')\n")
    code, written = out.split()
    assert code == "ENOSPC" and int(written) <= 64 * MiB


FOLDERS = """\
import errno, os, shutil
made = 0
try:
    while True:
        os.mkdir(f'{path}/d{{made}}')
        made += 1
except OSError as e:
    print(errno.errorcode[e.errno], made)
for name in os.listdir({path!r}):
    shutil.rmtree(f'{path}/' + name, ignore_errors=True)
"""


@pytest.mark.parametrize("path", ["/tmp", "/dev/shm"])
def test_filling_a_scratch_folder_with_empty_folders_stops_at_its_entries_and_the_interpreter_still_starts(
    shared: Sandbox, path: str
) -> None:
    # Before: no cap on the entries, only on the bytes: folders made until the session's memory was spent (the
    # entries are kernel memory), after which each start of the interpreter was killed for want of memory, for good.
    code, made = run_ok(shared, FOLDERS.format(path=path)).split()
    assert code == "ENOSPC" and 16000 <= int(made) < 16384
    shared.reset()
    assert run_ok(shared, "print(len(bytearray(300 << 20)) >> 20)") == "300\n"


def test_filling_the_workspace_stops_at_its_quota_and_what_fits_is_saved(
    docker_engine: EngineWithCLI, tmp_path: Path
) -> None:
    config = SandboxConfig(owner=TEST_OWNER, workspace_size="16m")
    with Sandbox(DockerBackend(config, docker=docker_engine), workspace=tmp_path / "ws") as sb:
        code, written = run_ok(sb, FILL.format(path="fill.bin")).split()
        assert code == "ENOSPC" and 15 * MiB <= int(written) <= 16 * MiB
        # Output still works when the workspace is full (its spill file cannot be written).
        big = sb.execute("print('z' * 50_000)")
        assert big.error is None and big.stdout_truncated and big.stdout_path is None
        assert "could not be saved" in big.stdout
    saved = tmp_path / "ws" / "fill.bin"
    assert saved.stat().st_size == int(written)


FILL_PAGES = """\
import errno, os
page = b'p' * 4096
made = 0
try:
    for i in range(6000):
        with open(f'p{i:05}', 'wb') as f:
            f.write(page)
        made += 1
except OSError as e:
    print(errno.errorcode[e.errno], made)
"""


@pytest.mark.parametrize("size", ["16m", "300m"])
def test_whatever_fills_the_workspace_is_saved_whole(docker_engine: EngineWithCLI, tmp_path: Path, size: str) -> None:
    # Before: the save's cap was 256 MiB counting 4 KiB per entry, whatever the workspace's size, so a
    # workspace of 300m could not save more than 256 MiB, and one of 256m filled with page-sized files
    # (4 KiB of data, 4 KiB counted per entry) not at all: the whole session's work was refused.
    config = SandboxConfig(owner=TEST_OWNER, workspace_size=size)
    fills = "p" if size == "16m" else "fill.bin"
    with Sandbox(DockerBackend(config, docker=docker_engine), workspace=tmp_path / "ws") as sb:
        code, written = run_ok(sb, FILL_PAGES if fills == "p" else FILL.format(path=fills)).split()
        assert code == "ENOSPC"
    saved = {p.name: p for p in (tmp_path / "ws").iterdir() if p.name.startswith(fills)}
    if fills == "p":  # the files written whole, and the one the disk ran out in, empty
        pages = [p for p in saved.values() if p.stat().st_size]
        assert len(pages) == int(written) > 3500 and all(p.read_bytes() == b"p" * 4096 for p in pages[::500])
    else:
        assert int(written) > 299 * MiB and saved["fill.bin"].stat().st_size == int(written)


def test_many_small_files_are_listed_within_the_limit_and_saved(bare_backend: DockerBackend, tmp_path: Path) -> None:
    with Sandbox(bare_backend, workspace=tmp_path / "ws") as sb:
        run_ok(sb, "import os\nos.mkdir('many')\nfor i in range(5000):\n    open(f'many/{i:05}', 'w').write(str(i))\n")
        listed = sb.list_files("many", limit=100)
        assert len(listed) == 100 and all(e["type"] == "file" for e in listed)
    files = sorted((tmp_path / "ws" / "many").iterdir())
    assert len(files) == 5000 and files[4999].read_text(encoding="utf-8") == "4999"


GIANT_LINE = "import sys\nchunk = b'x' * (1 << 20)\nfor _ in range(300):\n    sys.stdout.buffer.write(chunk)\n"
MANY_LINES = (
    "import sys\nline = b'y' * 99 + b'\\n'\nchunk = line * 10486\n"
    "for _ in range(300):\n    sys.stdout.buffer.write(chunk)\n"
)


@pytest.mark.parametrize(("shape", "code"), [("one_giant_line", GIANT_LINE), ("many_lines", MANY_LINES)])
def test_300_mb_of_output_is_capped_and_host_memory_stays_bounded(
    docker_engine: EngineWithCLI, shared: Sandbox, shape: str, code: str
) -> None:
    before = host_rss_bytes()
    result = shared.execute(code)
    grown = host_rss_bytes() - before
    assert result.error is None, result.error
    assert result.stdout_truncated and len(result.stdout) < shared.config.output_chars + 300
    assert "[... stdout cut: 314," in result.stdout  # "314,572,800 bytes in all" / "314,588,160 bytes in all"
    assert result.stdout_path is not None
    # The spill file keeps the first 64 MiB, not all 300.
    size = run_ok(shared, f"import os\nprint(os.path.getsize({result.stdout_path!r}))")
    assert int(size) == 64 * MiB
    assert grown < 64 * MiB, f"host memory grew by {grown} bytes"
    # The engine keeps no copy: the log driver is none, so there is nothing to read.
    logs = docker_engine.run(["logs", shared.name], check=False)
    assert logs.returncode != 0 and b"does not support reading" in logs.stderr
    assert docker_engine.text(["inspect", "--format", "{{.LogPath}}", shared.name]) == ""


def test_escape_sequences_in_errors_and_tracebacks_are_cleaned(shared: Sandbox) -> None:
    code = (
        "import sys\n"
        "sys.stderr.write('\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J\\u202eevil\\x9b31m\\n')\n"
        "raise ValueError('\\x1b]0;owned title\\x07bad \\x1b[31mvalue\\x1b[0m')\n"
    )
    result = shared.execute(code)
    assert result.stderr == "evil\n"
    assert result.error == "ValueError: bad value"
    assert result.traceback is not None and "\x1b" not in result.traceback and "bad value" in result.traceback


def test_fd_exhaustion_stops_at_the_limit_which_cannot_be_raised(shared: Sandbox) -> None:
    code = (
        "import errno, os, resource\n"
        "fds = []\n"
        "try:\n"
        "    while True:\n"
        "        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "except OSError as e:\n"
        "    print(errno.errorcode[e.errno], len(fds) < 1024)\n"
        "for fd in fds:\n"
        "    os.close(fd)\n"
        "try:\n"
        "    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))\n"
        "except ValueError as e:\n"
        "    print(e)\n"
    )
    assert run_ok(shared, code) == "EMFILE True\nnot allowed to raise maximum limit\n"
    assert run_ok(shared, "print('fine')") == "fine\n"


def test_zombies_left_by_an_exiting_process_are_reaped(shared: Sandbox) -> None:
    code = (
        "import subprocess, sys\n"
        "maker = 'import os\\nfor _ in range(50):\\n    if os.fork() == 0:\\n        os._exit(0)\\n'\n"
        "subprocess.run([sys.executable, '-c', maker], check=True)\n"
    )
    run_ok(shared, code)
    assert run_ok(shared, OTHER_PROCESSES) == "[]\n"
