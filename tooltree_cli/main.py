"""Entry points for the `tooltree` and `generate-tree` commands.

The commands' modules are imported by `build_parser`, within `main`, not as this module is. A Ctrl-C, SIGTERM or
SIGHUP in the first tenths of a second, while they import, is held until the command is known, then ends it as a later
one does (one line, exit 130, 143 or 129; `exec --json` its object), not with a traceback, nor (SIGTERM, SIGHUP: their
default action) at once with nothing said.
"""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from tooltree_cli.signals import Terminated, handling, held, signals_stop_like_ctrl_c, stop

DEBUG_HELP = "show tracebacks for unexpected errors"
# The positionals a user may forget to quote (`tooltree search export leads`): the words past the first are told so.
QUOTED = ("query", "task")


def build_parser() -> argparse.ArgumentParser:
    from tooltree_cli import agent_cmd, exec_cmd, generate_cmd, image_cmd, sandbox_cmd, search_cmd, serve_cmd
    from tooltree_cli.common import UNEXPECTED_HELP

    parser = argparse.ArgumentParser(
        prog="tooltree",
        description="Turn MCP servers into a browsable tree of typed Python stubs.",
        epilog=f"Every command exits {UNEXPECTED_HELP}.",
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


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, pending: Sequence[int] = ()) -> int:
    """Run the command ``args`` chose; a signal held while it started (``pending``) stops it at once."""
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False)) or os.environ.get("TOOLTREE_DEBUG") == "1"
    try:
        if pending:
            raise stop(pending[0])
        from tooltree_cli import logs

        logs.install()  # before: log records went out raw (a server's escape sequences), a traceback per notification
        code: int = handler(args)
        return code
    except KeyboardInterrupt as e:  # Terminated too (SIGTERM, SIGHUP): before the command could say what it did
        if (on_stop := getattr(args, "on_stop", None)) is not None:
            on_stop(args, e)
        said, code = (e.said, e.exit_code) if isinstance(e, Terminated) else ("interrupted", 130)
        print(f"tooltree: {said}", file=sys.stderr)
        return code
    except BrokenPipeError:  # the reader of stdout left (`tooltree search --json ... | head`): nothing to say
        # Python flushes stdout once more at exit, which would fail again: point it at nothing first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141  # as a shell reports a command ended by SIGPIPE
    except Exception as e:  # the top level: one clear line unless --debug, and a status no outcome has
        if debug:
            raise
        from tooltree_cli.common import EXIT_UNEXPECTED

        hint = "(unexpected: run with --debug for the traceback)"
        print(f"tooltree: error: {type(e).__name__}: {e} {hint}", file=sys.stderr)
        return EXIT_UNEXPECTED


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but an argument nobody knows is reported by the (sub)command it was given to, with
    that command's usage and a hint (argparse reports it from the top-level parser, with ``tooltree``'s usage)."""
    _refuse_option_before_command(parser, sys.argv[1:] if argv is None else argv)
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _command_parser(parser, args)
        hint = _hint(command, command is not parser, args, extras)
        command.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    return args


def _refuse_option_before_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Refuse an option of a command given before it with its value (``tooltree --config x.yaml serve``), as `_hint`
    refuses one without (``tooltree --json search x``). Before: argparse took the value for the command, "argument
    COMMAND: invalid choice: 'x.yaml' (choose from 'generate-tree', …)"."""
    chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if chooser is None:
        return
    first = next((i for i, a in enumerate(argv) if a not in parser._option_string_actions), None)
    if first is None or not argv[first].startswith("-") or argv[first] == "--":
        return
    name = next((a for a in argv[first + 1 :] if a in chooser.choices), None)
    option = argv[first].split("=", 1)[0]
    if name is None or (action := (command := chooser.choices[name])._option_string_actions.get(option)) is None:
        return
    given = argv[first : first + 2] if action.nargs is None and option == argv[first] else argv[first : first + 1]
    hint = f"(an option of `{command.prog}`: put it after the command)"
    command.error(f"unrecognized arguments: {' '.join(given)} {hint}")


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)command parser ``args`` chose (``parser`` itself when no command was given)."""
    while True:
        chooser = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, chooser.dest, None) if chooser is not None else None
        if chooser is None or not isinstance(name, str) or name not in chooser.choices:
            return parser
        parser = chooser.choices[name]


def _hint(command: argparse.ArgumentParser, sub: bool, args: argparse.Namespace, extras: list[str]) -> str:
    """What the first unrecognized argument probably meant: an option of the command put before it, a
    misspelt option, or the rest of a query or task that was not quoted."""
    options = [e.split("=", 1)[0] for e in extras if e.startswith("--")]
    if options:
        if sub and options[0] in command._option_string_actions:  # it would have been taken after the command
            return f" (an option of `{command.prog}`: put it after the command)"
        known = [o for o in command._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(options[0], known, n=1)
        return f" (did you mean {close[0]}?)" if close else ""
    words = [e for e in extras if not e.startswith("-")]
    quoted = next((a.dest for a in command._actions if not a.option_strings and a.dest in QUOTED), None)
    first = getattr(args, quoted, None) if quoted is not None else None
    if words and isinstance(first, str):
        return f' (a {quoted} of several words goes in quotes: "{" ".join([first, *words])}")'
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    return _run(build_parser, argv)


def generate_tree_main(argv: Sequence[str] | None = None) -> int:
    """The standalone `generate-tree` command: the same options as `tooltree generate-tree`."""
    return _run(_generate_tree_parser, argv)


def _generate_tree_parser() -> argparse.ArgumentParser:
    from tooltree_cli import generate_cmd

    parser = argparse.ArgumentParser(prog="generate-tree", description=f"Write the MCP stub tree. {generate_cmd.EXITS}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    generate_cmd.add_arguments(parser)
    return parser


def _run(make_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str] | None) -> int:
    # While the commands' modules import and the arguments are read, Ctrl-C, SIGTERM and SIGHUP are held, then acted
    # on once the command is known, so that it says it; from there on SIGTERM and SIGHUP stop the command as Ctrl-C
    # does where it does not handle them itself. Before, their default action ended it at once with nothing said.
    with held() as pending:
        try:
            parser = make_parser()
            args = _parse(parser, argv)
        except KeyboardInterrupt:  # not a held signal (one is not raised): an interrupt nonetheless, one line
            print("tooltree: interrupted", file=sys.stderr)
            return 130
        # Installed over the holding handlers: no moment with the default action. Ctrl-C raises again (unless it was
        # ignored: a shell's background job).
        ctrl_c = [signal.SIGINT] if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN else []
        with signals_stop_like_ctrl_c(), handling(ctrl_c, signal.default_int_handler):
            return _dispatch(parser, args, pending)


if __name__ == "__main__":
    sys.exit(main())
