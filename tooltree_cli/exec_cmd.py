"""`tooltree exec`: run a script in the sandbox against the real servers of a generated tree.

(Over 400 lines: running the script and telling each way a run ends — a result, Ctrl-C, SIGTERM or SIGHUP, a sandbox
that did not start or failed under the script, a workspace not saved — share how a result is reported (`_report`).
The script is read in `exec_script`; a result's printout and ``--json`` object are made in `exec_result`.)
"""

from __future__ import annotations

import argparse
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tool_tree.text import one_line
from tooltree_cli.common import (
    CONFIG_FILES,
    UNEXPECTED_HELP,
    audit_problem,
    config_path,
    file_problem,
    folder_problem,
    load_optional_config,
    sandbox_config,
    sandbox_seconds,
    workspace_problem,
)
from tooltree_cli.exec_calls import LEDGER_LINES as LEDGER_LINES
from tooltree_cli.exec_calls import print_sandbox_failed
from tooltree_cli.exec_images import save_images
from tooltree_cli.exec_result import _outputs_where, _print_human, result_json
from tooltree_cli.exec_script import _read_code, _UsageError, left_behind
from tooltree_cli.exec_stop import CANCEL_WAIT, CtrlCStopsTheScript, FinishTheSave, notes_not_logged
from tooltree_cli.output import EXIT_NOT_PRINTED, not_printed, print_json
from tooltree_cli.signals import EXIT_HUNG_UP, EXIT_TERMINATED, Terminated, signals_stop_like_ctrl_c

if TYPE_CHECKING:
    from sandbox.config import SandboxConfig
    from sandbox.errors import Unreported
    from sandbox.results import ExecutionResult
    from sandbox.session import Sandbox
    from tool_tree.config import Config
    from tooltree_cli.exec_live import LiveOutput

EXIT_OK, EXIT_SCRIPT, EXIT_USAGE, EXIT_SANDBOX = 0, 1, 2, 4
EXIT_INTERRUPTED = 128 + signal.SIGINT


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "exec",
        help="run a Python script in the sandbox, with the tree's tools",
        description="Run a script in a hardened container; its tool calls go through the bridge to the real "
        f"servers. Exit {EXIT_OK} when the script succeeded, {EXIT_SCRIPT} when it failed or timed out, {EXIT_USAGE} "
        f"for usage errors, {EXIT_SANDBOX} when the sandbox failed or the workspace or an image could not be saved "
        f"(the script's output is printed first) or the result printed; {UNEXPECTED_HELP}; {EXIT_INTERRUPTED} when "
        "interrupted (Ctrl-C "
        f"stops the script and prints what it did so far; Ctrl-C again quits at once, with what the sandbox sent of "
        f"it), {EXIT_TERMINATED} when terminated (SIGTERM stops the script and prints what it did so far, within "
        f"10 s), {EXIT_HUNG_UP} when its terminal closed (SIGHUP: the same, printed where it still can be). The "
        "workspace is saved in each case.",
    )
    p.add_argument("script", nargs="?", help="the script file ('-' for standard input)")
    p.add_argument("-c", dest="code", metavar="CODE", help="the code to run, instead of a file")
    p.add_argument(
        "--config",
        type=config_path,
        default=None,
        help=f"{CONFIG_FILES}, or for a --tree generated before, the file its manifest records)",
    )
    p.add_argument("--tree", default="tree", help="the generated tree (default: ./tree)")
    p.add_argument("--workspace", metavar="DIR", help="a host folder restored into /workspace and saved back")
    p.add_argument(
        "--timeout",
        type=sandbox_seconds,
        help="wall-clock limit in seconds, at most a week (default: the config's, or 30)",
    )
    p.add_argument(
        "--images",
        metavar="DIR",
        help="save images the script shows into this folder, as image-N.png (or .jpg, .gif, .webp) numbered on from "
        "the highest image-N already there: no file is ever overwritten, nor a link followed",
    )
    p.add_argument("--audit", metavar="FILE", help="append one JSON line per tool call to this file")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(handler=run, on_stop=_quit_before_run)


def _path_problem(args: argparse.Namespace) -> str | None:
    """The first path option that cannot be written, as one line (None when all can)."""
    if args.audit is not None and (problem := file_problem("--audit", args.audit)):
        return problem
    if args.audit is not None and (
        problem := audit_problem(args.audit, tree=args.tree, workspace=args.workspace, config=args.config)
    ):
        return problem
    if args.images is not None and (problem := folder_problem("--images", args.images, home=True)):
        return problem
    if args.workspace is not None and (problem := folder_problem("--workspace", args.workspace, home=True)):
        return problem
    if args.workspace is not None and (problem := workspace_problem(args.workspace, args.tree)):
        return problem
    return None


def run(args: argparse.Namespace) -> int:
    from sandbox.errors import EngineUnavailableError, ImageError, SandboxError, SessionError
    from tooltree_cli.logs import upstream_failures

    upstream_failures(shown=False)  # a failing server is in the script's error and the calls it made
    from tool_tree.config import ConfigError
    from tool_tree.tree import Manifest, TreeError

    try:
        code, filename = _read_code(args)
        if (problem := _path_problem(args)) is not None:
            print(f"tooltree: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
        # A server whose variable is unset fails its calls; without --config, the file the tree records is read.
        config = load_optional_config(args.config, using=(), tree=Path(args.tree))
        tree = Path(args.tree)
        Manifest.load(tree)  # a missing or broken tree is a usage error, before anything starts
        settings = sandbox_config(config, timeout=args.timeout)
    except (_UsageError, OSError, ConfigError, TreeError, SandboxError) as e:
        print(f"tooltree: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if config is None:  # a script may compute, or search the tree, without the servers
        print(f"tooltree: {NO_CONFIG}", file=sys.stderr)
    # On a terminal, what the script prints is shown as it comes (`exec_live`); the end prints only the rest.
    from tooltree_cli.exec_live import LiveOutput

    args.live = None if args.json else LiveOutput.on_terminals(sys.stdout, sys.stderr)
    try:
        try:
            with signals_stop_like_ctrl_c():
                result, unsaved, notes = execute(
                    code,
                    tree,
                    config,
                    settings,
                    workspace=args.workspace,
                    audit=args.audit,
                    filename=filename,
                    live=args.live,
                )
        finally:
            args.accounted = True  # what a stop prints from now on is said below (`_quit_before_run` is not)
    except TerminatedAfter as e:  # SIGTERM or SIGHUP: what the stopped script did (as for a Ctrl-C)
        why = f"{e.cause}, which stopped the script" if e.result is not None else e.cause
        why = f"{e.cause} during the workspace's save" if e.while_saving else why
        _print_stopped(args, e, e.exit_code, why)
        print(f"tooltree: {e.said}", file=sys.stderr)
        return e.exit_code
    except QuitAfter as e:  # a second Ctrl-C: what the script did, as far as it is known
        why = "tooltree was interrupted (Ctrl-C) during the workspace's save" if e.while_saving else ""
        _print_stopped(args, e, EXIT_INTERRUPTED, why or "the script was interrupted (Ctrl-C)")
        print("tooltree: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt as e:  # Terminated too: before the servers and the sandbox started; main says the line
        _quit_json(args, e)
        raise
    except (EngineUnavailableError, ImageError) as e:
        print_sandbox_failed(_shown(str(e)), (), 0, code=EXIT_SANDBOX, as_json=args.json, ran=False)
        return EXIT_SANDBOX
    except NotStarted as e:  # no script ran: the sandbox did not start, or the workspace could not be restored
        said = _shown(str(e.error))
        message = said if isinstance(e.error, EngineUnavailableError | ImageError) else f"the sandbox failed: {said}"
        print_sandbox_failed(message, (), 0, code=EXIT_SANDBOX, as_json=args.json, ran=False)
        return EXIT_SANDBOX
    except (SandboxFailed, SandboxError) as e:  # may quote the container's own words (its stderr, an error it sent)
        failed, unsaved = (e.error, e.unsaved) if isinstance(e, SandboxFailed) else (e, None)
        # With the calls the script made before the sandbox ended under it (`SessionError.tool_calls`).
        calls, omitted = (failed.tool_calls, failed.tool_calls_omitted) if isinstance(failed, SessionError) else ((), 0)
        # And what it printed, as far as the sandbox sent it before it ended (before: lost with the sandbox).
        printed = (failed.stdout, failed.stderr) if isinstance(failed, SessionError) else (None, None)
        if args.live is not None:  # what of it was not shown as it came
            printed = (args.live.rest("stdout", printed[0]), args.live.rest("stderr", printed[1]))
        message = f"the sandbox failed: {_shown(str(failed))}"
        print_sandbox_failed(
            message,
            calls,
            omitted,
            code=EXIT_SANDBOX,
            as_json=args.json,
            unsaved=unsaved,
            stdout=printed[0],
            stderr=printed[1],
        )
        return EXIT_SANDBOX
    # A save's message and notes may name what the script made (files, errors the sandbox sent): cleaned.
    try:
        exit_code = _report(args, result, _shown(unsaved) if unsaved is not None else None, [_shown(n) for n in notes])
        if (behind := left_behind(args, result.error)) is not None:
            print(f"tooltree: note: {_shown(behind)}", file=sys.stderr)
        return exit_code
    except BrokenPipeError:  # the reader left: said as every command says it
        raise
    except OSError as e:  # stdout on a full disk (`> out.txt`): before, "unexpected" (exit 70), as if a bug
        not_printed("the result", e)
        return EXIT_NOT_PRINTED


def _quit_before_run(args: argparse.Namespace, stopped: KeyboardInterrupt) -> None:
    """What a Ctrl-C, SIGTERM or SIGHUP that stopped ``exec`` as it started (its modules imported, its script and
    config read) prints before tooltree's last line, unless the run said what it did: ``--json``'s object."""
    if not getattr(args, "accounted", False):
        _quit_json(args, stopped)


def _quit_json(args: argparse.Namespace, stopped: KeyboardInterrupt) -> None:
    """With ``--json``, the object of a run ``stopped`` before the script ran (before: none, an empty stdout)."""
    if args.json:
        code, why = (
            (stopped.exit_code, stopped.cause)
            if isinstance(stopped, Terminated)
            else (EXIT_INTERRUPTED, "tooltree was interrupted (Ctrl-C)")
        )
        print_sandbox_failed("quit before the script ran", (), 0, code=code, as_json=True, ran=False, quit_why=why)


def _print_stopped(args: argparse.Namespace, stopped: QuitAfter, code: int, why: str) -> None:
    """What a script did that tooltree quit under (``why``, exit ``code``): its result when it came, else what it
    printed as far as the sandbox sent it (on a terminal, what of it was not shown as it came) and its tool calls;
    then the workspace's notes."""
    if stopped.result is not None:
        _report(args, stopped.result, stopped.unsaved, stopped.notes, outcome=(code, why))
        return
    if (unreported := stopped.unreported) is None:  # no script ran: --json still prints one object (before: none)
        if args.json:
            print_sandbox_failed("quit before the script ran", (), 0, code=code, as_json=True, ran=False, quit_why=why)
        _print_notes(stopped.notes)
        return
    printed = (unreported.stdout, unreported.stderr)
    if args.live is not None:
        printed = (args.live.rest("stdout", printed[0]), args.live.rest("stderr", printed[1]))
    print_sandbox_failed(
        "quit before the sandbox reported the script's end",
        unreported.tool_calls,
        unreported.tool_calls_omitted,
        code=code,
        as_json=args.json,
        stdout=printed[0],
        stderr=printed[1],
        quit_why=why,
    )
    _print_notes(stopped.notes)


def _report(
    args: argparse.Namespace,
    result: ExecutionResult,
    unsaved: str | None,
    notes: list[str],
    *,
    outcome: tuple[int, str] | None = None,
) -> int:
    """Print a script's result, the workspace's (cleaned) ``notes`` and why it was ``unsaved``; the exit code
    (``outcome``, with why, instead of the result's own)."""
    result = _outputs_where(result, args.workspace, saved=unsaved is None)
    saved, image_problem = save_images(result, Path(args.images)) if args.images else ([], None)
    exit_code, why = outcome or _outcome(result, unsaved=unsaved, image_problem=image_problem)
    if args.json:
        print_json(
            {
                **result_json(result, saved, image_problem),
                "workspace_error": unsaved,
                "workspace_notes": notes,
                "sandbox_error": None,
            }
        )
    else:
        _print_human(result, saved, asked=args.images is not None, code=exit_code, why=why, live=args.live)
    _print_notes(notes)
    # After the output: a failed save never hides what the script printed.
    if image_problem is not None:
        print(f"tooltree: error: --images: {image_problem}", file=sys.stderr)
    if unsaved is not None:
        print(f"tooltree: error: {unsaved}", file=sys.stderr)
    return exit_code


class QuitAfter(KeyboardInterrupt):
    """A second Ctrl-C (or none of the stopped script's result within the wait) ended `execute`: the result, when
    it came all the same, else what the script did as far as the host knows (`sandbox.errors.Unreported`; None when
    it ran no script), and the workspace's ``notes`` (cleaned). Before: only ``tooltree: interrupted``; its output
    and tool calls were lost."""

    def __init__(self, result: ExecutionResult | None, notes: list[str], unreported: Unreported | None) -> None:
        super().__init__()
        self.result, self.notes, self.unreported = result, notes, unreported
        self.while_saving = False
        """It came during the workspace's save, after the script had ended (`FinishTheSave`)."""
        self.unsaved: str | None = None
        """Why the workspace was not saved (a second Ctrl-C stopped its save)."""


class TerminatedAfter(Terminated, QuitAfter):
    """SIGTERM or SIGHUP (``signum``) stopped `execute` (`Terminated`), with what `QuitAfter` holds: the workspace was
    saved on the way out, as after a Ctrl-C.

    Before: `exec` printed only ``tooltree: terminated``; the output and the tool calls of the script were lost, and
    its help said nothing of the workspace was saved, though it was."""

    def __init__(
        self,
        result: ExecutionResult | None,
        notes: list[str],
        unreported: Unreported | None,
        signum: int = signal.SIGTERM,
    ) -> None:
        QuitAfter.__init__(self, result, notes, unreported)
        self.signum = signum


class SandboxFailed(Exception):
    """The sandbox failed under the script (``error``, the `SandboxError`); ``unsaved``: why the workspace folder was
    not saved (None: it was, or there is none)."""

    def __init__(self, error: Exception, unsaved: str | None) -> None:
        super().__init__(str(error))
        self.error, self.unsaved = error, unsaved


class NotStarted(Exception):
    """`execute` ran no script: the sandbox did not start, or the workspace could not be restored into it
    (``error``, the `SandboxError`, says which; the folder is left as it was)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _lost(workspace: str) -> str:
    """What `exec` says of the workspace folder when the sandbox ended under the script or before its save."""
    return (
        f"the workspace was not saved: the sandbox ended before it could be, so what the script wrote in /workspace "
        f"is lost and {workspace} is left as it was"
    )


NO_CONFIG = (
    "no tooltree.yaml here, so no servers: the script runs without its tools (a tool call fails; search_tools "
    "works); pass --config PATH to use them"
)
"""The note `exec` prints when it found no config."""


def _outcome(result: ExecutionResult, *, unsaved: str | None, image_problem: str | None) -> tuple[int, str]:
    """tooltree's exit code after ``result`` and why it is not 0 (empty when it is)."""
    if result.cancelled:  # the first Ctrl-C stopped it (a second one, or no result in time, prints nothing)
        return EXIT_INTERRUPTED, "the script was interrupted (Ctrl-C)"
    if unsaved is not None:
        return EXIT_SANDBOX, "the workspace was not saved (below)"
    if image_problem is not None:
        return EXIT_SANDBOX, "an image was not saved (below)"
    if result.error is None:
        return EXIT_OK, ""
    if result.timed_out:
        return EXIT_SCRIPT, f"the script {result.error}"
    return EXIT_SCRIPT, f"the script failed ({one_line(result.error, 200)})"


_MESSAGE_CHARS = 4_000
"""The most of one message from the sandbox's side that is printed: twice what the host keeps of the
container's words in any one (`sandbox.channel` quotes at most 2,000 characters of them), so only a runaway
message is cut."""


def _shown(text: str) -> str:
    """A message that may quote the sandbox, as printed: cleaned of terminal escapes and control characters
    (as the script's output is) and at most `_MESSAGE_CHARS` characters."""
    from sandbox.results import clean_text, cut

    window = 2 * _MESSAGE_CHARS
    return cut(clean_text(text[:window]).rstrip(), _MESSAGE_CHARS, len(text) > window)


def execute(
    code: str,
    tree: Path,
    config: Config | None,
    settings: SandboxConfig,
    *,
    workspace: str | None = None,
    audit: str | None = None,
    filename: str | None = None,
    live: LiveOutput | None = None,
) -> tuple[ExecutionResult, str | None, list[str]]:
    """One execution in a fresh sandbox session with live servers; the servers stop afterwards.

    Returns the result, why the workspace could not be saved (None when it was, or when there is
    none: a failed save does not lose the result), and what the save has to say (a file changed on
    both sides and kept beside the other, links the script made that were not saved). ``filename``
    names the code in its traceback; ``live`` shows the output as it comes (on a terminal).

    Raises:
        NotStarted: the sandbox could not be started or the workspace restored: no script ran.
        SandboxFailed: the sandbox failed under the script (and whether the workspace was saved).
        TreeError: the tree has no readable manifest.
    """
    from sandbox.errors import SandboxError, WorkspaceError, interrupted_execution, interrupted_unreported
    from sandbox.host import Runtime
    from tool_tree.config import Config
    from tooltree_cli.exec_live import WaitNotes

    session: Sandbox | None = None
    # Its own `session` in the audit log, of serve's HTTP session ids' form: the lines of runs appending to one log
    # told apart (before: "" for every run).
    runtime = Runtime(
        config or Config(servers=()),
        tree,
        sandbox_config=settings,
        workspace=workspace,
        audit=audit,
        session=uuid.uuid4().hex,
    )
    with notes_not_logged():
        try:
            with runtime as rt:
                try:
                    session = rt.sandbox
                except SandboxError as e:
                    raise NotStarted(e) from e
                with (
                    CtrlCStopsTheScript(session, CANCEL_WAIT, live.break_line if live else None),
                    WaitNotes(live, session.calls_waiting),
                ):
                    try:
                        result = session.execute(code, filename=filename, on_output=live.feed if live else None)
                    except KeyboardInterrupt:  # a second Ctrl-C quits at once: nothing more is shown as it comes
                        if live is not None:
                            live.stop()
                        raise
                unsaved: str | None = None
                with FinishTheSave() as stop:
                    try:
                        # Saves the workspace. After the first Ctrl-C (the script stopped) or its timeout, a server
                        # still at the script's call gets SIGTERM at once: before, the 2 s of grace given to an idle
                        # one, which a server busy with a call never uses.
                        rt.close(interrupted=result.cancelled or result.timed_out)
                    except WorkspaceError as e:
                        unsaved = str(e)
                    except KeyboardInterrupt:  # a second Ctrl-C (or SIGTERM) quit the save
                        if workspace is not None:
                            unsaved = (
                                f"the workspace's save into {workspace} was stopped midway: the folder may hold part "
                                "of what the script wrote, and the next save names anything left beside it"
                            )
                if stop.signum is not None:
                    raise _stopped_while_saving(result, _notes_of(session), unsaved, stop.signum)
                if unsaved is not None:
                    return result, unsaved, _notes_of(session)
        except QuitAfter:
            raise
        except KeyboardInterrupt as e:  # a second Ctrl-C, SIGTERM or SIGHUP: the workspace was saved on the way out
            notes = [_shown(note) for note in _notes_of(session)] if session is not None else []
            if isinstance(e, Terminated):
                raise TerminatedAfter(interrupted_execution(e), notes, interrupted_unreported(e), e.signum) from e
            raise QuitAfter(interrupted_execution(e), notes, interrupted_unreported(e)) from e
        except SandboxError as e:  # under the script: the sandbox ended (then nothing was saved), or broke the protocol
            if session is None:
                raise
            lost = workspace is not None and session.not_saved is not None
            raise SandboxFailed(e, _lost(workspace) if lost and workspace is not None else None) from e
    if workspace is not None and session.not_saved is not None:  # it ended after the script, before the save
        return result, f"{_lost(workspace)} ({session.not_saved})", _notes_of(session)
    return result, None, _notes_of(session)


def _stopped_while_saving(result: ExecutionResult, notes: list[str], unsaved: str | None, signum: int) -> QuitAfter:
    """What `execute` raises once a signal that came during the workspace's save (``signum``) let it finish, or once
    a second one stopped it (``unsaved`` says so): the script's whole result, to be printed as usual."""
    interrupted = signum == signal.SIGINT
    stopped = QuitAfter(result, notes, None) if interrupted else TerminatedAfter(result, notes, None, signum)
    stopped.while_saving, stopped.unsaved = True, unsaved
    return stopped


def _notes_of(session: Sandbox) -> list[str]:
    """The workspace's notes to print: those the session kept (the latest), after a line counting those it did not."""
    notes = list(session.workspace_notes)
    if (dropped := session.workspace_notes_total - len(notes)) > 0:
        notes.insert(0, f"{dropped:,} earlier notes of the save are not shown (the last {len(notes):,} follow)")
    return notes


def _print_notes(notes: Sequence[str]) -> None:
    """The workspace's notes (already cleaned), on stderr (with ``--json`` too: they are in its output as well)."""
    for note in notes:
        print(f"tooltree: workspace: {note}", file=sys.stderr)
