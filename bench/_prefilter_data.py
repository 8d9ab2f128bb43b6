"""Data of the pre-filter benchmarks: MetaTool split by tool, and the evidence of queries, cached.

The split is the tool search's (``search_sets.held_out_tool``): a MetaTool tool belongs to the
calibration half when the first byte of the SHA-256 of its name is even, else to the held-out
half, so the pre-filter is calibrated on the half the search's defaults were tuned on. A
single-tool query goes with its tool; a multi-tool query goes to a half only when all its tools
are in that half (the others are not used). Each half is searched as a catalog of its own tools
only.

Two exclusion lists keep the held-out figures on data nothing was tuned on:

- ``DOUBLED`` (``search_sets.DOUBLED``, which the search's benchmark leaves out too): six MetaTool query
  texts that are queries of both halves, with other tools as answers (the same text names a calibration
  tool in one row and a held-out tool in another). Their rows are left out of both halves before the
  queries are drawn, and `metatool_halves` checks that the list is exactly the texts the data has in both
  halves;
- ``REPEATED_TASKS``: three of the 40 tasks of ``prefilter_tasks_527.json`` ask what one of the
  search's tuning tasks asks (``search_sets.repeats``: the same needs, mostly the same words), so the
  search constants behind the classifier's features saw them; `prefilter_tasks` leaves them out.

Each says how many rows it left out and why.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from _common import OUT, ROOT, corpus
from search_sets import DOUBLED, _ident, held_out_tool, text_key

from tool_tree.search import SearchDoc

__all__ = [
    "DOUBLED",
    "REPEATED_TASKS",
    "TASKS",
    "Half",
    "apart",
    "metatool_halves",
    "prefilter_tasks",
    "raw_scores",
]

TASKS = ROOT / "bench" / "prefilter_tasks_527.json"
"""The pre-filter benchmark's 40 multi-step tasks over the 527-tool catalog (each need lists the tools that meet it)."""

REPEATED_TASKS = (
    "Find Airbnb listings in Lisbon for next weekend for two guests and show details of the cheapest one.",
    "Find train tickets from Beijing to Shanghai for tomorrow.",
    "List the running Docker containers and show me the logs of the one called web.",
)
"""The tasks of ``prefilter_tasks_527.json`` that repeat a tuning task of the tool search (``search_sets.repeats``,
which the search's own held-out set of these tasks leaves out too): the search's BM25F constants and the clause fusion
were chosen with them, and the classifier's features are that search's scores. The 37 others are reported."""


@dataclass
class Half:
    name: str
    docs: list[SearchDoc]
    queries: list[tuple[str, list[str]]]
    """``(query, the tools it needs)``: single-tool queries first, then multi-tool ones."""
    singles: int
    dropped: int = 0
    """Rows of this half's data left out because their text is in ``DOUBLED``."""


def doubled(single: list[tuple[str, str]], multi: list[tuple[str, list[str]]]) -> set[str]:
    """The query texts (spaces collapsed) that are queries of both halves: ``(query, tool)`` rows and
    ``(query, tools)`` multi-tool ones (those mixing halves are in neither)."""
    sides: dict[str, set[bool]] = {}
    for q, t in single:
        sides.setdefault(text_key(q), set()).add(calibration_half(t))
    for q, ts in multi:
        halves = {calibration_half(t) for t in ts}
        if len(halves) == 1:
            sides.setdefault(text_key(q), set()).update(halves)
    return {q for q, side in sides.items() if len(side) == 2}


def calibration_half(tool: str) -> bool:
    return not held_out_tool(tool)


SINGLES = 2500
"""Single-tool queries used per half: every query's SHA-256 orders them and the first 2,500 are
taken (embedding all ~10,000 per half takes tens of minutes on the shared 2-core machine)."""


def metatool_halves(singles: int = SINGLES) -> tuple[Half, Half]:
    """(calibration half, held-out half); ``singles`` single-tool queries each, and every multi-tool one."""
    described: dict[str, str] = json.loads(corpus("metatool", "plugin_des.json").read_text(encoding="utf-8"))
    with corpus("metatool", "all_clean_data.csv").open(encoding="utf-8", newline="") as f:
        single = [(row["Query"], row["Tool"]) for row in csv.DictReader(f)]
    multi = [
        (i["query"], list(i["tool"]))
        for i in json.loads(corpus("metatool", "multi_tool_query_golden.json").read_text(encoding="utf-8"))
    ]
    found = doubled(single, multi)
    if found != set(DOUBLED):
        raise SystemExit(
            f"MetaTool's texts in both halves are not search_sets.DOUBLED: {sorted(found - set(DOUBLED))} "
            f"unlisted, {sorted(set(DOUBLED) - found)} listed but not in both"
        )
    halves = []
    for name, side in (("calibration", True), ("held-out", False)):
        tools = {t for t in described if calibration_half(t) == side}
        docs = [
            SearchDoc(server=t, package=_ident(t), tool=t, function=_ident(t), path="", description=described[t])
            for t in sorted(tools)
        ]
        mine = [(q, [t]) for q, t in single if t in tools] + [(q, ts) for q, ts in multi if ts and set(ts) <= tools]
        dropped = sum(text_key(q) in found for q, _ in mine)
        queries, n_single = _draw(single, multi, tools, singles, found)
        unlisted, _ = _draw(single, multi, tools, singles, set())
        drawn = sum(text_key(q) in found for q, _ in unlisted)
        print(
            f"MetaTool {name} half: {dropped} rows left out ({drawn} of them among the queries drawn without the "
            f"list), their text a query of the other half too, with other tools (search_sets.DOUBLED, "
            f"{len(found)} texts)"
        )
        halves.append(Half(name, docs, queries, n_single, dropped))
    return halves[0], halves[1]


def _draw(
    single: list[tuple[str, str]], multi: list[tuple[str, list[str]]], tools: set[str], singles: int, skip: set[str]
) -> tuple[list[tuple[str, list[str]]], int]:
    """(queries, how many are single-tool) of a half's ``tools``: the first ``singles`` single-tool queries by
    SHA-256, then every multi-tool one, each text once; texts in ``skip`` (spaces collapsed) left out."""
    seen: set[str] = set()
    queries: list[tuple[str, list[str]]] = []
    for q, t in sorted(single, key=lambda qt: hashlib.sha256(qt[0].encode("utf-8")).digest()):
        if t in tools and q not in seen and text_key(q) not in skip and len(queries) < singles:
            seen.add(q)
            queries.append((q, [t]))
    n_single = len(queries)
    for q, ts in multi:
        if ts and all(t in tools for t in ts) and q not in seen and text_key(q) not in skip:
            seen.add(q)
            queries.append((q, sorted(set(ts))))
    return queries, n_single


def apart(calibration: Half, held: Half) -> None:
    """Raises SystemExit unless the two halves share no tool and no query text (spaces collapsed): what the
    calibration is fitted on must hold nothing of what it is judged on."""
    tools = {d.tool for d in calibration.docs} & {d.tool for d in held.docs}
    texts = {text_key(q) for q, _ in calibration.queries} & {text_key(q) for q, _ in held.queries}
    if tools or texts:
        raise SystemExit(f"the calibration half holds held-out data: tools {sorted(tools)}, queries {sorted(texts)}")


def prefilter_tasks() -> list[dict[str, Any]]:
    """The tasks of ``prefilter_tasks_527.json`` but ``REPEATED_TASKS`` (``{"task", "needs"}`` each), saying how many
    it left out and why. Raises SystemExit when a listed task is not in the file."""
    tasks: list[dict[str, Any]] = json.loads(TASKS.read_text(encoding="utf-8"))["tasks"]
    missing = set(REPEATED_TASKS) - {t["task"] for t in tasks}
    if missing:
        raise SystemExit(f"_prefilter_data.REPEATED_TASKS names tasks {TASKS.name} lacks: {sorted(missing)}")
    kept = [t for t in tasks if t["task"] not in REPEATED_TASKS]
    print(
        f"pre-filter tasks: {len(kept)} of {len(tasks)}; {len(tasks) - len(kept)} left out, each repeating a tuning "
        "task of the tool search (_prefilter_data.REPEATED_TASKS)"
    )
    return kept


def raw_scores(index: Any, texts: list[str], *, meaning: bool, cache: str) -> tuple[Any, Any]:
    """``(lexical, cosine or None)``: arrays (texts, tools) of every text's evidence, cached in
    ``bench/out/cache/<cache>-<hash>.npz`` (embedding ten thousand queries takes minutes here).

    The hash covers the texts and the whole index (its ranking settings, postings and vectors), so
    a change of the search's ranking never reads evidence computed under the old one."""
    import numpy as np

    from tool_tree.search import score_tools

    digest = hashlib.sha256(json.dumps([texts, meaning]).encode("utf-8"))
    digest.update(index.to_json().encode("utf-8"))
    key = digest.hexdigest()[:16]
    path = OUT / "cache" / f"{cache}-{key}.npz"
    if path.exists():
        data = np.load(path)
        return data["lex"], (data["cos"] if meaning else None)
    lex, cos = [], []
    for start in range(0, len(texts), 256):
        for s in score_tools(index, texts[start : start + 256], meaning=meaning):
            lex.append(s.lexical)
            if s.meaning is not None:
                cos.append(s.meaning)
    lex_a = np.asarray(lex, dtype=np.float32)
    cos_a = np.asarray(cos, dtype=np.float32) if meaning else np.zeros((0,), np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, lex=lex_a, cos=cos_a)
    return lex_a, (cos_a if meaning else None)
