"""`tooltree agent`: run a task with Claude over the tree's tools, with a live view on stderr.

Its options and the checks made before any request are here; the running of the agents it made, one mode after
another, and the exit status that follows are `tooltree_cli.agent_runs`; what it prints (the live view, the summary
lines, the comparison and dry-run tables, and the four shapes of ``--json``) is `tooltree_cli.agent_view`.

(Over 400 lines: one command's options, each checked before any request is sent, and how each mode of
``--compare`` is set up from them.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.agent_runs import EXIT_API as EXIT_API  # exit codes of agent (tests/test_readme.py)
from tooltree_cli.agent_runs import EXIT_INCOMPLETE as EXIT_INCOMPLETE
from tooltree_cli.agent_runs import EXIT_OK, EXIT_USAGE, _no_request, _print_stopped, _run_all
from tooltree_cli.agent_runs import EXIT_SANDBOX as EXIT_SANDBOX
from tooltree_cli.agent_view import Failure, live_view, print_first_requests, print_runs
from tooltree_cli.common import (
    CONFIG_FILES,
    UNEXPECTED_HELP,
    config_path,
    file_problem,
    folder_problem,
    load_optional_config,
    located,
    positive_int,
    positive_seconds,
    probability,
    sandbox_config,
    search_setting_problem,
    warn_unset,
)
from tooltree_cli.output import error
from tooltree_cli.signals import EXIT_HUNG_UP, EXIT_TERMINATED, Terminated, signals_stop_like_ctrl_c

if TYPE_CHECKING:
    from agent import Agent, RunResult
    from agent.prefilter.options import PrefilterOptions
    from tool_tree.config import Config

API_KEY_ENV = "ANTHROPIC_API_KEY"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from agent.defaults import (
        CLASSIFIERS,
        DEFAULT_MAX_TOKENS,
        DEFAULT_MAX_TURNS,
        DEFAULT_MODEL,
        MAX_PREFILTER_TIMEOUT,
        MODES,
        SIBLING_MODES,
    )

    p = subparsers.add_parser(
        "agent",
        help="run a task with Claude over the tree's tools",
        description="Run a task with Claude. In code mode it browses the stub tree and runs scripts in the sandbox; "
        "direct, tool-search and filtered are the baselines (every MCP tool as a native tool; deferred behind tool "
        "search; native tools narrowed by the pre-filter). "
        f"Needs {API_KEY_ENV}; honours ANTHROPIC_BASE_URL. Exit 0 when the model finished, 1 when a limit, a "
        "refusal or max_tokens ended the run, 2 for usage errors, 3 when the API failed, 4 when the sandbox failed, "
        f"{UNEXPECTED_HELP}, 130 when interrupted (Ctrl-C), {EXIT_TERMINATED} when terminated (SIGTERM), "
        f"{EXIT_HUNG_UP} when its terminal closed (SIGHUP); each prints what ran so far (where it still can) and "
        "saves --workspace.",
    )
    p.add_argument("task", help="the task ('-' reads it from standard input)")
    p.add_argument(
        "--config",
        type=config_path,
        default=None,
        help=f"{CONFIG_FILES}, or for a --tree generated before, the file its manifest records)",
    )
    p.add_argument("--tree", default="tree", help="the generated tree (default: ./tree)")
    # Options left out take the config's `agent:` section, then the defaults shown.
    p.add_argument("--mode", choices=MODES, help="code (default), direct, tool-search or filtered")
    p.add_argument("--model", type=_model_name, help=f"the model (default: {DEFAULT_MODEL})")
    p.add_argument("--max-turns", type=positive_int, help=f"most requests to the model (default: {DEFAULT_MAX_TURNS})")
    p.add_argument(
        "--token-budget",
        type=positive_int,
        help="stop once this many tokens (input + output, the claude pre-filter's too) were used",
    )
    p.add_argument(
        "--max-tokens", type=positive_int, help=f"max_tokens of each request (default: {DEFAULT_MAX_TOKENS})"
    )
    p.add_argument(
        "--pin",
        action="append",
        metavar="SERVER.TOOL",
        help="keep a tool at hand (repeat; replaces agent.pinned; not in direct mode, which sends every tool)",
    )
    p.add_argument(
        "--prefilter",
        choices=CLASSIFIERS,
        help="narrow the tools before each request: local (offline, default of filtered mode) or claude (one "
        "request to a small model); in code mode the admitted tools' signatures go into the prompt",
    )
    p.add_argument(
        "--prefilter-threshold",
        type=probability,
        metavar="P",
        help="admit the tools whose probability is at least P (P above 0, at most 1)",
    )
    p.add_argument(
        "--prefilter-siblings",
        choices=SIBLING_MODES,
        help="with a tool, admit the tools of its server that it names or that name it (named, default) or all of them",
    )
    p.add_argument("--prefilter-state", metavar="FILE", help="keep the admitted set in FILE between conversations")
    p.add_argument(
        "--prefilter-model", type=_model_name, help="the claude pre-filter's model (default: claude-haiku-5-5)"
    )
    p.add_argument(
        "--prefilter-timeout",
        type=_prefilter_seconds,
        metavar="SECONDS",
        help=f"send every tool when it takes longer (at most {MAX_PREFILTER_TIMEOUT:g})",
    )
    p.add_argument(
        "--no-batch", action="store_true", help="do not offer batch_tool (direct, tool-search and filtered modes)"
    )
    p.add_argument(
        "--workspace", metavar="DIR", help="a host folder restored into /workspace and saved back (code mode)"
    )
    p.add_argument("--transcript", metavar="FILE", help="write the JSONL transcript of the run here")
    p.add_argument(
        "--compare",
        nargs="?",
        const=",".join(MODES),
        metavar="MODES",
        help=f"run the task once in each of these modes (comma-separated; default: {','.join(MODES)}) and print "
        "a table of the tokens each used; "
        "the task really runs that many times, so use it on tasks whose effects can be repeated; a mode whose "
        "request to the API fails is a row of the table and the others still run (exit 3)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="call nothing: print the tokens each mode's first request would send (system prompt, tools, task); "
        "needs no API key",
    )
    p.add_argument("--json", action="store_true", help="print the run summary as JSON instead of the answer")
    p.add_argument("--quiet", action="store_true", help="no live view or summary on stderr (a failed run says why)")
    p.set_defaults(handler=run, on_stop=_stopped_at_start)


def _model_name(text: str) -> str:
    """An argparse type: a model's name, not empty nor only white space (before: ``--model ""`` was sent, and the API
    refused it after the sandbox had started; ``--prefilter-model ""`` was taken as the default)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty model name ({text!r}); leave the option out for the default")
    return text


def _prefilter_seconds(text: str) -> float:
    """An argparse type: seconds for the pre-filter, above 0 and at most `MAX_PREFILTER_TIMEOUT`."""
    from agent.defaults import MAX_PREFILTER_TIMEOUT

    value = positive_seconds(text)
    if value > MAX_PREFILTER_TIMEOUT:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_PREFILTER_TIMEOUT:g} seconds, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from tooltree_cli.logs import upstream_failures

    upstream_failures(shown=False)  # a failing server is in the tool results the live view shows
    no_key = f"{API_KEY_ENV} is not set; export your Anthropic API key to run the agent"
    no_key = no_key if not args.dry_run and not os.environ.get(API_KEY_ENV) else ""
    if no_key and args.task == "-":  # before standard input is read: a task typed there would be lost
        error(no_key)
        return EXIT_USAGE
    task, unreadable = _read_task(args.task)
    if unreadable:
        error(unreadable)
        return EXIT_USAGE
    if not task.strip():
        error("the task is empty")
        return EXIT_USAGE
    modes = [args.mode] if args.compare is None else [m.strip() for m in args.compare.split(",") if m.strip()]
    if args.compare is not None and (args.mode or not modes or len(set(modes)) != len(modes)):
        error("--compare takes distinct modes (e.g. code,direct) and replaces --mode")
        return EXIT_USAGE
    from agent.defaults import MODES

    if args.compare is not None and (unknown := [m for m in modes if m not in MODES]):
        error(f"--compare: unknown mode {unknown[0]!r}; use some of {', '.join(MODES)}")
        return EXIT_USAGE
    if args.prefilter not in (None, "off") and args.mode in ("direct", "tool-search"):
        error(f"--prefilter works in code and filtered modes, not in {args.mode}")
        return EXIT_USAGE
    for problem in (
        _state_problem("--prefilter-state", args.prefilter_state) if args.prefilter_state is not None else None,
        folder_problem("--workspace", args.workspace, home=True) if args.workspace is not None else None,
        search_setting_problem(),
    ):  # before the model is asked: the sandbox would fail only after a script ran, and lose its files
        if problem is not None:
            error(problem)
            return EXIT_USAGE
    if args.transcript == "":  # before: taken as no --transcript, and the run wrote none, unsaid
        error("--transcript: the path is empty; name a file, or leave the option out for no transcript")
        return EXIT_USAGE
    if args.transcript == "-":  # before: a file named "-" in the working folder
        error("--transcript -: the transcript goes to a file (standard output carries the answer); name one")
        return EXIT_USAGE
    if args.transcript:  # before any run starts (under --compare, not once the first run is over)
        for mode in modes:
            path = _transcript(args.transcript, mode, len(modes) > 1)
            if (problem := file_problem("--transcript", path, makes_folders=True)) is not None:
                error(problem)
                return EXIT_USAGE
    if no_key:  # after the command line's own mistakes (before: said first, also of an empty task)
        error(no_key)
        return EXIT_USAGE
    try:
        with signals_stop_like_ctrl_c():  # from the config on: the agents are made, then run
            return _set_up_and_run(args, task, modes)
    except Terminated as e:  # SIGTERM or SIGHUP
        _stopped_at_start(args, e)
        print(f"tooltree: {e.said}", file=sys.stderr)
        return e.exit_code


def _stopped_at_start(args: argparse.Namespace, stopped: KeyboardInterrupt) -> None:
    """A Ctrl-C, SIGTERM or SIGHUP that stopped ``agent`` before it made or said any run (while its modules imported,
    its task or its config was read): under ``--json``, the runs it would have made, each with no turns and no tokens,
    stop reason ``interrupted`` (before: only ``tooltree: interrupted``, and a reader of ``--json`` had nothing to
    parse). Also `tooltree_cli.main`'s hook for a stop that came before ``agent`` ran."""
    if not args.json or args.dry_run or getattr(args, "accounted", False):
        return
    from tool_tree.config import Config, ConfigError

    config = getattr(args, "config_read", None)
    if config is None:  # stopped before it was read: its mode and model, as the run would have taken them
        try:
            config = load_optional_config(args.config, using=(), tree=Path(args.tree))
        except (ConfigError, OSError):
            config = None
    modes = [args.mode] if args.compare is None else [m.strip() for m in args.compare.split(",") if m.strip()]
    runs: list[tuple[RunResult, Failure | None]] = [
        (_no_request(*_mode_and_model(args, config or Config(servers=()), m), "interrupted"), None) for m in modes
    ]
    print_runs(runs, as_json=True, several=len(runs) > 1)


NO_CONFIG = (
    "no tooltree.yaml here: the dry run counts the tree alone, without a config's `agent:` settings (its pinned "
    "tools, mode, model, pre-filter); pass --config PATH to count them"
)
"""The note a dry run prints when it found no config."""


def _set_up_and_run(args: argparse.Namespace, task: str, modes: list[str | None]) -> int:
    """Read the config, make an agent per mode (each setting checked before any request), then run them
    (`_run_all`), or print their first requests (``--dry-run``)."""
    from agent import AgentSetupError
    from agent.defaults import BATCH_MODES
    from sandbox.errors import SandboxError
    from tool_tree.config import ConfigError

    try:
        # A server whose variable is unset fails its calls; without --config, the file the tree records is read.
        config = load_optional_config(args.config, using=(), tree=Path(args.tree))
        args.config_read = config
        if config is None and not args.dry_run:
            error("no tooltree.yaml here; pass --config PATH")
            return EXIT_USAGE
        if config is None:  # a dry run starts nothing: the tree alone is enough
            from tool_tree.config import Config

            print(f"tooltree: {NO_CONFIG}", file=sys.stderr)  # before: counted without `agent:`, in silence
            config = Config(servers=())
        _check_config_state(config)
        try:
            agents = _agents(args, config, modes)
        except AgentSetupError as e:  # a pinned tool of the config: its file, line and key
            raise located(e, config, given=("agent.pinned",) if args.pin else ()) from None
    except (ConfigError, AgentSetupError, SandboxError, OSError) as e:
        error(str(e))
        return EXIT_USAGE
    if args.prefilter not in (None, "off") and all(a.prefilter is None for a in agents):  # --compare direct,...
        error(f"--prefilter works in code and filtered modes, not in {' or '.join(a.mode for a in agents)}")
        return EXIT_USAGE  # before: accepted under --compare, and no mode ran it (alone, such a mode refused it)
    unused = [f"--prefilter-{k}" for k in PREFILTER_OPTIONS if getattr(args, f"prefilter_{k}") is not None]
    if unused and all(a.prefilter is None for a in agents):  # else the state would be silently never kept
        error(f"{', '.join(unused)}: no pre-filter runs in {' or '.join(a.mode for a in agents)} mode (it runs in "
              "filtered mode, and in code mode with --prefilter local or claude)")  # fmt: skip
        return EXIT_USAGE
    if args.no_batch and all(a.mode not in BATCH_MODES for a in agents):  # before: accepted, and it did nothing
        error(f"--no-batch: batch_tool is not offered in {' or '.join(a.mode for a in agents)} mode (it is in "
              f"{', '.join(BATCH_MODES)} modes)")  # fmt: skip
        return EXIT_USAGE
    if args.pin and all(a.mode == "direct" for a in agents):  # before: accepted, and it did nothing
        error("--pin: direct mode sends every tool whole already; pinning matters in code, tool-search and filtered "
              "modes")  # fmt: skip
        return EXIT_USAGE
    if args.workspace is not None and not any(a.toolset.needs_sandbox for a in agents):  # before: ignored silently
        error(f"--workspace: no script runs in {' or '.join(a.mode for a in agents)} mode, so no folder is restored "
              "or saved (the workspace is the sandbox's, in code mode)")  # fmt: skip
        return EXIT_USAGE
    if args.dry_run:
        if args.transcript is not None:  # before: taken, and no file written, unsaid
            print(f"tooltree: warning: --transcript {args.transcript}: a dry run writes no transcript", file=sys.stderr)
        print_first_requests(agents, task, as_json=args.json)
        return EXIT_OK
    if (problem := _unconfigured(agents[0], config)) is not None:  # before: found at each tool call, after paid turns
        error(problem)
        return EXIT_USAGE
    warn_unset(config, "agent")
    return _run_all(agents, task, args)


def _unconfigured(agent: Agent, config: Config) -> str | None:
    """Why the tree's servers cannot be called with ``config`` (some are not in it, or are disabled there), or None.
    Every call of such a server's tools is refused, so a run would pay for turns whose tool calls all fail."""
    enabled = {s.name for s in config.servers if s.enabled}
    missing = sorted(s.name for s in agent.toolset.manifest.servers if s.name not in enabled)
    if not missing:
        return None
    from tool_tree.regenerate import recorded_config, regenerate_command, shell_word

    again = regenerate_command(agent.tree, config=config.source)
    source = recorded_config(agent.tree, agent.toolset.manifest)  # before: not named, though the manifest records it
    named = f" ({shell_word(source)})" if source is not None else ""
    return (  # how to regenerate it from this config (before: `tooltree generate-tree`, of ./tooltree.yaml and ./tree)
        f"the tree {agent.tree} has server(s) {', '.join(missing)} that {config.source} does not have or disables: "
        f"the tree was generated from another configuration; pass the --config it was generated from{named}, or "
        f"regenerate the tree from this one ({again})"
    )


def _agents(args: argparse.Namespace, config: Config, modes: list[str | None]) -> list[Agent]:
    """An agent per mode. Ctrl-C while one is made (the tree's tools read, the pre-filter's catalog built) stops its
    run before it began: said as `_run_all` says it (`_print_stopped`), then the interrupt goes on.

    Raises:
        AgentSetupError: see `_agent`.
    """
    agents: list[Agent] = []
    for mode in modes:
        try:
            agents.append(_agent(args, config, mode, len(modes) > 1))
        except KeyboardInterrupt:
            stopped = _no_request(*_mode_and_model(args, config, mode), "interrupted")
            if not args.dry_run:  # a dry run runs nothing: it has no run to print
                _print_stopped([], stopped, args, several=len(modes) > 1)
            raise
    return agents


PREFILTER_OPTIONS = ("threshold", "siblings", "state", "model", "timeout")
"""The ``--prefilter-*`` options that set how a pre-filter decides (refused where none runs)."""
MAX_TASK_BYTES = 32 * 1024 * 1024
"""The largest task read from standard input: the Messages API takes no larger request."""


def _read_task(given: str) -> tuple[str, str]:
    """The task (``-``: read from standard input, at most `MAX_TASK_BYTES`), or why it cannot be sent."""
    if given != "-":
        data = given.encode("utf-8", errors="surrogateescape")  # bytes of the argument that are not UTF-8
    else:
        data = sys.stdin.buffer.read(MAX_TASK_BYTES + 1)
        if len(data) > MAX_TASK_BYTES:
            return "", f"the task on standard input is larger than {MAX_TASK_BYTES:,} bytes (the API's request limit)"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as e:
        where = "on standard input" if given == "-" else "given"
        return "", f"the task {where} is not UTF-8 text (byte {e.start:,} cannot be read)"


def _prefilter_options(args: argparse.Namespace, config: Config) -> PrefilterOptions:
    """The ``agent:`` section's pre-filter settings, with the command line's on top."""
    from dataclasses import replace

    from agent.defaults import agent_settings
    from agent.prefilter.options import PrefilterOptions

    given = {
        "threshold": args.prefilter_threshold,
        "siblings": args.prefilter_siblings,
        "state": Path(args.prefilter_state) if args.prefilter_state else None,
        "model": args.prefilter_model,
        "timeout": args.prefilter_timeout,
    }
    used = [f"prefilter_{k}" for k, v in given.items() if v is None]  # an option wins over the config's setting
    options = PrefilterOptions.from_settings(agent_settings(config, used=used), config)
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

    path = PrefilterOptions.from_settings(agent_settings(config, used=("prefilter_state",)), config).state
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
    """Raises: AgentSetupError: see `Agent`; or --prefilter in a mode of the config that has none."""
    from agent import Agent, AgentSetupError

    transcript = _transcript(args.transcript, mode, several) if args.transcript else None
    # The mode this agent runs in: left out, the config's. Before, a --prefilter went only to an agent given
    # --mode, so `tooltree agent TASK --prefilter local` ran code mode with no pre-filter at all.
    effective, _ = _mode_and_model(args, config, mode)
    if args.prefilter not in (None, "off") and effective in ("direct", "tool-search") and not several:
        raise AgentSetupError(f"--prefilter works in code and filtered modes, not in {effective}")
    options = _prefilter_options(args, config)
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
        prefilter=args.prefilter if effective in ("code", "filtered") else None,
        prefilter_options=_compared(options, mode) if several else options,
        batch=False if args.no_batch else None,
    )


def _mode_and_model(args: argparse.Namespace, config: Config, mode: str | None) -> tuple[str, str]:
    """The mode an agent made for ``mode`` runs in (left out: the config's) and its model, as `Agent` takes them."""
    from agent.defaults import DEFAULT_MODEL, agent_settings

    settings = agent_settings(config, used=[k for k, v in (("model", args.model), ("mode", mode)) if v is None])
    model = args.model if args.model is not None else str(settings.get("model", DEFAULT_MODEL))
    return mode or str(settings.get("mode", "code")), model


def _compared(options: PrefilterOptions, mode: str | None) -> PrefilterOptions:
    """``options`` for one mode of ``--compare``: its state file a copy of the file as it is now (each mode starts
    from the same tools, not those of the modes before it, and the user's file is left as it was).

    A file that cannot be read (corrupt, not a regular file, unreadable) is not copied: each mode is given the user's
    file, which a run never writes while it cannot be read (it fails open), so its reason names that file. Before: it
    named the copy (``/tmp/tooltree-compare-state-…/filtered.json: … fix or delete the file``), deleted at exit."""
    import atexit
    import shutil
    import tempfile
    from dataclasses import replace

    from agent.prefilter.base import FilterError
    from agent.prefilter.state import load_state

    if options.state is None:
        return options
    try:
        load_state(options.state)
    except FilterError:
        return options
    folder = Path(tempfile.mkdtemp(prefix="tooltree-compare-state-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    copy = folder / f"{mode}.json"
    if options.state.is_file():
        shutil.copyfile(options.state, copy)
    return replace(options, state=copy)
