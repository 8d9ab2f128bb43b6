"""How `tooltree agent` runs the agents it made, one mode after another, and what it exits with.

Each mode's sandbox is checked before any mode runs; each run's end is said (its summary line, or its failure), then
the answer, the summary or the comparison is printed, and the exit status follows from how the runs ended
(`EXIT_OK` .. `EXIT_SANDBOX`). A run stopped before its first request (Ctrl-C, a sandbox that cannot start) is one
with no turns and no tokens (`_no_request`); Ctrl-C prints what ran before the interrupt goes on (`_print_stopped`).
The options, their checks and the making of the agents are `tooltree_cli.agent_cmd`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.agent_live import ScriptNotes
from tooltree_cli.agent_view import Failure, print_run_end, print_runs
from tooltree_cli.output import EXIT_NOT_PRINTED, error, not_printed, terminal_text

if TYPE_CHECKING:
    from agent import Agent, RunResult

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_API, EXIT_SANDBOX = 0, 1, 2, 3, 4


def _run_all(agents: list[Agent], task: str, args: argparse.Namespace) -> int:
    """Run ``task`` with each agent in turn; print the answer, the summary or the comparison.

    Under ``--compare`` a mode whose request failed (`ModelAPIError`) is a row of the table and the other modes
    still run; the exit status is then `EXIT_API`. A mode whose sandbox or servers failed is a row too (its stop
    reason ``sandbox_error``, the tokens it spent before: `agent.errors.failed_run`; before, it was left out and its
    tokens with it), the others still run, and the exit status is `EXIT_SANDBOX`. A mode that runs scripts has its
    engine and image checked before any mode runs (`_sandbox_problem`), and its sandbox started before its first
    request (`Agent.run`: a limit it cannot start under costs no request). Ctrl-C prints what ran (the interrupted run's
    summary, its stop reason ``interrupted``) before the interrupt goes on (`tooltree_cli.main`: ``tooltree:
    interrupted``, 130); a run it stopped before its first request (its sandbox being checked, its client or its
    pre-filter's state being set up) is one with no turns and no tokens. Before, that stop printed nothing: under
    ``--json``, no JSON to read.
    """
    from agent import AgentSetupError, ModelAPIError
    from agent.errors import failed_run, interrupted_result
    from sandbox.errors import SandboxError
    from tool_tree.pool import PoolError

    several = len(agents) > 1
    runs: list[tuple[RunResult, Failure | None]] = []
    current: Agent | None = None  # the agent whose sandbox is being checked, or whose run is under way
    try:
        unstartable: dict[str, Exception] = {}
        for current in agents:
            if (problem := _sandbox_problem(current)) is not None:
                unstartable[current.mode] = problem
        for agent in agents:
            current = agent
            if several and not args.quiet:
                print(f"== {agent.mode}", file=sys.stderr, flush=True)
            failure = None
            try:
                if (problem := unstartable.get(agent.mode)) is not None:
                    raise problem
                with ScriptNotes(agent, quiet=args.quiet):  # on a terminal, what a running script does
                    result = agent.run(task)
            except AgentSetupError as e:  # the transcript cannot be opened, or another run writes it: nothing ran
                error(str(e))
                return EXIT_USAGE
            except ModelAPIError as e:
                error(terminal_text(f"{agent.mode}: {e}" if several else str(e)))
                if e.advice:
                    print(f"tooltree: what to do: {terminal_text(e.advice)}", file=sys.stderr)
                if e.result is None:  # not from Agent.run, whose error always holds the run so far
                    return EXIT_API
                result, failure = e.result, Failure.of_api(e)
            except (SandboxError, PoolError) as e:
                failure = Failure("sandbox", f"the sandbox failed: {e}")
                error(terminal_text(f"{agent.mode}: {failure.message}" if several else failure.message))
                written = agent.transcript if agent.mode not in unstartable else None  # Agent.run started and wrote it
                so_far = failed_run(e, transcript=agent.transcript)
                result = so_far or _no_request(agent.mode, agent.model, "sandbox_error", written)
            runs.append((result, failure))
            current = None
            print_run_end(result, quiet=args.quiet, max_tokens=agent.max_tokens, token_budget=agent.token_budget,
                          several=several)  # fmt: skip
    except KeyboardInterrupt as e:  # what ran, then the interrupt goes on (`tooltree: interrupted`, 130)
        stopped = interrupted_result(e)
        if stopped is None and current is not None:  # before `Agent.run` sent anything, or began
            stopped = _no_request(current.mode, current.model, "interrupted")
        _print_stopped(runs, stopped, args, several=several)
        raise
    args.accounted = True
    try:
        print_runs(runs, as_json=args.json, several=several)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left: said as every command says it
        raise
    except (OSError, UnicodeEncodeError) as e:  # a full disk, a terminal that takes only ASCII: before, exit 70
        not_printed("the answer", e, ", ".join(str(r.transcript) for r, _ in runs if r.transcript is not None))
        return EXIT_NOT_PRINTED
    if broken := [r.summary.mode for r, f in runs if f is not None and f.kind == "sandbox"]:
        if several:
            error(f"--compare: the sandbox failed in {', '.join(broken)} (see above); the other modes ran")
        return EXIT_SANDBOX
    if failed := [r.summary.mode for r, f in runs if f is not None]:
        if several:
            error(f"--compare: the Messages API failed in {', '.join(failed)} mode{'s' if len(failed) > 1 else ''} "
                  "(see above); each mode ran")  # fmt: skip
        return EXIT_API
    return EXIT_OK if all(r.completed for r, _ in runs) else EXIT_INCOMPLETE


def _sandbox_problem(agent: Agent) -> Exception | None:
    """Why the sandbox of ``agent``'s mode cannot start (no engine answers, its image is missing or not built), or
    None (also when the mode runs no scripts). Asked before the mode's first request: before, a missing image was
    found at the first ``execute_python``, after a paid request. What only a start finds (a ``memory`` too small for
    the sandbox's own processes) ends `Agent.run` before its first request: it starts the sandbox then."""
    if not agent.toolset.needs_sandbox:
        return None
    from sandbox.docker_backend import DockerBackend
    from sandbox.errors import SandboxError

    try:
        DockerBackend(agent.sandbox_config).prepare()  # the engine, and the image (not the tree: the run copies it)
    except SandboxError as e:
        return e
    return None


def _no_request(mode: str, model: str, stop_reason: str, transcript: Path | None = None) -> RunResult:
    """A run that ended before its first request: no turns, no tokens. Its ``stop_reason``: ``sandbox_error`` (its
    sandbox or servers could not start) or ``interrupted`` (Ctrl-C); its ``transcript`` when `Agent.run` wrote one."""
    from agent import RunResult
    from agent.summary import RunSummary

    summary = RunSummary(mode=mode, model=model, stop_reason=stop_reason)
    return RunResult("", stop_reason, summary, [], transcript)


def _print_stopped(
    runs: list[tuple[RunResult, Failure | None]], stopped: RunResult | None, args: argparse.Namespace, *, several: bool
) -> None:
    """Ctrl-C: the summary line of the run it ``stopped`` (None: it came between runs), then what ``runs`` ran and
    that run on stdout (`print_runs`: under ``--json`` one record, or ``{"runs": [...]}``)."""
    args.accounted = True  # said here, not again by `_stopped_at_start`
    if stopped is not None:
        print_run_end(stopped, quiet=args.quiet, max_tokens=None)
        runs = [*runs, (stopped, None)]
    if runs:
        print_runs(runs, as_json=args.json, several=several)
