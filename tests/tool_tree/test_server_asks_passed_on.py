"""A server configured with ``client_capabilities`` is declared them, and what it asks during a call goes to the
call's asker (`tool_tree.pool.ServerPool.call`'s ``asker``), on the wire and inside an ``input required`` result
alike; a question with no one to ask, of a capability not declared, or of roots, is refused in tooltree's words.

Before: every question was refused and no capability could be declared (a server that offers some tools only to a
client that can ask its user listed none of them). Real processes: `tests/servers/asking_server.py` through
`ServerPool`.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from tool_tree.config import ServerConfig
from tool_tree.pool import CallFailure, ServerPool

REPO = Path(__file__).resolve().parents[2]
ASKING = REPO / "tests" / "servers" / "asking_server.py"
PROMPTLY = 20.0
"""Seconds a call that asks may take at most (a start on a busy machine included)."""

pytestmark = pytest.mark.anyio


def asking(marks: Path, protocol: str = "auto", capabilities: tuple[str, ...] = ("elicitation", "sampling")) -> Any:
    return ServerConfig(
        name="asking",
        command=sys.executable,
        args=(str(ASKING), str(marks)),
        timeout=60,
        protocol=protocol,
        client_capabilities=capabilities,
    )


def text(result: dict[str, Any]) -> str:
    return "".join(b["text"] for b in result["content"] if b["type"] == "text")


class Asker:
    """An asker that records each question and answers as the user would."""

    def __init__(self) -> None:
        self.asked: list[mt.InputRequest] = []

    async def __call__(self, request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        self.asked.append(request)
        if isinstance(request, mt.ElicitRequest):
            return mt.ElicitResult(action="accept", content={"name": "Ana"})
        return mt.CreateMessageResult(
            role="assistant", content=mt.TextContent(type="text", text="a summary"), model="small"
        )


async def test_the_configured_capabilities_are_declared_and_no_others(tmp_path: Path) -> None:
    async with ServerPool([asking(tmp_path, capabilities=("elicitation",))]) as pool:
        declared = json.loads(text(await pool.call("asking", "capabilities", {})))
    assert set(declared) == {"elicitation"}  # before: {} whatever the configuration


@pytest.mark.parametrize("kind", ["elicitation", "sampling"])
async def test_a_question_on_the_wire_goes_to_the_calls_asker_and_its_answer_to_the_server(
    tmp_path: Path, kind: str
) -> None:
    asker = Asker()
    async with ServerPool([asking(tmp_path, "legacy")]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask", {"kind": kind, "message": "Which one?"}, asker=asker)
    assert not isinstance(result, CallFailure), result
    answered = json.loads(text(result).removeprefix("the client answered: "))
    assert answered == (
        {"action": "accept", "content": {"name": "Ana"}}
        if kind == "elicitation"
        else {"role": "assistant", "content": {"type": "text", "text": "a summary"}, "model": "small"}
    )
    [question] = asker.asked
    assert question.method == ("elicitation/create" if kind == "elicitation" else "sampling/createMessage")


@pytest.mark.parametrize("kind", ["elicitation", "sampling"])
async def test_a_question_of_an_input_required_result_goes_to_the_asker_too(tmp_path: Path, kind: str) -> None:
    asker = Asker()
    async with ServerPool([asking(tmp_path)]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask_input", {"kind": kind}, asker=asker)
    assert not isinstance(result, CallFailure), result
    answers = json.loads(text(result).removeprefix("the client answered: "))
    assert ("Ana" if kind == "elicitation" else "a summary") in json.dumps(answers["question"])
    assert len(asker.asked) == 1


async def test_without_an_asker_a_declared_question_is_refused_saying_there_is_no_one_to_ask(tmp_path: Path) -> None:
    async with ServerPool([asking(tmp_path)]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask_input", {"kind": "elicitation"})
        assert isinstance(result, CallFailure) and result.code == "server_error"
        assert "tooltree did not pass it on (no one to ask: tooltree passes elicitation on only" in text(result)
    async with ServerPool([asking(tmp_path, "legacy")]) as pool:
        wire = await pool.call("asking", "ask_times", {"kind": "elicitation", "times": 1})
    assert "no one to ask" in text(wire)


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("sampling", "its configuration declares only elicitation (client_capabilities)"),
        ("roots", "tooltree never passes roots on"),
    ],
)
async def test_a_question_of_a_capability_not_declared_is_refused_and_never_reaches_the_asker(
    tmp_path: Path, kind: str, why: str
) -> None:
    asker = Asker()
    async with ServerPool([asking(tmp_path, "legacy", capabilities=("elicitation",))]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask_times", {"kind": kind, "times": 1}, asker=asker)
    assert text(result).startswith(f"error: {kind.capitalize()} not supported: tooltree does not offer {kind} (")
    assert text(result).endswith(f"; {why}")
    assert asker.asked == []


async def test_a_question_while_a_call_without_an_asker_is_in_flight_is_refused_not_put_to_another_call(
    tmp_path: Path,
) -> None:
    # A script's call and a passthrough call to one server at once: the question names no call, so it could be the
    # script's; it is refused rather than put to the passthrough call's client.
    asker = Asker()
    async with ServerPool([asking(tmp_path, "legacy")]) as pool, anyio.create_task_group() as tg:
        tg.start_soon(pool.call, "asking", "wait", {"seconds": 30})
        with anyio.fail_after(PROMPTLY):
            while not (tmp_path / "ran").exists():
                await anyio.sleep(0.02)  # a poll of the server's mark, bounded
            result = await pool.call("asking", "ask_times", {"kind": "elicitation", "times": 1}, asker=asker)
        tg.cancel_scope.cancel()
    assert "another call to this server was in flight that may not pass elicitation on" in text(result)
    assert asker.asked == []


async def test_the_calls_timeout_withdraws_a_question_still_waiting_for_its_answer(tmp_path: Path) -> None:
    waiting, withdrawn = anyio.Event(), anyio.Event()

    async def never_answers(request: mt.InputRequest) -> mt.InputResponse | mt.ErrorData:
        waiting.set()
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()
        raise AssertionError("unreachable")

    async with ServerPool([asking(tmp_path, "legacy")]) as pool:
        with anyio.fail_after(PROMPTLY):
            result = await pool.call("asking", "ask", {"kind": "elicitation"}, timeout=2, asker=never_answers)
            await withdrawn.wait()
        assert waiting.is_set()
        assert isinstance(result, CallFailure) and result.code == "timeout"
        assert text(await pool.call("asking", "wait", {"seconds": 0})) == "waited 0 s"  # the server goes on


async def test_a_question_one_call_in_flight_may_not_pass_on_is_refused_not_put_to_another_call(tmp_path: Path) -> None:
    # A script's call (its asker passes only elicitation on) beside a passthrough call to one server: a sampling
    # question names no call, so it could be the script's; before, it went to the oldest call's asker, the
    # passthrough's, and reached the client's model on the script's behalf.
    passthrough, script = Asker(), Asker()
    script.kinds = ("elicitation",)  # type: ignore[attr-defined]
    async with ServerPool([asking(tmp_path, "legacy")]) as pool, anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(pool.call, "asking", "wait", {"seconds": 30}, asker=passthrough))
        with anyio.fail_after(PROMPTLY):
            while not (tmp_path / "ran").exists():
                await anyio.sleep(0.02)  # a poll of the server's mark, bounded
            sampled = await pool.call("asking", "ask_times", {"kind": "sampling", "times": 1}, asker=script)
            elicited = await pool.call("asking", "ask_times", {"kind": "elicitation", "times": 1}, asker=script)
        tg.cancel_scope.cancel()
    assert text(sampled).endswith(
        "another call to this server was in flight that may not pass sampling on (a script's, or a host caller's), and "
        "a question names no call, so it could have been that one's"
    )
    assert json.loads(text(elicited)) == {"action": "accept", "content": {"name": "Ana"}}
    assert [q.method for q in passthrough.asked + script.asked] == ["elicitation/create"]  # no sampling anywhere


async def test_a_question_between_calls_is_refused_saying_so(tmp_path: Path) -> None:
    from tool_tree.in_flight import InFlight

    assert InFlight().asker(object(), "elicitation") == (
        "it came between calls; tooltree passes a question on only during the call it belongs to"
    )


async def test_each_of_parallel_calls_gets_its_own_input_required_question(tmp_path: Path) -> None:
    # Two calls whose results ask at once (2026-07-28): before, each question went to the oldest call not asking
    # already, so they were swapped (and the one left with the call that ended first was withdrawn, failing the other).
    first, second = Asker(), Asker()
    async with ServerPool([asking(tmp_path)]) as pool:
        results: dict[str, Any] = {}

        async def call(tag: str, asker: Asker) -> None:
            results[tag] = await pool.call("asking", "ask_pair", {"tag": tag}, asker=asker)

        with anyio.fail_after(PROMPTLY):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "A", first)
                tg.start_soon(call, "B", second)
    assert [q.params.message for q in first.asked] == ["for A"]  # type: ignore[union-attr]
    assert [q.params.message for q in second.asked] == ["for B"]  # type: ignore[union-attr]
    assert all(not isinstance(r, CallFailure) for r in results.values()), results


def test_a_sessions_url_elicitations_are_forgotten_when_it_ends() -> None:
    # Before: kept for good, each holding serve's session, and told to a later session that got the same id.
    from tool_tree.in_flight import InFlight

    told: list[str] = []
    in_flight, session = InFlight(), object()
    in_flight._remember(id(session), "e1", told.append)
    in_flight.forget(session)
    in_flight.completed(session, "e1")
    assert told == [] and in_flight._urls == {}
