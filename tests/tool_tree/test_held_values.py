"""The servers of one run are bounded together as well as each on its own (`tool_tree.held_values`): generate-tree's
listings (held until every server is listed), a pool's (held for its life), and the readers of every snapshot of a
tree (generate-tree from snapshots, direct mode, the search index, serve's prompts and resources).

The real limit (5,000,000 values) takes servers listing hundreds of MB to reach: a lower one behaves alike. Each
``dense`` listing below is 1,990 values (an object holding a list of 990 ``{}``, twice).
"""

from __future__ import annotations

import gc
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import tool_tree.connect
import tool_tree.held_values
import tool_tree.snapshot_lists
from agent.errors import AgentSetupError
from agent.toolsets.direct import native_tools
from generator.discover import discover_one
from generator.generate import generate
from tests.generator.test_generate_hostile import generate_json, raw_servers
from tests.generator.test_snapshot_prompts import config as prompts_config
from tests.support import REPO
from tool_tree.config import ServerConfig
from tool_tree.held_values import HeldValues, Share
from tool_tree.pool import ServerPool, ServerUnavailable
from tool_tree.search import SearchError, docs_from_tree
from tool_tree.tree import Manifest
from tooltree_cli.common import load
from tooltree_cli.generate_cmd import EXIT_CONFIG, EXIT_OK, EXIT_SERVERS
from tooltree_cli.main import main

RAW = REPO / "tests" / "servers" / "raw_server.py"


def dense(name: str, values: int = 990) -> dict[str, Any]:
    """5 values more than ``values``: the tool, its name, its schema, the schema's type and list, and ``values``
    objects in the list."""
    return {"name": name, "inputSchema": {"type": "object", "x": [{}] * values}}


def dense_pages(prefix: str, pages: int = 2, values: int = 990) -> dict[str, Any]:
    return {"pages": [[dense(f"{prefix}{i}", values)] for i in range(pages)]}


def raw(folder: Path, name: str, spec: dict[str, Any]) -> ServerConfig:
    """`tests/servers/raw_server.py` serving ``spec`` over stdio."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return ServerConfig(name=name, command=sys.executable, args=(str(RAW), str(path)), timeout=30)


def test_a_share_counts_a_listing_once_whole_and_gives_back_what_it_drops() -> None:
    held = HeldValues(100)
    a, b = Share(held), Share(held)
    assert a.add(60) and held.held == 60
    assert not b.add(41) and held.held == 60 and b.reading == 0  # refused whole: nothing counted
    a.keep()
    assert a.add(30) and held.held == 90  # a new listing is read while the kept one is still held
    a.keep()  # ... and replaces it
    assert held.held == 30 and a.kept == 30
    assert b.add(70) and held.held == 100
    b.drop()
    assert held.held == 30
    a.release()
    assert held.held == 0 and HeldValues().limit == tool_tree.held_values.MAX_HELD_VALUES


def test_generate_tree_bounds_the_listings_of_all_servers_together_and_a_failed_server_gives_its_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: each server was bounded alone (2,500,000 values), and every listing held until all were listed, so N
    # servers at the bound held N times it (four: 1.4 GB).
    monkeypatch.setattr(tool_tree.held_values, "MAX_HELD_VALUES", 5_000)
    monkeypatch.setattr(tool_tree.connect, "MAX_LIST_VALUES", 2_500)
    config = raw_servers(
        tmp_path,
        {
            "a": dense_pages("a"),  # 1,990: held
            "big": dense_pages("big", 3),  # over its own bound on page 3, its 1,990 of pages 1-2 given back
            "b": dense_pages("b"),  # 3,980 with a's: held (over 5,000 had big's been kept)
            "c": dense_pages("c"),  # 5,970: over the run's limit on its page 2
            "fine": {"pages": [[{"name": "alpha", "inputSchema": {"type": "object"}}]]},  # 4 values: room for it
        },
    )
    out = tmp_path / "tree"
    code, summary = generate_json(["--config", str(config), "--out", str(out), "--jobs", "1"], capsys)
    assert code == EXIT_SERVERS
    servers = {s["name"]: s for s in summary["servers"]}
    assert {name: s["status"] for name, s in servers.items()} == {
        "a": "ok",
        "b": "ok",
        "big": "failed",
        "c": "failed",
        "fine": "ok",
    }
    assert servers["big"]["error"].startswith("bad response: tools/list holds more than 2,500 JSON values of tool ")
    assert servers["c"]["error"] == (
        "bad response: tools/list (1,990 JSON values by page 2) would take the listings held of all servers past "
        "5,000 JSON values, the limit for one run (each server is bounded on its own too; this bounds the servers "
        "together)"
    )
    written = [(t.server, t.tool) for t in Manifest.load(out).tools]
    assert written == [("a", "a0"), ("a", "a1"), ("b", "b0"), ("b", "b1"), ("fine", "alpha")]


def test_a_list_past_what_the_run_may_still_hold_is_cut_with_a_warning_and_the_tools_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gamma's resources never end: 3 values each (an object, its name and its URI); its tool takes a few.
    monkeypatch.setattr(tool_tree.held_values, "MAX_HELD_VALUES", 40)
    path = prompts_config(tmp_path, ("gamma", ["gamma", "endless"], {}))
    result = generate(load(path), tmp_path / "tree", embeddings="off")
    assert not result.failed and [s.tools for s in result.servers] == [1]
    snapshot = json.loads((tmp_path / "tree" / "snapshots" / "gamma.json").read_text(encoding="utf-8"))
    kept = len(snapshot["resources"])
    assert 0 < kept < 13
    assert (
        f"gamma: resources/list: only the first {kept} items are recorded: the next would take the listings held of "
        "all servers past 40 JSON values, the limit for one run"
    ) in "\n".join(result.warnings)


@pytest.mark.anyio
async def test_a_pool_bounds_the_listings_of_its_servers_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool_tree.held_values, "MAX_HELD_VALUES", 5_000)
    async with ServerPool([raw(tmp_path, name, dense_pages(name)) for name in "abc"]) as pool:
        assert [t["name"] for t in await pool.start("a")] == ["a0", "a1"]
        assert [t["name"] for t in await pool.start("b")] == ["b0", "b1"]
        with pytest.raises(ServerUnavailable) as caught:
            await pool.start("c")
        assert "would take the listings held of all servers past 5,000 JSON values" in str(caught.value)
        assert [t["name"] for t in await pool.start("a")] == ["a0", "a1"]  # the others are unharmed


def snapshot_folder(folder: Path, servers: int) -> Path:
    folder.mkdir()
    for i in range(servers):
        data = {"server": f"s{i}", "info": {}, "tools": [dense(f"t{i}a"), dense(f"t{i}b")]}
        (folder / f"s{i}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_the_snapshots_a_run_reads_are_bounded_together_naming_the_file_that_passes_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each snapshot is 1,997 values (1,990 of tools, the object, its three keys' values and info's object ...).
    # Before: each was bounded alone (3,500,000 values), and every one held until all were read.
    snaps = snapshot_folder(tmp_path / "snaps", 3)
    monkeypatch.setattr(tool_tree.held_values, "MAX_READ_VALUES", 5_000)
    code = main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(tmp_path / "tree")])
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG
    assert (
        f"{snaps / 's2.json'}: unreadable snapshot (with the snapshots read before it, it holds more than 5,000 " in err
    )
    assert not (tmp_path / "tree").exists()
    monkeypatch.setattr(tool_tree.held_values, "MAX_READ_VALUES", 6_000)
    assert generate_json(["--from-snapshot", str(snaps), "--out", str(tmp_path / "tree")], capsys)[0] == EXIT_OK


def test_the_readers_of_every_snapshot_of_a_tree_are_bounded_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    snaps = snapshot_folder(tmp_path / "snaps", 3)
    tree = tmp_path / "tree"
    assert generate_json(["--from-snapshot", str(snaps), "--out", str(tree)], capsys)[0] == EXIT_OK
    manifest = Manifest.load(tree)
    assert len(native_tools(tree, manifest)[1]) == 6
    monkeypatch.setattr(tool_tree.held_values, "MAX_READ_VALUES", 5_000)
    third = tree / "snapshots" / "s2.json"
    with pytest.raises(AgentSetupError, match=f"{third}: malformed snapshot \\(with the snapshots read before it"):
        native_tools(tree, Manifest.load(tree))  # another copy: the last result is given again only for the same one
    with pytest.raises(SearchError, match="with the snapshots read before it, it holds more than 5,000 JSON values"):
        docs_from_tree(tree)


@pytest.mark.anyio
async def test_a_refused_listing_is_let_go_at_once_not_when_the_collector_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its traceback's frames, in a cycle with the task groups it was raised through, held the pages read until the
    # collector ran, which `{}` values do not hasten: twenty servers refused in turn peaked at 1.8 GB, not 0.6.
    monkeypatch.setattr(tool_tree.connect, "MAX_LIST_VALUES", 250_000)
    server = raw(tmp_path, "big", dense_pages("t", 3, 150_000))
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = await discover_one(server)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gc.enable()
    assert result.error is not None and "more than 250,000 JSON values" in result.error
    assert held < 4 * 2**20, f"{held:,} bytes still held"  # two pages read: 22 MB before


@pytest.mark.anyio
async def test_a_server_of_a_pool_started_again_is_not_counted_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two servers of 1,990 values each within 5,000: the new session of one replaces its listing (before it was let
    # go, 1,990 more would have been counted, and its restart refused past the limit).
    monkeypatch.setattr(tool_tree.held_values, "MAX_HELD_VALUES", 5_000)
    servers = [raw(tmp_path, name, {"pages": [[dense(f"{name}0"), dense("crash")]]}) for name in "ab"]
    async with ServerPool(servers) as pool:
        await pool.start("b")
        assert [t["name"] for t in await pool.start("a")] == ["a0", "crash"]
        with pytest.raises(ServerUnavailable, match="died before answering the call"):
            await pool.call("a", "crash", {})
        assert [t["name"] for t in await pool.start("a")] == ["a0", "crash"]  # 5,970 had both listings counted
        assert pool.restarts("a") == 1


@pytest.mark.anyio
async def test_a_server_listed_again_as_its_tools_changed_is_not_counted_twice() -> None:
    changing = REPO / "tests" / "servers" / "changing_server.py"
    server = ServerConfig(name="shifty", command=sys.executable, args=(str(changing), "3"), timeout=30)
    measured = HeldValues()
    assert (await discover_one(server, held=measured)).error is None
    one = measured.held  # its one listing's values, kept
    assert one > 0
    exactly = HeldValues(one)  # room for one listing at a time: each listing again replaces the one before
    result = await discover_one(server, held=exactly)
    assert result.error is None and [t["name"] for t in result.tools] == ["tool_v3"]
    assert exactly.held == one


def test_a_count_within_a_shared_one_takes_from_both_and_names_the_bound_that_refused() -> None:
    shared = HeldValues.shared(100)
    a, b = HeldValues(80, within=shared), HeldValues(80, within=shared)
    assert a.take(60) and shared.held == 60
    assert not b.take(50) and (b.held, shared.held) == (0, 60)  # refused by the shared bound: nothing counted
    assert "held of the servers of all client sessions past 100 JSON values" in b.over("x")
    assert "serve.max_listing_values" in b.over("x")
    assert not a.take(30) and "held of all servers past 80 JSON values, the limit for one run" in a.over("x")
    assert shared.held == 60  # a's own bound refused first: the shared count untouched
    assert b.take(40) and shared.held == 100
    a.give(1_000)  # gives back what it held, no more
    assert (a.held, shared.held) == (0, 40)
    with pytest.raises(TypeError, match="held_within: expected a HeldValues or None, got int"):
        ServerPool([], held_within=5)  # type: ignore[arg-type]


def test_a_shared_count_taken_and_given_from_many_threads_adds_up() -> None:
    import threading

    shared = HeldValues.shared(10**9)
    counts = [HeldValues(within=shared) for _ in range(8)]

    def churn(held: HeldValues) -> None:
        for _ in range(2_000):
            assert held.take(3)
            held.give(2)

    threads = [threading.Thread(target=churn, args=(held,)) for held in counts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert shared.held == 8 * 2_000 == sum(held.held for held in counts)


@pytest.mark.anyio
async def test_pools_that_share_a_count_are_bounded_together_and_give_theirs_back_as_they_close(
    tmp_path: Path,
) -> None:
    # What `tooltree serve` does for its client sessions, each a pool of its own: before, each pool was bounded alone,
    # so 16 sessions of servers at a run's bound held 16 times it.
    shared = HeldValues.shared(5_000)
    servers = [raw(tmp_path, name, dense_pages(name)) for name in "ab"]
    async with ServerPool(servers, held_within=shared) as first:
        await first.start("a")
        await first.start("b")
        assert shared.held == 2 * 1_990
        async with ServerPool(servers, held_within=shared) as second:
            with pytest.raises(ServerUnavailable) as caught:
                await second.start("a")
            assert "held of the servers of all client sessions past 5,000 JSON values" in str(caught.value)
            assert "serve.max_listing_values" in str(caught.value)
            assert shared.held == 2 * 1_990  # the refused listing gave back what it had counted
        await first.start("a")  # the first pool's servers are unharmed
    assert shared.held == 0
    async with ServerPool(servers, held_within=shared) as third:
        assert [t["name"] for t in await third.start("a")] == ["a0", "a1"]
        assert shared.held == 1_990
    assert shared.held == 0
