"""`tooltree agent`: run a task with Claude over the tree's tools, with a live view on stderr."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tool_tree.text import size
from tooltree_cli.common import (
    file_problem,
    folder_problem,
    load_optional_config,
    located,
    positive_int,
    positive_seconds,
    probability,
    sandbox_config,
)
from tooltree_cli.output import error, print_json, table

if TYPE_CHECKING:
    from agent import Agent, RunResult
    from agent.events import Event
    from agent.prefilter.options import PrefilterOptions
    from tool_tree.config import Config

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_API, EXIT_SANDBOX = 0, 1, 2, 3, 4
API_KEY_ENV = "ANTHROPIC_API_KEY"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from agent.defaults import CLASSIFIERS, DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_MODEL, MODES, SIBLING_MODES

    p = subparsers.add_parser(
        "agent",
        help="run a task with Claude over the tree's tools",
        description="Run a task with Claude. In code mode it browses the stub tree and runs scripts in the sandbox; "
        "direct, tool-search and filtered are the baselines (every MCP tool as a native tool; deferred behind tool "
        "search; native tools narrowed by the pre-filter). "
        f"Needs {API_KEY_ENV}; honours ANTHROPIC_BASE_URL. Exit 0 when the model finished, 1 when a limit, a "
        "refusal or max_tokens ended the run, 2 for usage errors, 3 when the API failed, 4 when the sandbox failed.",
    )
    p.add_argument("task", help="the task ('-' reads it from standard input)")
    p.add_argument("--config", default=None, help="tooltree.yaml with the servers (default: ./tooltree.yaml)")
    p.add_argument("--tree", default="tree", help="the generated tree (default: ./tree)")
    # Options left out take the config's `agent:` section, then the defaults shown.
    p.add_argument("--mode", choices=MODES, help="code (default), direct, tool-search or filtered")
    p.add_argument("--model", help=f"the model (default: {DEFAULT_MODEL})")
    p.add_argument("--max-turns", type=positive_int, help=f"most requests to the model (default: {DEFAULT_MAX_TURNS})")
    p.add_argument("--token-budget", type=positive_int, help="stop once this many tokens (input + output) were used")
    p.add_argument(
        "--max-tokens", type=positive_int, help=f"max_tokens of each request (default: {DEFAULT_MAX_TOKENS})"
    )
    p.add_argument(
        "--pin", action="append", metavar="SERVER.TOOL", help="keep a tool at hand (repeat; replaces agent.pinned)"
    )
    p.add_argument(
        "--prefilter",
        choices=CLASSIFIERS,
        help="narrow the tools before each request: local (offline, default of filtered mode) or claude (one "
        "request to a small model); in code mode the admitted tools' signatures go into the prompt",
    )
    p.add_argument(
        "--prefilter-threshold", type=probability, metavar="P", help="admit tools with probability ≥ P (0-1)"
    )
    p.add_argument(
        "--prefilter-siblings",
        choices=SIBLING_MODES,
        help="with a tool, admit the tools of its server that it names or that name it (named, default) or all of them",
    )
    p.add_argument("--prefilter-state", metavar="FILE", help="keep the admitted set in FILE between conversations")
    p.add_argument("--prefilter-model", help="the claude pre-filter's model (default: claude-haiku-5-5)")
    p.add_argument(
        "--prefilter-timeout", type=positive_seconds, metavar="SECONDS", help="send every tool when it takes longer"
    )
    p.add_argument(
        "--no-batch", action="store_true", help="do not offer batch_tool (direct, tool-search and filtered modes)"
    )
    p.add_argument("--workspace", metavar="DIR", help="a host folder restored into /workspace and saved back")
    p.add_argument("--transcript", metavar="FILE", help="write the JSONL transcript of the run here")
    p.add_argument(
        "--compare",
        nargs="?",
        const=",".join(MODES),
        metavar="MODES",
        help=f"run the task once in each of these modes (comma-separated; default: {','.join(MODES)}) and print "
        "a table of the tokens each used; "
        "the task really runs that many times, so use it on tasks whose effects can be repeated",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="call nothing: print the tokens each mode's first request would send (system prompt, tools, task); "
        "needs no API key",
    )
    p.add_argument("--json", action="store_true", help="print the run summary as JSON instead of the answer")
    p.add_argument("--quiet", action="store_true", help="no live view on stderr")
    p.set_defaults(handler=run)


LABEL_CHARS = 80
"""The most characters of a tool name or a stop reason the live view prints."""
NOTE_CHARS = 120
"""The most characters of a tool call's note the live view prints."""
REASON_CHARS = 500
"""The most characters of a reason the summary quotes (why the pre-filter failed open, or did not save)."""
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_label(value: object, limit: int) -> str:
    """A value from the model, a server or the API as one line for the terminal: cleaned of escape
    sequences and control characters (`sandbox.results.clean_text`), at most ``limit`` characters."""
    from sandbox.results import note_label

    return note_label(value if isinstance(value, str) else str(value), limit)


def terminal_text(text: str) -> str:
    """Text for the terminal, lines kept: escape sequences and control characters removed
    (`sandbox.results.clean_text`; tabs and newlines stay, a carriage return ends a line)."""
    from sandbox.results import clean_text

    return clean_text(text)


def print_json_safely(value: object) -> None:
    """``value`` as JSON on stdout (as `print_json` writes it) with the characters a terminal may act on
    that JSON leaves raw (C1 controls such as the 8-bit CSI, bidi overrides) escaped as ``\\uXXXX``: the
    same JSON, nothing lost."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    print(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def live_view(event: Event) -> None:
    """One line per model reply and per tool call, on stderr; what the model, a server or the API wrote
    in it is cleaned and cut (`terminal_label`)."""
    from agent.events import ModelReplied, ToolFinished

    if isinstance(event, ModelReplied):
        u = event.usage
        stop = terminal_label(event.stop_reason, LABEL_CHARS)
        print(
            f"[turn {event.turn}] {stop} · in {u.sent:,} (cache read {u.cache_read_input_tokens:,}, "
            f"write {u.cache_creation_input_tokens:,}) · out {u.output_tokens:,} · total {event.total.total:,} "
            f"· {event.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    elif isinstance(event, ToolFinished):
        status = "error" if event.is_error else "ok"
        name, note = terminal_label(event.name, LABEL_CHARS), terminal_label(event.note, NOTE_CHARS)
        note = f" {note}" if note else ""
        print(
            f"  {name}{note} [{status}] · {size(event.model_bytes)} to the model · {event.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )


def run(args: argparse.Namespace) -> int:
    from agent import AgentSetupError, ModelAPIError
    from sandbox.errors import SandboxError
    from tool_tree.config import ConfigError
    from tool_tree.pool import PoolError

    if not args.dry_run and not os.environ.get(API_KEY_ENV):
        error(f"{API_KEY_ENV} is not set; export your Anthropic API key to run the agent")
        return EXIT_USAGE
    task = sys.stdin.read() if args.task == "-" else str(args.task)
    if not task.strip():
        error("the task is empty")
        return EXIT_USAGE
    modes = [args.mode] if args.compare is None else [m.strip() for m in args.compare.split(",") if m.strip()]
    if args.compare is not None and (args.mode or not modes or len(set(modes)) != len(modes)):
        error("--compare takes distinct modes (e.g. code,direct) and replaces --mode")
        return EXIT_USAGE
    if args.prefilter not in (None, "off") and args.mode in ("direct", "tool-search"):
        error(f"--prefilter works in code and filtered modes, not in {args.mode}")
        return EXIT_USAGE
    for problem in (
        _state_problem("--prefilter-state", args.prefilter_state) if args.prefilter_state is not None else None,
        folder_problem("--workspace", args.workspace) if args.workspace is not None else None,
    ):  # before the model is asked: the sandbox would fail only after a script ran, and lose its files
        if problem is not None:
            error(problem)
            return EXIT_USAGE
    if args.transcript:  # before any run starts (under --compare, not once the first run is over)
        for mode in modes:
            path = _transcript(args.transcript, mode, len(modes) > 1)
            if (problem := file_problem("--transcript", path, makes_folders=True)) is not None:
                error(problem)
                return EXIT_USAGE
    try:
        config = load_optional_config(args.config)
        if config is None and not args.dry_run:
            error("no tooltree.yaml here; pass --config PATH")
            return EXIT_USAGE
        if config is None:  # a dry run starts nothing: the tree alone is enough
            from tool_tree.config import Config

            config = Config(servers=())
        _check_config_state(config)
        try:
            agents = [_agent(args, config, mode, len(modes) > 1) for mode in modes]
        except AgentSetupError as e:  # a pinned tool of the config: its file, line and key
            raise located(e, config, given=("agent.pinned",) if args.pin else ()) from None
    except (ConfigError, AgentSetupError, SandboxError, OSError) as e:
        error(str(e))
        return EXIT_USAGE
    if args.dry_run:
        _print_first_requests(agents, task, as_json=args.json)
        return EXIT_OK
    results: list[RunResult] = []
    for agent in agents:
        if len(agents) > 1 and not args.quiet:
            print(f"== {agent.mode}", file=sys.stderr, flush=True)
        try:
            result = agent.run(task)
        except ModelAPIError as e:
            error(terminal_text(f"{agent.mode}: {e}" if len(agents) > 1 else str(e)))
            if not args.quiet and e.result is not None:
                print(_summary_line(e.result), file=sys.stderr)
            return EXIT_API
        except (SandboxError, PoolError) as e:
            error(f"the sandbox failed: {e}")
            return EXIT_SANDBOX
        if not args.quiet:
            print(_summary_line(result), file=sys.stderr)
        results.append(result)
    if len(results) > 1:
        _print_comparison(results, as_json=args.json)
    elif args.json:
        (result,) = results
        transcript = str(result.transcript) if result.transcript else None
        print_json_safely({**result.summary.to_json(), "transcript": transcript})
    elif results[0].answer:
        print(terminal_text(results[0].answer))
    return EXIT_OK if all(r.completed for r in results) else EXIT_INCOMPLETE


def _prefilter_options(args: argparse.Namespace, config: Config) -> PrefilterOptions:
    """The ``agent:`` section's pre-filter settings, with the command line's on top."""
    from dataclasses import replace

    from agent.defaults import agent_settings
    from agent.prefilter.options import PrefilterOptions

    options = PrefilterOptions.from_settings(agent_settings(config), config)
    given = {
        "threshold": args.prefilter_threshold,
        "siblings": args.prefilter_siblings,
        "state": Path(args.prefilter_state) if args.prefilter_state else None,
        "model": args.prefilter_model,
        "timeout": args.prefilter_timeout,
    }
    return replace(options, **{k: v for k, v in given.items() if v is not None})


def _state_problem(option: str, path: str | Path) -> str | None:
    """Why ``path`` cannot be a pre-filter state file, or None. A typo is reported rather than failed open on
    (every tool offered, the admitted set never saved); a file that is merely unwritable is allowed (the run
    says it was not saved)."""
    if not str(path):
        return f"{option}: the path is empty"
    p = Path(path)
    try:
        if p.is_dir():
            return f"{option}: {p} is a folder, not a file"
    except OSError as e:  # a parent that may not be searched
        return f"{option}: cannot reach {p}: {e.strerror or e}"
    problem = folder_problem(option, p.parent, writable=False)
    return None if problem is None else f"{option}: cannot keep {p}: {problem.removeprefix(f'{option}: ')}"


def _check_config_state(config: Config) -> None:
    """Raises: ConfigError: ``agent.prefilter_state`` names a path that cannot be a file (file, line, key)."""
    from agent.defaults import agent_settings
    from agent.prefilter.options import PrefilterOptions
    from tool_tree.config import ConfigError

    path = PrefilterOptions.from_settings(agent_settings(config), config).state
    if path is not None and (problem := _state_problem("prefilter_state", path)) is not None:
        section = config.section("agent")
        where = section.lines.get("prefilter_state")
        raise ConfigError(problem.removeprefix("prefilter_state: "), file=section.source, line=where,
                          key="agent.prefilter_state")  # fmt: skip


def _transcript(transcript: str, mode: str | None, several: bool) -> str:
    """Where the run of ``mode`` writes its transcript: run.jsonl -> run.code.jsonl, ... when several modes run."""
    if not several:
        return transcript
    path = Path(transcript)
    return str(path.with_name(f"{path.stem}.{mode}{path.suffix or '.jsonl'}"))


def _agent(args: argparse.Namespace, config: Config, mode: str | None, several: bool) -> Agent:
    from agent import Agent

    transcript = _transcript(args.transcript, mode, several) if args.transcript else None
    return Agent(
        config,
        tree=args.tree,
        mode=mode,
        model=args.model,
        max_turns=args.max_turns,
        token_budget=args.token_budget,
        max_tokens=args.max_tokens,
        pinned=args.pin,
        sandbox_config=sandbox_config(config),
        workspace=args.workspace,
        transcript=transcript,
        on_event=None if args.quiet else live_view,
        prefilter=args.prefilter if mode in ("code", "filtered") else None,
        prefilter_options=_prefilter_options(args, config),
        batch=False if args.no_batch else None,
    )


def _print_first_requests(agents: list[Agent], task: str, *, as_json: bool) -> None:
    """What each mode sends before any tool runs: system prompt, tools and the task, in tokens."""
    from agent.tokens import APPROXIMATION, request_tokens, system_tokens, tools_tokens

    keys = ("tools", "deferred", "system_tokens", "tools_tokens", "first_request_tokens")
    counts: dict[str, dict[str, int]] = {}
    for agent in agents:
        request = agent.first_request(task)
        tools = request["tools"]
        values = (len(tools), sum(1 for t in tools if t.get("defer_loading")), system_tokens(request["system"]),
                  tools_tokens(tools), request_tokens(request))  # fmt: skip
        counts[agent.mode] = dict(zip(keys, values, strict=True))
    if as_json:
        print_json({"token_count": APPROXIMATION, "modes": [{"mode": m, **c} for m, c in counts.items()]})
        return
    direct = counts.get("direct", {}).get("first_request_tokens")
    rows = [
        [mode, *(f"{c[k]:,}" for k in keys), f"{100 * c['first_request_tokens'] / direct:.1f} %" if direct else "-"]
        for mode, c in counts.items()
    ]
    print(table(rows, ["mode", "tools", "deferred", "system", "tools tokens", "first request", "of direct"]))
    print(f"\ntokens: {APPROXIMATION}")


def _summary_line(result: RunResult) -> str:
    """The run in a few lines for stderr: each reason it quotes on one line, cleaned and cut (`terminal_label`)."""
    s = result.summary
    refused = f" ({s.refused_tool_calls} more not run: too many in one reply)" if s.refused_tool_calls else ""
    stop = terminal_label(result.stop_reason, LABEL_CHARS)
    line = (
        f"tooltree: {stop} after {s.turns} turn(s) · {s.usage.sent:,} tokens sent, "
        f"{s.usage.output_tokens:,} received · {s.tool_calls} tool call(s){refused}, {s.script_tool_calls} from "
        f"scripts · {size(s.sandbox_bytes)} stayed in the sandbox, {size(s.model_bytes)} reached the model"
    )
    p = s.prefilter
    if p is not None:
        line += (
            f"\ntooltree: pre-filter {p.classifier}: {p.admitted} of {p.catalog} tools offered, grew {p.growths} "
            f"time(s), {s.cache_invalidations} cache invalidation(s) · asked {p.asked} time(s), "
            f"{p.seconds * 1000:.0f} ms, {p.usage.total:,} tokens"
        )
        for reason in p.fail_open:
            line += f"\ntooltree: pre-filter failed open (every tool sent): {terminal_label(reason, REASON_CHARS)}"
        for reason in p.state_errors:
            line += f"\ntooltree: pre-filter state not saved: {terminal_label(reason, REASON_CHARS)}"
    return terminal_text(line)


def _print_comparison(results: list[RunResult], *, as_json: bool) -> None:
    """The runs of one task side by side: tokens, and each as a share of ``direct`` when it ran."""
    direct = next((r.summary.usage.total for r in results if r.summary.mode == "direct"), None)
    if as_json:
        runs = [{**r.summary.to_json(), "transcript": str(r.transcript) if r.transcript else None} for r in results]
        print_json_safely({"runs": runs})
        return
    header = ["mode", "stop", "turns", "sent", "received", "total", "of direct", "tool calls", "kept", "to model"]
    rows = []
    for r in results:
        s, u = r.summary, r.summary.usage
        share = f"{100 * u.total / direct:.1f} %" if direct else "-"
        rows.append([
            s.mode, r.stop_reason, str(s.turns), f"{u.sent:,}", f"{u.output_tokens:,}", f"{u.total:,}", share,
            f"{s.tool_calls} ({s.script_tool_calls} from scripts)", size(s.sandbox_bytes), size(s.model_bytes),
        ])  # fmt: skip
    print(terminal_text(table(rows, header)))
    for r in results:
        print(f"\n[{r.summary.mode}] {terminal_text(r.answer)}")
