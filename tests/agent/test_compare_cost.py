"""What `tooltree agent --compare` says a mode costs: its tokens with the prompt cache's share of them, its cost units
(the tokens weighed by Anthropic's published price ratios, the pre-filter's included) and its share of the direct
run's cost units; ``--json`` gives the same figures. The real CLI and the real ``anthropic`` SDK against the fake API,
whose replies report the usage each test sets. Before, the table had no cache columns and no cost units, and its share
was of tokens: a cache read (0.1× an input token's price) counted as much as an uncached input token, an output token
(5×) as much as an input token."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from agent import read_transcript
from agent.prefilter.claude import VERDICT_TOOL
from agent.summary import TokenUsage
from agent.testing import FakeMessagesAPI, reply, tool_use
from tests.agent.conftest import Project
from tooltree_cli.main import main

TASK = "Read the Northwind deal"
GET = tool_use("crm__get_record", {"object_type": "opportunity", "record_id": "0065e000009Q3PR"})
VERDICT = tool_use(VERDICT_TOOL, {"verdicts": [{"tool": "crm__get_record", "needed": True, "probability": 0.9}]})
RATIOS = {"input_tokens": Fraction(1), "cache_creation_input_tokens": Fraction(5, 4),
          "cache_read_input_tokens": Fraction(1, 10), "output_tokens": Fraction(5)}  # fmt: skip
"""Anthropic's published price ratios for Claude models, next to an uncached input token."""
COLUMNS = ("mode", "stop", "turns", "sent", "cache read", "cache write", "received", "pre-filter", "total",
           "cost units", "of direct")  # fmt: skip


def usage(fresh: int, write: int, read: int, out: int) -> dict[str, int]:
    return {"input_tokens": fresh, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "output_tokens": out}  # fmt: skip


def cost(usages: list[dict[str, Any]]) -> Fraction:
    """What the usage blocks cost, in uncached input tokens."""
    return sum((ratio * u[k] for u in usages for k, ratio in RATIOS.items()), Fraction(0))


def summed(usages: list[dict[str, Any]], key: str) -> int:
    return sum(int(u[key]) for u in usages)


def table(out: str) -> dict[str, dict[str, str]]:
    """The comparison's rows by mode, each cell by its column (the cells before the tool calls: none has a space
    but ``of direct``'s ``%``)."""
    lines = out.split("\n\n")[0].splitlines()
    assert lines[0].split()[:15] == " ".join(COLUMNS).split()
    rows = {}
    for line in lines[2:]:
        cells = line.split()
        share = " ".join(cells[10:12]) if cells[10] != "-" else "-"
        rows[cells[0]] = dict(zip(COLUMNS, [*cells[:10], share], strict=True))
    return rows


def shown(value: Fraction) -> str:
    """Cost units as the table rounds them (whole units)."""
    return f"{float(value):,.0f}"


def share(part: Fraction, whole: Fraction) -> str:
    return f"{float(100 * part / whole):.1f} %"


def test_cost_units_weigh_each_count_by_its_price() -> None:
    # The audit's direct run: 16,875 tokens sent, 11,037 of them cache reads.
    u = TokenUsage(
        input_tokens=4_338, output_tokens=612, cache_creation_input_tokens=1_500, cache_read_input_tokens=11_037
    )
    assert u.sent == 16_875
    assert u.cost_units == float(cost([vars(u)])) == 10_376.7  # 4,338 + 5 × 612 + 1.25 × 1,500 + 0.1 × 11,037


def test_the_table_shows_the_cache_split_cost_units_and_a_share_by_price(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # direct: a first request that writes the cache, a second that mostly reads it; tool-search: one uncached request.
    direct = [usage(40, 6_000, 0, 120), usage(900, 300, 6_000, 60)]
    tool_search = [usage(2_500, 0, 0, 30)]
    api.add(reply(GET, usage=direct[0]), reply("Negotiation.", usage=direct[1]), reply("Negotiation.",
            usage=tool_search[0]))  # fmt: skip
    transcript = tmp_path / "run.jsonl"
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--compare",
            "direct,tool-search", "--quiet", "--transcript", str(transcript)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = table(out)
    for mode, usages in (("direct", direct), ("tool-search", tool_search)):
        sent = sum(
            summed(usages, k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        assert rows[mode]["sent"] == f"{sent:,}"
        assert rows[mode]["cache read"] == f"{summed(usages, 'cache_read_input_tokens'):,}"
        assert rows[mode]["cache write"] == f"{summed(usages, 'cache_creation_input_tokens'):,}"
        assert rows[mode]["received"] == f"{summed(usages, 'output_tokens'):,}"
        assert rows[mode]["total"] == f"{sent + summed(usages, 'output_tokens'):,}"
        assert rows[mode]["cost units"] == shown(cost(usages))
        summary = read_transcript(tmp_path / f"run.{mode}.jsonl")[-1]["summary"]  # its JSON, the same numbers
        assert summary["cost_units"] == summary["usage"]["cost_units"] == float(cost(usages))
    assert rows["direct"]["of direct"] == "100.0 %"
    assert rows["tool-search"]["of direct"] == share(cost(tool_search), cost(direct)) == "25.7 %"  # by tokens: 18.9 %
    assert (
        "\ncost units: the tokens weighed by price, the pre-filter's included, at Anthropic's published ratios for "
        "Claude models (uncached input 1, cache write 1.25, cache read 0.1, output 5): input-token equivalents, not "
        "money\nof direct: each run's cost units as a share of the direct run's, not its tokens\n"
    ) in out


def routed(api: FakeMessagesAPI, verdict: dict[str, int]) -> list[dict[str, Any]]:
    """Script ``api``: the pre-filter's requests get its verdict (reporting ``verdict``), the model's the replies put
    in the list returned, in order."""
    model: list[dict[str, Any]] = []

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return reply(VERDICT, usage=verdict) if body["tools"][0]["name"] == VERDICT_TOOL else model.pop(0)

    api.add(*[answer] * 40)
    return model


def verdicts(requests: list[dict[str, Any]]) -> int:
    """How many of ``requests`` the pre-filter sent."""
    return sum(1 for r in requests if r["tools"][0]["name"] == VERDICT_TOOL)


def test_the_prefilters_tokens_count_in_the_modes_cost_units_and_the_json_gives_the_tables_figures(
    project: Project, api: FakeMessagesAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    direct = [usage(10, 5_000, 0, 100), usage(700, 200, 5_000, 50)]
    filtered = [usage(1_500, 0, 0, 40), usage(300, 0, 1_500, 20)]
    verdict = usage(800, 0, 0, 60)  # the claude pre-filter's: 800 input and 60 output tokens a request
    argv = ["agent", TASK, "--config", str(project.config_path), "--tree", str(project.tree), "--compare",
            "direct,filtered", "--prefilter", "claude", "--quiet"]  # fmt: skip
    replies = [reply(GET, usage=direct[0]), reply("N.", usage=direct[1]), reply(GET, usage=filtered[0]),
               reply("N.", usage=filtered[1])]  # fmt: skip
    model = routed(api, verdict)
    model += replies
    assert main(argv) == 0
    rows = table(capsys.readouterr().out)
    asked = verdicts(api.requests)
    assert asked >= 1
    prefilter = [verdict] * asked
    paid = cost(filtered) + cost(prefilter)
    assert rows["filtered"]["pre-filter"] == f"{860 * asked:,}"
    assert rows["filtered"]["cost units"] == shown(paid)  # the model's and the pre-filter's
    assert rows["filtered"]["of direct"] == share(paid, cost(direct))
    assert rows["direct"]["cost units"] == shown(cost(direct)) and rows["direct"]["pre-filter"] == "-"

    before = len(api.requests)
    model += replies
    assert main([*argv, "--json"]) == 0
    runs = {r["mode"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert verdicts(api.requests[before:]) == asked and not model  # the same runs again
    for mode, run in runs.items():
        u, row = run["usage"], rows[mode]
        assert [f"{u[k]:,}" for k in ("sent", "cache_read_input_tokens", "cache_creation_input_tokens",
                                      "output_tokens")] == [row["sent"], row["cache read"], row["cache write"],
                                                            row["received"]]  # fmt: skip
        assert (f"{run['spent']:,}", f"{run['cost_units']:,.0f}") == (row["total"], row["cost units"])
        assert f"{100 * run['cost_units'] / runs['direct']['cost_units']:.1f} %" == row["of direct"]
    assert runs["filtered"]["cost_units"] == float(paid) and runs["direct"]["prefilter"] is None
    assert runs["filtered"]["usage"]["cost_units"] == float(cost(filtered))
    p = runs["filtered"]["prefilter"]["usage"]
    assert (p["sent"], p["total"], p["cost_units"]) == (800 * asked, 860 * asked, float(cost(prefilter)))
    assert {k: p[k] for k in RATIOS} == {k: summed(prefilter, k) for k in RATIOS}  # the keys it had are kept
