"""The catalog a pre-filter decides about, and each tool's siblings.

Siblings: a tool's error or description often sends the model to another tool of the same
server ("use get_record with an id from the results"), so admitting a tool also admits the
tools of its server that it names or that name it (``named``), or the whole server (``server``).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, get_args

from agent.prefilter.base import CatalogTool
from tool_tree.tree import Manifest

Siblings = Literal["named", "server"]
SIBLINGS: tuple[str, ...] = get_args(Siblings)
MIN_NAME = 4
"""Tool names shorter than this (``get``, ``run``) are too common as words to count as a mention."""


def tool_keys(tools: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """``(server, tool) → key``: ``<server>.<tool>``, unless another of ``tools`` joins to the same text
    (server ``a`` offering ``b.c``, server ``a.b`` offering ``c``): then each of them is the JSON array
    ``["<server>", "<tool>"]``, which no other pair gives. Distinct pairs always get distinct keys, so a
    server cannot name a tool to hide another's (or take its place in a state file)."""
    pairs = list(dict.fromkeys(tools))
    keys = {pair: f"{pair[0]}.{pair[1]}" for pair in pairs}
    while True:  # a dotted key equal to an array key is switched too; each pass only switches more
        counts = Counter(keys.values())
        shared = [pair for pair, key in keys.items() if counts[key] > 1 and key != _array(pair)]
        if not shared:
            return keys
        for pair in shared:
            keys[pair] = _array(pair)


def _array(pair: tuple[str, str]) -> str:
    return json.dumps(list(pair), ensure_ascii=False)


def load_catalog(tree: Path, manifest: Manifest) -> list[CatalogTool]:
    """Every tool of the tree, in native-name order, with its description and its key (`tool_keys`).

    Raises:
        AgentSetupError: a snapshot is missing or malformed.
    """
    from agent.toolsets.direct import native_tools

    names, definitions = native_tools(tree, manifest)
    keys = tool_keys((e.server, e.tool) for e in names.values())
    out: list[CatalogTool] = []
    for definition in definitions:
        entry = names[definition["name"]]
        description = str(definition.get("description", ""))
        key = keys[(entry.server, entry.tool)]
        out.append(CatalogTool(key, definition["name"], entry.server, entry.tool, description))
    return out


_WORD = re.compile(r"[\w-]+")
"""A run of the characters a mention may not be next to: a name made of them is mentioned where it is such a run."""


def _mentioned(tools: Sequence[CatalogTool]) -> dict[str, set[str]]:
    """``key → keys of the other tools of ``tools`` its description names`` (by ``tool`` or ``name``, at least
    `MIN_NAME` characters, not inside a longer run of word characters or hyphens).

    Each description is cut into its runs of word characters and hyphens once, and looked up in the names. A name
    holding another character (``v2.get``) is searched for with its pattern, compiled once, and only in the
    descriptions that hold one of its runs (``get``) as a whole run: every run of a name is a whole run of the text
    wherever the name is mentioned. Before, every pair was searched with a pattern compiled anew (a server of 300
    tools took 6 s to start a run, one of 1,000 a minute); then every description was still searched with every such
    pattern (a server of 1,000 tools named ``group.tool`` took 8.5 s, one of 2,000 37 s).
    """
    by_name: dict[str, list[CatalogTool]] = defaultdict(list)
    others: list[tuple[str, CatalogTool]] = []
    for u in tools:
        for name in {u.tool, u.name}:
            if len(name) < MIN_NAME:
                continue
            if _WORD.fullmatch(name):
                by_name[name].append(u)
            else:
                others.append((name, u))
    # Each name of other characters is keyed by the run that fewest such names share, the longest of those: of
    # `repo.list` and `issue.list`, `repo` and `issue`, not `list`, which every description may hold.
    shared = Counter(run for name, _ in others for run in set(_WORD.findall(name)))
    by_run: dict[str, list[tuple[re.Pattern[str], CatalogTool]]] = defaultdict(list)
    no_run: list[tuple[str, re.Pattern[str], CatalogTool]] = []
    for name, u in others:
        pattern = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
        runs = _WORD.findall(name)
        if runs:
            by_run[min(runs, key=lambda run: (shared[run], -len(run)))].append((pattern, u))
        else:  # no word character at all (an emoji's name): only where the text holds it
            no_run.append((name, pattern, u))
    out: dict[str, set[str]] = {}
    for t in tools:
        words = set(_WORD.findall(t.description))
        named = {u.key for word in words for u in by_name.get(word, ())}
        for pattern, u in (found for word in words for found in by_run.get(word, ())):
            if u.key not in named and pattern.search(t.description):
                named.add(u.key)
        for name, pattern, u in no_run:
            if u.key not in named and name in t.description and pattern.search(t.description):
                named.add(u.key)
        named.discard(t.key)
        out[t.key] = named
    return out


def sibling_map(catalog: Sequence[CatalogTool], mode: Siblings = "named") -> dict[str, Sequence[str]]:
    """``key → keys of its siblings`` (same server, in catalog order): in mode ``named`` a list of its own, without
    the tool itself; in mode ``server`` every key of the server, the tool's own among them, in one tuple all the
    server's tools share. Before, a list per tool of all the others: a server of 8,000 tools held 64 million entries
    (550 MB, 7 s to build), one of 20,000 (the most a server keeps) about 3 GB."""
    by_server: dict[str, list[CatalogTool]] = defaultdict(list)
    for tool in catalog:
        by_server[tool.server].append(tool)
    out: dict[str, Sequence[str]] = {}
    for tools in by_server.values():
        if mode == "server":
            whole = tuple(t.key for t in tools)
            out.update(dict.fromkeys(whole, whole))
            continue
        # Both ways at once, each list then put in catalog order: before, each tool went through the whole server
        # to find who named it (a server of 4,000 tools: 6.5 s before a run's first request).
        place = {t.key: i for i, t in enumerate(tools)}
        linked: dict[str, set[str]] = {t.key: set() for t in tools}
        for key, named in _mentioned(tools).items():
            for other in named:
                linked[key].add(other)
                linked[other].add(key)
        for t in tools:
            out[t.key] = sorted(linked[t.key], key=place.__getitem__)
    return out
