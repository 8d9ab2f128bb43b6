"""Planning a tree: which files, with which bytes, for a set of servers and their raw tool lists."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from generator.index_files import render_index, render_package_init, render_readme, render_servers_init
from generator.naming import assign_identifiers
from generator.render import render_stub
from generator.text import first_sentence
from tool_tree.tree import (
    MANIFEST_FILE,
    SERVERS_DIR,
    SNAPSHOTS_DIR,
    Manifest,
    ServerEntry,
    ToolEntry,
    schema_hash,
)

MAX_TOOLS_PER_SERVER = 20_000
INDEX_FILE_NAME = "INDEX.md"
_RESERVED_MODULES = {"README", "INDEX", "__init__", "servers", "tool_tree"}


@dataclass
class ServerListing:
    """One server's raw ``tools/list`` result plus what to do with it."""

    name: str
    tools: list[dict[str, Any]]
    info: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()

    def snapshot(self) -> dict[str, Any]:
        return {"server": self.name, "info": self.info, "tools": self.tools}


@dataclass
class Plan:
    files: dict[str, bytes]
    manifest: Manifest
    owned_dirs: list[str]
    warnings: list[str]


def selected_tools(listing: ServerListing) -> tuple[list[dict[str, Any]], list[str]]:
    """The tools that pass include/exclude, de-duplicated by name (first wins), with warnings."""
    warnings: list[str] = []
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for raw in listing.tools:
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            warnings.append(f"{listing.name}: skipped a tool without a name")
            continue
        if name in seen:
            warnings.append(f"{listing.name}: tool {name!r} is listed twice; keeping the first")
            continue
        seen.add(name)
        if listing.include and not any(fnmatch.fnmatchcase(name, pat) for pat in listing.include):
            continue
        if any(fnmatch.fnmatchcase(name, pat) for pat in listing.exclude):
            continue
        out.append(raw)
    if len(out) > MAX_TOOLS_PER_SERVER:
        warnings.append(f"{listing.name}: {len(out)} tools; keeping the first {MAX_TOOLS_PER_SERVER}")
        out = out[:MAX_TOOLS_PER_SERVER]
    return out, warnings


def server_description(listing: ServerListing) -> str:
    """One line saying what the server is for: config, then what the server says about itself."""
    for candidate in (
        listing.description,
        listing.info.get("description"),
        listing.info.get("instructions"),
        listing.info.get("title"),
    ):
        if isinstance(candidate, str) and candidate.strip():
            return first_sentence(candidate, 140)
    return ""


def _dumps(value: Any) -> bytes:
    # Key order is kept: the order of properties in a schema is the order of the stub's parameters.
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def plan_tree(
    listings: Sequence[ServerListing], *, keep: Sequence[ServerEntry] = (), keep_tools: Sequence[ToolEntry] = ()
) -> Plan:
    """Plan the files for ``listings``; servers in ``keep`` stay on disk as they are.

    ``keep`` are servers of a previous manifest that are not regenerated this time (filtered
    out with ``--server``, or failed to connect); their files are left alone and their manifest
    entries carried over, so a failing server never loses its stubs.
    """
    names = [entry.name for entry in keep] + [listing.name for listing in listings]
    packages = assign_identifiers(names, fallback="server", reserved=_RESERVED_MODULES, case_insensitive=True)
    files: dict[str, bytes] = {}
    warnings: list[str] = []
    servers: list[ServerEntry] = []
    tools: list[ToolEntry] = []
    owned: list[str] = []
    kept_names = {entry.name for entry in keep}
    for entry in keep:
        if entry.package != packages[entry.name]:
            # The package name must not move under a kept server: its files stay where they are.
            packages[entry.name] = entry.package
        servers.append(entry)
    tools.extend(t for t in keep_tools if t.server in kept_names)

    for listing in listings:
        package = packages[listing.name]
        base = f"{SERVERS_DIR}/{package}"
        owned.append(base)
        selected, w = selected_tools(listing)
        warnings += w
        functions = assign_identifiers(
            [t["name"] for t in selected], fallback="tool", reserved=_RESERVED_MODULES, case_insensitive=True
        )
        server_tools: list[ToolEntry] = []
        for raw in selected:
            function = functions[raw["name"]]
            digest = schema_hash(raw)
            stub = render_stub(server=listing.name, tool=raw, function=function, schema_hash=digest)
            warnings += [f"{listing.name}: {msg}" for msg in stub.warnings]
            path = f"{base}/{function}.py"
            files[path] = stub.source.encode("utf-8")
            description = raw.get("description") if isinstance(raw.get("description"), str) else ""
            server_tools.append(
                ToolEntry(
                    server=listing.name,
                    tool=raw["name"],
                    function=function,
                    path=path,
                    schema_hash=digest,
                    summary=first_sentence(description or "", 200),
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
        )
        files[f"{base}/__init__.py"] = render_package_init(entry, server_tools).encode("utf-8")
        files[f"{base}/README.md"] = render_readme(entry, server_tools).encode("utf-8")
        files[entry.snapshot] = _dumps(listing.snapshot())
        servers.append(entry)
        tools.extend(server_tools)

    manifest = Manifest(servers=sorted(servers, key=lambda s: s.name), tools=tools)
    files[f"{SERVERS_DIR}/{INDEX_FILE_NAME}"] = render_index(manifest).encode("utf-8")
    files[f"{SERVERS_DIR}/__init__.py"] = render_servers_init().encode("utf-8")
    files[MANIFEST_FILE] = manifest.to_json().encode("utf-8")
    return Plan(files=files, manifest=manifest, owned_dirs=sorted(owned), warnings=warnings)
