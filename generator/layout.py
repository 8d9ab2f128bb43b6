"""Planning a tree: which files, with which bytes, for a set of servers and their raw tool lists."""

from __future__ import annotations

import difflib
import fnmatch
import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from generator.fingerprint import generator_fingerprint
from generator.index_files import render_index, render_package_init, render_readme, render_servers_init
from generator.json_numbers import not_json
from generator.naming import assign_identifiers
from generator.parts import tool_title
from generator.workers import forked_map
from tool_tree.config import filtered_out, unmatched_filter
from tool_tree.text import cut_name, first_sentence, one_line, quoted_name, summary_line

if TYPE_CHECKING:
    from generator.render import RenderedStub

from tool_tree.tree import (
    MANIFEST_FILE,
    SERVERS_DIR,
    SNAPSHOTS_DIR,
    Manifest,
    ServerEntry,
    ToolEntry,
    content_hash,
    lines_kept,
    requires_task,
    schema_hash,
)

MAX_TOOLS_PER_SERVER = 20_000
MAX_TOOL_NAME = 256
"""Characters of a tool name; a tool with a longer one is left out. MCP suggests 1 to 128: this is
generous, and keeps a hostile name (every stub, warning and manifest line of the tool holds it) small."""
INDEX_FILE_NAME = "INDEX.md"
# Module names a stub must not take: the tree's own files, and names the stubs import.
_RESERVED_MODULES = frozenset(
    {"README", "INDEX", "__init__", "servers", "tool_tree", "typing", "call_tool", "structured", "cast"}
    | {"ToolResult", "Any", "Literal", "TypedDict", "NotRequired"}
)


@dataclass
class ServerListing:
    """One server's raw ``tools/list`` result plus what to do with it."""

    name: str
    tools: list[dict[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    named: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    """Patterns that stand for a tool name of another client's list (`tool_tree.config.ServerConfig.named`)."""
    lists: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)  # by snapshot key (`snapshot_lists`)
    lists_recorded: bool = True
    """``lists`` is what the server declares: false for the snapshot of a tree of a release that did not record
    them (the new tree's manifest then says so: `tool_tree.tree.Manifest.lists_recorded`)."""


@dataclass
class Plan:
    files: dict[str, bytes]
    manifest: Manifest
    owned_dirs: list[str]
    warnings: list[str]


_Job = tuple[str, dict[str, Any], str, dict[str, str]]
"""(server, raw tool, function, the names its parameters were given before): one stub to render."""


def _render(job: _Job) -> RenderedStub:
    from generator.render import render_stub  # not imported for a rerun that renders nothing

    server, raw, function, parameters = job
    return render_stub(server=server, tool=raw, function=function, parameters=parameters)


def render_many(jobs: Sequence[_Job]) -> Iterator[RenderedStub]:
    """Render stubs, in order, as `forked_map`'s workers finish them (early stubs written while others render)."""
    return forked_map(_render, jobs)


def selected_tools(listing: ServerListing) -> tuple[list[dict[str, Any]], list[str]]:
    """The tools that pass include/exclude, de-duplicated by name (first wins), with warnings.

    Left out with a warning: a tool without a name, one whose name is over `MAX_TOOL_NAME`
    characters, one whose definition holds NaN or an infinity (the SDK reads ``NaN``, ``Infinity`` and ``1e309`` as
    such floats, `generator.json_numbers`; the manifest, the bridge's argument check and the model's tool list
    cannot carry them), and one that runs only as an MCP task (`tool_tree.tree.requires_task`: tooltree cannot call it).
    """
    warnings: list[str] = []
    server = cut_name(listing.name)  # escaped, not cleaned: crm\u200b is not crm, another server
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for raw in listing.tools:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            warnings.append(f"{server}: skipped a tool without a name")
            continue
        if len(name) > MAX_TOOL_NAME:
            warnings.append(
                f"{server}: left out tool {quoted_name(name)}: its name is {len(name):,} characters "
                f"(the limit is {MAX_TOOL_NAME})"
            )
            continue
        # Before the check for NaN, so a tool left out for NaN still takes its name from a later one:
        # the bridge checks a name against its first tool in the snapshot and in the live list.
        if name in seen:
            shown = quoted_name(name, MAX_TOOL_NAME)  # escaped, not cleaned: a name another differs from by U+200B
            warnings.append(f"{server}: tool {shown} is listed twice; keeping the first")
            continue
        seen.add(name)
        if filtered_out(name, listing.include, listing.exclude) is not None:
            continue
        if (why := not_json(raw)) is not None:
            warnings.append(f"{server}: left out tool {quoted_name(name, MAX_TOOL_NAME)}: its definition holds {why}")
            continue
        if requires_task(raw):
            warnings.append(
                f"{server}: left out tool {quoted_name(name, MAX_TOOL_NAME)}: it runs only as an MCP task "
                "(execution.taskSupport: required), and tooltree calls tools directly"
            )
            continue
        out.append(raw)
    if len(out) > MAX_TOOLS_PER_SERVER:
        warnings.append(f"{server}: {len(out)} tools; keeping the first {MAX_TOOLS_PER_SERVER}")
        out = out[:MAX_TOOLS_PER_SERVER]
    warnings += _unmatched_patterns(listing, sorted(seen))
    return out, warnings


def _unmatched_patterns(listing: ServerListing, names: Sequence[str]) -> list[str]:
    """A warning for each include or exclude pattern that matches none of ``names`` (likely a typo)."""
    warnings = []
    for kind, patterns in (("include", listing.include), ("exclude", listing.exclude)):
        for pattern in dict.fromkeys(patterns):
            if any(fnmatch.fnmatchcase(name, pattern) for name in names):
                continue
            close = difflib.get_close_matches(pattern, names, n=1)
            hint = f" (did you mean {cut_name(close[0], 80)}?)" if close else ""
            warnings.append(f"{cut_name(listing.name)}: {unmatched_filter(kind, pattern, listing.named)}{hint}")
    return warnings


def tool_summary(raw: dict[str, Any]) -> str:
    """The first sentence of a tool's description, else its title, as the stub's docstrings have it (many
    servers give a tool a title and no description)."""
    description = raw.get("description")
    return summary_line(description if isinstance(description, str) else "", 200) or one_line(tool_title(raw), 200)


def server_description(listing: ServerListing) -> str:
    """One line saying what the server is for: config, then what the server says about itself."""
    for candidate in (
        listing.description,
        listing.info.get("description"),
        listing.info.get("instructions"),
        listing.info.get("title"),
    ):
        if isinstance(candidate, str) and (text := _without_headings(candidate)):
            line = first_sentence(text, 140)
            if not _ABOUT_ITSELF.search(line):
                return line
    return ""


def _without_headings(text: str) -> str:
    """``text`` without its Markdown heading lines (instructions often open with ``# Name – Instructions``)."""
    return "\n".join(line for line in text.splitlines() if not _HEADING.match(line)).strip()


_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_ABOUT_ITSELF = re.compile(
    r"^(?:audience|note)\s*:|\b(?:these|this|the following)\s+(?:instructions|document|guide)\b", re.IGNORECASE
)
"""A first sentence about the text itself, not the server: server-everything's instructions open with "Audience: These
instructions are written for an LLM or autonomous agent …", which was its line in INDEX.md."""


def _snapshot_bytes(listing: ServerListing) -> bytes:
    """The snapshot as JSON, one tool (prompt, resource, template) per line: diffable, written by the C encoder (fast).
    Key order is kept: the order of properties in a schema is the order of the stub's parameters."""
    head = json.dumps({"server": listing.name, "info": listing.info}, ensure_ascii=False)[:-1]
    lists = [f'"{k}": [\n' + ",\n".join(map(json.dumps, v)) + "\n]" for k, v in listing.lists.items()]
    tools = ",\n".join(json.dumps(t, ensure_ascii=False) for t in listing.tools)
    return lines_kept(f'{", ".join([head, *lists])}, "tools": [\n{tools}\n]}}\n').encode()


def emptied_servers(previous: Manifest | None, listings: Sequence[ServerListing]) -> dict[str, int]:
    """The servers listed with no tool at all whose part of the ``previous`` tree has tools, and how many it has
    (before, a server that came back empty lost every stub without a word)."""
    had = {s.name: s.tool_count for s in previous.servers} if previous is not None else {}
    return {listing.name: had[listing.name] for listing in listings if not listing.tools and had.get(listing.name)}


def plan_tree(
    listings: Sequence[ServerListing],
    *,
    keep: Sequence[ServerEntry] = (),
    previous: Manifest | None = None,
    existing: Callable[[str], bytes | None] = lambda _: None,
    on_rendered: Callable[[str, bytes], None] | None = None,
    modules: Collection[str] = (),
    folders: Callable[[str], Collection[str]] = lambda _package: (),
    config: str = "",
) -> Plan:
    """Plan the files for ``listings``; servers in ``keep`` stay on disk as they are. ``config``: the configuration
    file the tree is generated from, relative to the tree (`tool_tree.tree.Manifest.config`).

    ``modules`` are the user's own modules in ``servers/`` (``servers/crm.py``): a new server's package is not
    given one of their names, which would hide the module from imports. ``folders(package)`` are the folders in a
    server's package (one the user added): a new tool is not given one of their names (before: ``reports.py`` beside
    the user's ``reports/``, which wins the import, so every stub of the server failed to import).

    ``keep`` are servers of the ``previous`` manifest that are not regenerated this time
    (filtered out with ``--server``, or failed to connect); their files are left alone and their
    manifest entries carried over, so a failing server never loses its stubs.

    A stub whose tool definition, path and generator are unchanged since ``previous`` is not
    rendered again: its bytes on disk (read with ``existing``) are reused when they still hash to
    what was written. That makes a no-op rerun cost a file read per tool, not a render. The manifest
    names the generator that rendered its stubs: when ``keep`` carries stubs another one rendered (a
    ``--server`` run, or a server down, after an upgrade), it names that one, so the next run renders
    every stub again rather than taking the kept ones for current.

    Names are stable: a server keeps the package, a tool the function and a parameter the name
    ``previous`` records for it while they are still valid, so adding a tool or a property never
    renames an existing stub or parameter (scripts and saved skills import them).

    ``on_rendered(path, data)`` is called for each stub as soon as it is rendered (the plan has
    it too), so a caller can write it while the rest still renders.
    """
    fingerprint = generator_fingerprint()
    before = previous.tools if previous is not None else ()
    given = {(t.server, t.tool): t for t in before}  # names once given are given again
    functions_before: dict[str, dict[str, str]] = {}
    for t in before:
        functions_before.setdefault(t.server, {})[t.tool] = t.function
    reusable: dict[tuple[str, str], ToolEntry] = {}
    if previous is not None and previous.generator == fingerprint:
        reusable = {key: t for key, t in given.items() if t.stub_hash}
    # Kept servers keep their package; the others get their previous one or a name that cannot collide.
    packages_before = {s.name: s.package for s in previous.servers} if previous is not None else {}
    packages = {entry.name: entry.package for entry in keep}
    packages.update(
        assign_identifiers(
            [listing.name for listing in listings],
            fallback="server",
            reserved=_RESERVED_MODULES | set(packages.values()),
            case_insensitive=True,
            previous=packages_before,
            occupied=set(modules) - set(packages_before.values()),
        )
    )
    files: dict[str, bytes] = {}
    warnings: list[str] = []
    servers: list[ServerEntry] = []
    tools: list[ToolEntry] = []
    owned: list[str] = []
    kept_names = {entry.name for entry in keep}
    servers.extend(keep)
    tools.extend(t for t in before if t.server in kept_names)

    # First decide every stub's path and whether it can be reused; then render the rest at once.
    selections: list[tuple[ServerListing, str, list[tuple[dict[str, Any], str, str]]]] = []
    jobs: list[_Job] = []
    for listing in listings:
        package = packages[listing.name]
        base = f"{SERVERS_DIR}/{package}"
        owned.append(base)
        selected, w = selected_tools(listing)
        warnings += w
        ours = functions_before.get(listing.name, {})
        functions = assign_identifiers(
            [t["name"] for t in selected],
            fallback="tool",
            reserved=_RESERVED_MODULES,
            case_insensitive=True,
            previous=ours,
            occupied=set(folders(package)) - set(ours.values()),
        )
        chosen = []
        for raw in selected:
            function, digest = functions[raw["name"]], schema_hash(raw)
            chosen.append((raw, function, digest))
            path = f"{base}/{function}.py"
            old = reusable.get((listing.name, raw["name"]))
            data = existing(path) if old is not None and old.path == path and old.schema_hash == digest else None
            if old is None or data is None or content_hash(data) != old.stub_hash:
                earlier = given.get((listing.name, raw["name"]))
                jobs.append((listing.name, raw, function, dict(earlier.parameters) if earlier is not None else {}))
            else:
                files[path] = data
        selections.append((listing, base, chosen))
    rendered: dict[tuple[str, str], RenderedStub] = {}
    for job, done in zip(jobs, render_many(jobs), strict=True):
        rendered[(job[0], job[2])] = done
        if on_rendered is not None and not done.left_out:
            on_rendered(f"{SERVERS_DIR}/{packages[job[0]]}/{job[2]}.py", done.source.encode("utf-8"))

    for listing, base, chosen in selections:
        package = base.split("/")[1]
        server_tools: list[ToolEntry] = []
        for raw, function, digest in chosen:
            path = f"{base}/{function}.py"
            stub = rendered.get((listing.name, function))
            if stub is not None and stub.left_out:  # too large even as the minimal stub: no file, no entry
                warnings += [f"{cut_name(listing.name)}: {msg}" for msg in stub.warnings]
                continue
            if stub is not None:
                files[path] = stub.source.encode("utf-8")
                stub_warnings, parameters = list(stub.warnings), stub.parameters
            else:
                reused = reusable[(listing.name, raw["name"])]
                stub_warnings, parameters = list(reused.warnings), dict(reused.parameters)
            data = files[path]
            warnings += [f"{cut_name(listing.name)}: {msg}" for msg in stub_warnings]
            server_tools.append(
                ToolEntry(
                    server=listing.name,
                    tool=raw["name"],
                    function=function,
                    path=path,
                    schema_hash=digest,
                    summary=tool_summary(raw),
                    stub_hash=content_hash(data),
                    warnings=tuple(stub_warnings),
                    parameters=parameters,
                )
            )
        server_tools.sort(key=lambda t: t.function)
        description = server_description(listing)
        entry = ServerEntry(
            name=listing.name,
            package=package,
            tool_count=len(server_tools),
            description=description,
            snapshot=f"{SNAPSHOTS_DIR}/{package}.json",
            include=tuple(listing.include),
            exclude=tuple(listing.exclude),
        )
        files[f"{base}/__init__.py"] = render_package_init(entry, server_tools).encode("utf-8")
        readme = render_readme(entry, server_tools, listing.info.get("instructions"))
        files[f"{base}/README.md"] = readme.encode("utf-8")
        files[entry.snapshot] = _snapshot_bytes(listing)
        servers.append(entry)
        tools.extend(server_tools)

    # Stubs kept from a tree another generator wrote are its renderings: the manifest names that generator, so the
    # next run renders them again (before, it named this one, and they were reused as current from then on).
    rendered_by = fingerprint
    if previous is not None and previous.generator != fingerprint and any(t.server in kept_names for t in before):
        rendered_by = previous.generator
    # Kept servers keep their snapshots, of whichever release wrote them.
    recorded = all(listing.lists_recorded for listing in listings)
    recorded = recorded and (not keep or previous is None or previous.lists_recorded)
    manifest = Manifest(
        servers=sorted(servers, key=lambda s: s.name), tools=tools, generator=rendered_by, lists_recorded=recorded,
        config=config,
    )  # fmt: skip
    files[f"{SERVERS_DIR}/{INDEX_FILE_NAME}"] = render_index(manifest).encode("utf-8")
    files[f"{SERVERS_DIR}/__init__.py"] = render_servers_init().encode("utf-8")
    manifest.files = _file_hashes(files, tools, keep, previous)
    files[MANIFEST_FILE] = manifest.to_json().encode("utf-8")
    return Plan(files=files, manifest=manifest, owned_dirs=sorted(owned), warnings=warnings)


def _file_hashes(
    files: dict[str, bytes], tools: Sequence[ToolEntry], keep: Sequence[ServerEntry], previous: Manifest | None
) -> dict[str, str]:
    """The manifest's ``files``: the hash of every planned file but the stubs (their ``stub_hash`` says it),
    and of the files of ``keep``'s servers as the previous manifest recorded them (they are not planned)."""
    stubs = {t.path for t in tools}
    hashes = {rel: content_hash(data) for rel, data in files.items() if rel not in stubs}
    if previous is not None and keep:
        kept = {entry.package for entry in keep}
        snapshots = {entry.snapshot for entry in keep}
        for rel, digest in previous.files.items():
            parts = rel.split("/")
            if (len(parts) > 2 and parts[0] == SERVERS_DIR and parts[1] in kept) or rel in snapshots:
                hashes.setdefault(rel, digest)
    return hashes
