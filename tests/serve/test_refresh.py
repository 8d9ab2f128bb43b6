"""`tooltree serve` with an existing tree answers at once and refreshes the tree in the background.

A client waits only so long for its handshake (Claude Code: 30 s), and listing every server of a big
config takes longer; so the handshake must not wait for the servers. When serving ends, the refresh
is cancelled and the servers it started are closed.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.serve.conftest import TOKEN, http_client
from tests.serve.raw_stdio import RawStdio
from tests.support import (
    RAW_SERVER,
    TEST_OWNER,
    ServeProcess,
    alive,
    hung_server_yaml,
    raw_server_config,
    sample_config_yaml,
    wait_until,
)
from tooltree_cli.main import main

pytestmark = pytest.mark.docker


def _argv(config: Path, tree: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree),
            "--warm", "0", *more]  # fmt: skip


def _env() -> dict[str, str]:
    return {"TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "PATH": "/usr/local/bin:/usr/bin:/bin"}


def _setup(folder: Path, crm_tree: Path, config_text: str) -> tuple[Path, Path]:
    """A config with ``config_text`` and a copy of the crm tree in ``folder``."""
    config = folder / "tooltree.yaml"
    config.write_text(config_text, encoding="utf-8")
    tree = folder / "tree"
    shutil.copytree(crm_tree, tree)
    return config, tree


@pytest.fixture(scope="module")
def crm_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("refresh")
    config = folder / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return tree


def _refreshing(folder: Path, crm_tree: Path) -> tuple[RawStdio, Path, Path]:
    """`tooltree serve` over stdio whose background refresh is waiting on a server that never answers: the
    process, the file holding that server's pid, and the tree."""
    hung_entry, pid_file = hung_server_yaml(folder, timeout=600)
    config, tree = _setup(folder, crm_tree, sample_config_yaml("crm") + hung_entry)
    raw = RawStdio(_argv(config, tree), _env())
    try:
        raw.wait_for_stderr("refreshing it from 2 server(s) meanwhile")
        wait_until(pid_file.exists, "the refresh to start the hung server")
    except BaseException:
        raw.close()
        raise
    return raw, pid_file, tree


def test_the_handshake_does_not_wait_for_a_server_that_hangs_and_leaving_closes_it(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    raw, pid_file, tree = _refreshing(tmp_path, crm_tree)
    try:
        answer = raw.initialize()
        assert "servers/crm" in json.dumps(answer["result"]) or "crm" in answer["result"].get("instructions", "")
        raw.send({"id": 2, "method": "tools/call", "params": {"name": "list_files", "arguments": {"path": "servers"}}})
        listed = raw.wait_for(lambda m: m.get("id") == 2, "list_files result")
        assert "crm" in listed["result"]["content"][0]["text"]
        hung = int(pid_file.read_text(encoding="utf-8"))
        assert alive(hung)  # still being listed: the client was answered without waiting for it
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    assert not alive(hung)
    assert any("refresh was stopped" in line for line in raw.stderr), "".join(raw.stderr)
    assert not (tree / "servers" / "hung").exists()


def test_sigterm_during_the_refresh_stops_it_before_its_servers_are_killed(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    # Before: the signal killed the servers first, so the refresh reported them as failed ("failed to list its
    # tools ... the server exited during start-up", "not up to date") and could write a tree from what was left.
    raw, pid_file, tree = _refreshing(tmp_path, crm_tree)
    try:
        hung = int(pid_file.read_text(encoding="utf-8"))
        raw.proc.send_signal(signal.SIGTERM)
        assert raw.proc.wait(timeout=30) == 0
    finally:
        raw.close()
    stderr = "".join(raw.stderr)
    assert not alive(hung)
    assert "refresh was stopped" in stderr, stderr
    assert "failed to list" not in stderr and "not up to date" not in stderr, stderr
    assert not (tree / "servers" / "hung").exists()


def test_a_stale_tree_is_refreshed_while_it_is_served(docker_engine: object, crm_tree: Path, tmp_path: Path) -> None:
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm"))
    stub = tree / "servers" / "crm" / "list_leads.py"
    expected = stub.read_bytes()
    stub.unlink()
    raw = RawStdio(_argv(config, tree), _env())
    try:
        raw.initialize()
        raw.wait_for_stderr(f"{tree} is up to date (")
        assert stub.read_bytes() == expected
        assert raw.close_stdin() == 0
    finally:
        raw.close()


def test_a_refresh_whose_servers_fail_shows_their_stderr_and_does_not_say_up_to_date(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    # As under an MCP client with a minimal PATH: the server's interpreter lacks its dependencies.
    missing = json.dumps("import tooltree_missing_dependency")
    crm = f"servers:\n  crm:\n    command: {json.dumps(sys.executable)}\n    args: [-c, {missing}]\n"
    config, tree = _setup(tmp_path, crm_tree, crm)
    raw = RawStdio(_argv(config, tree), _env())
    try:
        raw.initialize()
        raw.wait_for_stderr(f"{tree} is not up to date: every server failed (see above); it is served as it was")
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    log = "".join(raw.stderr)
    assert (
        "crm failed to list its tools (the server exited during start-up, with exit status 1); its stubs are kept"
        in log
    )
    assert "    ModuleNotFoundError: No module named 'tooltree_missing_dependency'\n" in log
    assert "is up to date" not in log
    assert (tree / "servers" / "crm" / "list_leads.py").is_file()


def test_regenerate_first_brings_the_tree_up_to_date_before_serving(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm"))
    stub = tree / "servers" / "crm" / "list_leads.py"
    stub.unlink()
    raw = RawStdio(_argv(config, tree, "--regenerate-first"), _env())
    try:
        raw.initialize()
        assert stub.is_file()  # written before the handshake was answered
        assert not any("meanwhile" in line for line in raw.stderr)
        assert raw.close_stdin() == 0
    finally:
        raw.close()


def test_a_session_that_starts_after_the_refresh_gets_the_refreshed_instructions(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm", "docs"))  # docs is not in the tree yet
    raw = RawStdio(_argv(config, tree), _env())
    try:
        raw.wait_for_stderr("sessions from now on get the refreshed tree's instructions")
        instructions = raw.initialize()["result"]["instructions"]
        assert "docs" in instructions and "crm" in instructions
        assert (tree / "servers" / "docs").is_dir()
        assert raw.close_stdin() == 0
    finally:
        raw.close()


@pytest.mark.anyio
async def test_over_http_sessions_opened_after_the_refresh_get_its_instructions(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    config, tree = _setup(tmp_path, crm_tree, sample_config_yaml("crm", "docs"))
    served = ServeProcess(_argv(config, tree, "--http", "--port", "0"), {**_env(), "TOOLTREE_SERVE_TOKEN": TOKEN})
    try:
        done = "sessions from now on get the refreshed tree's instructions"
        wait_until(lambda: any(done in line for line in served.stderr_lines), "the refresh to end")
        async with http_client(served.url) as client:
            instructions = str(client.session.initialize_result.instructions)
        assert "docs" in instructions and "crm" in instructions
    finally:
        assert served.stop() == 0


def _gated(folder: Path, crm_tree: Path, *, warm: str) -> tuple[RawStdio, Path]:
    """`tooltree serve` over stdio (``--warm``) of the crm tree, whose config adds docs and a server whose listing
    waits for a gate file: the refresh ends when the test makes that file. The process, and the gate."""
    gate = folder / "gate"
    spec = folder / "gated.json"
    spec.write_text(json.dumps({"pages": [[{"name": "ping", "inputSchema": {"type": "object"}}]],
                                "list_gate": str(gate)}), encoding="utf-8")  # fmt: skip
    gated = f"  gated:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(RAW_SERVER))}, "
    gated += f"{json.dumps(str(spec))}]\n"
    config, tree = _setup(folder, crm_tree, sample_config_yaml("crm", "docs") + gated)
    argv = [*_argv(config, tree)]
    argv[argv.index("--warm") + 1] = warm
    raw = RawStdio(argv, _env())
    raw.wait_for_stderr("refreshing it from 3 server(s) meanwhile")
    return raw, gate


def _call(raw: RawStdio, request_id: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    raw.send({"id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    result = raw.wait_for(lambda m: m.get("id") == request_id, f"the result of {name}")["result"]
    assert isinstance(result, dict)
    return result


DOCS = "from servers.docs import list_documents\nlisted = list_documents()\nprint('listed')"


@pytest.mark.parametrize("warm", ["1", "0"], ids=["warm-pool", "no-pool"])
def test_a_session_without_a_sandbox_yet_takes_the_tree_the_refresh_brought(
    docker_engine: object, crm_tree: Path, tmp_path: Path, warm: str
) -> None:
    # Before: search and read_file showed the added server's tools, and the script could not import them
    # (ModuleNotFoundError: the warm sandboxes mounted the tree of the start) nor call them (the session's runtime
    # had the old manifest and servers).
    raw, gate = _gated(tmp_path, crm_tree, warm=warm)
    try:
        raw.initialize()
        before = _call(raw, 2, "search_tools", {"query": "list documents", "detail": "name"})  # opens the session
        assert "docs." not in json.dumps(before)
        gate.touch()
        raw.wait_for_stderr("sessions from now on get the refreshed tree's instructions")
        ran = _call(raw, 3, "execute_python", {"code": DOCS})
        assert ran.get("isError") is not True, ran
        text = ran["content"][0]["text"]  # type: ignore[index]
        assert text.startswith("[this session runs on the tree as regenerated since this client connected: the index")
        assert "]\n\nlisted\n" in text and "docs.list_documents ok" in json.dumps(ran)
        pinged = _call(raw, 4, "execute_python", {"code": "from servers.gated import ping\nprint('called')"})
        assert pinged.get("isError") is not True and "called" in json.dumps(pinged), pinged
        assert raw.close_stdin() == 0
    finally:
        raw.close()


def test_a_session_whose_sandbox_started_before_the_refresh_keeps_it_and_is_told_once(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    raw, gate = _gated(tmp_path, crm_tree, warm="1")
    try:
        raw.initialize()
        assert _call(raw, 2, "execute_python", {"code": "kept = 41"}).get("isError") is not True
        gate.touch()
        raw.wait_for_stderr("sessions from now on get the refreshed tree's instructions")
        told = _call(raw, 3, "execute_python", {"code": "print(kept + 1)"})
        text = told["content"][0]["text"]  # type: ignore[index]
        assert text.startswith("[the tree was regenerated from the servers since this session's sandbox started")
        assert text.endswith("\n\n42") and "reconnect the client" not in text
        assert "the next call starts a new sandbox session on the regenerated tree, with an empty /workspace" in text
        again = _call(raw, 4, "execute_python", {"code": "print(kept)"})
        assert again["content"][0]["text"] == "41"  # type: ignore[index]  # said once
        # A server the regeneration added cannot be imported here: the failed import says why, and the next call
        # renews the session (before: "reconnect the client", which a model cannot do).
        missed = json.dumps(_call(raw, 5, "execute_python", {"code": "from servers.gated import ping"}))
        assert "No module named 'servers.gated'" in missed and "reconnect the client" not in missed
        renewed = json.dumps(
            _call(raw, 6, "execute_python", {"code": "from servers.gated import ping\nprint('called')"})
        )
        assert "called" in renewed and "a new sandbox session on the regenerated tree" in renewed, renewed
        assert raw.close_stdin() == 0
    finally:
        raw.close()


@pytest.mark.parametrize(
    "text", ["servers: {}\n", '{"mcpServers": {"linear": {"type": "sse", "url": "http://h/sse"}}}']
)
def test_a_config_with_no_server_to_list_is_refused_and_the_tree_left_as_it_was(
    crm_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    # Before: "tree is up to date (3 written, 4 deleted)": the background refresh emptied the served tree.
    config, tree = _setup(tmp_path, crm_tree, text)
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    assert main(["serve", "--config", str(config), "--tree", str(tree), "--warm", "0"]) == 2
    said = capsys.readouterr().err
    assert "it lists no server tooltree can start, so this run would delete all" in said
    assert said.rstrip().endswith("(or --no-regenerate to serve the tree as it is)")
    assert sorted(p.relative_to(tree) for p in tree.rglob("*")) == before


def test_serve_says_which_tools_it_left_out_as_malformed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: generate-tree named them; serve's regeneration said nothing (the pool logged them below warnings).
    from tool_tree.config import load_config
    from tooltree_cli.serve_cmd import _regenerate

    tools = [{"name": "good", "inputSchema": {"type": "object"}}, {"name": "vague\x1b[2J", "annotations": {}}]
    config = raw_server_config(tmp_path, {"pages": [tools]})
    code, read = _regenerate(load_config(config), tmp_path / "tree")
    assert code == 0 and read is not None and [t.tool for t in read[1].tools] == ["good"]
    said = capsys.readouterr().err
    left_out = "tooltree serve: warning: raw: left out tool 'vague\\x1b[2J', malformed: inputSchema: Field required\n"
    assert left_out in said  # the name escaped, as every warning quotes one
    assert "\x1b" not in said


def test_a_server_whose_variable_is_unset_is_said_kept_as_it_is_and_fails_its_calls_while_the_others_serve(
    docker_engine: object, crm_tree: Path, tmp_path: Path
) -> None:
    # Before: "tooltree: error: …: servers.crm.env.TOKEN: environment variable ${CRM_TOKEN_UNSET} is not set", exit
    # 2: one server's unset token stopped serve, so the client had none of the others either.
    text = sample_config_yaml("crm", "docs").replace("  crm:\n", '  crm:\n    env: {TOKEN: "${CRM_TOKEN_UNSET}"}\n', 1)
    config, tree = _setup(tmp_path, crm_tree, text)  # docs is not in the tree yet
    stub = tree / "servers" / "crm" / "list_leads.py"
    kept = stub.read_bytes()
    raw = RawStdio(_argv(config, tree), _env())
    try:
        raw.wait_for_stderr("sessions from now on get the refreshed tree's instructions")
        raw.initialize()
        script = "from servers.crm import list_leads\nlist_leads(limit=1)\n"
        raw.send({"id": 2, "method": "tools/call", "params": {"name": "execute_python", "arguments": {"code": script}}})
        answer = raw.wait_for(lambda m: m.get("id") == 2, "the script's result")
        assert raw.close_stdin() == 0
    finally:
        raw.close()
    log = "".join(raw.stderr)
    said = f"{config}:3: servers.crm.env.TOKEN: environment variable ${{CRM_TOKEN_UNSET}} is not set"
    assert f"warning: server 'crm' cannot start until this is set: {said}; its tool calls fail, and {tree} " in log
    assert "refreshing it from 1 server(s) meanwhile" in log and (tree / "servers" / "docs").is_dir()
    assert stub.read_bytes() == kept  # its part of the tree kept as it was
    text = json.dumps(answer["result"])
    assert f"server 'crm' is unavailable: {said}" in text, text
