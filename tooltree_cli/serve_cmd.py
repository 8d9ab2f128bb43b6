"""`tooltree serve`: the tree, tool search and the sandbox as an MCP server (stdio, or Streamable HTTP with a token).

The tree is brought up to date from the configured servers (`generate-tree`: a rerun with
nothing changed writes nothing), unless ``--no-regenerate``. A missing tree is generated before
serving. An existing one is served at once and refreshed in the background: listing every
server can take longer than a client waits for its handshake (Claude Code gives up after 30 s,
and 120 servers take ~40 s on two cores), so the client connects at once. Its file and search
tools see each refreshed file as it is replaced, and a sandbox session started after the refresh
can call the tools it added; client sessions that start after it get its ``instructions`` (the
tools offered never change). A server that later says its tools, prompts or resources changed, in any client
session, has its part of the tree regenerated the same way (`tooltree_cli.serve_follow`). When serving ends the
refresh is cancelled and every server it started is closed. ``--regenerate-first`` waits for it instead. When every
server fails, nothing is written: a tree generated before serving (missing, or ``--regenerate-first``) is not served
(exit 3), and a background refresh leaves the served tree as it was. A config that lists no server
tooltree can start is refused (the refresh would empty the tree). Everything this command prints goes
to stderr: over stdio, stdout is the MCP channel.

Over 400 lines: the command, its background refresh and the regeneration both share, which report to the
one stderr in the same words.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.common import (
    DEFAULT_CONFIG,
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
from tooltree_cli.output import error, terminal_name, terminal_text

if TYPE_CHECKING:
    from agent.serve.server import ToolServer
    from generator.cancel import Cancel
    from tool_tree.config import Config
    from tool_tree.tree import Manifest

    Read = tuple[tuple[int, ...], Manifest]
    """A tree's manifest as read, with its file's version (`sandbox.stored_definitions.versioned_manifest`)."""
    from tooltree_cli.serve_follow import Follow

EXIT_OK, EXIT_USAGE, EXIT_SERVERS, EXIT_SANDBOX = 0, 2, 3, 4
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
        "or served. Exit 0 when the client disconnected or a signal stopped it, 2 for usage "
        "errors, 3 when the tree could not be generated or every server failed, 4 when the sandbox cannot run, "
        f"{UNEXPECTED_HELP}, 128 + the signal's number when a signal stopped the tree's generation before serving "
        "(129 SIGHUP, 130 SIGINT, 143 SIGTERM).",
    )
    p.add_argument(
        "--config", type=config_path, default=None, help="tooltree.yaml with the servers (default: ./tooltree.yaml)"
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
        else audit_problem(args.audit, tree=args.tree, workspace=args.workspace, config=args.config or DEFAULT_CONFIG),
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
        config = load_optional_config(args.config, using=())  # a server whose variable is unset fails its calls
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


MAX_WARNINGS = 50
"""Warnings of a generation printed one per line (as `generate-tree` prints them); the rest are counted."""


def _regenerate_before_serving(config: Config, tree: Path) -> tuple[int, Read | None]:
    """`_regenerate` before anything is served, stopped by SIGINT, SIGTERM or SIGHUP (`_signals_stop_generation`);
    its exit code, 128 + the signal's number when one stopped it, and the manifest it read (None: nothing written)."""
    from generator.cancel import Cancel, GenerateCancelled

    cancel, received = Cancel(), list[int]()
    try:
        with _signals_stop_generation(cancel, received):
            code, read = _regenerate(config, tree, cancel=cancel)
    except (GenerateCancelled, KeyboardInterrupt):
        if not received:
            raise
        name = signal.Signals(received[0]).name
        print(f"tooltree serve: stopped generating {tree} ({name}); the servers it started are ended and nothing is "
              "served", file=sys.stderr, flush=True)  # fmt: skip
        return 128 + received[0], None
    return code, read


@contextlib.contextmanager
def _signals_stop_generation(cancel: Cancel, received: list[int]) -> Iterator[None]:
    """While a tree is generated before serving: SIGINT, SIGTERM or SIGHUP stops the listing of the servers
    (``cancel``: nothing is written) and ends the servers it started at once, SIGTERM then SIGKILL `KILL_WAIT`
    seconds later, as `agent.serve.stdio.StopSignals` does once serving; outside the listing, where no server
    runs, it raises KeyboardInterrupt where the run is (a first tree written halfway is removed). ``received``
    collects the signals. Only on the main thread.

    A client that gave up waiting for its handshake sends them (Claude Code: SIGINT, SIGTERM, SIGKILL within about
    a second). Before, SIGTERM and SIGHUP ended serve at once and left the server being listed running, orphaned.
    """
    from agent.serve.stdio import KILL_WAIT, STOP_SIGNALS, terminate_children
    from tooltree_cli.signals import handling

    def end_servers(first: bool) -> None:
        if first:  # `Cancel.set` waits for the event loop, which runs on the main thread: set from this one
            cancel.set()
        if terminate_children():
            time.sleep(KILL_WAIT)
            terminate_children(signal.SIGKILL)

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        first = not cancel.is_set()
        if first and not cancel.listening():
            raise KeyboardInterrupt
        threading.Thread(target=end_servers, args=(first,), name="tooltree-stop", daemon=True).start()

    with handling(STOP_SIGNALS, on_signal):
        yield


def _usable(tree: Path) -> tuple[tuple[int, ...], Manifest] | None:
    """The tree's manifest and its file's version, None when it has no usable one: the copy the process shares
    (`versioned_manifest`), so a caller holding it until the served toolset reads the same file spares that a second
    read."""
    from sandbox.stored_definitions import versioned_manifest
    from tool_tree.tree import TreeError

    try:
        return versioned_manifest(tree)
    except TreeError:
        return None


class Refresh:
    """`_regenerate` on a thread while the tree is served; `stop` cancels it and waits for it."""

    def __init__(self, config: Config, tree: Path) -> None:
        from generator.cancel import Cancel

        self.config, self.tree = config, tree
        self.cancel = Cancel()
        self.thread = threading.Thread(target=self._run, name="tooltree-refresh", daemon=True)
        self.on_refreshed: Callable[[Read], None] | None = None
        self.on_ended: Callable[[], None] | None = None

    def start(self, on_refreshed: Callable[[Read], None], on_ended: Callable[[], None] | None = None) -> None:
        """Start refreshing; ``on_refreshed`` is called once the tree is up to date, with its manifest as the refresh
        read it (`_regenerate`), and ``on_ended`` after the refresh ended, whether it succeeded or failed (not when
        it was stopped)."""
        self.on_refreshed, self.on_ended = on_refreshed, on_ended
        self.thread.start()

    def _run(self) -> None:
        from generator.cancel import GenerateCancelled

        try:
            code, read = _regenerate(self.config, self.tree, cancel=self.cancel, background=True)
            if code == EXIT_OK and read is not None and self.on_refreshed is not None:  # else the tree is as it was
                _serve_refreshed(self.on_refreshed, read)
        except GenerateCancelled:
            print("tooltree serve: the tree's refresh was stopped; the tree is as it was", file=sys.stderr)
            return
        except Exception as e:  # serving goes on with the tree as it is
            error(f"refreshing {self.tree} failed: {type(e).__name__}: {e}")
        if self.on_ended is not None:
            self.on_ended()

    def stop(self) -> None:
        self.cancel.set()
        self.thread.join()


def _serve_refreshed(
    reload: Callable[[Read], None], read: Read, what: str = "the refreshed tree's instructions"
) -> None:
    """Have the tree served as it is now (``reload``: `ToolServer.reload_tree`, given the manifest ``read``), and say
    so."""
    from agent.errors import AgentSetupError

    try:
        reload(read)
    except AgentSetupError as e:
        error(f"the refreshed tree: {e}; new sessions keep the instructions of the tree at start")
    else:
        print(f"tooltree serve: sessions from now on get {what}", file=sys.stderr, flush=True)


def _follow(config: Config, tree: Path, app: ToolServer) -> Follow:
    """Regenerate a server's part of the tree when it says its tools, prompts or resources changed
    (`tooltree_cli.serve_follow`)."""
    from tooltree_cli.serve_follow import Follow

    def regenerate(servers: Sequence[str], cancel: Cancel) -> None:
        code, read = _regenerate(config, tree, cancel=cancel, only=servers)
        if code == EXIT_OK and read is not None:
            now = f"the tools, prompts and resources of {', '.join(servers)} as they are now"
            _serve_refreshed(app.reload_tree, read, now)

    return Follow(regenerate, error)


def _regenerate(
    config: Config, tree: Path, *, cancel: Cancel | None = None, background: bool = False, only: Sequence[str] = ()
) -> tuple[int, Read | None]:
    """Bring the tree up to date from the servers (``only`` those named, when given: the others' stubs are kept;
    nothing is written when nothing changed); report each server that failed. The exit code, EXIT_SERVERS when
    the tree could not be generated or every server failed (the tree, if any, is then left as it was: `generate`
    writes nothing), else EXIT_OK; and, when any file of the tree but its search index was written or deleted (the
    sessions then get the tree again), the new manifest and its version as the check that the tree is usable read
    them, for the served toolset and the prompts and resources (before: read again, so twice, and a manifest
    replaced in between was served unchecked), else None."""
    from generator.files import UnsafePathError
    from generator.generate import generate
    from sandbox.mcp_bridge import with_stderr
    from sandbox.stored_definitions import versioned_manifest
    from tool_tree.search import SearchError
    from tool_tree.tree import SEARCH_INDEX_FILE, TreeError
    from tooltree_cli.progress import shown_error  # the server wrote the error: one line, cleaned, cut

    existed = _usable(tree) is not None
    # A server whose variable is not set cannot be listed: its part of the tree is kept as it is (`warn_unset` said
    # why at start); before, its error stopped serve.
    unset = [s.name for s in config.offered_servers if s.unresolved is not None and (not only or s.name in only)]
    listed = [s.name for s in config.offered_servers if s.unresolved is None and (not only or s.name in only)]
    if unset and not listed:
        if not existed:
            error(f"could not generate {tree}: no server can be listed ({', '.join(unset)}: see above)")
        return (EXIT_OK if existed else EXIT_SERVERS), None
    count = len(listed)
    if only:
        said = f"{only[0]} says its" if len(only) == 1 else f"{', '.join(only)} say their"
        said += " tools, prompts or resources"  # `Follow` keeps the server, not which of its lists
        print(f"tooltree serve: {said} changed; regenerating {'its' if len(only) == 1 else 'their'} part of {tree} "
              "…", file=sys.stderr, flush=True)  # fmt: skip
    elif background:
        print(f"tooltree serve: serving {tree} as it is; refreshing it from {count} server(s) meanwhile …",
              file=sys.stderr)  # fmt: skip
    elif existed:
        print(f"tooltree serve: checking {tree} against {count} server(s) …", file=sys.stderr)
    else:
        print(f"tooltree serve: generating {tree} from {count} server(s) …", file=sys.stderr)
    try:
        result = generate(config, tree, cancel=cancel, only=listed if unset else only)
    except (TreeError, UnsafePathError, SearchError) as e:
        error(f"could not generate {tree}: {e}")
        return EXIT_SERVERS, None
    for w in result.warnings[:MAX_WARNINGS]:  # a tool left out as malformed, a server that kept changing its tools
        print("tooltree serve: warning: " + " ".join(terminal_text(w).splitlines()), file=sys.stderr)
    if len(result.warnings) > MAX_WARNINGS:
        print(f"tooltree serve: warning: … {len(result.warnings) - MAX_WARNINGS} more", file=sys.stderr)
    for s in result.failed:
        kept = "its stubs are kept" if s.kept_previous else "its tools are not in the tree"
        failed = f"tooltree serve: {terminal_name(s.name)} failed to list its tools ({shown_error(s.error)}); {kept}"
        print(with_stderr(failed, terminal_text(s.stderr_tail)), file=sys.stderr)  # escape sequences go whole
    if result.failed and len(result.failed) == len(result.servers):  # `generate` wrote nothing
        if background or only:
            print(f"tooltree serve: {tree} is not up to date: every server failed (see above); it is served as it "
                  "was", file=sys.stderr, flush=True)  # fmt: skip
        elif existed:
            error(f"could not bring {tree} up to date: every server failed (see above); it is left as it was")
        else:
            error(f"could not generate {tree}: every server failed (see above); nothing was written or served")
        return EXIT_SERVERS, None
    try:
        read = versioned_manifest(tree)
    except TreeError as e:
        error(f"no usable tree at {tree}: {e}")
        return EXIT_SERVERS, None
    r = result.report
    changed = r is not None and bool(r.written or r.deleted)
    changes = f"{len(r.written)} written, {len(r.deleted)} deleted" if r is not None and changed else "nothing changed"
    made = f"{len(r.written) if r is not None else 0} file(s) written"
    names = ", ".join(s.name for s in result.failed)
    if result.failed and existed:
        print(f"tooltree serve: {tree} is not up to date: {len(result.failed)} of {count} server(s) failed "
              f"({names}; see above); {changes} for the others", file=sys.stderr, flush=True)  # fmt: skip
    elif result.failed:
        print(f"tooltree serve: generated {tree} without the {len(result.failed)} of {count} server(s) that failed "
              f"({names}; see above): {made}", file=sys.stderr, flush=True)  # fmt: skip
    elif not existed:
        print(f"tooltree serve: generated {tree} ({made})", file=sys.stderr, flush=True)
    elif background or changed or only:
        print(f"tooltree serve: {tree} is up to date ({changes})", file=sys.stderr, flush=True)
    # The search index alone written (it was missing or stale) changes nothing a session holds: it is read anew by
    # itself. Before, sessions were told the tree was regenerated and to reconnect for a tool added since.
    served = r is not None and any(rel != SEARCH_INDEX_FILE for rel in [*r.written, *r.deleted])
    return EXIT_OK, read if served else None


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
