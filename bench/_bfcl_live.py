"""BFCL's live categories as a tool-search set: real users' functions and requests (``search_bfcl_live``).

The Berkeley Function Calling Leaderboard's "live" data (in the ``bfcl-eval`` wheel, Apache-2.0) holds
functions and requests that users contributed: each entry offers a list of functions and one
request, and its possible answer names the functions to call.

- **Catalog**: every function offered by an entry of ``live_multiple``, ``live_parallel_multiple``,
  ``live_parallel`` and ``live_simple``, one tool per distinct (name, description): the same name often
  comes with several descriptions (22 ``get_current_weather``), and each is kept. Its parameters become
  an MCP ``inputSchema`` (BFCL's ``dict`` / ``float`` / ``tuple`` / ``any`` as ``object`` / ``number`` /
  ``array`` / no type). ``by_name=True`` keeps only the first description of each name instead (files
  in the order above): a catalog where, as in a real one, a name means one tool.
- **Servers**: a dotted name's prefix before the first ``.`` (``uber.ride`` → ``uber``); a name without a
  dot goes to the entry group it first appears in (the middle number of an id such as
  ``live_multiple_12-4-0``: entries that offer the same functions), named ``g`` and a running number so
  that no invented word enters the server field. Several descriptions of one dotted name share one
  server and one key; each keeps its own path.
- **Queries**: the entries of the three multi-function categories (``live_multiple``,
  ``live_parallel_multiple``, ``live_parallel``), the text of their user turns joined (every entry has
  one user turn, some a system turn too, which is left out). ``live_simple`` offers one function per
  request, so its requests are not used; its functions are in the catalog.
- **Needs**: the distinct function names of the possible answer; a need is met by any tool of that
  name (any of its descriptions).

Split by the SHA-256 of the query text (held out when its first byte is odd), like the user tasks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from search_sets import Catalog, QuerySet, bfcl_data, held_out_tool

from tool_tree.search import SearchDoc
from tool_tree.search._docs import description_of, params_of

QUERY_CATEGORIES = ("live_multiple", "live_parallel_multiple", "live_parallel")
CATEGORIES = (*QUERY_CATEGORIES, "live_simple")
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def _ident(name: str) -> str:
    return re.sub(r"\W+", "_", name).strip("_") or "tool"


def mcp_schema(schema: Any) -> Any:
    """BFCL's parameter schema as JSON Schema (its Python type names as JSON Schema's)."""
    if isinstance(schema, list):
        return [mcp_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: mcp_schema(v) for k, v in schema.items() if k != "type"}
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "any":
        out["type"] = _TYPES.get(kind, kind)
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def entries(data: Path) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(category, entry, possible answer) of every live entry, categories in ``CATEGORIES`` order."""
    for category in CATEGORIES:
        questions = _lines(data / f"BFCL_v4_{category}.json")
        answers = _lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
        for question, answer in zip(questions, answers, strict=True):
            if question["id"] != answer["id"]:
                raise SystemExit(f"{category}: question {question['id']} paired with answer {answer['id']}")
            yield category, question, answer


@dataclass
class LiveSet:
    catalog: Catalog
    servers: int
    category_of: dict[str, str] = field(default_factory=dict)
    """Each query text's category."""
    one_need_queries: int = 0


def live(*, by_name: bool = False) -> LiveSet | None:
    """The live catalog and its tuning and held-out queries (see the module docstring), or None when
    ``bfcl-eval`` is not installed."""
    data = bfcl_data()
    if data is None:
        return None
    items = list(entries(data))
    groups: dict[tuple[str, str], str] = {}
    docs: list[SearchDoc] = []
    seen: set[tuple[str, str]] = set()
    keys_of: dict[str, list[str]] = {}
    variants: dict[str, int] = {}
    for category, question, _ in items:
        group = (category, question["id"].rsplit("_", 1)[1].split("-")[1])
        for function in question["function"]:
            name, description = function["name"], function["description"]
            if (name, description) in seen or (by_name and name in keys_of):
                continue
            seen.add((name, description))
            server = name.split(".", 1)[0] if "." in name else groups.setdefault(group, f"g{len(groups):03d}")
            key = f"{server}.{name}"
            variants[key] = variants.get(key, 0) + 1
            tool = {"name": name, "description": description,
                    "inputSchema": {**mcp_schema(function.get("parameters", {})), "type": "object"}}  # fmt: skip
            docs.append(
                SearchDoc(
                    server=server,
                    package=_ident(server),
                    tool=name,
                    function=_ident(name),
                    path=f"servers/{_ident(server)}/{_ident(name)}_{variants[key]}.py",
                    description=description_of(tool),
                    params=params_of(tool),
                )
            )
            if key not in keys_of.setdefault(name, []):
                keys_of[name].append(key)
    sets = {n: QuerySet(n) for n in ("tune queries", "held queries")}
    out = LiveSet(Catalog("BFCL live, one tool per name" if by_name else "BFCL live", docs, sets), 0)
    out.servers = len({d.server for d in docs})
    for category, question, answer in items:
        if category not in QUERY_CATEGORIES:
            continue
        text = " ".join(m["content"] for turn in question["question"] for m in turn if m["role"] == "user").strip()
        called = dict.fromkeys(name for call in answer["ground_truth"] for name in call)
        if not text or not called:
            continue
        sets["held queries" if held_out_tool(text) else "tune queries"].queries.append(
            (text, [sorted(keys_of[name]) for name in called])
        )
        out.category_of[text] = category
        out.one_need_queries += len(called) == 1
    return out
