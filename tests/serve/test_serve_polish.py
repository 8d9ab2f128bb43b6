"""Two things `tooltree serve` does once: say a failed upstream server's last stderr lines in what `execute_python`
returns (and `tooltree exec` prints), and read the passthrough tools' snapshots at its start.

A script that lets the ``ToolCallError`` of a server that cannot start go shows the server's stderr in its traceback;
the call ledger under it gives the call's first line and ``[as above]`` (before: the same lines again, and again for
each other call of it listed). A script that catches the error and prints nothing still gets them, in the ledger,
once. The passthrough tools' definitions (direct mode's, with the servers' titles and annotations) come from one read
of each chosen server's snapshot; the other servers' are not read (before: every server's, then the chosen ones' again).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.content import execution_blocks
from agent.serve.passthrough import Passthrough
from agent.toolsets.direct import DirectToolset
from sandbox.results import ExecutionResult, ToolCallRecord
from tests.serve.conftest import Serve, result_text
from tests.support import REPO, SAMPLE_SERVERS
from tooltree_cli.main import main

WAIT = 120.0
FAILING = "import sys\nsys.stderr.write('starting docs\\nError: the index at /srv/docs is locked\\n')\nsys.exit(1)\n"
TAIL = "    starting docs\n    Error: the index at /srv/docs is locked"
UNAVAILABLE = (
    "server 'docs' is unavailable: the server exited during start-up, with exit status 1; the last lines of its stderr:"
)
RAISES = "from servers.docs import list_documents\nlist_documents()\n"
CATCHES = "from servers.docs import list_documents\ntry:\n    list_documents()\nexcept Exception:\n    pass\n"


def record(error: str, tool: str = "list_documents") -> ToolCallRecord:
    return ToolCallRecord("docs", tool, False, 20, 0, 5.0, error)


def test_the_ledger_under_a_traceback_that_holds_the_stderr_does_not_say_it_again() -> None:
    error = f"{UNAVAILABLE}\n{TAIL}"
    traceback = (
        'Traceback (most recent call last):\n  File "<cell-1>", line 2, in <module>\n    list_documents()\n'
        f"tool_tree.runtime.ToolCallError: docs.list_documents: {error}\n"
    )
    other = f"server 'crm' is unavailable: the server exited during start-up; the last lines of its stderr:\n{TAIL}!"
    calls = [record(error), record(error), ToolCallRecord("crm", "get", False, 20, 0, 5.0, other)]
    result = ExecutionResult("", "", 1, 0.1, error="ToolCallError", traceback=traceback, tool_calls=calls)
    text = execution_blocks(result)[0]["text"]
    assert text.count("Error: the index at /srv/docs is locked\n") == 1, text  # the traceback's; crm's ends in "!"
    assert text.count(f"  docs.list_documents error: {UNAVAILABLE} [as above] (0 B, 5 ms)\n") == 2, text
    assert f"crm.get error: {other} (0 B, 5 ms)" in text  # other lines: said


def test_a_script_that_caught_the_error_gets_the_stderr_in_the_ledger_once() -> None:
    error = f"{UNAVAILABLE}\n{TAIL}"
    result = ExecutionResult("", "", 0, 0.1, tool_calls=[record(error)] * 3)
    text = execution_blocks(result)[0]["text"]
    assert text.count(TAIL) == 1 and text.count("[as above]") == 2, text
    assert f"  docs.list_documents error: {error} (0 B, 5 ms)\n" in text
    # Many calls: one line a tool, its first failure's error whole.
    many = execution_blocks(ExecutionResult("", "", 0, 0.1, tool_calls=[record(error)] * 9))[0]["text"]
    assert many.count(TAIL) == 1, many
    # A timed-out run shows no traceback: the ledger says the lines.
    timed = ExecutionResult("", "", -9, 30.0, error="timed out", traceback=f"ToolCallError: {error}", timed_out=True,
                            tool_calls=[record(error)])  # fmt: skip
    assert execution_blocks(timed)[0]["text"].count(TAIL) == 1


def broken_docs(config: Path, folder: Path) -> None:
    """``docs`` in ``config`` made a server that writes two lines of stderr and exits 1 at start."""
    script = folder / "failing_docs.py"
    script.write_text(FAILING, encoding="utf-8")
    text = config.read_text(encoding="utf-8")
    docs = str(SAMPLE_SERVERS / "docs.py")
    assert docs in text
    config.write_text(text.replace(docs, str(script)), encoding="utf-8")


@pytest.mark.docker
@pytest.mark.anyio
async def test_execute_python_says_a_failed_servers_stderr_once(
    make_serve: Callable[..., Serve], tmp_path: Path
) -> None:
    import mcp

    serve = make_serve()
    broken_docs(serve.config, tmp_path)
    async with mcp.Client(serve.stdio_params(), read_timeout_seconds=WAIT) as client:
        raised = result_text(await client.call_tool("execute_python", {"code": RAISES}))
        caught = result_text(await client.call_tool("execute_python", {"code": CATCHES}))
    assert f"tool_tree.runtime.ToolCallError: docs.list_documents: {UNAVAILABLE}\n{TAIL}" in raised
    assert raised.count(TAIL) == 1, raised
    assert f"  docs.list_documents error: {UNAVAILABLE} [as above] (" in raised
    assert f"  docs.list_documents error: {UNAVAILABLE}\n{TAIL} (" in caught  # the ledger alone says it
    assert caught.count(TAIL) == 1, caught


@pytest.mark.docker
def test_exec_says_a_failed_servers_stderr_once(make_serve: Callable[..., Serve], tmp_path: Path, owner: str) -> None:
    serve = make_serve()  # its config and the tree of the sample servers; exec runs its own sandbox
    broken_docs(serve.config, tmp_path)
    argv = [sys.executable, "-m", "tooltree_cli.main", "exec", "--config", str(serve.config), "--tree",
            str(serve.tree), "-c", RAISES]  # fmt: skip
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": owner}
    proc = subprocess.run(argv, capture_output=True, text=True, encoding="utf-8", timeout=WAIT, env=env, cwd=REPO)
    assert proc.returncode == 1, proc.stderr
    assert f"tool_tree.runtime.ToolCallError: docs.list_documents: {UNAVAILABLE}\n{TAIL}\n" in proc.stderr
    assert proc.stderr.count(TAIL) == 1, proc.stderr
    assert f"  call docs.list_documents  error: {UNAVAILABLE} [as above]  0 B  " in proc.stderr


def snapshot_tree(folder: Path) -> Path:
    """The tree ``generate-tree --from-snapshot`` makes of four servers of three tools each, with titles and hints."""
    snapshots = folder / "snapshots"
    snapshots.mkdir()
    for s in range(4):
        tools = [
            {
                "name": f"tool_{t}",
                "title": f"Tool {t} of srv{s}",
                "description": f"Does thing {t}.",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "description": "A count."}}},
                "annotations": {"readOnlyHint": t == 0, "destructiveHint": t == 2},
            }
            for t in range(3)
        ]
        snapshot = {"server": f"srv{s}", "info": {"name": f"srv{s}", "version": "1"}, "tools": tools}
        (snapshots / f"srv{s}.json").write_text(json.dumps(snapshot), encoding="utf-8")
    out = folder / "tree"
    assert main(["generate-tree", "--from-snapshot", str(snapshots), "--out", str(out), "--embeddings", "off"]) == 0
    return out


def test_passthrough_reads_each_chosen_servers_snapshot_once_and_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tool_tree.tree

    tree = snapshot_tree(tmp_path)
    reads: list[str] = []
    read_in_tree = tool_tree.tree.read_in_tree

    def counted(root: Path, rel: str, *args: int) -> bytes:
        if rel.startswith("snapshots/"):
            reads.append(rel)
        return read_in_tree(root, rel, *args)

    monkeypatch.setattr(tool_tree.tree, "read_in_tree", counted)
    passthrough = Passthrough(tree, ["srv1.tool_0", "srv1.tool_2", "srv3.tool_1"])
    assert sorted(reads) == ["snapshots/srv1.json", "snapshots/srv3.json"]  # before: all four, then srv1 and srv3

    monkeypatch.undo()
    direct = {d["name"]: d for d in DirectToolset(tree).tools()}
    offered = {d.name: d for d in passthrough.definitions}
    assert list(offered) == ["srv1__tool_0", "srv1__tool_2", "srv3__tool_1"]
    for name, tool in offered.items():
        assert tool.description == direct[name]["description"]
        assert tool.input_schema == direct[name]["input_schema"]
    assert offered["srv1__tool_0"].title == "Tool 0 of srv1"
    hints = offered["srv1__tool_2"].annotations
    assert hints is not None and hints.read_only_hint is False and hints.destructive_hint is True
