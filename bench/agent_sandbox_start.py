"""What starting a code-mode run's sandbox before its first request costs, against starting it at the first
``execute_python`` (what `Agent.run` did before).

    python bench/agent_sandbox_start.py [--runs 9]

The bundled sample servers (``examples/tooltree.yaml``), their tree generated once; the project's fake Messages API
(`agent.testing.FakeMessagesAPI`) replies at once. Two runs: one that browses and scripts (``list_files``,
``read_file``, ``execute_python``), one that browses only. Each ``--runs`` times, eager and lazy alternating (lazy:
`agent.loop._start_sandbox` replaced by nothing, so the sandbox starts at its first use). Measured: the time from
``run()`` to the first request the API receives, and the whole run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import ROOT, positive_int, print_table, summary, write_json

EXAMPLES = ROOT / "examples"


def setup(folder: Path) -> tuple[Any, Path]:
    """The sample servers' config, and their tree generated into ``folder``."""
    from tool_tree.config import load_config
    from tooltree_cli.main import main as cli

    config = EXAMPLES / "tooltree.yaml"
    tree = folder / "tree"
    assert cli(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return load_config(config), tree


def one(config: Any, tree: Path, *, scripts: bool) -> tuple[float, float]:
    """Seconds to the first request, and of the whole run."""
    from agent import Agent
    from agent.testing import FakeMessagesAPI, reply, tool_use
    from sandbox import SandboxConfig

    stamps: list[float] = []

    def stamped(answer: Any) -> Callable[[Any], Any]:
        def respond(body: Any) -> Any:
            stamps.append(time.perf_counter())
            return answer

        return respond

    steps = [tool_use("list_files", {"path": "servers"}), tool_use("read_file", {"path": "servers/crm/__init__.py"})]
    if scripts:
        steps.append(
            tool_use("execute_python", {"code": "from servers.crm import list_leads\nprint(len(list_leads().text))"})
        )
    script = [stamped(reply(step)) for step in steps] + [stamped(reply("Done."))]
    with FakeMessagesAPI(script) as api:
        agent = Agent(
            config, tree=tree, mode="code", client=api.client(), sandbox_config=SandboxConfig.from_config(config)
        )
        start = time.perf_counter()
        result = agent.run("the top leads")
        end = time.perf_counter()
    assert result.completed, result
    return stamps[0] - start, end - start


def main() -> None:
    import agent.loop as loop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=9)
    args = parser.parse_args()
    eager = loop._start_sandbox
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config, tree = setup(Path(tmp))
        one(config, tree, scripts=True)  # warm up: the image's layers read, the servers' first start paid
        for _ in range(args.runs):
            for when in ("lazy", "eager"):
                loop._start_sandbox = eager if when == "eager" else (lambda runtime: None)  # type: ignore[assignment]
                for scripts in (True, False):
                    kind = "scripts" if scripts else "never scripts"
                    times.setdefault((kind, when), []).append(one(config, tree, scripts=scripts))
        loop._start_sandbox = eager
    data: dict[str, Any] = {"runs": args.runs, "seconds": {}}
    rows = []
    for (kind, when), values in sorted(times.items()):
        first, whole = summary([v[0] for v in values]), summary([v[1] for v in values])
        data["seconds"][f"{kind}, {when}"] = {"first_request": first, "run": whole}
        rows.append([kind, when, f"{first['median']:.3f}", f"{whole['median']:.3f}", f"{whole['min']:.3f}"])
    print_table(
        f"code-mode runs, seconds (median of {args.runs}, eager and lazy alternating)",
        ["run", "sandbox started", "first request after", "whole run", "whole run, min"],
        rows,
    )
    write_json("agent_sandbox_start.json", data)


if __name__ == "__main__":
    main()
