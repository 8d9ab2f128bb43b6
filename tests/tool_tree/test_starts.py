"""`tool_tree.starts`: the start limit, where it comes from, and the gate that enforces it."""

from __future__ import annotations

import anyio
import pytest

from tool_tree.config import ConfigError, parse_config
from tool_tree.starts import StartGate, default_start_jobs, start_jobs


def test_the_start_limit_comes_from_the_override_then_the_pool_section_then_the_cores() -> None:
    configured = parse_config("servers: {}\npool:\n  start_jobs: 3\n", environ={})
    assert start_jobs(configured, 5) == 5
    assert start_jobs(configured) == 3
    assert start_jobs(parse_config("servers: {}\n", environ={})) == default_start_jobs() >= 1
    assert start_jobs(None) == default_start_jobs()


def test_a_bad_pool_section_is_a_config_error_naming_file_line_and_key() -> None:
    from tooltree_cli.common import config_sections

    for text, message in [
        ("pool:\n  start_job: 2\n", "tooltree.yaml:3: pool.start_job: unknown key (did you mean 'start_jobs'?)"),
        (
            "pool:\n  start_jobs: 0\n",
            "tooltree.yaml:3: pool.start_jobs: expected a whole number, at least 1 (servers starting at once; "
            "default: the number of cores), got 0",
        ),
        ("pool:\n  start_jobs: 1000000\n", "tooltree.yaml:3: pool.start_jobs: at most 1,024, got 1,000,000"),
    ]:
        with pytest.raises(ConfigError) as info:
            parse_config("servers: {}\n" + text, source="tooltree.yaml", environ={}, sections=config_sections())
        assert str(info.value).startswith(message)


@pytest.mark.anyio
async def test_the_gate_lets_jobs_through_and_queues_the_rest_in_order() -> None:
    gate = StartGate(2)
    order: list[int] = []

    async def start(i: int) -> None:
        slot = await gate.acquire()
        order.append(i)
        await release.wait()
        slot.release()
        slot.release()  # a second release gives nothing back twice

    release = anyio.Event()
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(start, i)
            await anyio.wait_all_tasks_blocked()
        assert (gate.starting, gate.queued, order) == (2, 3, [0, 1])
        release.set()
    assert (gate.starting, gate.queued, order) == (0, 0, [0, 1, 2, 3, 4])


def test_a_start_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        StartGate(0)
    with pytest.raises(ValueError, match="at least 1"):
        start_jobs(None, 0)


@pytest.mark.anyio
async def test_a_gate_shared_with_another_threads_event_loop_counts_its_starts_and_hands_it_a_place() -> None:
    import asyncio
    import threading

    gate = StartGate(1)
    elsewhere = await anyio.to_thread.run_sync(asyncio.run, gate.acquire())  # another loop's start holds the place
    got = anyio.Event()

    async def start() -> None:
        slot = await gate.acquire()
        got.set()
        slot.release()

    async with anyio.create_task_group() as tg:
        tg.start_soon(start)
        await anyio.wait_all_tasks_blocked()
        assert (gate.starting, gate.queued, got.is_set()) == (1, 1, False)
        threading.Thread(target=elsewhere.release).start()
        with anyio.fail_after(10):
            await got.wait()
    assert (gate.starting, gate.queued) == (0, 0)


@pytest.mark.anyio
async def test_a_start_cancelled_while_queued_takes_no_place() -> None:
    gate = StartGate(1)
    first = await gate.acquire()
    with anyio.move_on_after(0):
        await gate.acquire()
    assert gate.queued == 0
    first.release()
    with anyio.fail_after(10):
        (await gate.acquire()).release()
    assert (gate.starting, gate.queued) == (0, 0)
