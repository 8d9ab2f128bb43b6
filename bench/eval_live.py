"""`make eval`: the replication tasks against the real Messages API, in every mode.

    python bench/eval_live.py [--tasks drive_to_crm,leads] [--modes code,code+pinned,direct,tool-search]
                              [--model claude-sonnet-5-5] [--max-turns 20] [--max-tokens 64000]

Needs ``ANTHROPIC_API_KEY`` (honours ``ANTHROPIC_BASE_URL``) and a Docker engine for ``code``
mode. Each (task, mode) runs with fresh sample servers; the outcome is checked (the CRM record
holds the transcript; the answer names the right leads) and the tokens are the API's own
``usage`` numbers. Prints the table and writes bench/out/eval_live.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _common import OUT, print_table
from agent_tasks import TASKS, Task, generate, prefilter_of, sample_config, split_variant

from agent import Agent, ModelAPIError
from agent.defaults import DEFAULT_MODEL, MODES
from sandbox.host import Runtime
from tool_tree.config import Config, load_config
from tooltree_cli.agent_view import live_view

if TYPE_CHECKING:
    import anthropic

EVAL_OWNER = "tooltree-eval"


def run_one(
    client: anthropic.Anthropic,
    task: Task,
    mode: str,
    config: Config,
    tree: Path,
    *,
    model: str = DEFAULT_MODEL,
    max_turns: int = 20,
    max_tokens: int = 64_000,
    transcript: Path | None = None,
    verbose: bool = False,
) -> dict[str, Any]:
    """One run of ``task`` in ``mode`` (maybe ``+pinned``) with fresh servers, checked; the API's usage as reported."""
    from sandbox import SandboxConfig

    base_mode, _ = split_variant(mode)

    settings = SandboxConfig(owner=EVAL_OWNER, timeout=60.0)
    with Runtime(config, tree, sandbox_config=settings) as runtime:
        agent = Agent(
            config, tree=tree, mode=base_mode, pinned=task.pins(mode), model=model, client=client, runtime=runtime,
            max_turns=max_turns, prefilter=prefilter_of(mode),
            max_tokens=max_tokens, transcript=transcript, on_event=live_view if verbose else None,
        )  # fmt: skip
        problem: str | None
        try:
            result = agent.run(task.prompt)
        except ModelAPIError as e:
            if e.result is None:
                raise
            result, problem = e.result, str(e)
        else:
            problem = task.check(runtime, result.answer) if result.completed else f"stopped: {result.stop_reason}"
    s = result.summary
    return {
        "task": task.name,
        "mode": mode,
        "model": model,
        "ok": problem is None,
        "problem": problem,
        "answer": result.answer,
        **{k: v for k, v in s.to_json().items() if k not in ("answer", "mode", "model")},
    }


def table(runs: list[dict[str, Any]]) -> None:
    rows = []
    for r in runs:
        u = r["usage"]
        direct = next((d for d in runs if d["task"] == r["task"] and d["mode"] == "direct"), None)
        # By cost units (`agent.summary.PRICE_RATIOS`), as `tooltree agent --compare`: a cache read is not an input.
        share = f"{100 * r['cost_units'] / direct['cost_units']:.2f} %" if direct and direct["cost_units"] else "-"
        rows.append([
            r["task"], r["mode"], "ok" if r["ok"] else f"FAIL: {r['problem']}", r["turns"], f"{u['input_tokens']:,}",
            f"{u['cache_creation_input_tokens']:,}", f"{u['cache_read_input_tokens']:,}", f"{u['output_tokens']:,}",
            f"{u['total']:,}", f"{r['cost_units']:,.0f}", share,
        ])  # fmt: skip
    header = ["task", "mode", "check", "turns", "input", "cache write", "cache read", "output", "total", "cost units",
              "of direct"]  # fmt: skip
    print_table("Live evaluation: the API's usage per task and mode", header, rows)


def main(argv: list[str] | None = None, *, client: anthropic.Anthropic | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task names")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes or variants (code+pinned)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--max-turns", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64_000)
    parser.add_argument("--transcripts", metavar="DIR", help="write each run's JSONL transcript here")
    parser.add_argument("--quiet", action="store_true", help="no live view")
    parser.add_argument("--out", default=str(OUT / "eval_live.json"), help="where to write the JSON results")
    parser.add_argument("--tree", help="an existing tree of the sample servers (default: generate one)")
    parser.add_argument("--config", help="the config of --tree")
    args = parser.parse_args(argv)
    if bool(args.tree) != bool(args.config):
        parser.error("--tree and --config go together")
    if client is None:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            print("eval: ANTHROPIC_API_KEY is not set; `make eval` runs against the real API", file=sys.stderr)
            return 2
        import anthropic

        client = anthropic.Anthropic(max_retries=6)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tooltree-eval-") as tmp:
        if args.tree:
            config_path, tree = Path(args.config), Path(args.tree)
        else:
            config_path = sample_config(Path(tmp))
            tree = generate(config_path, Path(tmp) / "tree")
        config = load_config(config_path)
        options: dict[str, Any] = {"model": args.model, "max_turns": args.max_turns, "max_tokens": args.max_tokens}
        for name in [t for t in args.tasks.split(",") if t]:
            for mode in [m for m in args.modes.split(",") if m]:
                if not args.quiet:
                    print(f"\n== {name} · {mode}", file=sys.stderr)
                transcript = Path(args.transcripts) / f"{name}-{mode}.jsonl" if args.transcripts else None
                run = run_one(
                    client, TASKS[name], mode, config, tree, transcript=transcript, verbose=not args.quiet, **options
                )
                runs.append(run)
    table(runs)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "runs": runs}, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
