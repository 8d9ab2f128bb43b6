"""A tree regenerated under a running session (`tooltree generate-tree` while `tooltree agent` runs in a native-tool
mode, or a `tooltree serve` session goes on with the tree it began with): a call the session's stale manifest lets
through is told that the session is stale, not that the tree is. Before: "regenerate the tree", though it was, and a
call of a server the regeneration dropped went out unchecked, with a warning that the snapshot was missing.

A `Runtime` whose sandbox starts after such a regeneration (its first, or one after `Runtime.stop_sandbox`) runs the
regenerated tree, and its bridge and servers move to it then, said once (`Runtime.take_sandbox_note`). Before, the
sandbox's stubs were the regenerated tree's and its bridge checked the calls against the manifest the runtime had
opened: a call as its stub showed it was refused, 'the regenerated tree holds another definition of it', and a tool
the regeneration added was 'not in this tree's manifest'.

Real parts: `generate-tree` of the test servers, run twice; the evolving test server and the sample servers; a real
container.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent.toolsets.direct import DirectToolset
from sandbox import SandboxConfig
from sandbox.bridge import ToolCallRefused
from sandbox.docker_backend import DockerBackend
from sandbox.host import Runtime
from sandbox.pool import SandboxPool
from tests.docker_cli import EngineWithCLI
from tests.support import sample_config_yaml, wait_until
from tool_tree.config import load_config
from tooltree_cli.main import main

EVOLVING = Path(__file__).resolve().parents[1] / "servers" / "evolving_server.py"
SLOW = Path(__file__).resolve().parents[1] / "servers" / "slow_server.py"


def generate(config: Path, tree: Path) -> None:
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0


def evolving(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A config of the evolving server as ``evo`` at release 1, the file that says its release, and its tree."""
    version, config, tree = tmp_path / "version", tmp_path / "tooltree.yaml", tmp_path / "tree"
    version.write_text("1", encoding="utf-8")
    config.write_text(
        f"servers:\n  evo:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(EVOLVING))}, {json.dumps(str(version))}]\n    timeout: 30\n",
        encoding="utf-8",
    )
    generate(config, tree)
    return config, version, tree


def text(outcome: object) -> str:
    return "".join(str(b.get("text", "")) for b in getattr(outcome, "content", []))


def test_a_direct_call_of_a_tool_a_regeneration_changed_says_to_start_a_new_run_not_to_regenerate(
    tmp_path: Path,
) -> None:
    config, version, tree = evolving(tmp_path)
    toolset = DirectToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        version.write_text("2", encoding="utf-8")
        generate(config, tree)
        removed = toolset.call("evo__delete_record", {"id": "r1"}, runtime)
        changed = toolset.call("evo__update_record", {"record_id": "r1", "note": "n"}, runtime)
    for outcome in (removed, changed):
        assert outcome.is_error
        said = text(outcome)
        assert "the tree was regenerated since this session began" in said and "start a new run" in said, said
        assert "regenerate the tree" not in said and "invalid arguments" not in said


def test_a_tool_the_server_changed_since_the_tree_was_generated_still_says_to_regenerate(tmp_path: Path) -> None:
    config, version, tree = evolving(tmp_path)
    toolset = DirectToolset(tree)
    with Runtime(load_config(config), tree) as runtime:
        version.write_text("2", encoding="utf-8")  # the server changed; the tree is as it was
        said = text(toolset.call("evo__delete_record", {"id": "r1"}, runtime))
    assert "no longer offered by the server; regenerate the tree (tooltree generate-tree" in said
    assert "regenerated since" not in said


def test_a_call_of_a_server_a_regeneration_dropped_is_refused_as_a_stale_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    both, crm, tree = tmp_path / "both.yaml", tmp_path / "crm.yaml", tmp_path / "tree"
    both.write_text(sample_config_yaml("crm", "docs"), encoding="utf-8")
    crm.write_text(sample_config_yaml("crm"), encoding="utf-8")
    generate(both, tree)
    with Runtime(load_config(both), tree) as runtime:
        generate(crm, tree)  # docs dropped: its snapshot is gone
        with caplog.at_level(logging.WARNING), pytest.raises(ToolCallRefused) as refused:
            runtime.call_tool("docs", "list_documents", {"limit": "not a number"})
        kept = runtime.call_tool("crm", "list_leads", {"limit": 1})  # unchanged by the regeneration: called
        with pytest.raises(ToolCallRefused) as checked:  # and its arguments checked as before
            runtime.call_tool("crm", "list_leads", {"limit": "one"})
    assert refused.value.code == "tool_changed"
    assert "the tree was regenerated since this session began" in refused.value.message
    assert "docs.list_documents" in refused.value.message
    assert "cannot read the definition" not in caplog.text
    assert not kept.get("isError"), kept
    assert checked.value.code == "invalid_arguments"


def test_a_tool_called_before_the_regeneration_changed_or_dropped_it_is_refused_as_one_never_called(
    tmp_path: Path,
) -> None:
    config, version, tree = evolving(tmp_path)
    with Runtime(load_config(config), tree) as runtime:
        before = [
            runtime.call_tool("evo", "update_record", {"record_id": "r1", "note": "n"}),
            runtime.call_tool("evo", "delete_record", {"id": "r1"}),
            runtime.call_tool("evo", "get_record", {"record_id": "r1"}),
        ]
        version.write_text("2", encoding="utf-8")
        generate(config, tree)  # update_record changed, delete_record removed, get_record only described anew
        refused = []
        for tool, arguments in (("update_record", {"record_id": "r1", "note": "n"}), ("delete_record", {"id": "r1"})):
            with pytest.raises(ToolCallRefused) as caught:
                runtime.call_tool("evo", tool, arguments)
            refused.append(caught.value)
    assert all(not result.get("isError") for result in before), before
    for error, held in zip(refused, ("holds another definition of it", "no longer holds it"), strict=True):
        assert error.code == "tool_changed", error.message
        assert f"the regenerated tree {held}" in error.message
        assert "the tree was regenerated since this session began" in error.message


UPDATE_AS_STUBS_SAY = """\
import inspect
from servers.evo import export_records, update_record
print(sorted(inspect.signature(update_record).parameters))
print(update_record(record_id="r1", status="done").text)
print(export_records().text)
"""


@pytest.mark.docker
def test_a_runtime_whose_sandbox_starts_after_a_regeneration_runs_the_regenerated_tree_and_says_so_once(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI
) -> None:
    config, version, tree = evolving(tmp_path)
    with Runtime(load_config(config), tree, sandbox_config=test_config) as runtime:
        runtime.call_tool("evo", "get_record", {"record_id": "r1"})  # its server started, listing release 1
        version.write_text("2", encoding="utf-8")
        generate(config, tree)  # update_record: note removed, status required; export_records added
        result = runtime.sandbox.execute(UPDATE_AS_STUBS_SAY)
        note, again = runtime.take_sandbox_note(), runtime.take_sandbox_note()
        direct = runtime.call_tool("evo", "update_record", {"record_id": "r1", "status": "done"})
        runtime.stop_sandbox()
        later = runtime.sandbox.execute("from servers.evo import export_records\nprint(export_records().text)")
        quiet = runtime.take_sandbox_note()
    assert result.error is None, (result.error, result.tool_calls)
    assert result.stdout.splitlines() == [
        "['limit', 'mode', 'record_id', 'status', 'tags']",
        "update_record ran in release 2 (record_id, status)",
        "export_records ran in release 2 ()",
    ]
    assert "the tree was regenerated" in note and "this sandbox runs the regenerated tree" in note, note
    assert again == "" and quiet == ""
    assert not direct.get("isError"), direct
    assert later.error is None and later.stdout == "export_records ran in release 2 ()\n", later


@pytest.mark.docker
def test_a_call_tool_under_way_when_the_runtime_moves_to_the_regenerated_tree_ends_on_the_servers_it_began_on(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI
) -> None:
    config, version, tree = evolving(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    with config.open("a", encoding="utf-8") as f:
        f.write(f"  slow:\n    command: {json.dumps(sys.executable)}\n")
        f.write(f"    args: [{json.dumps(str(SLOW))}, {json.dumps(str(marks))}]\n    timeout: 60\n")
    generate(config, tree)
    outcome: list[Any] = []
    with Runtime(load_config(config), tree, sandbox_config=test_config) as runtime:

        def slow_call() -> None:
            try:
                outcome.append(runtime.call_tool("slow", "wait", {"seconds": 5, "mark": "running"}))
            except BaseException as e:  # the test says what it was
                outcome.append(e)

        version.write_text("2", encoding="utf-8")
        generate(config, tree)  # the slow server as it was: its calls go on
        caller = threading.Thread(target=slow_call)
        caller.start()
        wait_until(lambda: (marks / "running").exists(), "the slow call to run on its server", 30)
        result = runtime.sandbox.execute("from servers.evo import export_records\nprint(export_records().text)")
        caller.join(30)
        after = runtime.call_tool("slow", "wait", {"seconds": 0})
    assert result.error is None and result.stdout == "export_records ran in release 2 ()\n", result
    assert len(outcome) == 1 and isinstance(outcome[0], dict) and not outcome[0].get("isError"), outcome
    assert "waited 5 s" in str(outcome[0]["content"]), outcome  # not 'the runtime was closed during the call'
    assert not after.get("isError"), after


@pytest.mark.docker
@pytest.mark.parametrize("shared", ["backend", "pool"])
def test_a_runtime_opened_on_a_tree_regenerated_before_its_shared_sandboxes_took_it_runs_the_tree_it_checks_against(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI, shared: str
) -> None:
    # `tooltree serve`: a generate-tree that ends between a call's look at the manifest and its session's opening.
    # Before: the session's bridge read release 2's manifest while its sandbox, of the backend or warm pool every
    # session shares (which serve had not yet told of the regeneration), mounted release 1's copy: its stubs lacked
    # export_records, and update_record called as they read was refused by the check of release 2's parameters.
    config, version, tree = evolving(tmp_path)
    backend = DockerBackend(test_config, tree=tree)
    pool = SandboxPool(size=1, config=test_config, tree=tree) if shared == "pool" else None
    with pool or contextlib.nullcontext():
        if pool is not None:
            pool.wait_ready()  # started on release 1
        else:
            backend.prepare()  # release 1 copied
        version.write_text("2", encoding="utf-8")
        generate(config, tree)
        shared_backend = None if pool is not None else backend
        with Runtime(load_config(config), tree, sandbox_pool=pool, sandbox_backend=shared_backend) as runtime:
            result = runtime.sandbox.execute(UPDATE_AS_STUBS_SAY)
            old = runtime.sandbox.execute(
                "from servers.evo import update_record\nupdate_record(record_id='r', note='n')"
            )
    assert result.error is None, (result.error, result.tool_calls)
    assert result.stdout.splitlines() == [
        "['limit', 'mode', 'record_id', 'status', 'tags']",
        "update_record ran in release 2 (record_id, status)",
        "export_records ran in release 2 ()",
    ]
    assert old.error is not None and "note" in old.error, old  # the stub of release 2 has no note


@pytest.mark.docker
def test_a_runtime_whose_shared_backend_took_a_regenerated_tree_before_its_sandbox_started_moves_to_that_tree(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI
) -> None:
    # `tooltree serve`: the tree refreshed between a session's opening and the start of its sandbox. Before: the
    # sandbox mounted release 2's copy while the bridge checked its calls against release 1's manifest: update_record
    # as its stub read was refused, 'the regenerated tree holds another definition of it'.
    config, version, tree = evolving(tmp_path)
    backend = DockerBackend(test_config, tree=tree)
    backend.prepare()
    with Runtime(load_config(config), tree, sandbox_backend=backend) as runtime:
        runtime.call_tool("evo", "get_record", {"record_id": "r1"})  # opened, its server listing release 1
        version.write_text("2", encoding="utf-8")
        generate(config, tree)
        assert backend.refresh_tree()  # as serve does when it sees the regeneration
        result = runtime.sandbox.execute(UPDATE_AS_STUBS_SAY)
        note = runtime.take_sandbox_note()
        direct = runtime.call_tool("evo", "update_record", {"record_id": "r1", "status": "done"})
    assert result.error is None, (result.error, result.tool_calls)
    assert result.stdout.splitlines()[1:] == [
        "update_record ran in release 2 (record_id, status)",
        "export_records ran in release 2 ()",
    ]
    assert "this sandbox runs the regenerated tree" in note, note
    assert not direct.get("isError"), direct


def rewritten_for_another_config(config: Path, tree: Path) -> None:
    """``generate-tree`` from a copy of ``config`` once ``config`` is gone: the manifest names the copy and records the
    same tree."""
    serve = config.with_name("serve.yaml")
    serve.write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    config.unlink()
    generate(serve, tree)
    assert json.loads(Path(tree, "manifest.json").read_text(encoding="utf-8"))["config"] == "../serve.yaml"


def test_a_manifest_rewritten_for_its_config_alone_is_not_a_regeneration_to_the_session(tmp_path: Path) -> None:
    # Before: the session took it for a regeneration, and a tool its server changed since was refused as one the
    # session's stale tree had, 'start a new run (in tooltree serve, reconnect the client)', though no new run helps.
    config, version, tree = evolving(tmp_path)
    with Runtime(load_config(config), tree) as runtime:
        rewritten_for_another_config(config, tree)
        on_tree = runtime.on_tree_now
        version.write_text("2", encoding="utf-8")  # the server changed; the tree is as it was
        said = text(DirectToolset(tree).call("evo__delete_record", {"id": "r1"}, runtime))
    assert on_tree
    assert "no longer offered by the server; regenerate the tree (tooltree generate-tree --config" in said, said
    assert "regenerated since" not in said


@pytest.mark.docker
def test_a_sandbox_mounting_a_copy_rewritten_for_its_config_alone_runs_and_says_nothing(
    tmp_path: Path, test_config: SandboxConfig, docker_engine: EngineWithCLI
) -> None:
    # `tooltree serve` copies the tree again once its manifest names another configuration file. Before: a session
    # opened on the manifest before took that copy for a regenerated tree, moved to it and said so.
    config, _, tree = evolving(tmp_path)
    backend = DockerBackend(test_config, tree=tree)
    backend.prepare()
    with Runtime(load_config(config), tree, sandbox_backend=backend) as runtime:
        runtime.call_tool("evo", "get_record", {"record_id": "r1"})
        rewritten_for_another_config(config, tree)
        assert backend.refresh_tree()  # the copy holds the rewritten manifest
        result = runtime.sandbox.execute(
            "from servers.evo import update_record\nprint(update_record(record_id='r1').text)"
        )
        note = runtime.take_sandbox_note()
    assert result.error is None and result.stdout == "update_record ran in release 1 (record_id)\n", result
    assert note == "", note


def test_a_tool_the_server_changed_while_serve_regenerates_its_part_says_so_not_to_regenerate(tmp_path: Path) -> None:
    # `tooltree serve` between a server's notice that its tools changed and its regeneration (`Runtime.following`).
    # Before: "regenerate the tree" with the command, which serve was about to do by itself.
    config, version, tree = evolving(tmp_path)
    runtime = Runtime(load_config(config), tree)
    runtime.following = {"evo": 12.4}.get
    with runtime:
        version.write_text("2", encoding="utf-8")
        refused = []
        for tool, arguments in (("delete_record", {"id": "r1"}), ("update_record", {"record_id": "r1", "note": "n"})):
            with pytest.raises(ToolCallRefused) as caught:
                runtime.call_tool("evo", tool, arguments)
            refused.append(caught.value)
    removed, changed = refused
    assert removed.code == changed.code == "tool_changed"
    assert removed.message.startswith("evo.delete_record is no longer offered by the server; ")
    assert changed.message.startswith("evo.update_record changed since the tree was generated: its parameters; ")
    for error in refused:
        assert error.message.endswith(
            "; tooltree serve is regenerating evo's part of the tree, as the server said its tools changed (due in "
            "about 13 s): call the tool again once that is done, after reading its stub again (its parameters may "
            "have changed)"
        ), error.message
        assert "generate-tree" not in error.message
