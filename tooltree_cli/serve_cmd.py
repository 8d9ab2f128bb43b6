"""`tooltree serve`: the tree, tool search and the sandbox as an MCP server (stdio, or Streamable HTTP with a token).

Before serving, the tree is brought up to date from the configured servers (`generate-tree`: a
rerun with nothing changed writes nothing), unless ``--no-regenerate``. Everything this command
prints goes to stderr: over stdio, stdout is the MCP channel.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.common import load_optional_config, sandbox_config
from tooltree_cli.output import error

if TYPE_CHECKING:
    from agent.serve.server import ToolServer
    from tool_tree.config import Config

EXIT_OK, EXIT_USAGE, EXIT_SERVERS, EXIT_SANDBOX = 0, 2, 3, 4
TOKEN_ENV = "TOOLTREE_SERVE_TOKEN"  # as agent.serve.http.TOKEN_ENV (not imported: help text only)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve",
        help="offer the tree, search and sandbox to any MCP client (Claude Code, Claude Desktop, ...)",
        description="An MCP server with the four tools of code mode (list_files, read_file, search_tools, "
        "execute_python) over the tree, one sandbox session per client session. stdio by default; --http for "
        f"Streamable HTTP at /mcp, which requires a bearer token (${TOKEN_ENV}, or one generated and printed "
        "once). The tree is regenerated from the servers first when it is missing or stale. Exit 0 when the "
        "client disconnected or a signal stopped it, 2 for usage errors, 3 when the tree could not be "
        "generated, 4 when the sandbox cannot run.",
    )
    p.add_argument("--config", default=None, help="tooltree.yaml with the servers (default: ./tooltree.yaml)")
    p.add_argument("--tree", default="tree", help="the generated tree (default: ./tree)")
    p.add_argument(
        "--no-regenerate",
        action="store_true",
        help="serve the tree as it is: start no server to check it (a missing tree is then an error)",
    )
    p.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="the address to bind with --http (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="the port with --http (default: 8765; 0 picks one)")
    p.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow --host to be other than loopback. Whoever holds the token can then run code in the sandbox "
        "and call every tool of every configured server with your credentials, from anywhere that reaches the "
        "address; the token travels in clear text unless a TLS proxy sits in front",
    )
    p.add_argument("--workspace", metavar="DIR", help="a host folder restored into each session's /workspace and "
                   "saved back when the session ends (files and skills/ persist across sessions)")  # fmt: skip
    p.add_argument("--audit", metavar="FILE", help="append one JSON line per tool call (every session) to this file")
    p.add_argument("--timeout", type=float, help="wall-clock limit of one execution in seconds (default: 30)")
    p.add_argument("--idle-timeout", type=float, help="seconds without a call before a client's session ends")
    p.add_argument("--warm", type=int, help="sandboxes kept started for the next client (default: 1; 0: none)")
    p.add_argument(
        "--passthrough",
        action="append",
        metavar="SERVER.TOOL",
        help="also offer this tool as an ordinary MCP tool (repeat; replaces serve.passthrough)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent.errors import AgentSetupError
    from agent.serve.settings import ServeSettings
    from sandbox.errors import SandboxError
    from tool_tree.config import Config, ConfigError

    if args.http and args.host not in LOOPBACK and not args.allow_remote:
        error(f"--host {args.host} is not loopback; add --allow-remote if you mean it (see --help for what it exposes)")
        return EXIT_USAGE
    if args.warm is not None and args.warm < 0:
        error("--warm takes 0 or more")
        return EXIT_USAGE
    tree = Path(args.tree)
    try:
        config = load_optional_config(args.config)
        if config is None and not args.no_regenerate:
            error("no tooltree.yaml here; pass --config PATH (or --no-regenerate to serve an existing tree)")
            return EXIT_USAGE
        if config is None:
            config = Config(servers=())
        if not args.no_regenerate:
            code = _regenerate(config, tree)
            if code != EXIT_OK:
                return code
        settings = ServeSettings.from_config(
            config, passthrough=tuple(args.passthrough) if args.passthrough else None, idle_timeout=args.idle_timeout,
            warm=args.warm,
        )  # fmt: skip
        limits = sandbox_config(config, timeout=args.timeout)
        from agent.serve.server import ToolServer

        app = ToolServer(config, tree, settings=settings, sandbox_config=limits, workspace=args.workspace,
                         audit=args.audit)  # fmt: skip
    except (ConfigError, AgentSetupError, SandboxError, OSError) as e:
        error(str(e))
        return EXIT_USAGE
    try:
        return _serve(app, args)
    except SandboxError as e:
        error(f"the sandbox cannot run: {e}")
        return EXIT_SANDBOX


def _regenerate(config: Config, tree: Path) -> int:
    """Bring the tree up to date from the servers (nothing is written when nothing changed)."""
    from generator.files import UnsafePathError
    from generator.generate import generate
    from tool_tree.search import SearchError
    from tool_tree.tree import Manifest, TreeError

    print(f"tooltree serve: checking {tree} against {len(config.enabled_servers)} server(s) …", file=sys.stderr)
    try:
        result = generate(config, tree)
    except (TreeError, UnsafePathError, SearchError) as e:
        error(f"could not generate {tree}: {e}")
        return EXIT_SERVERS
    for s in result.failed:
        print(f"tooltree serve: {s.name} failed to list its tools ({s.error}); its stubs are kept", file=sys.stderr)
    try:
        Manifest.load(tree)
    except TreeError as e:
        error(f"no usable tree at {tree}: {e}")
        return EXIT_SERVERS
    if result.report is not None and (result.report.written or result.report.deleted):
        r = result.report
        print(f"tooltree serve: {tree}: {len(r.written)} written, {len(r.deleted)} deleted", file=sys.stderr)
    return EXIT_OK


def _serve(app: ToolServer, args: argparse.Namespace) -> int:
    import anyio

    from agent.serve.http import TOKEN_ENV as ENV
    from agent.serve.http import new_token, serve_http
    from agent.serve.stdio import serve_stdio

    if not args.http:
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

    anyio.run(lambda: serve_http(app, token=token, host=args.host, port=args.port, on_ready=ready))
    return EXIT_OK
