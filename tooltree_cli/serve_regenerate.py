"""How `tooltree serve` brings the tree up to date: before serving, in the background while it serves, and a server's
part when the server says its tools, prompts or resources changed.

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
(exit 3), and a background refresh leaves the served tree as it was. The three report to the one stderr in the same
words (`_regenerate`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.output import error, terminal_name, terminal_text

if TYPE_CHECKING:
    from agent.serve.server import ToolServer
    from generator.cancel import Cancel
    from tool_tree.config import Config
    from tool_tree.tree import Manifest

    Read = tuple[tuple[int, ...], Manifest]
    """A tree's manifest as read, with its file's version (`sandbox.stored_definitions.versioned_manifest`)."""
    from tooltree_cli.serve_follow import Follow

EXIT_OK, EXIT_SERVERS = 0, 3  # `tooltree serve`'s exit codes that a regeneration gives (the others: serve_cmd)


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


logger = logging.getLogger(__name__)


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
        except Exception as e:  # serving goes on with the tree as it is; the traceback under --debug
            logger.debug("refreshing %s failed", self.tree, exc_info=True)
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
    from tool_tree.tree import MANIFEST_FILE, SEARCH_INDEX_FILE, TreeError
    from tooltree_cli.progress import shown_error  # the server wrote the error: one line, cleaned, cut

    before = _usable(tree)
    existed = before is not None
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
    # itself. Before, sessions were told the tree was regenerated and to reconnect for a tool added since. Nor does
    # a manifest that names another configuration file and records the same tree (its file moved or gone since).
    served = r is not None and any(rel != SEARCH_INDEX_FILE for rel in [*r.written, *r.deleted])
    if served and r is not None and before is not None and set(r.written) <= {MANIFEST_FILE, SEARCH_INDEX_FILE}:
        served = bool(r.deleted) or not read[1].same_tree(before[1])
    return EXIT_OK, read if served else None
