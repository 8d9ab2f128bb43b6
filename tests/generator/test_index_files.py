from __future__ import annotations

import importlib
import json
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from generator.index_files import render_index, render_package_init, render_readme
from tool_tree.tree import Manifest, ServerEntry, ToolEntry

LONG = (
    "A Model Context Protocol (MCP) server that provides access to the {n} service: search, create, update "
    "and delete {n} items, with filters, paging, sorting and bulk export. Supports OAuth and API keys."
)


def catalog(servers: int, tools: int) -> tuple[Manifest, int]:
    entries, tool_entries, definitions = [], [], 0
    for s in range(servers):
        name = f"service-{s}"
        entries.append(ServerEntry(name=name, package=f"service_{s}", tool_count=tools, description=LONG.format(n=s)))
        for t in range(tools):
            raw = {
                "name": f"do_thing_{t}",
                "description": f"Do thing {t} on service {s}. " * 8,
                "inputSchema": {
                    "type": "object",
                    "properties": {f"p{i}": {"type": "string", "description": "x" * 40} for i in range(5)},
                },
            }
            definitions += len(json.dumps(raw))
            tool_entries.append(
                ToolEntry(
                    server=name,
                    tool=raw["name"],
                    function=raw["name"],
                    path=f"servers/service_{s}/{raw['name']}.py",
                    schema_hash="sha256:0",
                )
            )
    return Manifest(servers=entries, tools=tool_entries), definitions


def test_index_stays_under_two_percent_of_the_definitions_at_catalog_scale() -> None:
    manifest, definitions = catalog(70, 8)
    index = render_index(manifest)
    assert len(index) <= 0.02 * definitions
    lines = [ln for ln in index.splitlines() if ln.startswith("- ")]
    assert len(lines) == 70
    for s, line in zip(sorted(manifest.servers, key=lambda s: s.package), lines, strict=True):
        assert line.startswith(f"- {s.package} (8 tools) — Access to the ")
        assert "do_thing_0" in line


def test_small_trees_keep_whole_purposes_and_every_tool_name() -> None:
    manifest, _ = catalog(3, 4)
    index = render_index(manifest)
    assert "Supports OAuth and API keys: do_thing_0, do_thing_1, do_thing_2, do_thing_3" in index


def test_a_server_whose_filters_leave_no_tool_has_a_line_without_a_dangling_dash() -> None:
    # Before: "- time (0 tools) — ".
    manifest = Manifest(
        servers=[
            ServerEntry(name="time", package="time", tool_count=0),
            ServerEntry(name="x", package="x", tool_count=0, description="Does x."),
        ],
        tools=[],
    )
    lines = [ln for ln in render_index(manifest).splitlines() if ln.startswith("- ")]
    assert lines == ["- time (0 tools)", "- x (0 tools) — Does x"]


def test_readme_lists_each_tool_with_its_mcp_name_when_renamed() -> None:
    server = ServerEntry(name="svc", package="svc", tool_count=1, description="Things.")
    tool = ToolEntry(
        server="svc",
        tool="do-it",
        function="do_it",
        path="servers/svc/do_it.py",
        schema_hash="h",
        summary="Does `it`.\nTwice.",
    )
    readme = render_readme(server, [tool])
    assert "- do_it — Does 'it'. Twice. (MCP name: do-it)" in readme


def test_package_init_reexports_every_function_and_compiles() -> None:
    server = ServerEntry(name="x'\"\\n", package="x", tool_count=2)
    tools = [
        ToolEntry(server=server.name, tool=n, function=n, path=f"servers/x/{n}.py", schema_hash="h") for n in ("b", "a")
    ]
    source = render_package_init(server, tools)
    compile(source, "init", "exec")
    assert "    from .a import a\n    from .b import b\n" in source and "__all__ = [\n    'a',\n    'b',\n]" in source


@pytest.fixture
def lazy_package(tmp_path: Path) -> Iterator[str]:
    """A package ``lazy_pkg`` of three tools (``a``, ``b``, ``c``) with the generated ``__init__.py``, importable."""
    package = tmp_path / "lazy_pkg"
    package.mkdir()
    names = ("a", "b", "c")
    tools = [ToolEntry(server="s", tool=n, function=n, path=f"servers/s/{n}.py", schema_hash="h") for n in names]
    source = render_package_init(ServerEntry(name="s", package="lazy_pkg", tool_count=3), tools)
    (package / "__init__.py").write_text(source, encoding="utf-8")
    for name in names:
        (package / f"{name}.py").write_text(f"def {name}() -> str:\n    return {name!r}\n", encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        yield "lazy_pkg"
    finally:
        sys.path.remove(str(tmp_path))
        for module in [m for m in sys.modules if m == "lazy_pkg" or m.startswith("lazy_pkg.")]:
            del sys.modules[module]


def test_importing_one_tool_of_a_package_imports_no_other_stub(lazy_package: str) -> None:
    # Before: the package re-exported every tool by importing it, so `from servers.big import echo` imported all of a
    # server's stubs: 5.2 s of a script's time (and 93 MB) for a server of 20,000 tools, 0.9 s for 3,000.
    from lazy_pkg import a  # type: ignore[import-not-found]

    assert a() == "a"
    assert sorted(m for m in sys.modules if m.startswith(f"{lazy_package}.")) == ["lazy_pkg.a"]
    package = importlib.import_module(lazy_package)
    assert "b" in dir(package) and package.__all__ == ["a", "b", "c"]
    with pytest.raises(AttributeError, match="has no attribute 'd'"):
        package.d  # noqa: B018


def test_a_name_of_no_tool_is_refused_at_the_callers_line_alone(lazy_package: str) -> None:
    # Before: the package's module __getattr__ raised the AttributeError by hand, so a script's typo
    # (crm.serach_records) showed a frame of servers/crm/__init__.py, `raise AttributeError(...)`, under its own line.
    package = importlib.import_module(lazy_package)
    with pytest.raises(AttributeError) as refused:
        package.serach  # noqa: B018
    assert [frame.filename for frame in traceback.extract_tb(refused.value.__traceback__)] == [__file__]
    assert str(refused.value) == "module 'lazy_pkg' has no attribute 'serach'"
    assert refused.value.name == "serach" and refused.value.obj is package  # what a "Did you mean" is made from
    with pytest.raises(ImportError, match="cannot import name 'serach' from 'lazy_pkg'"):
        exec(f"from {lazy_package} import serach", {})
    assert package.a() == "a" and "a" in vars(package)  # a tool's function is still imported at its first use


def test_a_tool_imported_through_its_stubs_module_is_still_the_packages_function(lazy_package: str) -> None:
    # Importing a submodule binds its name in the package to the module; the package's name stays the function.
    import lazy_pkg.b  # type: ignore[import-not-found]
    from lazy_pkg import b, c  # type: ignore[import-not-found]

    assert b() == "b" and c() == "c" and lazy_pkg.b is b
    namespace: dict[str, object] = {}
    exec(f"from {lazy_package} import *", namespace)
    assert sorted(n for n in namespace if not n.startswith("__")) == ["a", "b", "c"]


def _one_server(names: list[str]) -> Manifest:
    server = ServerEntry(name="svc", package="svc", tool_count=len(names))
    tools = [ToolEntry(server="svc", tool=n, function=n, path=f"servers/svc/{n}.py", schema_hash="h") for n in names]
    return Manifest(servers=[server], tools=tools)


def test_a_single_tool_name_left_over_is_shown_rather_than_counted() -> None:
    # Before: "- svc (12 tools) — tool_00_…, …, tool_10_…, … (+1)": eleven names and one hidden behind "(+1)".
    names = [f"tool_{i:02}_" + "x" * 14 for i in range(12)]
    (line,) = [ln for ln in render_index(_one_server(names)).splitlines() if ln.startswith("- svc")]
    assert line == "- svc (12 tools) — " + ", ".join(names)


def test_two_or_more_names_left_over_are_counted() -> None:
    names = [f"tool_{i:02}_" + "x" * 14 for i in range(13)]
    (line,) = [ln for ln in render_index(_one_server(names)).splitlines() if ln.startswith("- svc")]
    assert line == "- svc (13 tools) — " + ", ".join(names[:11]) + ", … (+2)"
