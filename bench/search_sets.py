"""The evaluation sets of the tool-search benchmark, and the split that keeps tuning apart from reporting.

MetaTool (199 tools, each its own "server") is split **by tool**: a tool is held out when the
first byte of the SHA-256 of its name is odd (``held_out_tool``), which puts 103 tools in the
held-out half and 96 in the tuning half. Queries follow their tools:

- single-tool rows (``all_clean_data.csv``) go to the half of their tool;
- multi-tool queries (``multi_tool_query_golden.json``) go to a half only when every gold tool is
  in it (the rest, mixing halves, are not used).

Every query is ranked over the whole 199-tool catalog, so the other half's tools are there as
distractors, as they would be in use; only which queries are scored differs.

No text is a query of both a tuning set and a held-out set of a catalog: the six MetaTool texts asked of
both halves with other tools (``DOUBLED``, 14 rows) and BFCL's one turn text asked in a tuning and a held-out task
(``DOUBLED_BFCL``, 2 turns) are left out of both halves, and a catalog whose data holds other such texts (or
not these) is refused (``leave_out``). Each says how many rows it left out.

The LiveMCPBench catalog (527 tools, 70 real MCP servers) comes without its tasks, so
``bench/data/livemcp_tasks.json`` holds multi-step tasks written for this benchmark before any
ranking ran on them, in two parts: ``tuning`` and ``held_out``. Each task lists its needs; a need
is met when any of its acceptable tools is in the first k. A second held-out set over the same
catalog is the pre-filter benchmark's 40 tasks (``bench/prefilter_tasks_527.json``), written
later and never used to choose a search setting; three of them repeat a tuning task (one word for word), so that set
holds the other 37 (``repeats``). These tasks were written by someone
who had read the tool names, so they lean towards the catalog's words more than a user's would.
``bench/data/livemcp_user_tasks.json`` holds 64 more (156 needs), worded as users word them: written
from the servers' names, categories and descriptions alone, frozen, and only then annotated against
the catalog's tools. They are split by the SHA-256 of the query text into a tuning half (35 tasks, 87
needs) and a held-out half (29 tasks, 69 needs).

BFCL's multi-turn tasks (``bfcl()``) are a third kind: users' requests, turn by turn, to
REST-style APIs with many tools each — 162 tools in 12 "servers" (the API classes of
``bfcl_eval/data/multi_turn_func_doc``), 731 turns of the 200 ``multi_turn_base`` tasks. A turn's
needs are the distinct functions its ground truth calls (1,100 needs; navigation such as ``cd``
that the user never asked for counts too). They are split **by task** like MetaTool's tools: a
task is held out when the first byte of the SHA-256 of its id is odd (nothing in the ranking is
learned per tool, so sharing tools across the halves leaks nothing). Each tool description's leading "This tool belongs
to …" sentence is the server's description, the rest the tool's. The data ships inside the
``bfcl-eval`` wheel (Apache-2.0; ``pip install --no-deps bfcl-eval==2026.3.23``, read from the
installed files); without it the set is left out.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import ROOT, corpus

from tool_tree.search import SearchDoc
from tool_tree.search._docs import description_of, params_of

TASKS = ROOT / "bench" / "data" / "livemcp_tasks.json"
USER_TASKS = ROOT / "bench" / "data" / "livemcp_user_tasks.json"
"""Tasks worded as users word them, written without seeing the catalog's tools (see the module docstring)."""
PREFILTER_TASKS = ROOT / "bench" / "prefilter_tasks_527.json"
"""A second held-out set: the pre-filter benchmark's 40 tasks, written later and never used to tune the search
(those that repeat a tuning task left out: ``repeats``)."""
PREFILTER_SET = "held tasks, pre-filter's"
"""The name of that set among the LiveMCPBench catalog's sets."""
REPEAT_OVERLAP = 0.4
"""A held-out task repeats a tuning task when it has the same needs and at least this share of the words of the two
requests are common to both (Jaccard). Of the 527-tool catalog's held-out tasks, three of the pre-filter's 40 repeat
one of the search's 20 tuning tasks: at 1.00 ("Find train tickets from Beijing to Shanghai for tomorrow.", twice),
0.85 (the logs of the running container "web") and 0.46 (Airbnb listings in Lisbon for next weekend); the nearest
task with the same needs below it is at 0.26 (Bitcoin's price and the market's fear), a request of its own."""
KS = (1, 5, 10)
DOUBLED = (
    "Can you recommend a good book to read?",
    "How can I improve my writing skills?",
    "I'm planning a trip to Paris. Can you suggest some must-visit attractions?",
    "What are some popular podcasts right now?",
    "What movies are currently playing in theaters?",
    "What's the weather like today?",
)
"""MetaTool's query texts (``text_key``) that are queries of both halves with other tools as answers, e.g. the
weather: ``WeatherTool`` (held out) and ``word_sneak`` (tuning). Such a text is in the data the defaults were tuned on
and in the data they are judged on, so its rows (14 of ``all_clean_data.csv``: 8 in the tuning half, 6 held out; none
is a multi-tool query) are left out of both halves, here and in the pre-filter's benchmarks (``_prefilter_data``)."""
DOUBLED_BFCL = (
    "Arrange a complete listing of all files and directories presently located here, making sure you don't overlook "
    "the hidden ones too.",
)
"""BFCL's turn text asked in a tuning task (``multi_turn_base_43``) and a held-out one (``multi_turn_base_40``), both
times needing ``ls``: its two turns are left out of both halves."""


def _ident(name: str, fallback: str = "tool") -> str:
    """A package (``fallback="server"``) or function name as the generator makes it: an identifier
    (``12306-mcp`` → ``server_12306_mcp``), which a search index must hold to load."""
    ident = re.sub(r"\W+", "_", name).strip("_") or fallback
    return f"{fallback}_{ident}" if ident[0].isdigit() else ident


def held_out_tool(name: str) -> bool:
    """The fixed split of MetaTool (by tool name) and BFCL (by task id): held out when the first byte of
    sha256(name) is odd."""
    return hashlib.sha256(name.encode("utf-8")).digest()[0] % 2 == 1


@dataclass
class QuerySet:
    """Queries whose needs are lists of acceptable tool keys (``server.tool``)."""

    name: str
    queries: list[tuple[str, list[list[str]]]] = field(default_factory=list)

    @property
    def needs(self) -> int:
        return sum(len(n) for _, n in self.queries)


@dataclass
class Catalog:
    name: str
    docs: list[SearchDoc]
    sets: dict[str, QuerySet]


def metatool(step: int = 1) -> Catalog:
    """MetaTool with its four sets: tune/held single (every ``step``-th row) and tune/held multi, less the rows of
    ``DOUBLED`` (found on every row, whatever ``step``)."""
    described: dict[str, str] = json.loads(corpus("metatool", "plugin_des.json").read_text(encoding="utf-8"))
    docs = [
        SearchDoc(
            server=name, package=_ident(name, "server"), tool=name, function=_ident(name), path="", description=desc
        )
        for name, desc in described.items()
    ]
    with corpus("metatool", "all_clean_data.csv").open(encoding="utf-8", newline="") as f:
        rows = [(row["Query"], row["Tool"]) for row in csv.DictReader(f)]
    multi = [
        (item["query"], list(item["tool"]))
        for item in json.loads(corpus("metatool", "multi_tool_query_golden.json").read_text(encoding="utf-8"))
    ]
    found = in_both(_metatool_sets(rows, multi))
    sets = _metatool_sets(rows[::step], multi)
    leave_out("MetaTool", sets, DOUBLED, "search_sets.DOUBLED", found)
    return Catalog("MetaTool", docs, sets)


def _metatool_sets(rows: Sequence[tuple[str, str]], multi: Sequence[tuple[str, list[str]]]) -> dict[str, QuerySet]:
    sets = {n: QuerySet(n) for n in ("tune single", "tune multi", "held single", "held multi")}
    for query, tool in rows:
        half = "held" if held_out_tool(tool) else "tune"
        sets[f"{half} single"].queries.append((query, [[f"{tool}.{tool}"]]))
    for query, tools in multi:
        halves = {held_out_tool(t) for t in tools}
        if len(halves) == 1:
            half = "held" if halves.pop() else "tune"
            sets[f"{half} multi"].queries.append((query, [[f"{t}.{t}"] for t in tools]))
    return sets


def text_key(query: str) -> str:
    """A query's text as the sets compare texts: spaces collapsed (one MetaTool row ends in a space)."""
    return " ".join(query.split())


def in_both(sets: dict[str, QuerySet]) -> set[str]:
    """The texts (``text_key``) of a catalog that are queries of a tuning set and of a held-out set."""
    tuning = {text_key(q) for name, qs in sets.items() if name.startswith("tune") for q, _ in qs.queries}
    return tuning & {text_key(q) for name, qs in sets.items() if name.startswith("held") for q, _ in qs.queries}


def leave_out(catalog: str, sets: dict[str, QuerySet], listed: Sequence[str], name: str, found: set[str]) -> None:
    """Leaves the rows whose text is in ``listed`` (the list called ``name``) out of every set of ``sets``,
    saying how many and why. Raises SystemExit unless ``found``, the texts the data asks in both halves (``in_both``),
    are exactly ``listed``: a text in both is measured on held-out data after being tuned on."""
    if found != set(listed):
        raise SystemExit(
            f"{catalog}'s texts in both the tuning and the held-out sets are not those listed ({name}): "
            f"{sorted(found - set(listed))} unlisted, {sorted(set(listed) - found)} listed but not in both"
        )
    dropped: dict[str, int] = {}
    for set_name, qs in sets.items():
        kept = [(q, needs) for q, needs in qs.queries if text_key(q) not in found]
        if len(kept) < len(qs.queries):
            dropped[set_name] = len(qs.queries) - len(kept)
        qs.queries = kept
    if listed:
        where = ", ".join(f"{n} in {set_name}" for set_name, n in dropped.items()) or "none is among the rows taken"
        print(
            f"{catalog}: {sum(dropped.values())} rows left out ({where}), their text a query of both the tuning and "
            f"the held-out sets ({name}: {len(found)})"
        )


def _tool_doc(server: str, tool: dict[str, Any], server_description: str) -> SearchDoc:
    """An MCP tool definition (``name``, ``description``, ``inputSchema``) as the index sees it."""
    return SearchDoc(
        server=server,
        package=_ident(server, "server"),
        tool=tool["name"],
        function=_ident(tool["name"]),
        path=f"servers/{_ident(server, 'server')}/{_ident(tool['name'])}.py",
        description=description_of(tool),
        params=params_of(tool),
        server_description=server_description,
    )


def livemcpbench_docs() -> list[SearchDoc]:
    """The 527 tools of the LiveMCPBench catalog as the index sees them."""
    servers = json.loads(corpus("livemcpbench", "tools.json").read_text(encoding="utf-8"))
    return [
        _tool_doc(server, tool, entry.get("description", ""))
        for entry in servers
        for server, listing in entry["tools"].items()
        for tool in listing["tools"]
    ]


def _tasks(label: str, source: Path, tasks: Sequence[dict[str, Any]], known: set[str]) -> QuerySet:
    qs = QuerySet(label)
    for task in tasks:
        query = task.get("query") or task["task"]
        unknown = [t for need in task["needs"] for t in need if t not in known]
        if unknown:
            raise SystemExit(f"{source}: {query!r} names unknown tools {unknown}")
        qs.queries.append((query, task["needs"]))
    return qs


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def repeats(query: str, needs: list[list[str]], tuning: Sequence[QuerySet]) -> bool:
    """Whether a held-out task asks what a tuning task asks: the same needs, in mostly the same words
    (``REPEAT_OVERLAP``). Such a task measures the tuning data again, so it is left out of the held-out sets."""
    mine = frozenset(map(frozenset, needs))
    words = _words(query)
    for qs in tuning:
        for other, other_needs in qs.queries:
            theirs = _words(other)
            if frozenset(map(frozenset, other_needs)) == mine and len(words & theirs) >= REPEAT_OVERLAP * len(
                words | theirs
            ):
                return True
    return False


def livemcpbench() -> Catalog:
    docs = livemcpbench_docs()
    known = {f"{d.server}.{d.tool}" for d in docs}
    data = json.loads(TASKS.read_text(encoding="utf-8"))
    users = json.loads(USER_TASKS.read_text(encoding="utf-8"))
    second = json.loads(PREFILTER_TASKS.read_text(encoding="utf-8"))["tasks"]
    sets = {
        "tune tasks": _tasks("tune tasks", TASKS, data["tuning"], known),
        "held tasks": _tasks("held tasks", TASKS, data["held_out"], known),
        "tune user tasks": _tasks("tune user tasks", USER_TASKS, users["tuning"], known),
        "held user tasks": _tasks("held user tasks", USER_TASKS, users["held_out"], known),
        PREFILTER_SET: _tasks(PREFILTER_SET, PREFILTER_TASKS, second, known),
    }
    tuning = [sets["tune tasks"], sets["tune user tasks"]]
    for label in ("held tasks", "held user tasks", PREFILTER_SET):
        sets[label].queries = [(q, needs) for q, needs in sets[label].queries if not repeats(q, needs, tuning)]
    leave_out("LiveMCPBench", sets, (), "none", in_both(sets))  # refuses a text in both halves: none is listed
    return Catalog("LiveMCPBench", docs, sets)


BFCL_PIP = "pip install --no-deps bfcl-eval==2026.3.23"
_BELONGS = re.compile(r"^(This tool belongs to .*?)\s*Tool description:\s*", re.S)
_CALLED = re.compile(r"\s*([A-Za-z_]\w*)\s*\(")


def bfcl_data() -> Path | None:
    """The ``data`` folder of the installed ``bfcl_eval`` package, or None."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    return data if (data / "multi_turn_func_doc").is_dir() else None


def bfcl() -> Catalog | None:
    """BFCL's multi-turn tasks, tuning and held-out halves (see the module docstring), or None when not installed."""
    data = bfcl_data()
    if data is None:
        return None
    docs: list[SearchDoc] = []
    servers_of: dict[str, list[str]] = {}
    for path in sorted((data / "multi_turn_func_doc").glob("*.json")):
        server = path.stem
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            tool = json.loads(line)
            belongs = _BELONGS.match(tool["description"])
            schema = {**tool.get("parameters", {}), "type": "object"}
            mcp = {"name": tool["name"], "description": tool["description"][belongs.end() if belongs else 0 :],
                   "inputSchema": schema}  # fmt: skip
            docs.append(_tool_doc(server, mcp, belongs.group(1) if belongs else ""))
            servers_of.setdefault(tool["name"], []).append(server)
    sets = {n: QuerySet(n) for n in ("tune turns", "held turns")}
    questions = (data / "BFCL_v4_multi_turn_base.json").read_text(encoding="utf-8").splitlines()
    answers = (data / "possible_answer" / "BFCL_v4_multi_turn_base.json").read_text(encoding="utf-8").splitlines()
    for q_line, a_line in zip(questions, answers, strict=True):
        question, answer = json.loads(q_line), json.loads(a_line)
        qs = sets["held turns" if held_out_tool(question["id"]) else "tune turns"]
        for messages, calls in zip(question["question"], answer["ground_truth"], strict=True):
            text = " ".join(m["content"] for m in messages if m["role"] == "user").strip()
            called = dict.fromkeys(m.group(1) for c in calls if (m := _CALLED.match(c)))
            if text and called:
                qs.queries.append((text, [[f"{s}.{name}" for s in servers_of[name]] for name in called]))
    leave_out("BFCL", sets, DOUBLED_BFCL, "search_sets.DOUBLED_BFCL", in_both(sets))
    return Catalog("BFCL", docs, sets)


def with_bfcl(catalogs: list[Catalog]) -> list[Catalog]:
    """``catalogs`` and BFCL's when ``bfcl-eval`` is installed (else it says so and leaves it out)."""
    extra = bfcl()
    if extra is None:
        print(f"BFCL multi-turn sets left out: bfcl-eval is not installed ({BFCL_PIP})")
        return catalogs
    return [*catalogs, extra]


def recall(rank: Callable[[str], Sequence[str]], qs: QuerySet) -> dict[str, float]:
    """Recall@k (the share of needs met in the first k) and MRR@10 over the needs."""
    hits = dict.fromkeys(KS, 0)
    rr = 0.0
    for query, needs in qs.queries:
        ranked = list(rank(query))
        for need in needs:
            positions = [ranked.index(t) for t in need if t in ranked]
            if not positions:
                continue
            first = min(positions)
            for k in KS:
                hits[k] += first < k
            rr += 1.0 / (first + 1) if first < 10 else 0.0
    n = max(1, qs.needs)
    return {**{f"R@{k}": hits[k] / n for k in KS}, "MRR": rr / n, "needs": qs.needs, "queries": len(qs.queries)}
