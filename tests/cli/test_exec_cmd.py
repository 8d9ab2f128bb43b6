"""`tooltree exec` end to end: a real container, the sample servers, the JSON result."""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docker_cli import EngineWithCLI
from tests.support import TEST_OWNER, sample_project
from tooltree_cli.main import main

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples" / "sample_servers"


pytestmark = pytest.mark.usefixtures("sandbox_owner")  # its containers and volumes removed by the engine fixture


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    # A sandbox timeout of 120 s, which no test here is about: a script's first call starts its server within it, and
    # `examples/top_leads.py` (the sample crm's 10,000 leads) took 5.4 s of 20 on a loaded machine.
    return sample_project(tmp_path_factory.mktemp("exec"), "crm", "media", timeout=120)


@pytest.mark.docker
def test_exec_json_reports_output_calls_and_bytes_kept_in_the_sandbox(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config, tree = project
    script = tmp_path / "top.py"
    script.write_text((REPO / "examples" / "top_leads.py").read_text(encoding="utf-8"), encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    code = main(["exec", str(script), "--config", str(config), "--tree", str(tree), "--json", "--audit", str(audit)])
    printed = capsys.readouterr()
    out = json.loads(printed.out)
    assert code == 0, out
    assert printed.err == ""  # the object stands for the output, the call lines and the summary line, as README says
    assert out["stdout"].startswith("10000 leads; the five biggest:")
    assert out["exit_code"] == 0 and out["timed_out"] is False and out["error"] is None
    assert [(c["server"], c["tool"], c["ok"]) for c in out["calls"]] == [("crm", "list_leads", True)]
    assert out["tool_result_bytes"] > 1_000_000 > 100 * out["printed_bytes"]
    (line,) = [json.loads(x) for x in audit.read_text(encoding="utf-8").splitlines()]
    assert line["tool"] == "list_leads" and line["outcome"] == "ok"


@pytest.mark.docker
def test_a_call_refused_for_its_server_name_of_a_megabyte_is_in_the_ledger_and_the_audit_log_its_name_cut(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: refused before the bridge, neither the ledger nor the audit log had it (nor the call sent before it).
    config, tree = project
    script = tmp_path / "long_name.py"
    script.write_text(
        "from tool_tree.runtime import ToolCallError, call_tool\n"
        "try:\n    call_tool('s' * 1_000_000, 'get_record', {})\nexcept ToolCallError as e:\n    print(e.code)\n",
        encoding="utf-8",
    )
    audit = tmp_path / "audit.jsonl"
    code = main(["exec", str(script), "--config", str(config), "--tree", str(tree), "--json", "--audit", str(audit)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["stdout"] == "invalid_arguments\n", out
    (call,) = out["calls"]
    assert call["server"] == "s" * 255 + "…" and call["tool"] == "get_record" and call["ok"] is False
    assert call["error"] == "server or tool name too long"
    (line,) = [json.loads(x) for x in audit.read_text(encoding="utf-8").splitlines()]
    assert line["server"] == "s" * 255 + "…" and line["tool"] == "get_record"
    assert line["outcome"] == "refused" and line["code"] == "invalid_arguments"
    assert line["error"] == "server or tool name too long"
    assert audit.stat().st_size < 1_000


@pytest.mark.docker
def test_exec_failing_script_exits_1_with_its_traceback(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = project
    code = main(
        ["exec", "-c", "def f():\n    raise KeyError('lead')\nf()\n", "--config", str(config), "--tree", str(tree)]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert "line 2, in f" in err and "KeyError: 'lead'" in err


@pytest.mark.docker
def test_exec_traceback_names_the_script_as_given_with_its_lines(
    docker_engine: object,
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: every frame said File "<cell-1>", whatever the script was called.
    config, tree = project
    (tmp_path / "bad.py").write_text("def f():\n    return 1/0\nf()\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["exec", "bad.py", "--config", str(config), "--tree", str(tree)]) == 1
    err = capsys.readouterr().err
    assert '  File "bad.py", line 3, in <module>\n    f()\n' in err
    assert '  File "bad.py", line 2, in f\n    return 1/0\n' in err
    assert "<cell-" not in err and "ZeroDivisionError: division by zero" in err
    assert main(["exec", "-c", "x = 1\nraise KeyError(x)\n", "--config", str(config), "--tree", str(tree)]) == 1
    assert '  File "<string>", line 2, in <module>\n    raise KeyError(x)\n' in capsys.readouterr().err


@pytest.mark.docker
def test_a_script_importing_a_module_beside_it_is_told_that_only_its_text_is_in_the_sandbox(
    docker_engine: object,
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # Before: a bare "ModuleNotFoundError: No module named 'helpers'", with helpers.py right beside the script.
    config, tree = project
    (tmp_path / "top.py").write_text("import helpers\nprint(helpers.X)\n", encoding="utf-8")
    (tmp_path / "helpers.py").write_text("X = 5\n", encoding="utf-8")
    argv = ["--config", str(config), "--tree", str(tree)]
    assert main(["exec", str(tmp_path / "top.py"), *argv]) == 1
    err = capsys.readouterr().err
    assert "ModuleNotFoundError: No module named 'helpers'" in err
    assert f"tooltree: note: {tmp_path / 'helpers.py'} is beside the script on this machine, not in the sandbox" in err
    assert "put what it imports in a --workspace folder (/workspace in the sandbox, on its import path)" in err
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "helpers.py").write_text("X = 5\n", encoding="utf-8")  # as the note says: it runs
    assert main(["exec", str(tmp_path / "top.py"), "--workspace", str(workspace), *argv]) == 0
    out, err = capsys.readouterr()
    assert out == "5\n" and "note:" not in err
    assert main(["exec", "-c", "import json_helpers_nowhere", *argv]) == 1  # nothing of that name here: no note
    assert "note:" not in capsys.readouterr().err


@pytest.mark.docker
def test_a_server_whose_variable_is_unset_fails_its_calls_naming_it_and_the_other_servers_work(
    docker_engine: object,
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: "tooltree: error: …: environment variable ${MEDIA_TOKEN} is not set", exit 2, for any script: one
    # server's unset token stopped every script, even one that used only the other servers.
    config, tree = project
    monkeypatch.delenv("MEDIA_TOKEN", raising=False)
    text = config.read_text(encoding="utf-8").replace("  media:\n", '  media:\n    env: {TOKEN: "${MEDIA_TOKEN}"}\n')
    unset = tmp_path / "tooltree.yaml"
    unset.write_text(text, encoding="utf-8")
    line = text.splitlines().index('    env: {TOKEN: "${MEDIA_TOKEN}"}') + 1
    script = (
        "from servers.crm import list_leads\nfrom servers.media import list_gallery\n"
        "print(len(list_leads(limit=2).json()['leads']))\nlist_gallery()\n"
    )
    code = main(["exec", "-c", script, "--config", str(unset), "--tree", str(tree), "--json"])
    out = json.loads(capsys.readouterr().out)
    said = "servers.media.env.TOKEN: environment variable ${MEDIA_TOKEN} is not set"
    why = f"server 'media' is unavailable: {unset}:{line}: {said}"
    assert code == 1 and out["stdout"] == "2\n", {k: out[k] for k in ("stdout", "stderr", "error", "calls")}
    assert [(c["server"], c["ok"]) for c in out["calls"]] == [("crm", True), ("media", False)]
    assert (
        out["calls"][1]["error"] == why
        and out["error"] == f"tool_tree.runtime.ToolCallError: media.list_gallery: {why}"
    )


@pytest.mark.docker
def test_exec_shows_the_stderr_of_a_server_that_failed_to_start(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _, tree = project
    broken = tmp_path / "broken_crm.yaml"
    exit_code = json.dumps("import sys; sys.exit('crm: CRM_TOKEN is not set')")
    broken.write_text(f"servers:\n  crm:\n    command: {json.dumps(sys.executable)}\n    args: [-c, {exit_code}]\n",
                      encoding="utf-8")  # fmt: skip
    script = "from servers.crm import list_leads\nlist_leads(limit=1)\n"
    code = main(["exec", "-c", script, "--config", str(broken), "--tree", str(tree)])
    err = capsys.readouterr().err
    assert code == 1
    why = (
        "server 'crm' is unavailable: the server exited during start-up, with exit status 1; "
        "the last lines of its stderr:\n"
    )
    assert f"ToolCallError: crm.list_leads: {why}    crm: CRM_TOKEN is not set\n" in err  # the script's traceback
    # The ledger says the stderr once, in the traceback above it (before: again under the call).
    assert f"call crm.list_leads  error: {why.rstrip()} [as above]  " in err and err.count("CRM_TOKEN is not") == 2
    code = main(["exec", "-c", script, "--config", str(broken), "--tree", str(tree), "--json"])
    (call,) = json.loads(capsys.readouterr().out)["calls"]
    assert code == 1 and call["error"].endswith(f"{why}    crm: CRM_TOKEN is not set")


@pytest.mark.docker
def test_exec_saves_images_the_script_shows_in_new_files_beside_the_users(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Before: the user's image-1.png was replaced by the script's image.
    config, tree = project
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "image-1.png").write_bytes(b"my photo")
    code = main(
        [
            "exec",
            "-c",
            "from servers.media import render_chart\nshow_image(render_chart(title='t', values=[1, 2]).images[0])\n",
            "--config",
            str(config),
            "--tree",
            str(tree),
            "--images",
            str(tmp_path / "img"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert (tmp_path / "img" / "image-1.png").read_bytes() == b"my photo"
    assert (tmp_path / "img" / "image-2.png").read_bytes().startswith(b"\x89PNG")
    assert "  image 1: image/png, " in err and f" saved to {tmp_path / 'img' / 'image-2.png'}\n" in err


def test_exec_without_an_engine_says_so_in_one_line(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config, tree = project
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    code = main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 4
    assert len(err) == 1 and err[0].startswith("tooltree: error:")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["exec"], "give a SCRIPT or -c CODE"),
        (["exec", "x.py", "-c", "print(1)"], "give a SCRIPT or -c CODE"),
        (["exec", "-c", "print(1)", "--tree", "/x/tree"], "no manifest; run `tooltree generate-tree --out /x/tree`"),
    ],
)
def test_exec_usage_errors_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.docker
def test_exec_prints_the_output_even_when_the_workspace_cannot_be_saved(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config, tree = project
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "kept.txt").write_text("previous save", encoding="utf-8")
    code = "import os\nopen('locked', 'w').write('x')\nos.chmod('locked', 0)\nprint('the output')\n"
    argv = ["exec", "-c", code, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    assert main(argv) == 4
    out, err = capsys.readouterr()
    assert out == "the output\n"
    assert "tooltree: error: could not save the workspace" in err and "'locked': Permission denied" in err
    assert sorted(os.listdir(workspace)) == ["kept.txt"]
    assert main([*argv, "--json"]) == 4
    result = json.loads(capsys.readouterr().out)
    assert result["stdout"] == "the output\n" and "Permission denied" in result["workspace_error"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "soon"])
def test_exec_timeout_must_be_a_positive_finite_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["exec", "-c", "print(1)", f"--timeout={value}"])
    assert info.value.code == 2
    assert f"argument --timeout: expected a positive number of seconds, got {value!r}" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["604801", "1e308"])
def test_exec_timeout_past_a_week_is_refused_naming_the_option(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "tooltree: error: timeout: expected at most 604800 seconds (a week), got 1e+308", naming no option.
    with pytest.raises(SystemExit) as info:
        main(["exec", "-c", "print(1)", f"--timeout={value}"])
    assert info.value.code == 2
    assert f"argument --timeout: expected at most 604800 seconds (a week), got {value!r}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  memory: lots\n", "tooltree.yaml:3: sandbox.memory: not a size: 'lots' (use e.g. 512m or 2g)"),
        ("  output_chars: 10\n", "tooltree.yaml:3: sandbox.output_chars: expected at least 100 characters, got 10"),
    ],
)
def test_exec_bad_sandbox_setting_exits_2_naming_file_line_and_key(
    body: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(f"servers: {{}}\nsandbox:\n{body}", encoding="utf-8")
    assert main(["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tmp_path / "tree")]) == 2
    assert capsys.readouterr().err == f"tooltree: error: {tmp_path}/{expected}\n"


@pytest.mark.parametrize(
    ("option", "path", "expected"),
    [
        ("--audit", "folder", "--audit: {tmp}/folder is a folder, not a file"),
        ("--audit", "missing/audit.jsonl", "--audit: the folder {tmp}/missing does not exist"),
        ("--audit", "file.txt/audit.jsonl", "--audit: {tmp}/file.txt is a file, not a folder"),
        ("--images", "file.txt", "--images: {tmp}/file.txt is a file, not a folder"),
        (
            "--images",
            "file.txt/img",
            "--images: cannot create {tmp}/file.txt/img: {tmp}/file.txt is a file, not a folder",
        ),
    ],
)
def test_exec_output_path_mistakes_exit_2_before_anything_runs(
    option: str, path: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("kept\n", encoding="utf-8")
    # No tree at --tree: had the run got that far, the error would be about the manifest.
    argv = ["exec", "-c", "print(1)", "--tree", str(tmp_path / "no-tree"), option, str(tmp_path / path)]
    assert main(argv) == 2
    assert capsys.readouterr().err == f"tooltree: error: {expected.format(tmp=tmp_path)}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt", "folder"]
    assert (tmp_path / "file.txt").read_text(encoding="utf-8") == "kept\n"


def test_exec_tree_that_is_a_file_exits_2_saying_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = tmp_path / "tree.txt"
    tree.write_text("not a tree\n", encoding="utf-8")
    assert main(["exec", "-c", "print(1)", "--tree", str(tree)]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: {tree}: not a folder; a tree is the folder `tooltree generate-tree` writes\n"
    )


def test_exec_workspace_that_is_a_file_exits_2_and_keeps_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my important notes\n", encoding="utf-8")
    assert main(["exec", "-c", "print(1)", "--tree", str(tmp_path), "--workspace", str(notes)]) == 2
    assert capsys.readouterr().err.strip() == f"tooltree: error: --workspace: {notes} is a file, not a folder"
    assert notes.read_text(encoding="utf-8") == "my important notes\n"


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_exec_workspace_that_is_a_fifo_or_a_socket_says_what_it_is_and_leaves_it(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "is a file, not a folder", which `ls -l` (p…, s…) contradicts.
    special = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(special)
    else:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(special))
    what = {"fifo": "a named pipe (FIFO)", "socket": "a socket"}[kind]
    for workspace, said in ((special, f"{special} is {what}"), (special / "ws", f"cannot create {special / 'ws'}: "
                                                               f"{special} is {what}")):  # fmt: skip
        assert main(["exec", "-c", "print(1)", "--tree", str(tmp_path), "--workspace", str(workspace)]) == 2
        assert capsys.readouterr().err == f"tooltree: error: --workspace: {said}, not a folder\n"
    assert (stat.S_ISFIFO if kind == "fifo" else stat.S_ISSOCK)(special.lstat().st_mode)


@pytest.mark.parametrize("option", ["--workspace", "--images"])
def test_exec_refuses_a_folder_starting_with_an_unexpanded_tilde_and_makes_nothing(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: `--workspace '~/x'` (quoted, or after `=`: the shell leaves it) made a folder named `~` here, which a
    # later `rm -rf ~` meant to clean up; generate-tree's --out already refused it.
    monkeypatch.chdir(tmp_path)
    assert main(["exec", "-c", "print(1)", "--tree", str(tmp_path / "no-tree"), option, "~/x"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tooltree: error: {option}: ~/x starts with `~`, which the shell did not expand (it was quoted, or written "
        "after `=`), so it would make a folder named '~' here; give the full path (e.g. $HOME/…)"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.docker
def test_exec_keeps_host_files_it_never_held_and_says_when_both_sides_changed_one(
    docker_engine: object,
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sandbox.session import Sandbox

    config, tree = project
    workspace, data = tmp_path / "ws", tmp_path / "data.csv"
    (workspace / "servers").mkdir(parents=True)
    (workspace / "servers" / "notes.txt").write_text("mine", encoding="utf-8")
    data.write_text("a,b\n", encoding="utf-8")
    (workspace / "latest.csv").symlink_to(data)
    (workspace / "report.txt").write_text("v1", encoding="utf-8")
    real_save = Sandbox.save_workspace

    def user_edits_during_the_run(self: Sandbox, dest: str | Path | None = None) -> Path:
        (workspace / "report.txt").write_text("user v2", encoding="utf-8")  # the user, while the script ran
        return real_save(self, dest)

    monkeypatch.setattr(Sandbox, "save_workspace", user_edits_during_the_run)
    script = "import pathlib\npathlib.Path('report.txt').write_text('sandbox v2')\nprint('done')\n"
    argv = ["exec", "-c", script, "--config", str(config), "--tree", str(tree), "--workspace", str(workspace)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == "done\n"
    assert (workspace / "report.txt").read_text(encoding="utf-8") == "sandbox v2"
    assert (workspace / "report.txt.host").read_text(encoding="utf-8") == "user v2"
    assert (workspace / "servers" / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert (workspace / "latest.csv").is_symlink() and os.readlink(workspace / "latest.csv") == str(data)
    assert "tooltree: workspace: report.txt: both the host and the sandbox changed it" in err


@pytest.mark.docker
def test_sigterm_stops_exec_as_ctrl_c_does_and_leaves_no_container(
    docker_engine: EngineWithCLI, project: tuple[Path, Path]
) -> None:
    # Before: SIGTERM ended the process at once (exit -15); a container whose create was with the engine stayed.
    config, tree = project
    running = ["ps", "--quiet", "--no-trunc", "--filter", f"label=tooltree.owner={TEST_OWNER}", "--filter",
               "status=running"]  # fmt: skip
    before = set(docker_engine.text(running).split())  # other tests' sessions may be running
    code = "import time\ntime.sleep(120)"
    argv = [sys.executable, "-m", "tooltree_cli.main", "exec", "--config", str(config), "--tree", str(tree), "-c", code]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline, ours = time.monotonic() + 60, set[str]()
        while not ours and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)  # the container as `docker ps` shows it: running once the script is
            ours = set(docker_engine.text(running).split()) - before
        assert len(ours) == 1, "the script's container never ran"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 143 and err.decode().endswith("tooltree: terminated\n")
    assert docker_engine.run(["inspect", ours.pop()], check=False).returncode != 0  # removed, not left


def test_exec_help_names_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    from tooltree_cli import exec_cmd

    with pytest.raises(SystemExit):
        main(["exec", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for code, meaning in (
        (exec_cmd.EXIT_OK, "when the script succeeded"),
        (exec_cmd.EXIT_SCRIPT, "when it failed or timed out"),
        (exec_cmd.EXIT_USAGE, "for usage errors"),
        (exec_cmd.EXIT_SANDBOX, "when the sandbox failed or the workspace or an image could not be saved"),
    ):
        assert f"{code} {meaning}" in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"print('caf\xe9')\n", "not UTF-8 text: byte 0xe9 at line 1, column 11 (save it as UTF-8)"),
        (b"import os\n\x9f\x00\xff", "not UTF-8 text: byte 0x9f at line 2, column 1 (save it as UTF-8)"),
    ],
)
def test_exec_a_script_that_is_not_utf8_exits_2_naming_line_and_column(
    content: bytes, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "tooltree: error: UnicodeDecodeError: … (run with --debug …)", exit 1 (as if the script had failed).
    script = tmp_path / "s.py"
    script.write_bytes(content)
    assert main(["exec", str(script), "--tree", str(tmp_path / "no-tree")]) == 2
    assert capsys.readouterr().err == f"tooltree: error: {script}: {expected}\n"


def scripts_sent(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of each script `tooltree exec` would run, in order; each "runs" at once, exiting 0, in no sandbox."""
    from sandbox.results import ExecutionResult
    from tooltree_cli import exec_cmd

    codes: list[str] = []

    def execute(code: str, *args: object, **kwargs: object) -> tuple[object, ...]:
        codes.append(code)
        return ExecutionResult("", "", 0, 0.1), None, []

    monkeypatch.setattr(exec_cmd, "execute", execute)
    return codes


def test_exec_drops_a_utf8_byte_order_mark_as_python_does(
    project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the script failed in the sandbox, "SyntaxError: invalid non-printable character U+FEFF", though
    # `python bom.py` runs it (some Windows editors save UTF-8 with the mark).
    config, tree = project
    codes = scripts_sent(monkeypatch)
    script = tmp_path / "bom.py"
    script.write_bytes(b"\xef\xbb\xbfprint('bom \xc3\xa9')\n")
    argv = ["--config", str(config), "--tree", str(tree)]
    assert main(["exec", str(script), *argv]) == 0
    with script.open(encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["exec", "-", *argv]) == 0
    assert codes == ["print('bom é')\n"] * 2
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"\xef\xbb\xbfx = '\xff'\n")  # a column counts from after the mark, as an editor shows it
    assert main(["exec", str(bad), *argv]) == 2
    assert "not UTF-8 text: byte 0xff at line 1, column 6" in capsys.readouterr().err


def test_exec_reads_a_script_in_the_encoding_it_declares_as_python_does(
    project: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "not UTF-8 text: byte 0xe9 at line 2, column 11 (save it as UTF-8)", exit 2, though `python old.py` runs
    # a script that declares its encoding (PEP 263).
    config, tree = project
    codes = scripts_sent(monkeypatch)
    argv = ["--config", str(config), "--tree", str(tree)]
    first = b"# -*- coding: latin-1 -*-\nprint('caf\xe9')\n"
    second = b"#!/usr/bin/env python\n# vim: set fileencoding=cp1252 :\nprint('\x80 5')\n"
    # Emacs's names, which Python reads as UTF-8 and Latin-1 (before: "an encoding Python does not know").
    emacs = b"# -*- coding: utf-8-unix -*-\nprint('caf\xc3\xa9')\n"
    emacs_latin = b"# -*- coding: iso-latin-1-dos -*-\nprint('caf\xe9')\n"
    # UTF-7 reads ASCII as itself, but for '+', as python reads it.
    seven = b"# coding: utf-7\nprint('caf+AOk-')\n"
    for content in (seven, first, emacs, emacs_latin, second):
        (tmp_path / "old.py").write_bytes(content)
        assert main(["exec", str(tmp_path / "old.py"), *argv]) == 0, capsys.readouterr().err
    with (tmp_path / "old.py").open(encoding="utf-8", errors="surrogateescape") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["exec", "-", *argv]) == 0
    assert codes[:4] == [
        "# coding: utf-7\nprint('café')\n",
        first.decode("latin-1"),
        emacs.decode("utf-8"),
        emacs_latin.decode("latin-1"),
    ]
    assert codes[4:] == [second.decode("cp1252"), second.decode("cp1252")]
    assert "€" in codes[4]
    capsys.readouterr()
    refused = {
        b"# coding: klingon\nprint(1)\n": "declares an encoding Python does not know: 'klingon'",
        # Codecs of bytes, and one that reads nothing: before, exit 70, "LookupError: 'rot-13' is not a text encoding".
        b"# coding: rot13\nprint(1)\n": "declares 'rot13', which Python does not read a script in ('rot-13' is not a",
        b"# coding: zlib\nprint(1)\n": "declares 'zlib', which Python does not read a script in ('zlib' is not a",
        b"# coding: undefined\nprint(1)\n": "declares 'undefined', which Python does not read a script in (decoding",
        # Encodings that read the declaration's ASCII as other characters: before, UTF-16 was decoded into CJK text
        # and sent to fail oddly in the sandbox (python: "encoding problem: utf-16"), UTF-32 refused as "not utf-32
        # text … line 1, column 1".
        b"# coding: utf-16\nprint(1)\n": "declares 'utf-16', which Python does not read a script in (it reads the",
        b"# coding: utf-16-le\nprint(1)\n": "declares 'utf-16-le', which Python does not read a script in (it reads",
        b"#!/usr/bin/env python\n# coding: utf-32\nprint(1)\n": "declares 'utf-32', which Python does not read a",
        b"# coding: cp037\nprint(1)\n": "declares 'cp037', which Python does not read a script in (it reads the ASCII",
        b"# coding: ascii\nprint('caf\xe9')\n": "not ascii text, as it declares: byte 0xe9 at line 2, column 11",
        b"\xef\xbb\xbf# coding: latin-1\nprint(1)\n": "starts with UTF-8's byte order mark but declares 'latin-1'",
        # A declaration after the second line is a comment, as for Python.
        b"print(1)\n# coding: latin-1\nprint('caf\xe9')\n": "not UTF-8 text: byte 0xe9 at line 3, column 11",
    }
    for content, said in refused.items():
        (tmp_path / "bad.py").write_bytes(content)
        assert main(["exec", str(tmp_path / "bad.py"), *argv]) == 2
        assert f"tooltree: error: {tmp_path / 'bad.py'}: {said}" in capsys.readouterr().err


def test_exec_a_script_from_stdin_that_is_not_utf8_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "in.py").write_bytes(b"x = 1\nprint('\xff')\n")
    with (tmp_path / "in.py").open(encoding="utf-8") as stdin:  # as a shell's `< in.py` gives it
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["exec", "-", "--tree", str(tmp_path / "no-tree")]) == 2
    assert "standard input: not UTF-8 text: byte 0xff at line 2, column 8" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: None, "{p}: no such file"),
        (lambda p: p.mkdir(), "{p}: is a folder, not a script"),
        # 9 MB of backslashes: 18 MB once escaped for the wire, past its 16 MiB frame.
        (lambda p: p.write_text("x = '" + "\\" * 9_000_000 + "'\n", encoding="utf-8"), "{p}: 17.2 MB is more than"),
        (lambda p: p.write_bytes(b"#" * (17 << 20)), "{p}: 17.0 MB is more than"),
    ],
)
def test_exec_a_script_that_cannot_be_sent_exits_2_before_any_sandbox_starts(
    make: Callable[[Path], object],
    expected: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: the container started, then "the sandbox failed: … over the 16777216-byte frame cap", exit 4.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # nothing may reach an engine
    script = tmp_path / "s.py"
    make(script)
    assert main(["exec", str(script), "--tree", str(tmp_path / "no-tree")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tooltree: error: " + expected.format(p=script)) and err.count("\n") == 1


def _feed(fd: int, limit: int, written: list[int]) -> None:
    """Write ``#`` to ``fd`` until its reader closes it or ``limit`` bytes went in: an endless stream, bounded here so
    that a reader that reads it whole still ends."""
    chunk = b"#" * (1 << 20)
    try:
        while written[0] < limit:
            written[0] += os.write(fd, chunk)
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


@pytest.mark.parametrize("source", ["stdin", "fifo"])
def test_exec_reads_an_endless_script_only_as_far_as_the_sandbox_takes_and_exits_2(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: standard input, or a file whose size says nothing (a pipe, /dev/zero), was read whole before its size
    # was looked at: `tooltree exec /dev/zero` grew the host's memory until it was killed.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")  # nothing may reach an engine
    written = [0]
    if source == "stdin":
        read, write = os.pipe()
        feeder = threading.Thread(target=_feed, args=(write, 64 << 20, written))
        monkeypatch.setattr(sys, "stdin", open(read, encoding="utf-8"))  # noqa: SIM115 (closed with the test)
        script = "-"
        shown = "standard input"
    else:
        fifo = tmp_path / "endless.py"
        os.mkfifo(fifo)
        feeder = threading.Thread(target=lambda: _feed(os.open(fifo, os.O_WRONLY), 64 << 20, written))
        script = shown = str(fifo)
    feeder.start()
    try:
        code = main(["exec", script, "--tree", str(tmp_path / "no-tree")])
    finally:
        if source == "stdin":
            sys.stdin.close()
        feeder.join(timeout=30)
    assert code == 2
    err = capsys.readouterr().err
    assert err == (
        f"tooltree: error: {shown}: it holds more than the sandbox takes in one execution (16.0 MB); put the data in a "
        "file in --workspace and read it from the script\n"
    )
    assert not feeder.is_alive() and written[0] < 32 << 20, f"{written[0] >> 20} MiB were read"


# What a script can put in a terminal: an OSC 52 clipboard write, clear screen and cursor home, a bidi override,
# colours, a carriage return (a line of its own over the real one) and an 8-bit CSI.
OSC52_CLEAR = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x1b[H\u202e"
RED_CR = "\x1b[31mred\x1b[0m\rforged"
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.mark.docker
def test_exec_prints_the_ledger_of_a_scripts_hostile_call_names_cleaned(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the refused call's line went to the terminal as the script wrote its names: the clipboard was
    # written, the screen cleared, the text reversed, and "forged" printed over the start of the line.
    config, tree = project
    script = (
        "from tool_tree.runtime import call_tool\n"
        f"try:\n    call_tool({OSC52_CLEAR!r}, {RED_CR!r}, {{}})\n"
        "except Exception as e:\n    print(type(e).__name__)\n"
    )
    argv = ["exec", "-c", script, "--config", str(config), "--tree", str(tree)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert out == "ToolCallError\n"
    assert not UNSAFE.search(err), err
    assert "  call .red forged  error: .red\n    forged is not in this tree's manifest (only generated" in err
    assert main([*argv, "--json"]) == 0
    (call,) = json.loads(capsys.readouterr().out)["calls"]
    assert (call["server"], call["tool"]) == ("", "red forged") and not UNSAFE.search(call["error"])


def test_exec_prints_what_the_sandbox_side_said_cleaned(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failed save quotes the sandbox's words, a note names what the script made, a broken sandbox quotes its
    # stderr: all printed cleaned. Before: as they came.
    from sandbox.errors import SandboxError
    from sandbox.results import ExecutionResult
    from tooltree_cli import exec_cmd

    config, tree = project
    said = f"{OSC52_CLEAR}{RED_CR}\x9b2J" + "x" * 100_000
    result = ExecutionResult(stdout="", stderr="", exit_status=0, duration=0.1)
    monkeypatch.setattr(exec_cmd, "execute", lambda *a, **k: (result, f"could not save: {said}", [f"note {said}"]))
    argv = ["exec", "-c", "print(1)", "--config", str(config), "--tree", str(tree)]
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert not UNSAFE.search(err)
    assert "tooltree: workspace: note red\nforged" in err and "tooltree: error: could not save: red\nforged" in err
    assert err.count("x") < 2 * 4_000 and "x…\n" in err  # each cut short
    assert main([*argv, "--json"]) == 4
    printed = json.loads(capsys.readouterr().out)
    assert not UNSAFE.search(printed["workspace_error"] + printed["workspace_notes"][0])

    def broken(*args: object, **kwargs: object) -> None:
        raise SandboxError(f"the sandbox failed to start: {said}")

    monkeypatch.setattr(exec_cmd, "execute", broken)
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert err.startswith("tooltree: error: the sandbox failed: the sandbox failed to start: red\nforged")
    assert not UNSAFE.search(err)


def _shows(monkeypatch: pytest.MonkeyPatch, images: int) -> None:
    """`tooltree exec` runs no sandbox: the script printed "out" and showed ``images`` PNGs."""
    from sandbox.results import ExecutionResult, ShownImage
    from tooltree_cli import exec_cmd

    result = ExecutionResult("out\n", "", 0, 0.1, images=[ShownImage(PNG, "image/png")] * images)
    monkeypatch.setattr(exec_cmd, "execute", lambda *a, **k: (result, None, []))


def test_exec_images_never_overwrite_a_file_or_follow_a_link_even_one_made_after_the_folder_was_read(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: image-1.png was written over the user's file, and image-2.png through the link, wherever it led.
    from tooltree_cli import exec_images

    config, tree = project
    pics, elsewhere = tmp_path / "pics", tmp_path / "elsewhere"
    pics.mkdir()
    (pics / "image-1.png").write_bytes(b"my photo")
    (pics / "image-2.png").symlink_to(elsewhere)  # to nowhere yet: writing through it would create it
    monkeypatch.setattr(exec_images, "_IMAGE_NAME", re.compile("(?!)"))  # as if both appeared once pics was read
    _shows(monkeypatch, 2)
    assert main(["exec", "-c", "pass", "--config", str(config), "--tree", str(tree), "--images", str(pics)]) == 0
    err = capsys.readouterr().err
    assert (pics / "image-1.png").read_bytes() == b"my photo" and not elsewhere.exists()
    assert (pics / "image-3.png").read_bytes() == PNG and (pics / "image-4.png").read_bytes() == PNG
    assert f"  image 1: image/png, 70 B saved to {pics / 'image-3.png'}\n" in err
    assert f"  image 2: image/png, 70 B saved to {pics / 'image-4.png'}\n" in err


def _disk_full_at_image_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening image-2.png fails as on a full disk (ENOSPC); every other open is as it was."""
    real_open = os.open

    def full_disk(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        if str(path).endswith("image-2.png"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", full_disk)


def test_exec_an_image_that_cannot_be_written_is_reported_after_the_output_and_exits_4(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: an OSError before anything was printed: the script's output was lost, and "tooltree: error:
    # OSError: ..." exited 1, as if the script had failed.
    config, tree = project
    _shows(monkeypatch, 3)
    _disk_full_at_image_2(monkeypatch)
    argv = ["exec", "-c", "pass", "--config", str(config), "--tree", str(tree), "--images", str(tmp_path / "pics")]
    assert main(argv) == 4
    out, err = capsys.readouterr()
    assert out == "out\n"
    assert (
        f"saved to {tmp_path / 'pics' / 'image-1.png'}\n" in err
        and "image 2: image/png, 70 B not saved (see below)" in err
    )
    assert err.endswith(
        f"tooltree: error: --images: image 2 could not be saved as {tmp_path / 'pics' / 'image-2.png'}: "
        "No space left on device\n"
    )
    assert sorted(p.name for p in (tmp_path / "pics").iterdir()) == ["image-1.png"]


def test_exec_json_says_why_an_image_was_not_saved(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: --json said no reason for its exit 4 (sandbox_error and workspace_error null): why was on stderr only.
    config, tree = project
    _shows(monkeypatch, 2)
    _disk_full_at_image_2(monkeypatch)
    pics = tmp_path / "pics"
    argv = ["exec", "-c", "pass", "--config", str(config), "--tree", str(tree), "--images", str(pics), "--json"]
    assert main(argv) == 4
    printed = json.loads(capsys.readouterr().out)
    assert printed["images_error"] == f"image 2 could not be saved as {pics / 'image-2.png'}: No space left on device"
    assert [i["saved_to"] for i in printed["images"]] == [str(pics / "image-1.png"), None]
    assert printed["sandbox_error"] is None and printed["workspace_error"] is None


def test_exec_says_which_shown_images_were_left_out_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: an image the script showed that the API would refuse (9,000 pixels wide) was left out unsaid: not
    # listed, not saved with --images, not in --json, though the script had seen show_image succeed.
    from sandbox.results import ExecutionResult
    from tooltree_cli.exec_cmd import _print_human, result_json

    note = "[a shown image of 9,000×2 pixels was left out: the API takes at most 8,000 on a side; show it smaller]"
    result = ExecutionResult(stdout="", stderr="", exit_status=0, duration=1.0, image_notes=[note])
    _print_human(result, [], asked=True)
    assert f"  {note}" in capsys.readouterr().err.splitlines()
    assert result_json(result)["image_notes"] == [note] and result_json(result)["images"] == []


def test_exec_lists_at_most_its_ledger_lines_and_counts_the_other_calls(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: one line per call however many: a script's 21,000 refused calls were 21,000 lines.
    from sandbox.results import ExecutionResult, ToolCallRecord
    from tooltree_cli.exec_cmd import LEDGER_LINES, _print_human, result_json

    calls = [ToolCallRecord("crm", f"t{i}", False, 10, 0, 1.0, "not in the manifest") for i in range(LEDGER_LINES + 5)]
    result = ExecutionResult(stdout="", stderr="", exit_status=0, duration=1.0, tool_calls=calls, tool_calls_omitted=40)
    _print_human(result, [])
    err = capsys.readouterr().err.splitlines()
    assert sum(line.startswith("  call crm.t") for line in err) == LEDGER_LINES
    assert f"  … 45 more call(s) (--json lists the first {LEDGER_LINES + 5})" in err
    assert err[-1].startswith(f"tooltree: script exited 0 in 1.00 s · {LEDGER_LINES + 45} tool call(s) · ")
    assert err[-1].endswith(" printed · tooltree exit 0")
    info = result_json(result)
    assert len(info["calls"]) == LEDGER_LINES + 5 and info["calls_not_listed"] == 40


def _ends(monkeypatch: pytest.MonkeyPatch, result: object, unsaved: str | None = None) -> list[object]:
    """`tooltree exec` runs no sandbox: its execution ends as ``result``; the config it was given is appended."""
    from tooltree_cli import exec_cmd

    given: list[object] = []

    def execute(code: str, tree: Path, config: object, *args: object, **kwargs: object) -> tuple[object, ...]:
        given.append(config)
        return result, unsaved, []

    monkeypatch.setattr(exec_cmd, "execute", execute)
    return given


@pytest.mark.parametrize(
    ("outcome", "code", "last"),
    [
        (
            {"exit_status": 0, "error": "the Python process exited with status 0"},  # os._exit(0)
            1,
            "tooltree: script exited 0 in 0.10 s · 0 tool call(s) · 0 B of tool results received in the sandbox · 0 B "
            "printed · tooltree exit 1 because the script failed (the Python process exited with status 0)",
        ),
        (
            {"exit_status": -9, "error": "timed out after 2 s", "timed_out": True},
            1,
            "tooltree: script killed by signal 9 in 0.10 s · 0 tool call(s) · 0 B of tool results received in the "
            "sandbox · 0 B printed · tooltree exit 1 because the script timed out after 2 s",
        ),
        (
            {"exit_status": 3, "error": "SystemExit: 3"},
            1,
            "tooltree: script exited 3 in 0.10 s · 0 tool call(s) · 0 B of tool results received in the sandbox · 0 B "
            "printed · tooltree exit 1 because the script failed (SystemExit: 3)",
        ),
        (  # the code as the script gave it: before, "exited 1"; `python` ends with status 0 (its low 8 bits)
            {"exit_status": 256, "error": "SystemExit: 256"},
            1,
            "tooltree: script exited 256 in 0.10 s · 0 tool call(s) · 0 B of tool results received in the sandbox · 0 "
            "B printed · tooltree exit 1 because the script failed (SystemExit: 256)",
        ),
        (  # the script's own code, not a signal: before, "killed by signal 1"
            {"exit_status": -1, "error": "SystemExit: -1"},
            1,
            "tooltree: script exited -1 in 0.10 s · 0 tool call(s) · 0 B of tool results received in the sandbox · 0 "
            "B printed · tooltree exit 1 because the script failed (SystemExit: -1)",
        ),
    ],
)
def test_exec_last_line_says_how_the_script_ended_and_the_exit_code_without_contradiction(
    project: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    outcome: dict[str, object],
    code: int,
    last: str,
) -> None:
    # Before: "tooltree: exit 0" for a script that ended with os._exit(0), and "tooltree: exit -9" for one that
    # timed out, each as tooltree exited 1.
    from sandbox.results import ExecutionResult

    config, tree = project
    _ends(monkeypatch, ExecutionResult(stdout="", stderr="", duration=0.1, **outcome))  # type: ignore[arg-type]
    assert main(["exec", "-c", "pass", "--config", str(config), "--tree", str(tree)]) == code
    assert capsys.readouterr().err.splitlines()[-1] == last


def test_exec_last_line_names_the_unsaved_workspace_as_the_reason_for_exit_4(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sandbox.results import ExecutionResult

    config, tree = project
    _ends(monkeypatch, ExecutionResult("out\n", "", 0, 0.1), unsaved="could not save the workspace: disk full")
    assert main(["exec", "-c", "pass", "--config", str(config), "--tree", str(tree)]) == 4
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("tooltree: script exited 0 in 0.10 s · ")
    assert err[-2].endswith(" · tooltree exit 4 because the workspace was not saved (below)")
    assert err[-1] == "tooltree: error: could not save the workspace: disk full"


def test_exec_without_a_config_says_it_runs_without_the_servers(
    project: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Before: nothing said so; the script's first tool call failed with "no server named 'crm' in the pool".
    from sandbox.results import ExecutionResult
    from tooltree_cli.exec_cmd import NO_CONFIG

    # A copy of the tree: the file its manifest records is not beside it (tests/cli/test_tree_config_file.py).
    tree = Path(shutil.copytree(project[1], tmp_path / "tree"))
    given = _ends(monkeypatch, ExecutionResult("1\n", "", 0, 0.1))
    monkeypatch.chdir(tmp_path)  # no tooltree.yaml here
    assert main(["exec", "-c", "print(1)", "--tree", str(tree)]) == 0
    assert capsys.readouterr().err.splitlines()[0] == f"tooltree: {NO_CONFIG}"
    assert NO_CONFIG.startswith("no tooltree.yaml here, so no servers: the script runs without its tools")
    assert given == [None]
    (tmp_path / "tooltree.yaml").write_text("servers: {}\n", encoding="utf-8")
    assert main(["exec", "-c", "print(1)", "--tree", str(tree)]) == 0
    assert NO_CONFIG not in capsys.readouterr().err


@pytest.mark.docker
def test_exec_a_script_that_ends_its_process_with_status_0_exits_1_and_says_why(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = project
    assert main(["exec", "-c", "import os; os._exit(0)", "--config", str(config), "--tree", str(tree)]) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("tooltree: script exited 0 in ")
    assert last.endswith(" · tooltree exit 1 because the script failed (the Python process exited with status 0)")


@pytest.mark.docker
def test_exec_says_a_scripts_exit_code_past_255_as_the_script_gave_it(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "script exited 1", and 1 under --json; `python` ends with status 0 for it (the low 8 bits), which hides
    # the failure the script meant.
    config, tree = project
    assert main(["exec", "-c", "raise SystemExit(256)", "--config", str(config), "--tree", str(tree)]) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("tooltree: script exited 256 in ")
    assert last.endswith(" · tooltree exit 1 because the script failed (SystemExit: 256)")


class _Full:
    """A standard output on a full disk (`tooltree exec … > out.txt`)."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def isatty(self) -> bool:
        return False


@pytest.mark.docker
def test_exec_whose_result_cannot_be_printed_says_why_and_exits_4_with_the_workspace_saved(
    docker_engine: object, project: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:  # fmt: skip
    # Before: "tooltree: error: OSError: [Errno 28] No space left on device (unexpected: run with --debug for the
    # traceback)", exit 70, as if tooltree had a bug.
    config, tree = project
    monkeypatch.setattr(sys, "stdout", _Full())
    argv = ["exec", "-c", "open('made.txt', 'w').write('x')\nprint('done')"]
    code = main([*argv, "--config", str(config), "--tree", str(tree), "--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 4, err
    assert err.endswith("tooltree: error: the result could not be printed: No space left on device\n"), err
    assert (tmp_path / "made.txt").read_text(encoding="utf-8") == "x"


def test_exec_json_says_whether_each_output_was_cut_short() -> None:
    # Before: --json had no such field: a script reading it could tell a cut output only by looking for the note in
    # its text, or by stdout_path, which is null when no --workspace kept the whole.
    from sandbox.results import parse_execution
    from tooltree_cli.exec_cmd import result_json

    raw = {"stdout": {"head": "x" * 100, "tail": "y" * 100, "truncated": True, "bytes": 5000}, "stderr": {"head": "e"}}
    info = result_json(parse_execution(raw, max_chars=100, duration=1.0, tool_calls=[]))
    assert info["stdout_truncated"] is True and info["stdout_path"] is None and "stdout cut" in info["stdout"]
    assert info["stderr_truncated"] is False and info["stderr"] == "e"
