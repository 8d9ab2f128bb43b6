"""`tooltree serve`: the tree, tool search and the sandbox as an MCP server (stdio, or Streamable HTTP with a token).

The tree is brought up to date from the configured servers, before serving or in the background while serving,
unless ``--no-regenerate`` (`tooltree_cli.serve_regenerate`). A config that lists no server
tooltree can start is refused (the refresh would empty the tree). Everything this command prints goes
to stderr: over stdio, stdout is the MCP channel.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.common import (
    CONFIG_FILES,
    UNEXPECTED_HELP,
    HttpOption,
    audit_problem,
    config_path,
    count,
    file_problem,
    folder_problem,
    load_optional_config,
    located,
    positive_seconds,
    sandbox_config,
    sandbox_seconds,
    search_setting_problem,
    warn_unset,
    workspace_problem,
)
from tooltree_cli.output import error, terminal_text
from tooltree_cli.serve_regenerate import EXIT_OK, Refresh, _follow, _regenerate_before_serving, _usable
from tooltree_cli.serve_regenerate import EXIT_SERVERS as EXIT_SERVERS  # an exit code of serve (tests/test_readme.py)
from tooltree_cli.serve_regenerate import _regenerate as _regenerate  # imported from here by the tests

if TYPE_CHECKING:
    from agent.serve.server import ToolServer
    from tool_tree.config import Config

EXIT_USAGE, EXIT_SANDBOX = 2, 4  # EXIT_OK and EXIT_SERVERS, which a regeneration gives too: serve_regenerate
TOKEN_ENV = "TOOLTREE_SERVE_TOKEN"  # as agent.serve.http.TOKEN_ENV (not imported: help text only)
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
STDIO_AT_A_TERMINAL = (
    "tooltree serve: waiting for an MCP client on stdin (an MCP client starts this command itself, e.g. "
    "`claude mcp add tooltree -- tooltree serve ...`; to try it by hand, add --http); Ctrl-C stops it"
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from agent.serve.settings import DEFAULT_IDLE_TIMEOUT, DEFAULT_WARM

    p = subparsers.add_parser(
        "serve",
        help="offer the tree, search and sandbox to any MCP client (Claude Code, Claude Desktop, ...)",
        description="An MCP server with the four tools of code mode (list_files, read_file, search_tools, "
        "execute_python) over the tree, one sandbox session per client session, each starting its own upstream "
        "servers on first use (at most pool.start_jobs, default the number of cores, starting at once in all "
        "sessions together). stdio by default; --http for "
        f"Streamable HTTP at /mcp, which requires a bearer token (${TOKEN_ENV}, or one generated and printed "
        "once). A missing tree is generated first; an existing one is served at once and brought up to date from "
        "the servers in the background (see --regenerate-first, --no-regenerate). A server that fails is named "
        "with its error and keeps its stubs from before (a new tree has none of its tools); when every server "
        "fails while the tree is generated before serving (missing, or --regenerate-first), nothing is written "
        "or served. Exit 0 when the client disconnected or a signal stopped it, 2 for usage errors, 3 when the tree "
        "could not be generated or every server failed, 4 when an engine answers but cannot run the sandbox (with no "
        "engine, serve starts: each execute_python says so and tries it again), "
        f"{UNEXPECTED_HELP}, 128 + the signal's number when a signal stopped the tree's generation before serving "
        "(129 SIGHUP, 130 SIGINT, 143 SIGTERM).",
    )
    p.add_argument(
        "--config",
        type=config_path,
        default=None,
        help=f"{CONFIG_FILES}, or for a --tree generated before, the file its manifest records)",
    )
    p.add_argument("--tree", default="tree", help="the generated tree (default: ./tree)")
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--no-regenerate",
        action="store_true",
        help="serve the tree as it is: start no server to check it (a missing tree is then an error)",
    )
    when.add_argument(
        "--regenerate-first",
        action="store_true",
        help="bring an existing tree up to date before answering the client, instead of in the background "
        "(a client that waits only so long for its handshake may give up on a big config)",
    )
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    p.add_argument(
        "--host",
        action=HttpOption,
        default=DEFAULT_HOST,
        help="the address to bind with --http (default: %(default)s)",
    )
    p.add_argument(
        "--port",
        action=HttpOption,
        type=_port,
        default=DEFAULT_PORT,
        help=f"the port with --http (default: {DEFAULT_PORT}; 0 picks one)",
    )
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --host to be other than loopback. Whoever holds the token can then run code in the sandbox "
        "and call every tool of every configured server with your credentials, from anywhere that reaches the "
        "address; the token travels in clear text unless a TLS proxy sits in front",
    )
    p.add_argument("--workspace", metavar="DIR", help="a host folder restored into each session's /workspace; what "
                   "a script changed is saved back before its result returns (files and skills/ persist)")  # fmt: skip
    p.add_argument("--audit", metavar="FILE", help="append one JSON line per tool call (every session) to this file")
    p.add_argument(
        "--timeout",
        type=sandbox_seconds,
        help="wall-clock limit of one execution in seconds, at most a week (default: sandbox.timeout in the config, "
        "or 30)",
    )
    p.add_argument(
        "--idle-timeout",
        type=positive_seconds,
        help="seconds without a call before a client's session ends (default: serve.idle_timeout in the config, "
        f"or {DEFAULT_IDLE_TIMEOUT:g})",
    )
    p.add_argument(
        "--warm",
        type=_warm,
        help=f"sandboxes kept started for the next client (default: serve.warm in the config, or {DEFAULT_WARM}; "
        "0: none)",
    )
    p.add_argument(
        "--passthrough",
        action="append",
        metavar="SERVER.TOOL",
        help="also offer this tool as an ordinary MCP tool (repeat; replaces serve.passthrough)",
    )
    p.set_defaults(handler=run, http_options=())


def _warm(text: str) -> int:
    from agent.serve.settings import warm_problem

    value = count(text)
    problem = warm_problem(value, text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range: give 1 to 65535 (or 0 to pick a free port)")
    return port


def run(args: argparse.Namespace) -> int:
    from tool_tree.connect import UPSTREAM_ENV
    from tooltree_cli.logs import upstream_failures

    upstream_failures(shown=True)  # a server failing mid-session: said in the log the MCP client keeps

    if os.environ.get(UPSTREAM_ENV):  # a tooltree started this serve as one of its servers: it would start another
        error(
            "tooltree serve was started by tooltree as one of its MCP servers (the config lists tooltree serve itself, "
            "through a wrapper command); it does not serve itself: remove that entry from the config"
        )
        return EXIT_USAGE
    given = [*args.http_options, *(["--allow-remote"] if args.allow_remote else [])]
    if given and not args.http:  # `serve --port 8765` would serve stdio and wait on the terminal
        error(
            f"{given[0]} is an option of --http; add --http to serve Streamable HTTP (without it, serve speaks MCP "
            "over stdin and stdout)"
        )
        return EXIT_USAGE
    if args.http:
        from agent.serve.http import token_problem
        from agent.serve.loopback import is_loopback

        if not is_loopback(args.host) and not args.allow_remote:  # 127.0.0.0/8 and ::1 (before: 127.0.0.1 alone)
            error(
                f"--host {args.host} is not loopback; add --allow-remote if you mean it (see --help for what it "
                "exposes)"
            )
            return EXIT_USAGE
        token = os.environ.get(TOKEN_ENV, "")  # empty: serve makes one
        if token and (problem := token_problem(token)) is not None:  # before: every client got 401, or a guess worked
            error(problem)
            return EXIT_USAGE
    for problem in (
        file_problem("--audit", args.audit) if args.audit is not None else None,
        None
        if args.audit is None
        else audit_problem(args.audit, tree=args.tree, workspace=args.workspace, config=args.config),
        folder_problem("--workspace", args.workspace, home=True) if args.workspace is not None else None,
        workspace_problem(args.workspace, args.tree) if args.workspace is not None else None,
        # Only its shape: a tree that is up to date is served, and refreshed without a write, from a read-only folder.
        None if args.no_regenerate else folder_problem("--tree", args.tree, writable=False),
        search_setting_problem(),
    ):
        if problem is not None:
            error(problem)
            return EXIT_USAGE
    # Bound before anything starts, so a busy port is reported at once, not after the tree's regeneration.
    sockets = _listen(args.host, args.port) if args.http else []
    if sockets is None:
        return EXIT_USAGE
    try:
        return _run(args, sockets)
    finally:
        for sock in sockets:
            sock.close()


def _listen(host: str, port: int) -> list[socket.socket] | None:
    """The sockets to serve HTTP on; None when the address cannot be bound (reported)."""
    from agent.serve.http import bind

    try:
        return bind(host, port)
    except OSError as e:
        reason = e.strerror or str(e)
        hint = "; choose another --port (0 picks a free one)" if e.errno == errno.EADDRINUSE else ""
        shown = f"[{host}]" if ":" in host else host
        error(f"cannot listen on {shown}:{port}: {reason[:1].lower()}{reason[1:]}{hint}")
        return None


def _run(args: argparse.Namespace, sockets: list[socket.socket]) -> int:
    from agent.errors import AgentSetupError
    from agent.serve.settings import ServeSettings
    from sandbox.errors import SandboxError
    from tool_tree.config import Config, ConfigError

    tree = Path(args.tree)
    try:
        # A server whose variable is unset fails its calls; a recorded file that is gone is an error unless the tree is
        # served as it is, as for generate-tree (a refresh writes the tree from it).
        config = load_optional_config(args.config, using=(), tree=tree, missing_ok=args.no_regenerate)
        if config is None and not args.no_regenerate:
            error("no tooltree.yaml here; pass --config PATH (or --no-regenerate to serve an existing tree)")
            return EXIT_USAGE
        if config is None:
            config = Config(servers=())
        _warn_doubled(config)
        warn_unset(config, "serve", refreshed=None if args.no_regenerate else tree)
        refresh = None
        read = None  # held until the served toolset has read it: the file read once (before: twice at start)
        if not args.no_regenerate:
            from tooltree_cli.generate_cmd import nothing_to_list

            if (problem := nothing_to_list(config, tree)) is not None:  # before: the refresh emptied the tree
                error(f"{problem} (or --no-regenerate to serve the tree as it is)")
                return EXIT_USAGE
            read = None if args.regenerate_first else _usable(tree)
            if read is None:
                code, read = _regenerate_before_serving(config, tree)
                if code != EXIT_OK:
                    return code
            else:
                refresh = Refresh(config, tree)
        settings = ServeSettings.from_config(
            config, passthrough=tuple(args.passthrough) if args.passthrough else None, idle_timeout=args.idle_timeout,
            warm=args.warm,
        )  # fmt: skip
        limits = sandbox_config(config, timeout=args.timeout)
        from agent.serve.server import ToolServer

        try:
            app = ToolServer(config, tree, settings=settings, sandbox_config=limits, workspace=args.workspace,
                             audit=args.audit)  # fmt: skip
        except AgentSetupError as e:  # a pinned or passthrough tool of the config: its file, line and key
            raise located(e, config, given=("serve.passthrough",) if args.passthrough else ()) from None
        del read  # the served toolset holds that copy now
    except (ConfigError, AgentSetupError, SandboxError, OSError) as e:
        error(str(e))
        return EXIT_USAGE
    if refresh is not None:
        refresh.start(app.reload_tree, on_ended=lambda: _warn_unrecorded(app, config, tree, refreshed=True))
        app.stop_on_close(refresh.stop)  # while the sessions close, under the same signal handling
        app.on_stop_signal.append(refresh.cancel.set)  # before a signal kills the servers it started
    else:
        _warn_unrecorded(app, config, tree, refreshed=not args.no_regenerate)
    if args.no_regenerate:
        _warn_unconfigured(app, config, tree)
    follow = None if args.no_regenerate else _follow(config, tree, app)
    if follow is not None:
        follow.start(after=refresh.thread if refresh is not None else None)
        app.on_tools_changed.append(follow.changed)
        app.regenerating = follow.due
        app.stop_on_close(follow.stop)
        app.on_stop_signal.append(follow.cancel.set)
    try:
        return _serve(app, args, sockets)
    except SandboxError as e:
        error(f"the sandbox cannot run: {e}")
        return EXIT_SANDBOX
    finally:
        for stop in (refresh, follow):
            if stop is not None:
                stop.stop()  # already stopped, unless the server never opened


def _warn_doubled(config: Config) -> None:
    """One warning when ``config`` is Claude Code's file, lists tooltree serve, and Claude Code also starts its servers
    directly (`tool_tree.client_settings`): with the setting that stops it."""
    from tool_tree.client_settings import claude_code_doubles

    doubled = claude_code_doubles(config)
    if doubled is not None:
        print("tooltree serve: warning: " + " ".join(terminal_text(doubled.message()).splitlines()), file=sys.stderr,
              flush=True)  # fmt: skip


def _warn_unconfigured(app: ToolServer, config: Config, tree: Path) -> None:
    """One warning when ``--no-regenerate`` serves a tree with servers ``config`` does not have or disables (no config
    at all among them): every call of their tools is refused, and nothing else would say so before a script ran."""
    enabled = {s.name for s in config.servers if s.enabled}
    missing = sorted(s.name for s in app.toolset.manifest.servers if s.name not in enabled)
    if not missing:
        return
    named = terminal_text(", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    source = "no config was given" if config.file is None else f"{config.file} does not have or disables them"
    print(f"tooltree serve: warning: {tree} has server(s) {named}, and {source}: every call of their tools fails; "
          "pass the --config the tree was generated from", file=sys.stderr, flush=True)  # fmt: skip


def _warn_unrecorded(app: ToolServer, config: Config, tree: Path, *, refreshed: bool) -> None:
    """One warning when serve offers prompts or resources and the tree it serves may not hold those of some servers:
    generated by a release that did not record them (`agent.serve.upstream_lists.UpstreamExtras.unrecorded`), and
    not ``refreshed`` since (``--no-regenerate``), or its regeneration did not record them (a server failed)."""
    servers = app.extras.unrecorded
    if not servers:
        return
    named = terminal_text(", ".join(servers[:3]) + (f" and {len(servers) - 3} more" if len(servers) > 3 else ""))
    said = (
        f"regenerating it did not record those of {named} (see above), so serve offers none of theirs"
        if refreshed
        else f"serve offers none of those of {named}"
    )
    from tool_tree.regenerate import regenerate_command

    todo = "" if refreshed else ", or serve without --no-regenerate"
    print(f"tooltree serve: warning: {tree} was generated by a tooltree release that did not record the servers' "
          f"prompts and resources, and {said}; regenerate the tree with {regenerate_command(tree, config=config.file)}"
          f"{todo}",
          file=sys.stderr, flush=True)  # fmt: skip


def _serve(app: ToolServer, args: argparse.Namespace, sockets: list[socket.socket]) -> int:
    import anyio

    from agent.serve.http import TOKEN_ENV as ENV
    from agent.serve.http import new_token, serve_http
    from agent.serve.stdio import serve_stdio

    if not args.http:
        if sys.stdin.isatty():  # typed at a terminal, it would wait there without a word
            print(STDIO_AT_A_TERMINAL, file=sys.stderr, flush=True)
        anyio.run(serve_stdio, app)
        return EXIT_OK
    token = os.environ.get(ENV) or ""
    generated = not token
    token = token or new_token()

    def ready(url: str) -> None:
        print(f"tooltree serve: {url}", file=sys.stderr)
        if generated:
            print(f"tooltree serve: token (shown once; set ${ENV} to choose it): {token}", file=sys.stderr)
        print("tooltree serve: clients send the header  Authorization: Bearer <token>", file=sys.stderr, flush=True)

    anyio.run(lambda: serve_http(app, token=token, host=args.host, port=args.port, on_ready=ready, sockets=sockets))
    return EXIT_OK
