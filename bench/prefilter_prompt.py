"""Size of the code-mode system prompt with the ``local`` pre-filter, on the 527-tool catalog.

    TOOLTREE_CORPORA=/path/to/corpora .venv/bin/python bench/prefilter_prompt.py [--tree DIR]

For each task of ``prefilter_tasks_527.json`` (the pre-filter recall benchmark's: 37 of its 40, those that repeat a
tuning task of the tool search left out, ``_prefilter_data.REPEATED_TASKS``), the first request's system prompt of
``code`` mode without and with ``--prefilter local`` (embeddings on, the default siblings ``named``), in tokens of the
local approximation (``agent/tokens.py``).
Also, for comparison, what the inlined part would be if every admitted tool had its full
signature (the form before the budget): ``render_hits(..., "summary")`` over the admitted tools.
Reported: median and largest over the tasks, how many tools are shown as signatures, as one-line
entries and by name only, and for each of the tasks' needs how its best tool is shown.

``--tree`` reuses a tree generated before (with embeddings); otherwise one is generated into a
temporary folder (~10 s). Writes bench/out/prefilter_prompt.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import print_table, write_json
from _prefilter_data import prefilter_tasks
from agent_tasks import generate
from generate_tree import livemcpbench_snapshots

from agent import Agent
from agent.tokens import system_tokens, text_tokens
from agent.toolsets.code import stub_hit
from agent.toolsets.code_filtered import PrefilteredCodeToolset
from tool_tree.config import Config
from tool_tree.search import render_hits

ORDER = ("signature", "line", "name")


def all_signatures(toolset: PrefilteredCodeToolset) -> str:
    """Every admitted tool's signature, as the prompt carried them before the budget."""
    entries = {f"{t.server}.{t.tool}": t for t in toolset.manifest.tools}
    hits = [stub_hit(entries[k]) for k in toolset.prefilter.decided]
    return render_hits(toolset.tree, hits, "summary").strip() if hits else ""


def measure(tree: Path) -> list[dict[str, Any]]:
    tasks = prefilter_tasks()
    plain = Agent(Config(servers=()), tree=tree, mode="code")
    filtered = Agent(Config(servers=()), tree=tree, mode="code", prefilter="local")
    toolset = filtered.toolset
    assert isinstance(toolset, PrefilteredCodeToolset)
    runs = []
    for task in tasks:
        base = system_tokens(plain.first_request(task["task"])["system"])
        system = system_tokens(filtered.first_request(task["task"])["system"])
        shown = toolset.shown()
        kinds = list(shown.values())
        # A need is met by its best-shown tool: a signature beats a line beats a name.
        needs = [min((ORDER.index(shown[k]) for k in need if k in shown), default=len(ORDER)) for need in task["needs"]]
        runs.append({
            "task": task["task"], "code": base, "code+prefilter": system, "added": system - base,
            "admitted": len(toolset.prefilter.decided), "signatures": kinds.count("signature"),
            "lines": kinds.count("line"), "names": kinds.count("name"),
            "all_signatures_tokens": text_tokens(all_signatures(toolset)),
            "needs": len(needs), "needs_by": {kind: needs.count(i) for i, kind in enumerate([*ORDER, "absent"])},
        })  # fmt: skip
    return runs


def stats(values: list[int]) -> str:
    return f"{statistics.median(values):,.0f} / {max(values):,}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, help="a 527-tool tree generated with embeddings (default: generate one)")
    args = parser.parse_args()
    if args.tree is not None:
        runs = measure(args.tree)
    else:
        with tempfile.TemporaryDirectory(prefix="tooltree-prefilter-prompt-") as tmp:
            livemcpbench_snapshots(Path(tmp) / "snap527")
            runs = measure(generate(None, Path(tmp) / "tree527", snapshots=Path(tmp) / "snap527", embeddings="on"))
    rows = [
        ["code: system prompt", stats([r["code"] for r in runs])],
        ["code+prefilter: system prompt", stats([r["code+prefilter"] for r in runs])],
        ["code+prefilter: added to code's", stats([r["added"] for r in runs])],
        ["every admitted tool's signature (before the budget)", stats([r["all_signatures_tokens"] for r in runs])],
        ["tools admitted", stats([r["admitted"] for r in runs])],
        ["shown as signatures", stats([r["signatures"] for r in runs])],
        ["shown as one line", stats([r["lines"] for r in runs])],
        ["shown by name only", stats([r["names"] for r in runs])],
    ]  # fmt: skip
    print_table(
        f"527-tool catalog, {len(runs)} tasks, first request (tokens: local approximation)", ["", "median / max"], rows
    )
    total = sum(r["needs"] for r in runs)
    by = {kind: sum(r["needs_by"][kind] for r in runs) for kind in [*ORDER, "absent"]}
    print(f"\nneeds ({total}) whose best tool is shown as: " + ", ".join(f"{k} {v}" for k, v in by.items()))
    write_json("prefilter_prompt.json", {"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
