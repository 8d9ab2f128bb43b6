"""Replicate the "code execution with MCP" savings: the same tasks in three modes, tokens counted.

    python bench/agent_replication.py [--tasks drive_to_crm,leads] [--modes code,code+pinned,direct,...]
                                      [--count auto|api|approx]

Each (task, mode) is a scripted trajectory (``agent_tasks.py``) run end to end through the real
loop, the real sandbox and the real sample servers against the fake Messages API, then checked
(the CRM record really holds the transcript; the answer names the right leads). Every request the
loop sent and every reply it got is counted: with ``ANTHROPIC_API_KEY`` set, by the real
``count_tokens`` endpoint; otherwise by the local approximation in ``agent/tokens.py`` (4
characters per token, the same rules for every mode). Targets: ``code`` ≤ 1 % of ``direct`` on
the Drive → CRM task. ``+pinned`` variants are the same task for a user who keeps its tools pinned
(their signatures in the code-mode prompt; not deferred in tool-search mode).

Also measured: the session-start context (system prompt + tools array) of each mode for the
527-tool LiveMCPBench catalog (generated into a temporary tree from snapshots) and for the sample
servers. Target: ``code`` ≤ 2 % of ``direct`` for the 527 tools.

Writes bench/out/agent_replication.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

from _common import corpus, print_table, write_json
from agent_tasks import TASKS, Task, generate, prefilter_of, sample_config, split_variant

from agent import Agent
from agent.defaults import DEFAULT_MODEL, MODES
from agent.testing import FakeMessagesAPI
from agent.tokens import APPROXIMATION, content_tokens, request_tokens, system_tokens, tools_tokens
from sandbox.config import OWNER_ENV
from sandbox.host import Runtime
from tool_tree.config import Config, load_config

BENCH_OWNER = "tooltree-bench"
"""The sandboxes' owner label when ``$TOOLTREE_SANDBOX_OWNER`` is not set (`bench_owner`)."""


def bench_owner() -> str:
    """The owner label of the run's sandboxes: ``$TOOLTREE_SANDBOX_OWNER`` when set, as every other command takes it
    (runs on one engine then keep their sandboxes apart), else `BENCH_OWNER`."""
    return os.environ.get(OWNER_ENV) or BENCH_OWNER


class Counter(Protocol):
    method: str

    def request(self, body: dict[str, Any]) -> int: ...

    def output(self, body: dict[str, Any], response: dict[str, Any]) -> int: ...


class ApproxCounter:
    method = APPROXIMATION

    def request(self, body: dict[str, Any]) -> int:
        return request_tokens(body)

    def output(self, body: dict[str, Any], response: dict[str, Any]) -> int:
        return content_tokens(response["content"])


class ApiCounter:
    """The real ``count_tokens`` endpoint; a reply counts as what it adds to the conversation."""

    def __init__(self, model: str) -> None:
        import anthropic

        self.client = anthropic.Anthropic(max_retries=8)
        self.model = model
        self.method = f"Anthropic count_tokens endpoint ({model})"

    def request(self, body: dict[str, Any]) -> int:
        extra = {k: body[k] for k in ("system", "tools") if body.get(k)}
        counted = self.client.messages.count_tokens(model=self.model, messages=body["messages"], **extra)
        return int(counted.input_tokens)

    def output(self, body: dict[str, Any], response: dict[str, Any]) -> int:
        turn = {"role": "assistant", "content": response["content"]}
        return self.request({**body, "messages": [*body["messages"], turn]}) - self.request(body)


def run_one(task: Task, variant: str, config: Config, tree: Path, counter: Counter) -> dict[str, Any]:
    """One scripted run of a variant (a mode, maybe ``+pinned``), checked and counted."""
    from sandbox import SandboxConfig

    mode, _ = split_variant(variant)
    settings = SandboxConfig(owner=bench_owner(), timeout=60.0)
    with FakeMessagesAPI(task.trajectories[variant]) as api, Runtime(config, tree, sandbox_config=settings) as rt:
        agent = Agent(
            config,
            tree=tree,
            mode=mode,
            pinned=task.pins(variant),
            client=api.client(),
            runtime=rt,
            max_tokens=64_000,
            prefilter=prefilter_of(variant),
        )
        result = agent.run(task.prompt)
        problem = task.check(rt, result.answer) if result.completed else f"stopped: {result.stop_reason}"
    sent = [counter.request(r) for r in api.requests]
    received = [counter.output(r, a) for r, a in zip(api.requests, api.responses, strict=True)]
    s = result.summary
    p = s.prefilter
    return {
        "task": task.name,
        "mode": variant,
        "ok": problem is None,
        "problem": problem,
        "turns": s.turns,
        "sent": sum(sent),
        "received": sum(received),
        "total": sum(sent) + sum(received),
        "peak_context": max(sent),
        "per_request": sent,
        # The fake API's usage (the same approximation, with its simulated prompt cache) weighed by price, as
        # `tooltree agent --compare` weighs it (`TokenUsage.cost_units`): to compare what the runs would cost.
        "cost_units": round(s.cost_units),
        "cache_read": s.usage.cache_read_input_tokens,
        "cache_write": s.usage.cache_creation_input_tokens,
        "tool_calls": s.tool_calls,
        "script_tool_calls": s.script_tool_calls,
        "sandbox_bytes": s.sandbox_bytes,
        "model_bytes": s.model_bytes,
        "prefilter": None if p is None else {"admitted": p.admitted, "catalog": p.catalog, "seconds": p.seconds},
        "cache_invalidations": s.cache_invalidations,
    }


def session_start(tree: Path, counter: Counter) -> dict[str, dict[str, Any]]:
    """System prompt + tools of each mode's first request (a one-word task), built offline."""
    out: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        request = Agent(Config(servers=()), tree=tree, mode=mode).first_request(".")
        tools = request.get("tools", [])  # none offered: no tools key
        out[mode] = {
            "context_tokens": counter.request(request),
            "system_tokens": system_tokens(request["system"]),
            "tools_tokens": tools_tokens(tools),
            "tools": len(tools),
            "deferred": sum(1 for t in tools if t.get("defer_loading")),
            "request_bytes": len(json.dumps({"system": request["system"], "tools": tools}).encode("utf-8")),
        }
    return out


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f} %" if whole else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task names")
    parser.add_argument(
        "--modes", help="comma-separated modes or variants (e.g. code+pinned); default: every variant of each task"
    )
    parser.add_argument("--count", choices=("auto", "api", "approx"), default="auto")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the model count_tokens counts for")
    args = parser.parse_args()
    use_api = args.count == "api" or (args.count == "auto" and bool(os.environ.get("ANTHROPIC_API_KEY")))
    counter: Counter = ApiCounter(args.model) if use_api else ApproxCounter()
    chosen = [m for m in (args.modes or "").split(",") if m]
    corpus("livemcpbench", "tools.json")  # the 527-tool catalog (not in this repository): missing, say so now
    print(f"tokens counted by: {counter.method}")
    with tempfile.TemporaryDirectory(prefix="tooltree-replication-") as tmp:
        work = Path(tmp)
        config_path = sample_config(work)
        tree = generate(config_path, work / "tree")
        config = load_config(config_path)
        tasks = [TASKS[t] for t in args.tasks.split(",") if t]
        runs = [run_one(t, v, config, tree, counter) for t in tasks for v in (chosen or list(t.trajectories))]
        from generate_tree import livemcpbench_snapshots

        n_tools = livemcpbench_snapshots(work / "snap527")
        # Only the session-start context is measured on this tree: its search index needs no embeddings.
        tree527 = generate(None, work / "tree527", snapshots=work / "snap527", embeddings="off")
        start527, start_sample = session_start(tree527, counter), session_start(tree, counter)

    rows = []
    for r in runs:
        direct = next((d for d in runs if d["task"] == r["task"] and d["mode"] == "direct"), None)
        rows.append([
            r["task"], r["mode"], "ok" if r["ok"] else f"FAIL: {r['problem']}", r["turns"], f"{r['sent']:,}",
            f"{r['received']:,}", f"{r['total']:,}", f"{r['peak_context']:,}",
            pct(r["total"], direct["total"]) if direct else "-", f"{r['cost_units']:,}",
            pct(r["cost_units"], direct["cost_units"]) if direct else "-",
            f"{r['sandbox_bytes']:,}", f"{r['model_bytes']:,}",
        ])  # fmt: skip
    header = ["task", "mode", "check", "turns", "sent", "received", "total", "peak ctx", "of direct", "cost units",
              "of direct", "B kept", "B to model"]  # fmt: skip
    print_table("Replication: tokens per task and mode", header, rows)

    for title, start in ((f"{n_tools}-tool LiveMCPBench catalog", start527), ("sample servers", start_sample)):
        srows = [
            [mode, v["tools"], v["deferred"], f"{v['system_tokens']:,}", f"{v['tools_tokens']:,}",
             f"{v['context_tokens']:,}", pct(v["context_tokens"], start["direct"]["context_tokens"]),
             f"{v['request_bytes']:,}"]
            for mode, v in start.items()
        ]  # fmt: skip
        print_table(
            f"Session start, {title}: system prompt + tools (target: code ≤ 2 % of direct)",
            ["mode", "tools", "deferred", "system tok", "tools tok", "context tok", "of direct", "request B"],
            srows,
        )
    write_json(
        "agent_replication.json",
        {
            "token_count": counter.method,
            "runs": runs,
            "session_start": {"livemcpbench": {"tools": n_tools, **start527}, "sample_servers": start_sample},
        },
    )
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
