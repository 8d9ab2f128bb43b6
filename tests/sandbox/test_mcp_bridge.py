"""`McpBridge`: allowlist, host-side validation, budgets, rug-pull detection and audit, against real
sample servers; then whole scripts in a real container calling them."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox, SandboxConfig
from sandbox.bridge import ToolCallRefused
from sandbox.mcp_bridge import MAX_REFUSED_LINES, AuditLog, Budgets, McpBridge
from tests.support import raw_server_tree, sample_project, sample_server_configs
from tool_tree.config import ServerConfig, load_config
from tool_tree.pool import BackgroundPool


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_project(tmp_path_factory.mktemp("bridge"), "crm", "media")[1]


@pytest.fixture(scope="module")
def pool() -> Iterator[BackgroundPool]:
    with BackgroundPool(sample_server_configs("crm", "media")) as bg:
        yield bg


def audited(tree: Path, pool: BackgroundPool, **options: Any) -> tuple[McpBridge, io.StringIO]:
    """A bridge to ``pool``'s servers (``options``: more of `McpBridge`'s) and the stream its audit log writes."""
    stream = io.StringIO()
    return McpBridge(tree, pool.pool, audit=AuditLog(stream), **options), stream


def call(bridge: McpBridge, pool: BackgroundPool, server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    return asyncio.run_coroutine_threadsafe(bridge.call_tool(server, tool, args), pool.loop).result()


def audit_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_manifest_tool_is_called_and_audited(tree: Path, pool: BackgroundPool) -> None:
    bridge, stream = audited(tree, pool, session="s1")
    result = call(bridge, pool, "media", "render_chart", {"title": "Q3", "values": [3, 1, 2]})
    assert any(b["type"] == "image" and b["mimeType"] == "image/png" for b in result["content"])
    (line,) = audit_lines(stream)
    assert line["session"] == "s1" and line["server"] == "media" and line["tool"] == "render_chart"
    assert line["outcome"] == "ok" and line["bytes"] > 100 and len(line["args_sha256"]) == 16 and line["ms"] >= 0


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("crm", "delete_everything"),
        ("crm", "../crm/list_leads"),
        ("crm", "List_Leads"),
        ("crm", "list_leads\x00"),
        ("crm", "list_leaｄs"),
        ("CRM", "list_leads"),
        ("other", "list_leads"),
        ("crm", "list-leads"),
    ],
)
def test_calls_outside_the_manifest_are_refused_and_audited(
    tree: Path, pool: BackgroundPool, server: str, tool: str
) -> None:
    bridge, stream = audited(tree, pool)
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, server, tool, {})
    assert info.value.code == "not_allowed"
    assert audit_lines(stream)[0]["outcome"] == "refused"


def test_schema_invalid_arguments_are_refused_on_the_host_with_the_path(tree: Path, pool: BackgroundPool) -> None:
    bridge = McpBridge(tree, pool.pool)
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, "crm", "list_leads", {"limit": "ten"})
    assert info.value.code == "invalid_arguments"
    assert "limit: 'ten' is not of type 'integer'" in info.value.message
    with pytest.raises(ToolCallRefused, match=r"status: 'maybe' is not one of"):
        call(bridge, pool, "crm", "list_leads", {"status": "maybe"})
    with pytest.raises(ToolCallRefused, match="'title' is a required property"):
        call(bridge, pool, "media", "render_chart", {"values": [1]})


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (float("nan"), "holds nan, which JSON cannot carry (it would reach the server as null)"),
        (10**5000, "holds a whole number of more than 4,300 digits, more than a server's JSON parser reads"),
    ],
    ids=["nan", "5000_digits"],
)
def test_arguments_a_server_cannot_read_are_refused_on_the_host_naming_the_argument(
    tree: Path, pool: BackgroundPool, value: float, said: str
) -> None:
    # Before: NaN passed the schema (a number) and reached the server as null, which it refused as not a number; a
    # whole number of 5,000 digits was said to be "cannot be encoded as UTF-8 JSON (a lone surrogate?)".
    bridge, stream = audited(tree, pool)
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, "media", "render_chart", {"title": "Q3", "values": [1, value]})
    assert info.value.code == "invalid_arguments"
    assert f"argument 'values' {said}" in info.value.message and info.value.message.endswith("; nothing was sent")
    assert audit_lines(stream)[0]["outcome"] == "refused"


def test_arguments_the_bridge_measured_as_sendable_are_not_walked_again_by_the_pool(
    tree: Path, pool: BackgroundPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the bridge's measure encoded a call's arguments, then the pool encoded and walked them again for what a
    # server cannot read (a 20,000-row argument: two passes). Arguments holding NaN are still checked there, and
    # refused naming the argument (above).
    import tool_tree.pool

    checked: list[dict[str, Any]] = []
    check = tool_tree.pool.checked

    async def spy(arguments: dict[str, Any]) -> None:
        checked.append(arguments)
        await check(arguments)

    monkeypatch.setattr(tool_tree.pool, "checked", spy)
    bridge, _ = audited(tree, pool)
    result = call(bridge, pool, "media", "render_chart", {"title": "Q3", "values": [3, 1, 2]})
    assert not result.get("isError") and checked == []
    with pytest.raises(ToolCallRefused, match="holds nan, which JSON cannot carry"):
        call(bridge, pool, "media", "render_chart", {"title": "Q3", "values": [1, float("nan")]})
    assert len(checked) == 1 and checked[0]["title"] == "Q3"  # the pool checked it: not measured sendable


def test_budgets_stop_a_runaway_script_and_reset_per_execution(tree: Path, pool: BackgroundPool) -> None:
    bridge = McpBridge(tree, pool.pool, budgets=Budgets(calls=2))
    for _ in range(2):
        call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    assert info.value.code == "budget_exhausted"
    bridge.begin_execution()
    call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    small = McpBridge(tree, pool.pool, budgets=Budgets(result_bytes=1000))
    call(small, pool, "crm", "list_leads", {"limit": 50})
    with pytest.raises(ToolCallRefused) as spent:  # refused as it is admitted: it never runs on the server
        call(small, pool, "crm", "list_leads", {"limit": 1})
    assert (spent.value.code, spent.value.message) == (
        "budget_exhausted",
        "budget exhausted: at most 1000 bytes of tool results per execution",
    )


def test_results_that_come_after_the_result_budget_is_spent_are_not_handed_on(tree: Path, pool: BackgroundPool) -> None:
    """Before, the budget of result bytes was checked only as a call was admitted: every call in flight when it ran
    out was relayed (60 threads' calls pulled 468 MB for 256 MiB). Now the first result to reach it is the last."""
    import asyncio

    bridge, stream = audited(tree, pool, budgets=Budgets(result_bytes=1000), session="s1")

    async def together() -> list[dict[str, Any] | BaseException]:
        calls = [bridge.call_tool("crm", "list_leads", {"limit": 20}) for _ in range(8)]  # all admitted at once
        return await asyncio.gather(*calls, return_exceptions=True)

    outcomes = asyncio.run_coroutine_threadsafe(together(), pool.loop).result()
    served = [o for o in outcomes if isinstance(o, dict)]
    late = [o for o in outcomes if isinstance(o, ToolCallRefused)]
    assert len(served) == 1 and len(late) == 7  # under the budget plus the one result that crossed it
    lines = audit_lines(stream)
    size = next(line["bytes"] for line in lines if line["outcome"] == "ok")
    assert size > 1000
    for refusal in late:
        assert refusal.code == "budget_exhausted"
        assert refusal.message == (
            f"budget exhausted: the result ({size:,} bytes) came after this execution's 1,000 bytes of tool results "
            "were spent by calls that ran beside it, so it is not returned; the call did run on the server (what the "
            "tool does, it has done)"
        )
    refused = [line for line in lines if line["outcome"] == "refused"]
    assert len(refused) == 7 and all(line["code"] == "budget_exhausted" and line["bytes"] == size for line in refused)


def test_a_companion_bridge_counts_its_own_budget_and_reuses_the_checked_schemas(
    tree: Path, pool: BackgroundPool
) -> None:
    bridge, stream = audited(tree, pool, budgets=Budgets(calls=2), session="s1")
    call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    validator = bridge._checks.validators[("media", "slow_echo")]
    assert validator is not None
    companion = bridge.companion()
    for _ in range(2):  # its own two calls, whatever the first bridge spent
        call(companion, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    with pytest.raises(ToolCallRefused) as info:
        call(companion, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    assert info.value.code == "budget_exhausted"
    call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})  # the first still has one call
    assert companion._checks.validators[("media", "slow_echo")] is validator  # built once
    with pytest.raises(ToolCallRefused, match="seconds"):  # and still applied
        call(companion.companion(), pool, "media", "slow_echo", {"text": "x", "seconds": "soon"})
    assert [line["session"] for line in audit_lines(stream)] == ["s1"] * 6


def test_a_companion_bridge_never_takes_the_running_scripts_askers(tree: Path, pool: BackgroundPool) -> None:
    # A host caller's calls (a passthrough tool's, made beside a script with `asks_from_scripts`) must not put their
    # servers' questions to the script's asker: the companion is a copy of the sandbox's bridge, made at any time.
    bridge = McpBridge(tree, pool.pool)

    def script_asks(server: str) -> None:
        return None

    bridge.script_asks = script_asks
    assert bridge.companion().script_asks is None
    assert bridge.script_asks is script_asks


def test_a_tool_its_snapshot_says_runs_only_as_a_task_is_refused_as_unsupported(
    tree: Path, pool: BackgroundPool, tmp_path: Path
) -> None:
    # generate-tree leaves such a tool out; a tree made before it did still lists it.
    import shutil

    old = tmp_path / "tree"
    shutil.copytree(tree, old)
    snapshot = old / "snapshots" / "media.json"
    data = json.loads(snapshot.read_text(encoding="utf-8"))
    for tool in data["tools"]:
        if tool["name"] == "slow_echo":
            tool["execution"] = {"taskSupport": "required"}
    snapshot.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ToolCallRefused) as info:
        call(McpBridge(old, pool.pool), pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    assert info.value.code == "unsupported" and "runs only as an MCP task" in info.value.message


def tampered_copy(tree: Path, folder: Path, *, gone: str | None = None) -> Path:
    """A copy of ``tree`` in ``folder`` whose manifest has another hash for ``slow_echo`` (changed since generation)
    and names ``gone`` ``render_map``, a tool the server does not offer."""
    import shutil

    tampered = folder / "tree"
    shutil.copytree(tree, tampered)
    manifest = json.loads((tampered / "manifest.json").read_text(encoding="utf-8"))
    for t in manifest["tools"]:
        if t["tool"] == "slow_echo":
            t["schema_hash"] = "sha256:" + "0" * 64
        if t["tool"] == gone:
            t["tool"] = "render_map"
    (tampered / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return tampered


def test_a_tool_that_changed_since_generation_is_refused(tree: Path, pool: BackgroundPool, tmp_path: Path) -> None:
    tampered = tampered_copy(tree, tmp_path)
    bridge = McpBridge(tampered, pool.pool)
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    assert info.value.code == "tool_changed" and "regenerate" in info.value.message
    # The manifest's hash is another, the snapshot holds what the server lists: nothing of its definition differs.
    assert "changed since the tree was generated: its definition; review the change (`tooltree generate-tree " in (
        info.value.message
    )


def test_a_tool_changed_or_gone_since_generation_is_refused_with_the_commands_for_its_tree_and_config(
    tree: Path, pool: BackgroundPool, tmp_path: Path
) -> None:
    # Before: `tooltree generate-tree` alone (or no command), which reads ./tooltree.yaml and writes ./tree.
    tampered = tampered_copy(tree, tmp_path, gone="render_chart")
    config = load_config(tree.parent / "tooltree.yaml")
    again = f"tooltree generate-tree --config {tree.parent / 'tooltree.yaml'} --out {tampered}"
    with pytest.raises(ToolCallRefused) as changed:
        call(McpBridge(tampered, pool.pool, config=config), pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    assert changed.value.code == "tool_changed" and changed.value.message.endswith(
        f"; review the change (`{again} --check --server media`) and regenerate the tree with `{again}`"
    )
    with pytest.raises(ToolCallRefused) as gone:
        call(McpBridge(tampered, pool.pool, config=config), pool, "media", "render_map", {})
    assert gone.value.code == "tool_changed"
    assert gone.value.message == f"media.render_map is no longer offered by the server; regenerate the tree ({again})"
    # A bridge given no config names the tree alone.
    with pytest.raises(ToolCallRefused) as unnamed:
        call(McpBridge(tampered, pool.pool), pool, "media", "render_map", {})
    assert unnamed.value.message.endswith(f"; regenerate the tree (tooltree generate-tree --out {tampered})")


def test_a_tool_changed_since_generation_is_refused_saying_what_changed() -> None:
    # Before: "(schema hash mismatch)" alone: a server writing the machine's time zone into a parameter's description
    # had every call refused on another machine, saying neither that nor that the types were as they were.
    from sandbox.tool_changes import changed_parts

    def tool(zone: str = "UTC", kind: str = "string", about: str = "Get the time.") -> dict[str, Any]:
        properties = {
            "timezone": {"type": kind, "description": f"Use '{zone}' as local timezone if none given."},
            "description": {"type": "string"},  # a parameter named so is a name, not a description
        }
        return {"name": "get_current_time", "description": about, "inputSchema": {"type": "object",
                "properties": properties}}  # fmt: skip

    assert changed_parts(tool(), tool("Europe/Paris")) == (
        "the descriptions in its parameters (their names and types are as they were)"
    )
    assert changed_parts(tool(), tool(kind="integer")) == "its parameters"
    assert changed_parts(tool(), tool(about="Get the time now.")) == "its description"
    renamed = tool()
    renamed["inputSchema"]["properties"]["summary"] = renamed["inputSchema"]["properties"].pop("description")
    assert changed_parts(tool(), renamed) == "its parameters"
    extra = {**tool("Europe/Paris", about="x"), "annotations": {"readOnlyHint": True}, "_meta": {"a": 1}, "icons": []}
    assert changed_parts(tool(), extra) == (
        "its annotations, its description, the descriptions in its parameters (their names and types are as they "
        "were), 2 other fields of its definition"
    )


def test_search_from_a_script_is_answered_from_the_tree_index(tree: Path, pool: BackgroundPool) -> None:
    bridge = McpBridge(tree, pool.pool)
    text = bridge.search_tools("export leads", limit=3)
    assert text.startswith("crm.list_leads — ")
    names = bridge.search_tools("chart", detail="name")
    assert "media.render_chart" in names.splitlines()
    with pytest.raises(ToolCallRefused, match="limit"):
        bridge.search_tools("x", limit=500)


def test_a_search_runs_on_the_sessions_thread_and_does_not_hold_up_tool_calls_on_the_pool_loop(
    tree: Path, pool: BackgroundPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import tool_tree.search
    from sandbox.calls import CallServer

    released = threading.Event()
    threads: list[str] = []

    def slow_search(*args: Any, **kwargs: Any) -> str:  # e.g. the first hybrid query loading the model
        threads.append(threading.current_thread().name)
        assert released.wait(10), "a tool call could not run while the search was busy"
        return "found"

    monkeypatch.setattr(tool_tree.search, "search_tools", slow_search)
    bridge = McpBridge(tree, pool.pool)
    calls, answered = CallServer(bridge, pool.loop), threading.Event()
    answers: dict[str, Any] = {}

    class Channel:
        def respond(self, call_id: str, *, result: Any = None, error: Any = None) -> None:
            answers[call_id] = result, error
            answered.set()

    calls.begin()
    calls.on_request(Channel(), "s1", "search_tools", {"query": "anything"})
    result = call(bridge, pool, "crm", "get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})
    assert result.get("isError") is not True
    released.set()
    assert answered.wait(10) and answers["s1"] == ({"text": "found"}, None)
    assert threads[0].startswith("sandbox-tool")  # the session's pool, where its CPU time is charged
    calls.close()


def exits_at_start(name: str, stderr: str) -> ServerConfig:
    """A server ``name`` that writes ``stderr`` and exits before the MCP handshake (a missing token, say)."""
    code = f"import sys\nsys.stderr.write({stderr!r})\nsys.exit(1)"
    return ServerConfig(name=name, command=sys.executable, args=("-c", code))


def refused_by_broken(tree: Path, server: ServerConfig) -> ToolCallRefused:
    """The refusal of a call to ``server`` (one that fails to start) through the bridge."""
    with BackgroundPool([server]) as broken:
        bridge = McpBridge(tree, broken.pool)
        with pytest.raises(ToolCallRefused) as info:
            call(bridge, broken, "crm", "list_leads", {"limit": 1})
    return info.value


def test_a_server_that_fails_to_start_is_refused_with_the_last_lines_of_its_stderr(tree: Path) -> None:
    refusal = refused_by_broken(tree, exits_at_start("crm", "loading settings\ncrm: CRM_TOKEN is not set\n"))
    assert refusal.code == "server_unavailable"
    assert refusal.message == (
        "server 'crm' is unavailable: the server exited during start-up, with exit status 1; "
        "the last lines of its stderr:\n"
        "    loading settings\n"
        "    crm: CRM_TOKEN is not set"
    )


@pytest.mark.parametrize(
    ("ending", "said"),
    [("sys.exit(127)", ", with exit status 127"), ("os.kill(os.getpid(), signal.SIGKILL)", ", killed by SIGKILL")],
)
def test_a_server_that_ends_at_start_is_refused_saying_how_it_ended(tree: Path, ending: str, said: str) -> None:
    # Before: "the server exited during start-up" whatever its status (a wrapper's 127, the kernel's OOM kill).
    code = f"import os, signal, sys\nsys.stderr.write('starting\\n')\nsys.stderr.flush()\n{ending}"
    server = ServerConfig(name="crm", command=sys.executable, args=("-c", code))
    refusal = refused_by_broken(tree, server)
    assert refusal.message == (
        f"server 'crm' is unavailable: the server exited during start-up{said}; the last lines of its stderr:\n"
        "    starting"
    )


def test_a_hostile_servers_stderr_reaches_the_script_as_short_plain_text(tree: Path) -> None:
    noise = "".join(f"noise {i}\n" for i in range(40))
    stderr = noise + "x" * 50_000 + "\n\x1b[2J\x1b]0;owned\x07\u202eesrever\nlast words\n"
    refusal = refused_by_broken(tree, exits_at_start("crm", stderr))
    message = refusal.message
    assert message.endswith("\n    last words")
    assert "noise 0" not in message  # only the last lines
    assert all(c.isprintable() for c in message.replace("\n", ""))  # no escape sequence, no bidi override
    assert "\n    [2J]0;ownedesrever\n" in message  # what remains of them is shown as text
    assert "…xxx" in message  # a long line is cut
    assert len(message) < 2_000


SECRET = "sk-live-bridge-9d2c7b1e55"


def names_its_key_at_start(name: str) -> ServerConfig:
    """A server ``name`` with `SECRET` in its ``env:`` that fails at start-up naming it on stderr, as real ones do."""
    code = "import os, sys\nsys.stderr.write('authentication failed (401) for API key ' + os.environ['CRM_API_KEY'])"
    return ServerConfig(
        name=name, command=sys.executable, args=("-c", code + "\nsys.exit(1)"), env={"CRM_API_KEY": SECRET}
    )


def test_a_refusal_shows_a_failed_servers_stderr_without_the_secret_from_its_env(tree: Path) -> None:
    refusal = refused_by_broken(tree, names_its_key_at_start("crm"))
    assert refusal.code == "server_unavailable"
    assert refusal.message == (
        "server 'crm' is unavailable: the server exited during start-up, with exit status 1; "
        "the last lines of its stderr:\n"
        "    authentication failed (401) for API key [redacted CRM_API_KEY]"
    )


def test_a_passthrough_call_to_a_failed_server_shows_its_stderr_without_the_secret(tree: Path) -> None:
    from agent.serve.passthrough import Passthrough
    from sandbox.host import Runtime
    from tool_tree.config import Config

    passthrough = Passthrough(tree, ["crm.list_leads"])
    (name,) = passthrough.entries
    with Runtime(Config(servers=(names_its_key_at_start("crm"),)), tree) as runtime:
        result = passthrough.call(name, {"limit": 1}, runtime)
    assert result.is_error
    shown = result.model_dump_json()
    assert SECRET not in shown
    assert "for API key [redacted CRM_API_KEY]" in shown


def test_with_stderr_leaves_a_message_alone_when_the_server_wrote_nothing() -> None:
    from sandbox.mcp_bridge import with_stderr

    assert with_stderr("server 'x' is unavailable: timed out", "") == "server 'x' is unavailable: timed out"
    assert with_stderr("m", "\n  \n\x1b\n") == "m"


# ---- whole scripts in a real container -------------------------------------------------------------------


@pytest.fixture
def session(docker_engine: object, test_config: SandboxConfig, tree: Path, pool: BackgroundPool) -> Iterator[Sandbox]:
    bridge = McpBridge(tree, pool.pool)
    with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=pool.loop) as sandbox:
        yield sandbox


@pytest.mark.docker
def test_a_script_filters_ten_thousand_leads_and_only_its_printout_returns(session: Sandbox) -> None:
    # 120 s, not the config's 20, which this is not about: the crm server's start and its answer of over 1 MB took 4 s
    # of them on a loaded machine.
    result = session.execute(
        "from servers.crm import list_leads\n"
        "rows = list_leads().json()['leads']\n"
        "top = sorted(rows, key=lambda r: r['estimated_value'], reverse=True)[:3]\n"
        "print(len(rows), [r['company'] for r in top])\n",
        timeout=120,
    )
    assert result.error is None, result.traceback
    assert result.stdout.startswith("10000 [")
    (ledger,) = result.tool_calls
    assert ledger.tool == "list_leads" and ledger.ok and ledger.response_bytes > 1_000_000
    assert len(result.stdout) < 300


@pytest.mark.docker
def test_parallel_calls_from_a_script_are_in_flight_together(session: Sandbox) -> None:
    # 120 s, not the config's 20, which this is not about: the media server's start and the meeting took 3.2 s of
    # them on a loaded machine. The six meet only when all are in flight together.
    result = session.execute(
        "from tool_tree.runtime import call_tool, parallel\n"
        "args = {'group': 'sandbox', 'parties': 6, 'timeout': 20}\n"
        "out = parallel(*[lambda: call_tool('media', 'rendezvous', args) for _ in range(6)])\n"
        "print(sorted({r.text for r in out}))\n",
        timeout=120,
    )
    assert result.error is None, result.traceback
    assert "6 parties met" in result.stdout and len(result.tool_calls) == 6


@pytest.mark.docker
def test_an_image_from_a_tool_reaches_the_result_as_an_image(session: Sandbox) -> None:
    result = session.execute(
        "from servers.media import render_chart\n"
        "chart = render_chart(title='Pipeline', values=[5, 3, 8])\n"
        "show_image(chart.images[0])\n"
    )
    assert result.error is None, result.traceback
    (image,) = result.images
    assert image.mime_type == "image/png" and image.data.startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.docker
def test_tool_errors_refusals_and_invalid_arguments_reach_the_script(session: Sandbox) -> None:
    result = session.execute(
        "from servers.media import fail\n"
        "from servers.crm import list_leads\n"
        "from tool_tree.runtime import ToolCallError, ToolError, call_tool\n"
        "try:\n    fail(message='quota exceeded')\nexcept ToolError as e:\n    print('tool error:', e.message)\n"
        "try:\n    call_tool('crm', 'drop_database', {})\nexcept ToolCallError as e:\n    print('refused:', e.code)\n"
        "try:\n    list_leads(limit='many')\nexcept ToolCallError as e:\n    print('invalid:', e.code, e.message)\n"
    )
    assert result.error is None, result.traceback
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tool error: ") and lines[0].endswith("quota exceeded")
    assert lines[1] == "refused: not_allowed"
    assert lines[2].startswith("invalid: invalid_arguments invalid arguments: limit:")


@pytest.mark.docker
def test_an_uncaught_refusal_shows_the_users_frames_not_the_plumbing(session: Sandbox) -> None:
    result = session.execute("from servers.crm import list_leads\n\nlist_leads(limit=0)\n")
    assert result.error is not None and result.error.startswith(
        "tool_tree.runtime.ToolCallError: crm.list_leads: invalid arguments: limit: 0 is less than the minimum of 1"
    )
    assert result.traceback is not None
    assert "line 3, in <module>" in result.traceback
    assert "servers/crm/list_leads.py" in result.traceback
    assert "tooltree_supervisor" not in result.traceback and "tool_tree/runtime" not in result.traceback


@pytest.mark.docker
def test_a_script_sees_a_failed_servers_stderr_without_the_secret_from_its_env(
    docker_engine: object, test_config: SandboxConfig, tree: Path
) -> None:
    with BackgroundPool([names_its_key_at_start("crm")]) as broken:
        bridge = McpBridge(tree, broken.pool)
        with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=broken.loop) as sandbox:
            result = sandbox.execute(
                "from servers.crm import list_leads\n"
                "from tool_tree.runtime import ToolCallError\n"
                "try:\n    list_leads(limit=1)\nexcept ToolCallError as e:\n    print(e.code, '|', e)\n"
            )
    assert result.error is None, result.traceback
    assert result.stdout.startswith("server_unavailable | ")
    assert "for API key [redacted CRM_API_KEY]" in result.stdout
    assert SECRET not in repr(result)


@pytest.mark.docker
def test_a_scripts_call_with_a_whole_number_too_long_for_json_is_refused_naming_the_argument(session: Sandbox) -> None:
    # Before: at the interpreter's limit, "the arguments cannot be sent as JSON: Exceeds the limit (4300 digits) …; use
    # sys.set_int_max_str_digits() to increase the limit"; a script that did so had its frame refused by the
    # supervisor: "the interpreter sent its supervisor a bad frame (…) and was restarted", its variables lost.
    result = session.execute(
        "import sys\n"
        "from tool_tree.runtime import ToolCallError, call_tool\n"
        "kept = 'still here'\n"
        "for limit in (4300, 0):\n"
        "    sys.set_int_max_str_digits(limit)\n"
        "    try:\n"
        "        call_tool('media', 'slow_echo', {'text': 'x', 'extra': [10**5000]})\n"
        "    except ToolCallError as e:\n"
        "        print(e.code, '|', e)\n"
        "print(kept, call_tool('media', 'slow_echo', {'text': 'ok', 'seconds': 0}).text)\n"
    )
    assert result.error is None, result.traceback
    said = (
        "invalid_arguments | media.slow_echo: argument 'extra' (at extra[0]) holds a whole number of more than 4,300 "
        "digits, more "
        "than a JSON parser reads (the host's, a server's); send it as a string"
    )
    assert result.stdout.splitlines() == [said, said, "still here ok"]


def test_arguments_past_the_per_call_limits_are_refused_before_hashing_and_audited(
    tree: Path, pool: BackgroundPool
) -> None:
    bridge, stream = audited(tree, pool)
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0, "pad": [{}] * 200_000})
    assert info.value.code == "arguments_too_large" and "100,000 values" in info.value.message
    (line,) = audit_lines(stream)
    assert line["outcome"] == "refused" and line["code"] == "arguments_too_large" and "args_sha256" not in line


def test_large_arguments_are_admitted_off_the_event_loop_and_small_ones_on_it(
    tree: Path, pool: BackgroundPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    bridge = McpBridge(tree, pool.pool)
    admitted_on: list[str] = []
    admit = bridge._admit

    def spy(server: str, tool: str, arguments: dict[str, Any], size: Any = None) -> Any:
        admitted_on.append(threading.current_thread().name)
        return admit(server, tool, arguments, size)

    monkeypatch.setattr(bridge, "_admit", spy)
    call(bridge, pool, "media", "slow_echo", {"text": "x", "seconds": 0})
    big = call(bridge, pool, "media", "slow_echo", {"text": "y" * 300_000, "seconds": 0})
    assert big["content"][0]["text"] == "y" * 300_000
    assert admitted_on[0] == "tooltree-server-pool" and admitted_on[1] != "tooltree-server-pool"


def test_a_costly_pattern_is_matched_off_the_event_loop_every_sessions_calls_share(tmp_path: Path) -> None:
    # Before: small arguments were validated on the pool's loop, patterns included; a 12 KB value against
    # (\w+\s?){1000}z (within the tool's RE2 budget) held that loop, and every session's calls, for ~0.5 s.
    import asyncio
    import time

    long = r"(\w+\s?){1000}z"
    schema = {"type": "object", "properties": {"text": {"type": "string", "pattern": long}}}
    tree, server = raw_server_tree(tmp_path, [{"name": "long", "inputSchema": schema}])
    with BackgroundPool([server]) as pool:
        bridge = McpBridge(tree, pool.pool)
        assert call(bridge, pool, "raw", "long", {"text": "a" * 1000 + "z"})["content"][0]["text"]  # server started

        async def spent() -> tuple[float, float]:
            """CPU seconds the call took on the loop's thread, and in the whole process (CPU, not wall-clock time:
            a loaded machine stretches the latter, and a gap in the loop's ticks with it)."""
            on_loop, in_all = time.thread_time(), time.process_time()
            with pytest.raises(ToolCallRefused) as info:
                await bridge.call_tool("raw", "long", {"text": "ab " * 4000})  # no z: a full scan, refused
            assert info.value.code == "invalid_arguments"
            return time.thread_time() - on_loop, time.process_time() - in_all

        on_loop, in_all = asyncio.run_coroutine_threadsafe(spent(), pool.loop).result(timeout=60)
    assert in_all > 0.1  # the match did cost something (~0.5 s of CPU)
    assert on_loop < in_all / 4, (on_loop, in_all)  # before: all of it on the loop's thread


def test_unique_items_compares_json_values_in_linear_time() -> None:
    import jsonschema

    from tool_tree.schema_check import _unique_items

    cls = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"uniqueItems": _unique_items})
    validator = cls({"type": "array", "uniqueItems": True})
    for repeated in (
        [1, 1.0],
        [{"a": [1, {"b": None}]}, {"a": [1.0, {"b": None}]}],
        [{"x": 1, "y": 2}, {"y": 2, "x": 1}],
    ):
        assert not validator.is_valid(repeated), repeated
    for distinct in ([1, True], [0, False], [None, False], ["1", 1], [[1, 2], [2, 1]], [{"a": 1}, {"a": 1, "b": 1}]):
        assert validator.is_valid(distinct), distinct
    assert validator.is_valid([{"id": i} for i in range(50_000)])  # pairwise, this would take hours


def test_an_audit_log_that_cannot_be_opened_is_a_sandbox_error_naming_it(tmp_path: Path) -> None:
    from sandbox.errors import SandboxError

    with pytest.raises(SandboxError) as info:
        AuditLog(tmp_path)
    assert str(info.value) == f"audit log {tmp_path}: a folder, not a file; give a file to append to"
    missing = tmp_path / "missing" / "audit.jsonl"
    with pytest.raises(SandboxError) as info:
        AuditLog(missing)
    assert str(info.value) == f"audit log {missing}: cannot append to it (No such file or directory)"
    assert list(tmp_path.iterdir()) == []


def test_an_audit_log_is_created_readable_by_its_owner_only_and_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    for n in (1, 2):
        log = AuditLog(path)
        log.write({"n": n})
        log.close()
    assert path.stat().st_mode & 0o777 == 0o600  # before: 0644, and it names every call's session and error
    assert [json.loads(line)["n"] for line in path.read_text().splitlines()] == [1, 2]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_an_audit_log_that_cannot_be_written_keeps_the_calls_result_refuses_later_calls_and_closes(
    tree: Path, pool: BackgroundPool
) -> None:
    # Before: the write's OSError (a full disk) replaced the result of a call that had run, and closing the log raised
    # it again: `tooltree exec --audit` ended with exit 70, the script's output never printed.
    log = AuditLog("/dev/full")
    bridge = McpBridge(tree, pool.pool, audit=log)
    result = call(bridge, pool, "media", "render_chart", {"title": "Q3", "values": [3, 1, 2]})
    assert any(b["type"] == "image" for b in result["content"])
    assert log.error == "audit log /dev/full: cannot write to it (No space left on device)"
    with pytest.raises(ToolCallRefused) as info:
        call(bridge, pool, "media", "render_chart", {"title": "Q4", "values": [1]})
    assert info.value.code == "audit_failed"
    assert info.value.message == f"{log.error}: tool calls are not made while it fails"
    log.close()


@pytest.mark.docker
def test_calls_in_flight_when_an_execution_times_out_are_cancelled_ledgered_and_free_their_server(
    docker_engine: object, test_config: SandboxConfig, tree: Path
) -> None:
    # Before: such a call ran on to its end, holding one of its server's slots (here the only one) while the
    # next script waited; it was missing from the ledger, and the audit blamed the server when the pool closed.
    with BackgroundPool(sample_server_configs("crm", "media"), concurrency=1) as one_slot:
        bridge, stream = audited(tree, one_slot)
        with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=one_slot.loop) as sb:
            # The server started first: on a loaded machine its start alone can outlast the 3 s below, and the call
            # is then cancelled as one waiting for that start (another wording), not as one in flight.
            started = sb.execute("from servers.media import slow_echo\nslow_echo(text='w', seconds=0)\n", timeout=120)
            assert started.error is None, started.traceback
            stuck = sb.execute("from servers.media import slow_echo\nslow_echo(text='x', seconds=60)\n", timeout=3)
            assert stuck.error is not None and "timed out" in stuck.error
            (call,) = stuck.tool_calls
            assert (call.tool, call.ok, call.error) == (
                "slow_echo",
                False,
                "cancelled: the execution ended before the server answered",
            )
            # The slot is free: this call is served within its execution's limit, long before the first would end.
            after = sb.execute("from servers.media import slow_echo\nprint(slow_echo(text='y', seconds=0).text)\n")
            assert after.error is None and after.stdout.strip().endswith("y"), after.traceback
    outcomes = [(line["tool"], line["outcome"]) for line in audit_lines(stream)]
    assert outcomes == [("slow_echo", "ok"), ("slow_echo", "cancelled"), ("slow_echo", "ok")]


def test_an_audit_line_is_ascii_whatever_the_script_named() -> None:
    # Before: json.dumps(ensure_ascii=False) left U+202E (bidi override) and 8-bit controls (CSI) raw in the
    # file a user reads with cat or tail.
    stream = io.StringIO()
    AuditLog(stream).write({"server": "crm\u202e", "tool": "x\x9b2Jy", "error": "caf\u00e9 \x1b[31m"})
    line = stream.getvalue()
    assert line.isascii() and "\x1b" not in line and line.endswith("\n")
    assert json.loads(line) == {"error": "caf\u00e9 \x1b[31m", "server": "crm\u202e", "tool": "x\x9b2Jy"}


def test_an_audit_log_whose_last_line_was_cut_short_gets_each_new_line_whole(tmp_path: Path) -> None:
    # Before: a line cut short by a full disk or a killed process was glued to the next run's first line, so
    # that line was not JSON and the call it recorded was lost to a reader of the log.
    path = tmp_path / "audit.jsonl"
    path.write_text('{"n": 1}\n{"n": 2, "tool": "li', encoding="utf-8")
    log = AuditLog(path)
    log.write({"n": 3})
    log.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == '{"n": 1}'
    assert lines[1] == '{"n": 2, "tool": "li'
    assert json.loads(lines[2]) == {"n": 3}
    assert len(lines) == 3


@pytest.mark.docker
def test_an_executions_refused_calls_past_the_ledgers_count_are_audited_as_one_line_of_counts(
    docker_engine: object, test_config: SandboxConfig, tree: Path, pool: BackgroundPool
) -> None:
    # Before: one audit line for each refused call, which costs no call budget: a script naming a tool of 256 emoji
    # (12 bytes each in ASCII JSON) wrote 45 MB of audit log in 25 s, growing with its timeout.
    bridge, stream = audited(tree, pool)
    script = (
        "from tool_tree.runtime import ToolCallError, call_tool\n"
        "for i in range({n}):\n"
        "    try:\n        call_tool('crm', '\\U0001f600' * 300 if i % 2 else 'drop_database', {{}})\n"
        "    except ToolCallError:\n        pass\n"
    )
    with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=pool.loop) as sandbox:
        # 2,050 calls take ~3 s here; the config's 20 s ran out on a loaded CI machine, and this test is not about time.
        result = sandbox.execute(script.format(n=MAX_REFUSED_LINES + 50), timeout=180)
        assert result.error is None, result.traceback
        lines = audit_lines(stream)
        assert len(lines) == MAX_REFUSED_LINES + 1
        assert all(line["outcome"] == "refused" and "tool" in line for line in lines[:-1])
        counted = lines[-1]
        assert counted["code"] == "refused_calls_counted" and counted["calls"] == 50
        assert counted["codes"] == {"not_allowed": 25, "invalid_arguments": 25}
        assert len(stream.getvalue()) < 30 * 1024 * 1024
        # The next execution's refused calls have their lines again.
        assert sandbox.execute(script.format(n=3)).error is None
        assert [line.get("tool", "")[:4] for line in audit_lines(stream)[-3:]] == ["drop", "\U0001f600" * 4, "drop"]


def test_a_bridge_that_is_never_told_an_execution_ended_counts_its_refused_calls_at_the_next_one(
    tree: Path, pool: BackgroundPool
) -> None:
    bridge, stream = audited(tree, pool)
    for _ in range(MAX_REFUSED_LINES + 2):
        bridge.refused("crm", "x" * 300, "name_too_long", "a name too long")
    assert len(audit_lines(stream)) == MAX_REFUSED_LINES
    bridge.begin_execution()
    bridge.refused("crm", "y", "name_too_long", "a name too long")
    counted, last = audit_lines(stream)[-2:]
    assert counted["calls"] == 2 and counted["codes"] == {"name_too_long": 2}
    assert last["tool"] == "y"
