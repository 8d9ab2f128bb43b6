"""Entry points for the `tooltree` and `generate-tree` commands."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from tooltree_cli import agent_cmd, exec_cmd, generate_cmd, image_cmd, sandbox_cmd, search_cmd, serve_cmd

DEBUG_HELP = "show tracebacks for unexpected errors"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tooltree",
        description="Turn MCP servers into a browsable tree of typed Python stubs.",
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (generate_cmd, search_cmd, exec_cmd, agent_cmd, serve_cmd, image_cmd, sandbox_cmd):
        module.add_parser(sub)
    _debug_everywhere(sub)
    return parser


def _debug_everywhere(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Give every subcommand (and theirs) ``--debug`` too, so ``tooltree exec ... --debug`` works as well as
    ``tooltree --debug exec ...``. Left out, it sets nothing: a ``--debug`` given before the command stays."""
    for parser in sub.choices.values():
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _debug_everywhere(action)


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False)) or os.environ.get("TOOLTREE_DEBUG") == "1"
    try:
        code: int = handler(args)
        return code
    except KeyboardInterrupt:
        print("tooltree: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout left (`tooltree search --json ... | head`): nothing to say
        # Python flushes stdout once more at exit, which would fail again: point it at nothing first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141  # as a shell reports a command ended by SIGPIPE
    except Exception as e:  # the top level: one clear line unless --debug
        if debug:
            raise
        print(f"tooltree: error: {type(e).__name__}: {e} (run with --debug for the traceback)", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return _dispatch(parser, args)


def generate_tree_main(argv: Sequence[str] | None = None) -> int:
    """The standalone `generate-tree` command: the same options as `tooltree generate-tree`."""
    parser = argparse.ArgumentParser(prog="generate-tree", description="Write the MCP stub tree.")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    generate_cmd.add_arguments(parser)
    return _dispatch(parser, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
