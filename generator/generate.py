"""`generate`: from a configuration (or stored snapshots) to a tree on disk.

This is the whole of ``tooltree generate-tree`` minus argument parsing and printing.

(Over 400 lines: one run end to end, as the Python API offers it: discovery, the guards that leave a tree as it
was, and the planning and writing under the tree's lock. The previous tree's manifest is read in `generator.previous`;
what the writing does with the files it writes over is in `generator.write_over`.)
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from generator.api_changes import ApiChange, api_changes, breaking_warning
from generator.cancel import Cancel
from generator.files import (
    WriteReport,
    check_out,
    diff_plan,
    files_under,
    modules_in,
    read_existing,
    read_remembered,
    relinked_warning,
    remove_created,
    tooltree_manifest,
    write_plan,
)
from generator.generate_args import checked_args
from generator.kept import Keeper, forget_unsaid, unrecorded_warning, unsaid_warnings, users_folders
from generator.layout import Plan, ServerListing, emptied_servers, plan_tree
from generator.previous import keep_recorded_config, load_previous
from generator.search_index import write_search_index
from generator.snapshots import read_snapshots, tree_snapshot_files
from generator.write_over import _before, _EarlyWriter, _noting, _unrecorded_kept
from tool_tree.config import Config, ConfigError, ServerConfig
from tool_tree.snapshot_lists import LIST_KEYS, previous_snapshot, recorded_lists, with_previous
from tool_tree.text import cut_name, quoted_name
from tool_tree.tree import (
    MANIFEST_FILE,
    SEARCH_INDEX_FILE,
    SERVERS_DIR,
    SNAPSHOTS_DIR,
    Manifest,
    ServerEntry,
    tree_lock,
)

if TYPE_CHECKING:
    from generator.discover import Discovery
    from tool_tree.search import EmbeddingNotice

OWNED_DIRS = (SERVERS_DIR, SNAPSHOTS_DIR)


@dataclass
class ServerOutcome:
    name: str
    status: Literal["ok", "failed"]
    tools: int = 0
    seconds: float = 0.0
    error: str | None = None
    stderr_tail: str = ""
    kept_previous: bool = False
    """Failed, but its stubs from the previous generation were kept."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "tools": self.tools,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "stderr_tail": self.stderr_tail,  # as the human output shows it (`StderrLog.tail`: last 20 lines)
            "kept_previous": self.kept_previous,
        }


@dataclass
class GenerateResult:
    out: Path
    servers: list[ServerOutcome]
    warnings: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    report: WriteReport | None = None
    """What was written; None with ``check``, or when every server failed (nothing was written)."""
    seconds: float = 0.0
    index_seconds: float = 0.0
    """Time spent rebuilding the search index (0 when it was current)."""
    embedding_model: str | None = None
    """The model whose tool embeddings the index stores, if any."""
    api_changes: list[ApiChange] = field(default_factory=list)
    """What the run changed (with ``check``: would change) for scripts that call the stubs (`generator.api_changes`)."""

    @property
    def failed(self) -> list[ServerOutcome]:
        return [s for s in self.servers if s.status == "failed"]


def _listing(
    server: ServerConfig,
    tools: list[dict[str, Any]],
    info: dict[str, Any],
    lists: dict[str, list[dict[str, Any]]],
    recorded: bool = True,
) -> ServerListing:
    s = server
    return ServerListing(s.name, tools, info, s.description, s.include, s.exclude, s.named, lists, recorded)


def _lists_recorded(data: Mapping[str, Any], own: bool, previous: Manifest | None) -> bool:
    """Whether the snapshot ``data`` records the lists its server declares (`ServerListing.lists_recorded`). One of
    the tree's own snapshots (``own``) does when the tree's manifest says so or it holds one of the lists; one from a
    folder elsewhere is taken to (nothing there tells an earlier release's snapshot from one of a server that
    declares none)."""
    if not own or (previous is not None and previous.lists_recorded):
        return True
    return any(key in data for key, _, _ in LIST_KEYS)


def select_servers(config: Config, only: Sequence[str]) -> list[ServerConfig]:
    """Raises: ConfigError: a name in ``only`` is not configured."""
    if not only:
        return list(config.enabled_servers)
    return [config.server(name) for name in dict.fromkeys(only)]


def generate(
    config: Config | None,
    out: str | Path,
    *,
    only: Sequence[str] = (),
    check: bool = False,
    snapshots: str | Path | None = None,
    on_server: Callable[[ServerOutcome], None] | None = None,
    on_embedding: EmbeddingNotice | None = None,
    embeddings: str | None = None,
    jobs: int | None = None,
    on_server_start: Callable[[str], None] | None = None,
    cancel: Cancel | None = None,
    on_wait: Callable[[], None] | None = None,
    on_writing: Callable[[], None] | None = None,
    on_listing: Callable[[], None] | None = None,
) -> GenerateResult:
    """Generate (or, with ``check``, compare) the tree at ``out``.

    ``snapshots`` regenerates from stored ``tools/list`` results instead of connecting; with no ``config`` every
    snapshot there is used. ``on_embedding`` is told how many tools the search index is about to embed (none: not
    called); the callback it may return is told how many are done after each batch. ``embeddings`` (``auto``, ``on``,
    ``off``; default ``TOOLTREE_SEARCH_EMBEDDINGS``, else ``auto``) decides whether the search index stores tool
    embeddings; see ``tool_tree.search.embedding_model``. ``jobs`` is how many servers may be starting at once
    (default: the config's ``pool.start_jobs``, else the number of cores); ``on_server_start`` is told each server's
    name when it leaves that queue and starts. ``cancel``, set from another thread, stops the run (see `Cancel`).
    ``on_wait`` is called before the run waits for another process writing the same tree (`tree_lock`), and
    ``on_writing`` once the run holds the tree's lock to write it, before it writes anything (not under ``check``);
    ``on_listing`` once ``out`` passed `check_out`, before the servers (or snapshots) are read.

    The tree's own snapshots (``snapshots`` is ``out/snapshots``) are read, with the filters and descriptions its
    manifest records, under the lock the run writes under: another run writing the tree meanwhile is waited for, and
    its generation is the one rendered. From snapshots elsewhere without a ``config``, the filters and descriptions
    are those the manifest records under that lock. Live servers are listed before the lock (listing is slow).

    A run in which every server failed writes nothing (``report`` is None): no tree without tools is made, and an
    existing tree is left as it was. A tree that would lose its last tool because its servers listed none keeps their
    stubs (each is reported failed); a server that lists none while others list tools loses its stubs with a
    warning. The search index is written last, after the manifest, and records the manifest
    it was built from (`generator.search_index`).

    Raises:
        TypeError: ``config`` is not a `Config` or None, ``only`` is a string, ``out`` or ``snapshots`` is not a path,
            or ``jobs`` not a whole number.
        ValueError: ``jobs`` is less than 1.
        RuntimeError: without ``snapshots``, an event loop runs on this thread (from async code, run it in a thread:
            ``await asyncio.to_thread(generate, ...)``).
        generator.cancel.GenerateCancelled: ``cancel`` was set during discovery (nothing was written).
        Exception: what ``on_server`` or ``on_server_start`` raised, as it raised it (nothing was written).
        ConfigError: ``only`` names a server that is not configured, or the ``pool:`` section is invalid.
        SearchError: ``embeddings`` is ``on`` but the embeddings extra is missing, or the mode is unknown (first).
        TreeError: ``snapshots`` is missing or holds a malformed file, or ``out`` is refused (empty, ``/``, an
            unexpanded ``~``: `risky_out`), not a folder, or holds files tooltree did not write (`check_out`; first).
        generator.files.UnsafePathError: the tree on disk contains a symlink where a file goes.
    """
    start = time.perf_counter()
    out, snapshots = checked_args(config, out, only, jobs=jobs, snapshots=snapshots)
    from tool_tree.search import SearchError, embedding_model, embeddings_mode

    mode = embeddings_mode(embeddings)
    try:  # under check, to tell an index a run would embed otherwise (a missing extra is that run's error)
        model = embedding_model(mode)
    except SearchError:
        if not check:
            raise
        model = None
    # The tree's own snapshots are read under the lock the run writes under (below): read before it, another run's
    # generation written meanwhile (its snapshots, its filters) would be written over with the one before it.
    own = snapshots if snapshots is not None and _own_snapshots(out, snapshots) else None
    # A run writing the tree now: judge the tree it leaves, not half of it.
    with tree_lock(out, shared=True, on_wait=on_wait):
        previous = load_previous(out)
        check_out(out, previous, owned=OWNED_DIRS)
    if on_listing is not None:  # the folder is one the run may write: the servers or snapshots are read next
        on_listing()
    listings: list[ServerListing] = []
    outcomes: list[ServerOutcome] = []
    noted: list[str] = []  # said of a server that was listed (it kept changing its tools while listed)
    lists_failed: dict[str, set[str]] = {}  # by server: its prompts or resources whose listing failed

    def record(outcome: ServerOutcome) -> None:
        outcomes.append(outcome)
        if on_server is not None:
            on_server(outcome)

    if snapshots is not None:
        if own is None:
            _read_listings(config, out, snapshots, previous, only, listings, record)
    else:
        if config is None:
            raise ConfigError("a configuration is needed to connect to servers")
        chosen = select_servers(config, only)

        import anyio

        from generator.discover import alone
        from tool_tree.starts import start_jobs

        limit = start_jobs(config, jobs)

        def done(d: Discovery) -> None:
            if d.ok:
                listings.append(_listing(d.server, d.tools, d.info, d.lists))
                if d.lists_failed:
                    lists_failed[d.server.name] = d.lists_failed
            noted.extend(d.warnings)
            record(
                ServerOutcome(
                    d.server.name,
                    "ok" if d.ok else "failed",
                    seconds=d.seconds,
                    error=d.error,
                    stderr_tail=d.stderr_tail,
                )
            )

        started = None if on_server_start is None else (lambda server: on_server_start(server.name))
        try:
            anyio.run(_discover, chosen, limit, started, done, cancel, config.file)
        except BaseExceptionGroup as group:  # what a callback raised, inside the run's task groups
            raise alone(group) from None
        if cancel is not None:
            cancel.check()

    if own is None:
        if not check and outcomes and not listings:
            return _none_listed(out, outcomes, previous, start)
        if not check:
            out.mkdir(parents=True, exist_ok=True)
    with tree_lock(out, shared=check, on_wait=on_wait):
        if own is not None:  # a folder of the tree, which holds it already
            previous = load_previous(out)
            _read_listings(config, out, own, previous, only, listings, record)
            if not check and outcomes and not listings:
                return _none_listed(out, outcomes, previous, start)
        elif snapshots is not None and config is None:  # a folder elsewhere, read before the lock
            _as_recorded(listings, load_previous(out))
        if on_writing is not None and not check:
            on_writing()
        _keep_failed_lists(out, listings, lists_failed)
        said: list[str] = []  # the lines of `generator.kept.UNSAID_FILE` the run's warnings name
        result = _plan_and_write(
            out,
            listings,
            outcomes,
            only=only,
            check=check,
            model_id=model.model_id if model is not None else None,
            said=said,
            config=_config_from(out, config),
        )
    result.warnings[:0] = noted
    if not check:
        # After the lock: embedding a big catalog takes minutes, sessions starting on the tree need not wait
        # for it, and the index is replaced whole (a reader sees the old one or the new one).
        write_search_index(out, result, mode, result.embedding_model, on_embedding)
        forget_unsaid(out, said)  # the run's warnings will be given: a run stopped before leaves them to the next
    result.seconds = time.perf_counter() - start
    return result


def _own_snapshots(out: Path, snapshots: Path) -> bool:
    """Whether ``snapshots`` is the tree ``out``'s own snapshots folder (one a run writing the tree writes)."""
    return snapshots.is_dir() and snapshots.resolve() == (out / SNAPSHOTS_DIR).resolve()


def _read_listings(
    config: Config | None,
    out: Path,
    snapshots: Path,
    previous: Manifest | None,
    only: Sequence[str],
    listings: list[ServerListing],
    record: Callable[[ServerOutcome], None],
) -> None:
    """The listing of each server chosen from the snapshots in ``snapshots`` into ``listings``, its outcome to
    ``record``. Without a ``config``, every snapshot there, with the filters and description ``previous`` records.

    Raises:
        TreeError: ``snapshots`` is missing or holds a malformed file.
        ConfigError: ``only`` names a server that is not configured, or (without a config) has no snapshot.
        Exception: what ``record`` raised, as it raised it.
    """
    own = tree_snapshot_files(out, snapshots, previous)
    stored = read_snapshots(snapshots, own)
    if config is None:
        # Without a config, the filters and descriptions recorded in the tree still apply.
        chosen = [_recorded(n, previous) for n in sorted(stored) if not only or n in only]
        missing_only = [n for n in only if n not in stored]
        if missing_only:
            raise ConfigError(f"no snapshot for server {quoted_name(missing_only[0])}", file=str(snapshots))
    else:
        chosen = select_servers(config, only)
    for server in chosen:
        data = stored.get(server.name)
        if data is None:
            record(ServerOutcome(server.name, "failed", error=f"no snapshot in {snapshots}"))
            continue
        info: dict[str, Any] = data["info"] if isinstance(data.get("info"), dict) else {}
        tools = [t for t in data["tools"] if isinstance(t, dict)]
        has_lists = _lists_recorded(data, own is not None, previous)
        listings.append(_listing(server, tools, info, recorded_lists(data), has_lists))
        record(ServerOutcome(server.name, "ok"))


def _recorded(name: str, previous: Manifest | None) -> ServerConfig:
    """The server ``name`` with the filters and description the tree's manifest ``previous`` records for it."""
    r = next((s for s in previous.servers if s.name == name), None) if previous is not None else None
    if r is None:
        return ServerConfig(name=name, command="-")
    return ServerConfig(name=name, command="-", include=r.include, exclude=r.exclude, description=r.description)


def _as_recorded(listings: list[ServerListing], previous: Manifest | None) -> None:
    """Give each of ``listings`` the filters and description ``previous``, the manifest as the run writes over it,
    records (`_recorded`): another run may have changed them since the snapshots were read."""
    for listing in listings:
        r = _recorded(listing.name, previous)
        listing.include, listing.exclude, listing.description = r.include, r.exclude, r.description


def _none_listed(out: Path, outcomes: list[ServerOutcome], previous: Manifest | None, start: float) -> GenerateResult:
    """The result of a run in which every server failed: a new tree would hold no tool (served as if fine), so
    nothing is written, and the next run tries again."""
    in_tree = {s.name for s in previous.servers} if previous is not None else set()
    for o in outcomes:
        o.kept_previous = o.name in in_tree
    servers = sorted(outcomes, key=lambda o: o.name)
    warnings, _ = unsaid_warnings(out)  # said again by the next run that writes the tree
    return GenerateResult(out=out, servers=servers, warnings=warnings, seconds=time.perf_counter() - start)


def _keep_failed_lists(out: Path, listings: list[ServerListing], failed: dict[str, set[str]]) -> None:
    """The prompts, resources or templates of a server whose listing of them failed: what its snapshot in the tree
    records (`tool_tree.snapshot_lists.with_previous`), as a server that fails to start keeps its snapshot."""
    previous = load_previous(out) if failed else None
    for listing in listings:
        if keys := failed.get(listing.name):
            before = previous_snapshot(out, previous, listing.name)
            listing.lists = with_previous(listing.lists, keys, before)


def _config_from(out: Path, config: Config | None) -> str:
    """``config``'s file relative to the tree folder ``out`` (`tool_tree.tree.Manifest.config`), "" without one: a
    tree moved with its configuration (a project's folder, a clone) still names it."""
    if config is None or config.file is None:
        return ""
    return os.path.relpath(Path(config.file).resolve(), out.resolve())


def _plan_and_write(
    out: Path,
    listings: list[ServerListing],
    outcomes: list[ServerOutcome],
    *,
    only: Sequence[str],
    check: bool,
    model_id: str | None,
    said: list[str],
    config: str = "",
) -> GenerateResult:
    """Plan the tree from the listings and the tree on disk, and write it (``check``: compare it). ``config``: the
    configuration file, as the manifest records it (`_config_from`).

    A first generation into a folder (no tree there yet) that fails midway (a full disk, Ctrl-C) removes
    the files it made: a half tree has no manifest, and no later run would write into it.
    """
    previous = load_previous(out)
    created: set[str] = set()
    try:
        return _plan_and_write_over(
            out, previous, listings, outcomes, only=only, check=check, model_id=model_id, created=created, said=said,
            config=config,
        )  # fmt: skip
    except BaseException:
        if previous is None and created:
            remove_created(out.resolve(), created, OWNED_DIRS)
        raise


def _plan_and_write_over(
    out: Path,
    previous: Manifest | None,
    listings: list[ServerListing],
    outcomes: list[ServerOutcome],
    *,
    only: Sequence[str],
    check: bool,
    model_id: str | None,
    created: set[str],
    said: list[str],
    config: str = "",
) -> GenerateResult:
    """`_plan_and_write` over the ``previous`` tree; ``created`` collects the files it makes, ``said`` the lines of
    `generator.kept.UNSAID_FILE` its warnings name."""
    listings.sort(key=lambda listing: listing.name)
    ok_names = {listing.name for listing in listings}
    failed_names = {o.name for o in outcomes if o.status == "failed"}
    # Kept: servers filtered out by --server, and ones that failed now (down, not lost). Others not listed go.
    keep = [
        entry
        for entry in (previous.servers if previous is not None else [])
        if entry.name not in ok_names and (entry.name in failed_names or (only and entry.name not in only))
    ]
    emptied = emptied_servers(previous, listings)
    if emptied and not any(listing.tools for listing in listings) and not any(k.tool_count for k in keep):
        # The tree would hold no tool (a token expired, a login lapsed): these count as failed, their stubs kept.
        keep += [entry for entry in (previous.servers if previous is not None else ()) if entry.name in emptied]
        listings[:] = [listing for listing in listings if listing.name not in emptied]
        for o in outcomes:
            if o.name in emptied:
                o.status, o.error = "failed", f"listed no tools, where the tree has {emptied[o.name]}"
        emptied = {}
    seen: dict[str, bytes | None] = {}  # files read from the tree in this run, so none is read twice
    early: set[str] = set()  # stubs written while the rest still rendered (not with --check)
    # A file edited, or not tooltree's, is copied aside, never lost.
    other = tooltree_manifest(out / MANIFEST_FILE) if previous is None else None
    unsaid, unsaid_lines = unsaid_warnings(out)  # copies an earlier run made and was stopped before it said so
    keeper = Keeper(out.resolve(), previous, other_release=other is not None, recorded=other)
    on_replace, unrecorded = _unrecorded_kept(out, previous, keeper)
    replaced: dict[str, bytes] = {}  # the previous stubs written over while the rest rendered
    relinked: list[str] = []  # the files of more than one name written afresh (`generator.files.read_existing`)
    writer = (
        None if check else _EarlyWriter(out, seen, early, _noting(on_replace, previous, replaced), created, relinked)
    )
    manifest_written = False
    try:
        plan = plan_tree(
            listings,
            keep=keep,
            previous=previous,
            existing=lambda rel: read_remembered(out, rel, seen),
            on_rendered=writer,
            modules=modules_in(out, SERVERS_DIR),
            folders=lambda package: users_folders(out, f"{SERVERS_DIR}/{package}"),
            # The file the tree was generated from; a --check, or a run from snapshots alone, keeps the recorded one.
            config=(previous.config if previous is not None and (check or not config) else config),
        )
        keep_recorded_config(out, plan, previous)
        _carry_kept_files(out, plan, keep)
        counts = {s.name: s.tool_count for s in plan.manifest.servers}
        kept_names = {k.name for k in keep}
        for o in outcomes:
            if o.status == "ok":
                o.tools = counts.get(o.name, 0)
            elif o.name in kept_names:
                o.kept_previous = True

        result = GenerateResult(
            out=out, servers=sorted(outcomes, key=lambda o: o.name), warnings=[*unsaid, *plan.warnings]
        )
        result.api_changes = api_changes(
            previous, plan.manifest, lambda rel: _before(out, rel, replaced, seen), plan.files.get
        )
        gone = "a run removes its stubs" if check else "its stubs are removed"
        result.warnings += [
            f"{cut_name(n)}: listed no tools, where the tree had {c}: {gone}" for n, c in emptied.items()
        ]
        if check:
            from tool_tree.search import index_embeds_with, index_matches_manifest, index_splits_words_as_now

            result.drift = diff_plan(out, plan.files, OWNED_DIRS, known=seen, deletable=keeper.ours)
            # missing, left by a generation interrupted while embedding, of an older word splitter, or embedded by
            # another model than a run would (none, since the extra was installed) (a run rebuilds it: before,
            # --check called such a tree up to date)
            if plan.files and not (
                index_matches_manifest(out, plan.files[MANIFEST_FILE])
                and index_splits_words_as_now(out)
                and index_embeds_with(out, model_id)
            ):
                result.drift.append(SEARCH_INDEX_FILE)
        else:
            result.report = write_plan(
                out,
                plan.files,
                OWNED_DIRS,
                known=seen,
                written=early,
                deletable=keeper.ours,
                on_replace=on_replace,
                created=created,
                relinked=relinked,
            )
            manifest_written = True
            if relinked:
                result.warnings.append(relinked_warning(relinked))
            result.warnings += keeper.warnings()
            if (breaking := breaking_warning(result.api_changes)) is not None:
                result.warnings.append(breaking)
            if unrecorded.kept:
                result.warnings.append(unrecorded_warning(unrecorded.kept, "an older tooltree"))
            result.embedding_model = model_id
            said += [*unsaid_lines, *keeper.unsaid, *unrecorded.unsaid]  # every copy is in the warnings
    finally:
        if writer is not None:  # its record of stubs goes once the manifest that records them is written
            writer.close(written=manifest_written)
    return result


async def _discover(
    servers: list[ServerConfig],
    jobs: int,
    started: Callable[[ServerConfig], None] | None,
    done: Callable[[Discovery], None],
    cancel: Cancel | None = None,
    source: str | None = None,
) -> None:
    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    from generator.discover import discover_all

    async with anyio.create_task_group() as tg:
        token = anyio.lowlevel.current_token()

        def stop() -> None:  # on the thread that sets the cancel
            with contextlib.suppress(RuntimeError):  # the loop has ended
                anyio.from_thread.run_sync(tg.cancel_scope.cancel, token=token)

        unhook = None
        if cancel is not None:
            unhook = cancel.on_set(stop)
            if unhook is None:
                return  # cancelled before it began
        try:
            await discover_all(servers, jobs=jobs, on_start=started, on_done=done, source=source)
        finally:
            if unhook is not None:
                unhook()


def _carry_kept_files(out: Path, plan: Plan, keep: Sequence[ServerEntry]) -> None:
    """Put the on-disk files of kept servers into the plan, so owning whole folders deletes nothing of theirs."""
    for entry in keep:
        snapshot = entry.snapshot or f"{SNAPSHOTS_DIR}/{entry.package}.json"
        for rel in [*files_under(out, f"{SERVERS_DIR}/{entry.package}"), snapshot]:
            data = read_existing(out, rel)
            if data is not None:
                plan.files.setdefault(rel, data)
