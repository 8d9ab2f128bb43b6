"""A tree the user's own `generate-tree` did not write (committed by a teammate, downloaded, edited by hand) read
by every host-side reader: no host file outside the tree reaches the model, a client or the sandbox; every cost is
bounded; every refusal is a clear error naming the file.

Covered elsewhere: a link under ``servers/`` not followed by ``read_file``/``list_files``
(tests/agent/test_files.py::test_symlinks_in_the_tree_are_not_followed); a FIFO in place of the manifest or index
(tests/tool_tree/test_search_odd_input.py); links, caches and files being written left out of the sandbox's copy
(tests/sandbox/test_docker.py::test_packing_skips_files_being_written_kept_copies_and_files_gone_since_they_were_listed);
a manifest of another version (tests/tool_tree/test_tree.py); names from a tampered manifest reused by `generate-tree`
(tests/generator/test_generate_hostile.py).
"""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tool_tree.snapshot_lists as lists
from agent.errors import AgentSetupError
from agent.testing import FakeMessagesAPI, reply
from agent.toolsets.code import CodeToolset
from agent.toolsets.direct import DirectToolset
from sandbox.errors import SandboxError
from sandbox.tree_pack import MAX_MODULE_BYTES, MAX_TREE_DEPTH, pack_tree, tree_fingerprint
from tests.support import REPO, TEST_OWNER, sample_project, write_tiny_bert
from tool_tree.connect import MAX_LIST_VALUES
from tool_tree.search import SearchError, SearchIndex, render_hits, search_tools
from tool_tree.search._mode import EMBEDDINGS_ENV
from tool_tree.search._render import MAX_STUB_BYTES
from tool_tree.tree import MAX_SNAPSHOT_VALUES, MAX_TREE_FILE_BYTES, Manifest, TreeError, load_snapshot, read_in_tree
from tooltree_cli.main import main

SECRET = "HOST-SECRET-7f3a"


class _NoSandbox:
    """The runtime a call of ``list_files``/``read_file`` on ``servers/`` gets: it never needs the sandbox."""

    def take_sandbox_note(self) -> str:
        return ""


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A config of the sample crm server and the tree `generate-tree` wrote from it."""
    return sample_project(tmp_path_factory.mktemp("from-elsewhere"), "crm", timeout=60)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A folder of host files outside every tree: a key and a JSON file shaped like a snapshot."""
    folder = tmp_path / "home"
    folder.mkdir()
    (folder / "id_rsa").write_text(f"{SECRET}\n", encoding="utf-8")
    tools = [{"name": "list_leads", "description": f"{SECRET} from a host file", "inputSchema": {"type": "object"}}]
    (folder / "creds.json").write_text(json.dumps({"tools": tools}), encoding="utf-8")
    return folder


@pytest.fixture
def tree(generated: tuple[Path, Path], tmp_path: Path) -> Path:
    """A fresh copy of the generated tree, to make hostile."""
    copy = tmp_path / "tree"
    shutil.copytree(generated[1], copy)
    return copy


def _edit_manifest(tree: Path, change: Any) -> None:
    data = json.loads((tree / "manifest.json").read_text(encoding="utf-8"))
    change(data)
    (tree / "manifest.json").write_text(json.dumps(data), encoding="utf-8")


def _call(toolset: CodeToolset, name: str, **arguments: Any) -> tuple[bool, str]:
    outcome = toolset.call(name, arguments, _NoSandbox())  # type: ignore[arg-type]
    return outcome.is_error, " ".join(str(b.get("text", "")) for b in outcome.content)


# ---- links that lead out of the tree ------------------------------------------------------------------------------


def test_a_servers_folder_that_is_a_link_is_refused_and_never_listed_or_read(tree: Path, host: Path) -> None:
    """Before: ``servers -> ~`` made the model's ``list_files('servers')`` list the host folder and
    ``read_file('servers/id_rsa')`` read the key (`FileView` resolved ``servers`` and checked only below it)."""
    real = tree / "servers.real"
    (tree / "servers").rename(real)
    (tree / "servers").symlink_to(host)
    with pytest.raises(AgentSetupError, match="servers is a symbolic link, which is not followed"):
        CodeToolset(tree)

    # a tree changed under a running agent or serve (a `git pull`): each call looks again
    (tree / "servers").unlink()
    real.rename(tree / "servers")
    toolset = CodeToolset(tree)
    shutil.move(tree / "servers", real)
    (tree / "servers").symlink_to(host)
    for name, arguments in [("list_files", {"path": "servers"}), ("read_file", {"path": "servers/id_rsa"})]:
        failed, text = _call(toolset, name, **arguments)
        assert failed and "is a symbolic link" in text and SECRET not in text and "id_rsa" not in text


def test_an_index_md_linked_to_a_host_file_is_not_put_in_the_prompt(tree: Path, host: Path) -> None:
    """Before: the system prompt (and `tooltree serve`'s instructions, sent to every client) inlined the file an
    ``INDEX.md`` link named, up to 4,000 characters: an SSH key fits."""
    (tree / "servers" / "INDEX.md").unlink()
    (tree / "servers" / "INDEX.md").symlink_to(host / "id_rsa")
    toolset = CodeToolset(tree, standalone=True)
    assert SECRET not in toolset.system_prompt()
    assert SECRET not in toolset.prompt("serve.md.j2")
    assert "1 server, 6 tools" in toolset.system_prompt()  # the compact list of the manifest's servers instead


def test_a_tree_file_that_is_a_hard_link_is_read_by_no_host_reader_nor_copied_to_the_sandbox(
    tree: Path, host: Path
) -> None:
    """A stub, the prompt's ``INDEX.md`` and the search index, each a hard link to a host file (one name in the tree,
    another outside: an archive extracted carelessly can make one). Before: each was a regular file to every reader,
    so the host file went to the model (``read_file``, the system prompt, a search's full detail) and into the
    sandbox's copy of the tree."""
    stub, index = tree / "servers" / "crm" / "list_leads.py", tree / "servers" / "INDEX.md"
    for linked in (stub, index):
        linked.unlink()
        os.link(host / "id_rsa", linked)
    toolset = CodeToolset(tree, standalone=True)
    failed, text = _call(toolset, "read_file", path="servers/crm/list_leads.py")
    assert failed and "it has 3 names (hard links)" in text and SECRET not in text
    assert SECRET not in toolset.system_prompt() and SECRET not in toolset.prompt("serve.md.j2")
    assert SECRET not in search_tools(tree, "export leads", detail="full", limit=6)
    with pytest.raises(SandboxError, match=r"INDEX\.md: it has 3 names \(hard links\)"):  # the first walked
        pack_tree(tree)
    with pytest.raises(OSError, match="hard links") as refused:
        read_in_tree(tree, "servers/INDEX.md")
    assert refused.value.errno == errno.EMLINK

    # The search index too: refused naming the file, never parsed from the host file's bytes.
    os.link(tree / "search_index.json", host / "index.json")
    with pytest.raises(SearchError, match=r"search_index\.json.*hard links"):
        SearchIndex.load(tree)


def test_regenerating_a_tree_of_hard_links_writes_each_file_afresh_and_says_so(
    generated: tuple[Path, Path], tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tree copied with ``cp -al`` (every file two names): refused by its readers, mended by `generate-tree`, which
    writes each such file afresh and leaves the other names as they were. Before the refusal there was nothing to
    mend; with it and without this, a rerun found the files unchanged and left them (and could not write the search
    index: the manifest could not be read)."""
    backup = tmp_path / "backup"
    files = [f for f in tree.rglob("*") if f.is_file()]
    for f in files:
        (backup / f.relative_to(tree)).parent.mkdir(parents=True, exist_ok=True)
        os.link(f, backup / f.relative_to(tree))
    before = {f: f.read_bytes() for f in backup.rglob("*") if f.is_file()}
    capsys.readouterr()
    assert (
        main(["generate-tree", "--config", str(generated[0]), "--out", str(tree), "--embeddings", "off", "--check"])
        == 1
    )
    assert main(["generate-tree", "--config", str(generated[0]), "--out", str(tree), "--embeddings", "off"]) == 0
    err = capsys.readouterr().err
    # Every file but the search index, which is written after (afresh as well, its own way).
    assert f"warning: {len(files) - 1} file(s) of the tree had more than one name (hard links)" in err
    assert "each was written afresh, and its other names keep the bytes it had" in err
    assert all(f.stat().st_nlink == 1 for f in tree.rglob("*") if f.is_file())
    assert {f: f.read_bytes() for f in backup.rglob("*") if f.is_file()} == before  # the other names untouched
    assert "crm.list_leads" in search_tools(tree, "export leads")  # readable again, its index written
    assert (
        main(["generate-tree", "--config", str(generated[0]), "--out", str(tree), "--embeddings", "off", "--check"])
        == 0
    )


def test_an_index_md_that_is_a_fifo_does_not_hang_the_agent_or_serve(tree: Path) -> None:
    """Before: the prompt's ``INDEX.md`` was opened blocking, so a FIFO in its place hung `tooltree agent` and
    `tooltree serve` at start for as long as no one wrote to it."""
    index = tree / "servers" / "INDEX.md"
    index.unlink()
    os.mkfifo(index)
    made: list[CodeToolset] = []
    worker = threading.Thread(target=lambda: made.append(CodeToolset(tree)), daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # let the thread go (before the fix): a writer ends its wait on the FIFO
        with open(index, "w"):
            pass
    assert made and "1 server, 6 tools" in made[0].system_prompt()


def test_the_direct_prompt_shows_a_manifests_server_description_cleaned_and_cut(tree: Path) -> None:
    """Before: put in ``direct`` mode's system prompt as the manifest had it, escapes and all, however long."""
    _edit_manifest(tree, _server(description="CRM \x1b]52;c;aGk=\x07\x1b[2J" + "x" * 100_000))
    prompt = DirectToolset(tree).system_prompt()
    assert "\x1b" not in prompt and "\x07" not in prompt
    assert "x" * 150 in prompt and "x" * 200 not in prompt


@pytest.mark.parametrize("how", ["relative_path", "absolute_path", "link"])
def test_a_snapshot_out_of_the_tree_is_refused_and_never_offered_to_the_model(tree: Path, host: Path, how: str) -> None:
    """Before: a manifest naming ``../home/creds.json`` or ``/home/.../creds.json`` as a snapshot, or a snapshot
    linked there, had the host file read, and what it held went to the model as tool descriptions (``direct`` mode,
    `tooltree serve`'s passthrough tools)."""
    if how == "link":
        (tree / "snapshots" / "crm.json").unlink()
        (tree / "snapshots" / "crm.json").symlink_to(host / "creds.json")
        expected = "crm.json is a symbolic link"
    else:
        named = os.path.relpath(host / "creds.json", tree) if how == "relative_path" else str(host / "creds.json")
        _edit_manifest(tree, lambda m: m["servers"][0].update(snapshot=named))
        expected = "not a path inside the tree"
    with pytest.raises(AgentSetupError, match=expected) as info:
        DirectToolset(tree)
    assert SECRET not in str(info.value)
    if how == "link":
        with pytest.raises(TreeError, match="regenerate the tree"):
            load_snapshot(tree, Manifest.load(tree).servers[0])


# ---- a hostile manifest -------------------------------------------------------------------------------------------


def _tool(**change: Any) -> Any:
    return lambda m: m["tools"][0].update(change)


def _server(**change: Any) -> Any:
    return lambda m: m["servers"][0].update(change)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_tool(path="servers/crm/../../../etc/passwd.py"), "not a path inside the tree"),
        (_tool(path="/etc/passwd"), "not a path inside the tree"),
        (_tool(path="snapshots/crm.json"), "is not a stub's path"),
        (_tool(function="get\x1b]52;c;aGk=\x07\nFAKE"), "is not a Python identifier"),
        (_tool(server=5), "server must be str, got int"),
        (_tool(warnings="abc"), "warnings of 'create_task' is not a list of strings"),
        (_server(package="../../x"), "is not a Python identifier"),
        (_server(tool_count="6"), "tool_count must be int, got str"),
        (_server(snapshot="servers/crm/__init__.py"), "is not in snapshots/"),
        (lambda m: m.update(tools={}), "servers and tools must be lists"),
    ],
    ids=[
        "dotdot_path", "absolute_path", "path_outside_servers", "escapes_in_function", "number_for_server",
        "string_for_warnings", "package_out_of_servers", "string_for_count", "snapshot_outside_snapshots",
        "object_for_tools",
    ],
)  # fmt: skip
def test_a_manifest_that_is_not_the_generators_is_a_tree_error_naming_it(tree: Path, change: Any, said: str) -> None:
    """Before: each was read as it was (a path out of the tree, escapes in a name printed to the model and the
    terminal) or failed later with an AttributeError far from the file."""
    _edit_manifest(tree, change)
    with pytest.raises(TreeError, match=r"manifest\.json: malformed manifest") as info:
        Manifest.load(tree)
    assert said in str(info.value)
    assert "\x1b" not in str(info.value)


def test_a_manifest_from_a_newer_generator_is_read_and_one_of_another_version_is_refused(tree: Path) -> None:
    """A generator fingerprint from the future is only a string (stubs are re-rendered by the next `generate-tree`);
    a manifest version other than 1 says to regenerate."""
    _edit_manifest(tree, lambda m: m.update(generator="99.0.0+ffffffffffffffff"))
    assert Manifest.load(tree).generator == "99.0.0+ffffffffffffffff"
    assert "crm.list_leads" in search_tools(tree, "export leads")
    _edit_manifest(tree, lambda m: m.update(version=2))
    with pytest.raises(TreeError, match="not a version-1 tooltree manifest"):
        Manifest.load(tree)


@pytest.mark.parametrize("name", ["manifest.json", "snapshots/crm.json", "search_index.json"])
def test_json_nested_100000_deep_is_an_error_naming_the_file(tree: Path, name: str) -> None:
    """Before: RecursionError out of every reader (`tooltree search` exited 70, "unexpected")."""
    (tree / name).write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises((TreeError, SearchError), match="nested too deeply") as info:
        if name == "manifest.json":
            Manifest.load(tree)
        elif name == "search_index.json":
            SearchIndex.load(tree)
        else:
            load_snapshot(tree, Manifest.load(tree).servers[0])
    assert str(tree / name) in str(info.value)


def test_a_snapshot_of_more_values_than_a_listing_keeps_is_refused_unparsed(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot is a server's listing, whose values generate-tree bounds; one from elsewhere is counted on its bytes
    before it is parsed. Its 11 MB of ``{}`` would be 3.5 million objects, 250 MB or more parsed (64 MiB of them,
    under the tree's file cap, gigabytes)."""
    assert MAX_SNAPSHOT_VALUES >= MAX_LIST_VALUES + 3 * lists.MAX_LIST_VALUES + 50_000  # what generate-tree writes
    dense = b'{"server": "crm", "info": {}, "tools": [{"name": "t", "x": [' + b",".join([b"{}"] * MAX_SNAPSHOT_VALUES)
    for path in (tree / "snapshots" / "crm.json", tmp_path / "snaps" / "crm.json"):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(dense + b"]}]}")
    tracemalloc.start()
    try:
        with pytest.raises(TreeError, match="more than 3,500,000 JSON values, more than generate-tree writes") as info:
            load_snapshot(tree, Manifest.load(tree).servers[0])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(tree / "snapshots" / "crm.json") in str(info.value)
    assert peak < 80 << 20, f"{peak:,} bytes"  # the file and copies of it for the count
    assert main(["generate-tree", "--from-snapshot", str(tmp_path / "snaps"), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.endswith(
        f"{tmp_path / 'snaps' / 'crm.json'}: unreadable snapshot (it holds more than 3,500,000 JSON values, more than "
        "generate-tree writes)\n"
    )


@pytest.mark.parametrize(
    ("name", "cap", "said"),
    [
        ("manifest.json", "tool_tree.tree.MAX_MANIFEST_VALUES", "malformed manifest"),
        ("search_index.json", "tool_tree.search._store.MAX_INDEX_VALUES", "corrupt search index"),
    ],
)
def test_a_manifest_or_index_of_more_values_than_a_tree_holds_is_refused_unparsed(
    tree: Path, name: str, cap: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: parsed whatever it held under the 256 MiB file cap (89 million objects of ``{}``, about 10 GB). The
    caps are far over any tree's (8 and 32 million; a lower one behaves alike)."""
    monkeypatch.setattr(cap, 5_000)
    (tree / name).write_bytes(b"[" + b",".join([b"{}"] * 5_000) + b"]")
    assert main(["search", "--tree", str(tree), "leads"]) == 2
    err = capsys.readouterr().err
    assert f"{tree / name}: {said} (it holds more than 5,000 JSON values, more than generate-tree writes)" in err


@pytest.mark.parametrize("name", ["manifest.json", "search_index.json"])
def test_a_tree_file_over_the_cap_is_refused_before_it_is_read(
    tree: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: read and parsed whole (a 1 GB search index cost `tooltree search` 9.3 s and 3.2 GB). A sparse file
    costs no disk."""
    os.truncate(tree / name, MAX_TREE_FILE_BYTES + 1)
    assert main(["search", "--tree", str(tree), "leads"]) == 2
    err = capsys.readouterr().err
    assert "larger than 268,435,456 bytes" in err and str(tree) in err


# ---- a hostile search index and stubs -----------------------------------------------------------------------------


def _edit_index(tree: Path, change: Any) -> None:
    data = json.loads((tree / "search_index.json").read_text(encoding="utf-8"))
    change(data)
    (tree / "search_index.json").write_text(json.dumps(data), encoding="utf-8")


def test_names_with_escapes_in_a_search_index_are_refused_not_printed(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ``tooltree search`` printed an index's names as they were: an OSC 52 sequence wrote the terminal's
    clipboard and a newline faked a line; the model got them too."""

    def hostile(data: dict[str, Any]) -> None:
        for entry in data["tools"]:
            entry["function"] += "\x1b]52;c;aGk=\x07\nFAKE LINE"

    _edit_index(tree, hostile)
    assert main(["search", "--tree", str(tree), "leads", "--detail", "name"]) == 2
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "FAKE LINE" not in out
    assert "search_index.json: corrupt search index" in err and "is not a Python identifier" in err


def test_escapes_in_a_stub_are_not_written_to_the_terminal_by_tooltree_search(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `tooltree search --detail full` wrote a stub's text as it was: OSC 52 in a comment set the terminal's
    clipboard, ``ESC [2J`` cleared the screen."""
    stub = tree / "servers" / "crm" / "list_leads.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "# \x1b]52;c;aGk=\x07 hi \x1b[2J\n", encoding="utf-8")
    assert main(["search", "--tree", str(tree), "export leads", "--limit", "1", "--detail", "full"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "# ── servers/crm/list_leads.py ──" in out and "def list_leads(" in out and "# " in out.splitlines()[-1]


@pytest.mark.parametrize("impact", [float("nan"), "x", 1e308], ids=["nan", "string", "too_large_to_sum"])
def test_postings_that_are_not_finite_numbers_are_a_corrupt_index(
    tree: Path, impact: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: NaN impacts made every search answer "No tools matched." (exit 0); a string failed each search with a
    TypeError (exit 70, "unexpected"), and so did impacts whose sum overflows (an OverflowError)."""

    def hostile(data: dict[str, Any]) -> None:
        data["postings"] = {term: [ids, [impact] * len(ids)] for term, (ids, _) in data["postings"].items()}

    _edit_index(tree, hostile)
    assert main(["search", "--tree", str(tree), "export leads"]) == 2
    assert "search_index.json: corrupt search index" in capsys.readouterr().err


def test_a_stub_path_in_the_index_that_leaves_the_tree_or_is_a_link_is_not_read(tree: Path, host: Path) -> None:
    (tree / "servers" / "crm" / "list_leads.py").unlink()
    (tree / "servers" / "crm" / "list_leads.py").symlink_to(host / "id_rsa")
    text = search_tools(tree, "export leads", detail="full", limit=6)
    assert SECRET not in text and "servers/crm/list_leads.py: stub missing" in text
    _edit_index(tree, lambda d: d["tools"][0].update(path="servers/crm/../../../x.py"))
    with pytest.raises(SearchError, match="not a path inside the tree"):
        search_tools(tree, "export leads")


def test_a_stub_over_the_generators_size_is_not_parsed(tree: Path) -> None:
    """Before: read and parsed whatever its size: a 40 MB stub cost one `tooltree search` 89 s and 19 GB."""
    stub = tree / "servers" / "crm" / "list_leads.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "#" * MAX_STUB_BYTES + "\n", encoding="utf-8")
    hits = SearchIndex.load(tree).search("export leads", limit=1)
    assert hits[0].function == "list_leads"
    assert "signature unavailable" in render_hits(tree, hits, "summary")


@pytest.mark.parametrize(
    "added",
    [
        "x = 1" + "+1" * 200_000,
        "x = " + "-" * 100_000 + "1",
        "def list_leads(*, a: " + "a." * 500 + "b = " + "-" * 500 + "1) -> None: ...",  # first: the stub's is later
    ],
    ids=["long", "deep", "deep_parameter"],
)
def test_a_stub_too_deep_for_the_parser_has_no_signature_and_the_search_answers(
    tree: Path, added: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the parser's RecursionError or MemoryError (its stack, not the machine's memory), or `ast.unparse`'s
    RecursionError, left `tooltree search` with exit 70, and a script's search with "tool search failed on the host"."""
    stub = tree / "servers" / "crm" / "list_leads.py"
    stub.write_text(f"{added}\n" + stub.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["search", "--tree", str(tree), "export leads", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("crm.list_leads — ") and "signature unavailable" in out


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory, generated: tuple[Path, Path]) -> Iterator[Path]:
    """The crm tree generated with embeddings of a tiny model (``TOOLTREE_EMBEDDING_MODEL`` set while it is used)."""
    folder = tmp_path_factory.mktemp("embedded")
    model = write_tiny_bert(folder / "model", ["lead", "record", "task", "export"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLTREE_EMBEDDING_MODEL", str(model))
        mp.setenv(EMBEDDINGS_ENV, "on")  # the suite turns them off (tests/conftest.py)
        out = folder / "tree"
        assert main(["generate-tree", "--config", str(generated[0]), "--out", str(out), "--embeddings", "on"]) == 0
        yield out


@pytest.mark.parametrize("vectors", ["wrong_dimension", "nan", "not_base64", "odd_bytes"])
def test_stored_embeddings_that_cannot_be_used_fall_back_to_words(embedded: Path, tmp_path: Path, vectors: str) -> None:
    """Before: vectors of another dimension than the model's (the index saying so) raised ValueError out of the
    matrix product (exit 70); NaN vectors made every score NaN, and no search found anything, unsaid; a vector that
    was not base64 (binascii.Error) or of an odd number of bytes (ValueError) was exit 70 too."""
    import numpy as np

    tree = tmp_path / "tree"
    shutil.copytree(embedded, tree)

    def hostile(data: dict[str, Any]) -> None:
        dense = data["dense"]
        dim = 4 if vectors == "wrong_dimension" else dense["dim"]
        value = 1.0 if vectors == "wrong_dimension" else np.nan
        dense["dim"] = dim
        dense["vectors"] = [base64.b64encode(np.full(dim, value, "<f2").tobytes()).decode() for _ in dense["vectors"]]
        if vectors in ("not_base64", "odd_bytes"):
            dense["vectors"][0] = "abc" if vectors == "not_base64" else base64.b64encode(b"abc").decode()

    _edit_index(tree, hostile)
    assert "crm.list_leads" in search_tools(tree, "export leads as rows", limit=6)


# ---- the sandbox's copy of the tree -------------------------------------------------------------------------------


def test_a_tree_nested_too_deep_is_refused_by_the_copy_with_a_clear_error(tree: Path) -> None:
    """Before: walked however deep (RecursionError past about 1,000 folders, `tooltree exec` exit 70)."""
    deep = tree / "servers" / "crm"
    for _ in range(MAX_TREE_DEPTH):
        deep = deep / "a"
    deep.mkdir(parents=True)
    for read in (pack_tree, tree_fingerprint):
        with pytest.raises(SandboxError, match=f"folders nested deeper than {MAX_TREE_DEPTH}"):
            read(tree)


def test_the_copy_of_the_tree_counts_each_entry_against_its_cap(tree: Path) -> None:
    """Before: only the files' data counted, so empty files were free: 600,000 made a 307 MB archive (host memory
    580 MB) under a 256 MiB cap. Each file's header counts now, so the archive is never over the cap."""
    many = tree / "servers" / "crm" / "many"
    many.mkdir()
    for i in range(400):
        (many / f"{i:04d}").touch()
    size = len(pack_tree(tree))
    with pytest.raises(SandboxError, match="the tree is larger than"):
        pack_tree(tree, max_bytes=size - 100 * 512)
    assert len(pack_tree(tree, max_bytes=size)) == size


def test_a_module_over_the_generators_size_is_not_copied_to_be_compiled(tree: Path) -> None:
    """Before: copied, then compiled in the copying container (no memory limit), at about 400 times its size: a
    256 MiB stub asked for some 100 GB of the host's memory."""
    os.truncate(tree / "servers" / "crm" / "list_leads.py", MAX_MODULE_BYTES + 1)
    with pytest.raises(SandboxError, match=r"list_leads\.py: larger than 8,388,608 bytes, which no module"):
        pack_tree(tree)


# ---- real parts: tooltree serve with the MCP SDK's client, tooltree agent against the fake Messages API -----------


@pytest.mark.docker
@pytest.mark.anyio
async def test_serve_sends_no_host_file_linked_from_the_tree_to_its_client(
    docker_engine: object, generated: tuple[Path, Path], tree: Path, host: Path
) -> None:
    """Before: the ``instructions`` every client gets at ``initialize`` held the host file ``INDEX.md`` linked to."""
    import mcp
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    (tree / "servers" / "INDEX.md").unlink()
    (tree / "servers" / "INDEX.md").symlink_to(host / "id_rsa")
    (tree / "servers" / "crm" / "keys").symlink_to(host)
    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(generated[0]), "--tree", str(tree), "--no-regenerate"]
    env = {**os.environ, "TOOLTREE_SANDBOX_OWNER": TEST_OWNER}
    params = StdioServerParameters(command=sys.executable, args=argv, env=env, cwd=str(REPO))
    with open(os.devnull, "w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            assert client.instructions and SECRET not in client.instructions
            seen = [client.instructions]
            for name, arguments in [
                ("read_file", {"path": "servers/INDEX.md"}),
                ("list_files", {"path": "servers/crm/keys"}),
                ("read_file", {"path": "servers/crm/keys/id_rsa"}),
            ]:
                result = await client.call_tool(name, arguments)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                assert result.is_error and "symbolic links are not followed" in text
                seen.append(text)
    assert not any(SECRET in text for text in seen)


@pytest.mark.docker
def test_the_agent_sends_no_host_file_linked_from_the_tree_to_the_model(
    docker_engine: object,
    sandbox_owner: str,
    generated: tuple[Path, Path],
    tree: Path,
    host: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the system prompt of `tooltree agent` inlined the host file ``INDEX.md`` linked to."""
    (tree / "servers" / "INDEX.md").unlink()
    (tree / "servers" / "INDEX.md").symlink_to(host / "id_rsa")
    with FakeMessagesAPI([reply("Nothing to do.")]) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        assert main(["agent", "Hi", "--config", str(generated[0]), "--tree", str(tree)]) == 0
        assert len(api.requests) == 1
        assert SECRET not in json.dumps(api.requests[0])


@pytest.mark.docker
def test_a_folder_generate_tree_did_not_write_is_not_copied_into_the_sandbox(
    docker_engine: object, test_config: object, tmp_path: Path
) -> None:
    """``Sandbox(tree=Path.home())`` (any folder, in the Python API): before, it was packed and copied into the
    sandbox's volume, where every script could read it (``~/.ssh``). Now refused, as `tooltree exec` refuses it."""
    from sandbox import Sandbox, SandboxConfig

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET, encoding="utf-8")
    assert isinstance(test_config, SandboxConfig)
    sandbox = Sandbox(config=test_config, tree=home)
    with pytest.raises(SandboxError, match=r"home: not a tree `tooltree generate-tree` wrote \(it has no manifest"):
        sandbox.start()
    sandbox.close()
    with pytest.raises(SandboxError, match=r"it has no manifest\.json"):
        pack_tree(home)
