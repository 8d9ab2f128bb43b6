"""`tooltree generate-tree`.

(Over 400 lines: its options, the checks made before any server starts, the signals that stop a run (Ctrl-C, SIGTERM,
SIGHUP) and what each run that ended, or stopped, says.)
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tooltree_cli.common import CONFIG_FILES, UNEXPECTED_HELP, config_path, positive_int
from tooltree_cli.output import error, print_json, table, terminal_label, terminal_name, terminal_text
from tooltree_cli.signals import EXIT_HUNG_UP, EXIT_TERMINATED, handling, hangup_ignored, quiet_where_gone, said

if TYPE_CHECKING:
    from generator.cancel import Cancel
    from generator.generate import GenerateResult, ServerOutcome
    from tool_tree.config import Config

SNAPSHOTS_DIR = "snapshots"  # as tool_tree.tree.SNAPSHOTS_DIR (imported lazily: it is only help text here)

EMBEDDINGS_MODES = ("auto", "on", "off")  # as tool_tree.search.EMBEDDINGS_MODES (only help text here)

DEFAULT_CONFIG = "tooltree.yaml"
EXIT_OK, EXIT_DRIFT, EXIT_CONFIG, EXIT_SERVERS = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # as a shell reports a command ended by SIGINT (and `tooltree_cli.main`)
EXITS = (
    f"Exit {EXIT_OK} when every server was listed (and, with --check, nothing would change), {EXIT_DRIFT} when "
    f"--check finds files that would change, {EXIT_CONFIG} for a configuration error or a tree it cannot write, "
    f"{EXIT_SERVERS} when a server failed, {UNEXPECTED_HELP}, {EXIT_INTERRUPTED} when interrupted, {EXIT_TERMINATED} "
    f"when terminated (SIGTERM), {EXIT_HUNG_UP} when its terminal closed (SIGHUP); each ends the servers it started."
)  # the help of `tooltree generate-tree` and of `generate-tree`


@contextlib.contextmanager
def ctrl_c_cancels(cancel: Cancel, received: list[int] | None = None) -> Iterator[None]:
    """While servers are being listed, Ctrl-C (or SIGTERM, or SIGHUP) sets ``cancel`` (which stops the listing and
    closes every server it started, the way `tooltree serve` stops a refresh) instead of interrupting the
    event loop wherever it is; at any other moment, or sent again, it interrupts as usual
    (`KeyboardInterrupt`, so a first tree written halfway is removed). ``received`` collects the signals.
    Only on the main thread.

    SIGHUP (the terminal closed) counts once, and is ignored from then on: a closed terminal may send it twice, and a
    second one would cut short the closing of the servers the first began, or end the command as it says so
    (`tooltree_cli.signals.signals_stop_like_ctrl_c`); what is printed after it goes where it still can
    (`quiet_where_gone`). Ignored when tooltree started (``nohup``), it stays so.
    """

    hung_up = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if signum == signal.SIGHUP:
            if hung_up.is_set():
                return
            hung_up.set()
            quiet_where_gone()
        if received is not None:
            received.append(signum)
        if cancel.is_set() or not cancel.listening():
            raise KeyboardInterrupt
        # `Cancel.set` waits for the event loop, which runs on this thread: set it from another one.
        threading.Thread(target=cancel.set, name="tooltree-ctrl-c", daemon=True).start()

    signals = [s for s in STOP_SIGNALS if s != signal.SIGHUP or not hangup_ignored()]
    try:
        with handling(signals, on_signal):
            yield
    finally:
        if hung_up.is_set():  # only on the main thread, where the handler was set
            signal.signal(signal.SIGHUP, signal.SIG_IGN)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a generation: before, SIGTERM ended it at once and left the servers it had started
running; so did SIGHUP (a closed terminal)."""

_STOPPED = {
    signal.SIGINT: (EXIT_INTERRUPTED, "interrupted"),
    signal.SIGTERM: (EXIT_TERMINATED, said(signal.SIGTERM)),
    signal.SIGHUP: (EXIT_HUNG_UP, said(signal.SIGHUP)),
}


def _stopped(received: list[int]) -> int:
    """Say the run was stopped; the exit code a shell gives a command ended by the signal (130, 143, 129)."""
    code, words = _STOPPED[signal.Signals(received[-1])] if received else _STOPPED[signal.SIGINT]
    print(f"tooltree: {words}", file=sys.stderr)
    return code


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "-c",
        type=config_path,
        default=None,
        help=f"{CONFIG_FILES}, or for an --out tree generated before, the file its manifest records; with "
        "--from-snapshot, no --config and neither file, every stored snapshot is used)",
    )
    p.add_argument("--out", "-o", default="tree", help="the tree to write (default: ./tree)")
    p.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="NAME",
        help="only this server (repeatable); others in the tree are kept",
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 and list files that would change")
    p.add_argument(
        "--from-snapshot",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help=f"regenerate offline from stored tools/list results (default: <out>/{SNAPSHOTS_DIR})",
    )
    p.add_argument(
        "--embeddings",
        choices=EMBEDDINGS_MODES,
        default=None,
        help="store tool embeddings in the search index for hybrid ranking: auto (when numpy and a model are "
        "installed), on (an error without them), off (default: $TOOLTREE_SEARCH_EMBEDDINGS: 1, 0 or auto; else auto)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=_start_jobs,
        default=None,
        metavar="N",
        help="servers starting at once, at most 1,024; the others wait their turn, and each server's timeout runs "
        "from its own start (default: `pool.start_jobs` in the config, else the number of cores)",
    )
    p.add_argument("--json", action="store_true", help="print a machine-readable summary on stdout")
    p.set_defaults(handler=run)


def _start_jobs(text: str) -> int:
    """An argparse type: ``--jobs``, bounded as ``pool.start_jobs`` is (before: 2000 was taken, the config's 2000
    refused)."""
    from tool_tree.starts import MAX_START_JOBS

    value = positive_int(text)
    if value > MAX_START_JOBS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_START_JOBS:,}, got {value:,}")
    return value


EMBED_NOTICE_TOOLS = 100
"""Embedding at least this many tools is announced before it starts (it takes ~15 ms a tool)."""
SLOW_INDEX_S = 1.0
"""A search index rebuild at least this slow (embedding tools) is explained in one line."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "generate-tree",
        help="render every MCP tool as a typed Python stub",
        description=f"Connect to each configured MCP server and write the stub tree. {EXITS}",
    )
    add_arguments(p)


def _embedding(count: int) -> Callable[[int], None] | None:
    """Announce embedding ``count`` tools when there are many; the callback follows the work."""
    from tooltree_cli.progress import embedding_progress

    return embedding_progress(count) if count >= EMBED_NOTICE_TOOLS else None


def _disabled_problem(config: Config, only: Sequence[str], out: Path) -> str | None:
    """Why a run over disabled servers, or none, must not go on: ``--server`` names a disabled one (a full run deletes
    its stubs, so listing it would write what the next run deletes); or no server is left to list (every one
    disabled, the config's servers empty, or each left out as tooltree itself or of a type it cannot connect to):
    the run would delete every stub of ``out``, as a slip rather than an intent to empty the tree, or make a tree of
    no tools."""
    if off := [name for name in dict.fromkeys(only) if not config.server(name).enabled]:
        from tool_tree.config import setting_named
        from tool_tree.regenerate import shell_word

        key = setting_named(config.server(off[0]), "enabled")
        said = f"{key} is {'true' if key.endswith('.disabled') else 'false'}"
        # the name as a word to type again (before: as it is, a zero-width space or a newline raw, `my crm` unquoted)
        return f"{config.source}: {said}: enable it to list it (--server {shell_word(off[0])})"
    if only:
        return None
    # With --from-snapshot too (before: exempt, and a config of every server disabled emptied the tree, its snapshots
    # with it, exit 0).
    return nothing_to_list(config, out)


def nothing_to_list(config: Config, out: Path) -> str | None:
    """Why a run of every server must not go on when none is left to list (`_disabled_problem`); None when one is."""
    from tool_tree.tree import Manifest, TreeError

    if config.offered_servers:  # one whose variable is unset is there, its error said where it is used
        return None
    why = "every server is disabled (enabled: false)" if config.servers else "it lists no server tooltree can start"
    try:
        tools = len(Manifest.load(out).tools)
    except TreeError:
        return f"{config.source}: {why}: there is nothing to list; add or enable a server"
    return (
        f"{config.source}: {why}, so this run would delete all {tools} tools of {out}; add or enable a server, or "
        "delete the tree yourself if that is what you want"
    )


def _other_generator(out: Path) -> str | None:
    """What to say when the tree ``out`` was written by another build of tooltree: its files may differ for that
    alone (the manifest records the build, the search index the manifest), not because a server changed."""
    from generator.fingerprint import generator_fingerprint
    from tool_tree.tree import Manifest, TreeError

    try:
        written_by = Manifest.load(out).generator
    except TreeError:
        return None
    now = generator_fingerprint()
    if written_by == now:
        return None
    return (
        f"(the tree was written by tooltree {terminal_label(written_by, 80)} and this is {now}: files may differ"
        " for that alone; a run without --check brings them up to date)"
    )


def run(args: argparse.Namespace) -> int:
    """``tooltree generate-tree``. What it shows goes to stderr, and a stderr that can no longer be written (a pipe
    whose reader left, ``generate-tree 2>&1 | head -3``; a full disk) ends what is shown, not the run. Before: the
    first line that failed stopped the run, no tree written, and it exited 1, the code of drift under --check."""
    from tooltree_cli.signals import stderr_forgiving

    with stderr_forgiving():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from generator.cancel import Cancel, GenerateCancelled
    from generator.files import UnsafePathError
    from generator.generate import generate
    from generator.generate_args import risky_out
    from tool_tree.config import ConfigError
    from tool_tree.search import SearchError
    from tool_tree.tree import TreeError
    from tooltree_cli.common import folder_problem, load, recorded_default
    from tooltree_cli.progress import ServerProgress

    # Checked before any server starts.
    risky = risky_out(args.out, name="--out", shell=True)  # the generator refuses it too, said for a command line
    if (problem := risky or folder_problem("--out", args.out, writable=not args.check)) is not None:
        error(problem)
        return EXIT_CONFIG
    out = Path(args.out)
    received: list[int] = []  # the signals that stopped the run
    writing: list[tuple[int, int] | None] = []  # the manifest as the run took the lock to write (`generate`'s
    # ``on_writing``): a run stopped that finds it so has not written its own
    snapshots: Path | None = None
    if args.from_snapshot is not None:
        snapshots = Path(args.from_snapshot) if args.from_snapshot else out / SNAPSHOTS_DIR
    try:
        config: Config | None
        named = args.config or recorded_default(out, missing_ok=snapshots is not None)
        config_path = named or DEFAULT_CONFIG
        if snapshots is not None and named is None and not Path(DEFAULT_CONFIG).exists():
            config = None
        elif snapshots is not None:  # nothing connects: no server's variable is needed (before: a CI job without the
            # tokens could not run `--check --from-snapshot`), and the references are kept as written
            config = load(config_path, using=())
            config = replace(config, servers=tuple(replace(s, unresolved=None) for s in config.servers))
        else:
            config = load(config_path, using=args.server or None)  # another server's unset variable is no error
        if config is not None:
            for name in args.server:
                config.server(name)  # an unknown name is a config error, before anything starts
            if (problem := _disabled_problem(config, args.server, out)) is not None:
                error(problem)
                return EXIT_CONFIG
        n = len(set(args.server)) if args.server else (len(config.enabled_servers) if config else 0)
        source = f"snapshots in {snapshots}" if snapshots is not None else f"{n} server(s)"
        off = [s.name for s in config.servers if not s.enabled] if config is not None and not args.server else []
        skipped = f" ({len(off)} disabled: {terminal_label(', '.join(map(terminal_name, off)), 200)})" if off else ""
        # Said once --out is known to be a folder the run may write (before, a refused --out followed this line).
        listing = f"tooltree: listing tools from {source}{skipped} …"
        show = not args.json and snapshots is None  # progress of live servers; a terminal gets a live line
        cancel = Cancel()
        with ServerProgress(n, live=None if show else False) as progress, ctrl_c_cancels(cancel, received):
            result = generate(
                config,
                out,
                only=args.server,
                check=args.check,
                snapshots=snapshots,
                on_server=progress.server_done if show else None,
                on_server_start=progress.server_started if show else None,
                on_embedding=None if args.json else _embedding,
                embeddings=args.embeddings,
                jobs=args.jobs,
                cancel=cancel,
                on_wait=lambda: print(
                    f"tooltree: another generate-tree is writing {out}; waiting for it to finish …", file=sys.stderr
                ),
                on_writing=lambda: writing.append(_manifest_identity(out)),
                on_listing=None if args.json else lambda: print(listing, file=sys.stderr),
            )
    except GenerateCancelled:  # Ctrl-C while servers were listed: they are closed, nothing was written
        return _stopped(received)
    except KeyboardInterrupt:  # Ctrl-C while the tree or its search index was written
        code = _stopped(received)
        # Not of a run that wrote nothing (stopped while it waited for another writing the tree: before, it said the
        # tree kept its previous manifest and to run again to finish it, of the other run's stubs, still being written).
        if writing and (note := _index_left_behind(out) or _manifest_left_behind(out, writing[0])) is not None:
            print(f"tooltree: {note}", file=sys.stderr)
        return code
    except (ConfigError, SearchError) as e:
        error(str(e))
        return EXIT_CONFIG
    except (TreeError, UnsafePathError) as e:
        error(str(e))
        return EXIT_CONFIG
    except OSError as e:  # the disk refused a write (full, read-only, a path that cannot hold files)
        where = e.filename if e.filename is not None else out
        error(f"--out: cannot write the tree: {where}: {e.strerror or e}{_left_as(out) if not args.check else ''}")
        return EXIT_CONFIG
    result.warnings[:0] = shared_packages(config, out)
    return report(result, args)


def shared_packages(config: Config | None, out: Path) -> list[str]:
    """A warning for each package name two or more enabled servers of ``config`` map to (``my.docs`` and
    ``my/docs``: ``my_docs``), naming the servers and, when ``out``'s manifest has them, the package each got (one
    keeps the name, the others are numbered: ``my_docs_2``). Before: nothing said so, and a script could not tell
    which was which. A warning, not a config error: such a config worked, and scripts import its packages."""
    from generator.naming import to_identifier
    from tool_tree.tree import Manifest, TreeError

    groups: dict[str, list[str]] = {}
    for s in config.offered_servers if config is not None else ():  # not `enabled_servers`: its unset variable waits
        groups.setdefault(to_identifier(s.name, fallback="server").lower(), []).append(s.name)
    try:
        packages = {s.name: s.package for s in Manifest.load(out).servers}
    except TreeError:
        packages = {}
    warnings = []
    for names in groups.values():
        if len(names) < 2:
            continue
        names.sort()
        named = ", ".join(map(repr, names[:-1])) + f" and {names[-1]!r}"
        said = f"servers {named} map to the same package, {to_identifier(names[0], fallback='server')}"
        if all(n in packages for n in names):
            said += ": " + ", ".join(f"{n!r} is servers.{packages[n]}" for n in names)
        else:
            said += ", which one keeps while the others are numbered (_2, _3 …)"
        where = f" in {config.file}" if config is not None and config.file is not None else ""
        warnings.append(f"{said}; rename one{where} for packages a script tells apart by name")
    return warnings


def _left_as(out: Path) -> str:
    """What a run that could not write the tree left (the manifest is written last, and a first tree is
    removed): said after the error."""
    from tool_tree.tree import MANIFEST_FILE

    if (out / MANIFEST_FILE).is_file():
        return "; the tree keeps its previous manifest (stubs written before the error may be new): run it again"
    return "; no tree was left there"


def _manifest_identity(out: Path) -> tuple[int, int] | None:
    """The inode and modification time of the manifest of ``out`` (None: there is none)."""
    from tool_tree.tree import MANIFEST_FILE

    try:
        st = (out / MANIFEST_FILE).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _manifest_left_behind(out: Path, before: tuple[int, int] | None) -> str | None:
    """What to say of a tree whose run stopped before it wrote the new manifest (it is written last): the previous
    one stays, and stubs written before may be new (None: no manifest, or the run wrote it). ``before`` is the manifest
    as the run began to write (another run may have written one since this run started: before, a manifest newer
    than the run's start was taken for its own, and nothing was said). Before that: only ``tooltree: interrupted``,
    though some stubs may have been new."""
    if before is None or _manifest_identity(out) != before:
        return None
    return (
        "the tree keeps its previous manifest (stubs written before the stop may be new); run `tooltree "
        "generate-tree` again to finish it"
    )


def _index_left_behind(out: Path) -> str | None:
    """What to do about the search index of ``out`` when a run stopped after writing the manifest and
    before the index (None: the index matches the manifest, or there is no manifest)."""
    from tool_tree.search import index_matches_manifest
    from tool_tree.tree import MANIFEST_FILE, SEARCH_INDEX_FILE

    index = out / SEARCH_INDEX_FILE
    if not (out / MANIFEST_FILE).is_file() or index_matches_manifest(out):
        return None
    if not index.is_file():
        return f"{index} was not written; run `tooltree generate-tree` again to build it (search needs it)"
    return (
        f"{index} was not rebuilt for the tree's new manifest; until you run `tooltree generate-tree` again, "
        "search warns and matches the tree's tools by their words only"
    )


JSON_ERROR_CHARS = 4000
"""The most characters of a server's error ``--json`` holds (the table shows `progress.ERROR_CHARS`)."""


def _server_json(s: ServerOutcome) -> dict[str, object]:
    """A server's outcome as ``--json`` prints it: its error cut at `JSON_ERROR_CHARS` (`print_json` escapes what
    a terminal would act on)."""
    from sandbox.results import cut

    entry = s.to_json()
    if s.error is not None and len(s.error) > JSON_ERROR_CHARS:
        entry["error"] = cut(s.error[:JSON_ERROR_CHARS], JSON_ERROR_CHARS, longer=True)
    return entry


def report(result: GenerateResult, args: argparse.Namespace) -> int:
    """The run's summary: ``--json`` on stdout, else a table on stderr. What the servers wrote (their errors,
    their stderr) is cleaned of escape sequences and control characters, and each error is one line, cut."""
    from generator.api_changes import breaking_warning, summary
    from tooltree_cli.progress import shown_error

    code = EXIT_OK
    if args.check and result.drift:
        code = EXIT_DRIFT
    if result.failed:
        code = EXIT_SERVERS
    if args.json:
        print_json(
            {
                "out": str(result.out),
                "servers": [_server_json(s) for s in result.servers],
                "drift": result.drift if args.check else None,
                "written": len(result.report.written) if result.report else 0,
                "deleted": len(result.report.deleted) if result.report else 0,
                "deleted_paths": sorted(result.report.deleted) if result.report else [],
                "warnings": result.warnings,
                "index_seconds": round(result.index_seconds, 3),
                "embedding_model": result.embedding_model,
                "api_changes": [c.to_json() for c in result.api_changes],
            }
        )
        return code
    rows = [
        [
            terminal_name(s.name),
            s.status,
            str(s.tools) if s.status == "ok" else "-",
            f"{s.seconds:.2f}",
            shown_error(s.error) + (" (kept previous stubs)" if s.kept_previous else ""),
        ]
        for s in result.servers
    ]
    print(table(rows, ["server", "status", "tools", "seconds", "error"]), file=sys.stderr)
    for s in result.failed:  # a name from a project's .mcp.json may carry escapes or line ends: escaped
        if s.stderr_tail and (name := terminal_name(s.name)):
            print(f"\n--- last lines of {name}'s stderr ---\n{terminal_text(s.stderr_tail)}", file=sys.stderr)
    shown = breaking_warning(result.api_changes)  # said in full below
    warnings = [w for w in result.warnings if w != shown]
    for w in warnings[:50]:
        print("warning: " + " ".join(terminal_text(w).splitlines()), file=sys.stderr)
    if len(warnings) > 50:
        print(f"warning: … {len(warnings) - 50} more warnings (see --json)", file=sys.stderr)
    if args.check:
        if result.drift:
            from tool_tree.tree import MANIFEST_FILE

            count = len(result.drift)
            if (result.out / MANIFEST_FILE).exists():
                print(f"\n{count} file(s) differ from the servers:", file=sys.stderr)
            else:  # before, a missing tree (a mistyped --out) read as a tree whose files differ
                print(
                    f"\n{result.out}: no tree there; a run without --check writes these {count} file(s):",
                    file=sys.stderr,
                )
            for rel in result.drift:
                print(f"  {rel}")
            if (note := _other_generator(result.out)) is not None:
                print(note, file=sys.stderr)
        else:
            print(f"\n{result.out}: up to date", file=sys.stderr)
    elif result.report is None:
        print(f"\n{result.out}: nothing written: every server failed (see above)", file=sys.stderr)
    else:
        r = result.report
        print(
            f"\n{result.out}: {len(r.written)} written, {len(r.deleted)} deleted, {r.unchanged} unchanged "
            f"({result.seconds:.2f} s)",
            file=sys.stderr,
        )
        if r.deleted:
            print(f"deleted: {deleted_summary(r.deleted, result.out)}", file=sys.stderr)
        if result.embedding_model and result.index_seconds >= SLOW_INDEX_S:
            print(
                f"search index: {result.index_seconds:.1f} s embedding new or changed tools for hybrid search "
                "(reruns reuse the embeddings; --embeddings off skips them)",
                file=sys.stderr,
            )
    for line in summary(result.api_changes, check=args.check):  # each server name and type cleaned, cut
        print(terminal_text(line), file=sys.stderr)
    return code


DELETED_SHOWN = 10
"""Folders or files named in the line saying what a run deleted; the rest are counted."""


def deleted_summary(deleted: list[str], out: Path | None = None) -> str:
    """What a run deleted: ``servers/media/ (8 files), 2 files in servers/crm/, snapshots/media.json``. A package
    still in the tree ``out`` (its ``__init__.py``; none without ``out``) lost only the files counted. Before: excluding
    two of a server's tools read ``servers/media/ (2 files)``, as if it had been removed.

    A removed server's folder that stays because it holds files tooltree did not write is said so, naming them:
    ``8 files in servers/crm/ (the folder stays: it holds notes.txt, not tooltree's)``. Before: ``servers/crm/
    (8 files)``, as if the folder were gone."""
    groups: dict[str, list[str]] = {}
    for rel in sorted(deleted):
        parts = rel.split("/")
        groups.setdefault(f"{parts[0]}/{parts[1]}/" if len(parts) > 2 else rel, []).append(rel)
    shown = [rels[0] if len(rels) == 1 else _folder_deleted(key, len(rels), out) for key, rels in groups.items()]
    more = f", and {len(shown) - DELETED_SHOWN} more" if len(shown) > DELETED_SHOWN else ""
    return ", ".join(shown[:DELETED_SHOWN]) + more


KEPT_SHOWN = 3
"""Entries named of a folder that stays after its files were deleted; the rest are counted."""


def _folder_deleted(key: str, count: int, out: Path | None) -> str:
    """``count`` files deleted in the folder ``key`` of the tree ``out``: said as the folder gone, or as files of a
    folder that stays (a package still in the tree, or a folder holding what tooltree did not write, named)."""
    folder = out / key if out is not None else None
    if folder is None or not folder.is_dir() or folder.is_symlink():
        return f"{key} ({count} files)"
    if (folder / "__init__.py").is_file():
        return f"{count} files in {key}"
    try:
        names = sorted(e.name + ("/" if e.is_dir() and not e.is_symlink() else "") for e in folder.iterdir())
    except OSError:  # it cannot be listed: that it stays is still true
        names = []
    kept = ", ".join(names[:KEPT_SHOWN]) + (f" and {len(names) - KEPT_SHOWN} more" if len(names) > KEPT_SHOWN else "")
    holds = (
        f"it holds {terminal_label(kept, 200)}, not tooltree's" if names else "it holds files tooltree did not write"
    )
    return f"{count} files in {key} (the folder stays: {holds})"
