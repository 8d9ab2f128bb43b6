"""`FileView`: read-only access to the tree and the workspace, with no way out of either."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent.files import MAX_CHARS, MAX_ENTRIES, MAX_LINE_CHARS, TREE_DIR, FileAccessError, FileView, normalize
from sandbox._supervisor.files import FileOpError, Workspace
from sandbox.errors import SessionError


class FolderWorkspace:
    """A workspace over a host folder, with the session's contract (a stand-in for `Sandbox`, whose
    own reads are tested in tests/sandbox; here only FileView's routing and formatting are under test).
    Its listings are the sandbox's own (`sandbox._supervisor.files.Workspace.listdir`, run on the folder)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: list[str] = []
        self.limits: list[int] = []

    def list_folder(self, path: str = "", *, limit: int = 1000) -> tuple[list[dict[str, Any]], int]:
        self.calls.append(path)
        self.limits.append(limit)
        try:
            return Workspace(str(self.root)).listdir(path, limit)
        except FileOpError as e:
            raise SessionError(f"workspace.list failed in the sandbox: {e}") from None

    def read_file(self, path: str, *, max_bytes: int = 1 << 20) -> bytes:
        self.calls.append(path)
        try:
            return Workspace(str(self.root)).read(path, max_bytes)[0]
        except FileOpError as e:
            raise SessionError(f"workspace.read failed in the sandbox: {e}") from None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "servers" / "crm").mkdir(parents=True)
    (root / "servers" / "INDEX.md").write_text("# MCP servers\n- crm\n", encoding="utf-8")
    (root / "servers" / "crm" / "list_leads.py").write_text("def list_leads(): ...\n", encoding="utf-8")
    (root / "manifest.json").write_text("{}", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("do not read", encoding="utf-8")
    return root


@pytest.fixture
def workspace(tmp_path: Path) -> FolderWorkspace:
    ws = tmp_path / "ws"
    (ws / "skills").mkdir(parents=True)
    (ws / "notes.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)), encoding="utf-8")
    return FolderWorkspace(ws)


def test_the_root_lists_the_tree_and_the_workspace(tree: Path, workspace: FolderWorkspace) -> None:
    view = FileView(tree, workspace=lambda: workspace)
    assert view.list_files("").splitlines() == ["servers/", "skills/", "notes.txt  (71 B)"]
    assert view.list_files("/workspace/servers") == "crm/\nINDEX.md  (20 B)"


def test_stubs_are_read_from_the_tree_and_other_files_from_the_workspace(
    tree: Path, workspace: FolderWorkspace
) -> None:
    view = FileView(tree, workspace=lambda: workspace)
    assert view.read_file("servers/crm/list_leads.py") == "def list_leads(): ...\n"
    assert view.read_file("/workspace/notes.txt", offset=9) == "line 9\nline 10\n"
    assert workspace.calls == ["notes.txt"]


def test_a_partial_read_says_where_to_continue(tree: Path, workspace: FolderWorkspace) -> None:
    text = FileView(tree, workspace=lambda: workspace).read_file("notes.txt", offset=2, limit=3)
    assert text == "line 2\nline 3\nline 4\n\n[lines 2–4 of 10; call read_file with offset=5 for more]"


def test_a_huge_file_is_cut_at_a_line_boundary(tree: Path) -> None:
    (tree / "servers" / "big.md").write_text("x" * 100 + "\n" + ("y" * 999 + "\n") * 100, encoding="utf-8")
    text = FileView(tree).read_file("servers/big.md")
    body, note = text.rsplit("\n[", 1)
    assert len(body) <= MAX_CHARS and body.endswith("y\n")
    assert note.startswith("lines 1–") and "offset=" in note


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../secret.txt", "'..' is not allowed"),
        ("servers/../../secret.txt", "'..' is not allowed"),
        ("/etc/passwd", "only paths under /workspace"),
        ("/workspace/../etc/passwd", "'..' is not allowed"),
        ("/workspaceX/a", "only paths under /workspace"),
        ("servers\\..\\x", "backslashes"),
        ("servers/a\x00b", "NUL"),
    ],
)
def test_paths_that_leave_the_root_are_refused(tree: Path, path: str, why: str) -> None:
    with pytest.raises(FileAccessError, match=why):
        FileView(tree).read_file(path)


def test_symlinks_in_the_tree_are_not_followed(tree: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "secret.txt", tree / "servers" / "crm" / "leak.py")
    os.symlink(tmp_path, tree / "servers" / "outside")
    view = FileView(tree)
    with pytest.raises(FileAccessError, match="symbolic links"):
        view.read_file("servers/crm/leak.py")
    with pytest.raises(FileAccessError, match="symbolic links"):
        view.read_file("servers/outside/secret.txt")
    with pytest.raises(FileAccessError, match="symbolic links"):
        view.list_files("servers/outside")
    assert "leak.py" not in view.list_files("servers/crm")
    assert "outside" not in view.list_files("servers")


def test_missing_files_binary_files_and_folders_are_errors_for_the_model(tree: Path) -> None:
    (tree / "servers" / "blob.bin").write_bytes(b"\x00\x01\x02")
    view = FileView(tree)
    with pytest.raises(FileAccessError, match="no such file"):
        view.read_file("servers/crm/nope.py")
    with pytest.raises(FileAccessError, match="binary file"):
        view.read_file("servers/blob.bin")
    with pytest.raises(FileAccessError, match="not a file"):
        view.read_file("servers/crm")
    with pytest.raises(FileAccessError, match="not a folder"):
        view.list_files("servers/INDEX.md")


def test_without_a_workspace_only_the_tree_is_readable(tree: Path) -> None:
    view = FileView(tree)
    assert view.list_files("") == "servers/"
    with pytest.raises(FileAccessError, match="no workspace"):
        view.read_file("notes.txt")


def test_manifest_and_snapshots_beside_the_stubs_are_not_reachable(tree: Path, workspace: FolderWorkspace) -> None:
    assert normalize("/workspace/manifest.json") == ("manifest.json",)
    with pytest.raises(FileAccessError, match="No such file or directory"):
        FileView(tree, workspace=lambda: workspace).read_file("manifest.json")
    assert workspace.calls == ["manifest.json"]  # looked up in the workspace, never in the tree


def test_a_hostile_name_is_listed_escaped_on_one_line(tree: Path, workspace: FolderWorkspace) -> None:
    forged = "notes.txt  (1 B)\nzz_fake_entry.py  (9 KB)\nzz"
    clipboard = "esc\x1b]52;c;cHduZWQ=\x07\x1b[2J.txt"
    for name in (forged, clipboard, "invoice\u202etxt.exe", "zero\u200bwidth", "back\\slash"):
        (workspace.root / name).write_text("x", encoding="utf-8")
    lines = FileView(tree, workspace=lambda: workspace).list_files("").splitlines()
    assert lines == [
        "servers/",
        "skills/",
        "back\\\\slash  (1 B)",
        "esc\\x1b]52;c;cHduZWQ=\\x07\\x1b[2J.txt  (1 B)",
        "invoice\\u202etxt.exe  (1 B)",
        "notes.txt  (71 B)",
        "notes.txt  (1 B)\\nzz_fake_entry.py  (9 KB)\\nzz  (1 B)",
        "zero\\u200bwidth  (1 B)",
    ]
    assert not any(c in "".join(lines) for c in "\x1b\x07\u202e\u200b")


def test_text_read_is_cleaned_of_escapes_line_by_line(tree: Path, workspace: FolderWorkspace) -> None:
    payload = (
        "hello\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[31mRED\u202eexe.txt\x9b2J\x07end\r\n"
        "open osc\x1b]0;title\n"  # an escape left open ends with its line
        "next\x0cline\rover\n"  # a form feed is dropped; a CR inside a line shows as a space
    )
    (workspace.root / "payload.txt").write_text(payload, encoding="utf-8", newline="")
    view = FileView(tree, workspace=lambda: workspace)
    assert view.read_file("payload.txt") == "helloREDexe.txtend\nopen osc\nnextline over\n"
    assert (
        view.read_file("payload.txt", offset=2, limit=1)
        == "open osc\n\n[lines 2–2 of 3; call read_file with offset=3 for more]"
    )


def test_a_large_file_is_read_at_the_window_asked_for_and_lines_end_only_at_newlines(
    tree: Path, workspace: FolderWorkspace
) -> None:
    lines = [f"line {i}" for i in range(1, 500_001)]
    lines[5] = "six\u2028still six\x1cand\x85six"  # separators str.splitlines would break at
    lines[9] = "ten \u00e9\u6f22"
    (workspace.root / "big.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    view = FileView(tree, workspace=lambda: workspace)
    assert view.read_file("big.txt", offset=5, limit=3) == (
        "line 5\nsix\u2028still sixandsix\nline 7\n\n[lines 5–7 of 500000; call read_file with offset=8 for more]"
    )
    assert view.read_file("big.txt", offset=10, limit=1).startswith("ten \u00e9\u6f22\n\n[lines 10–10 of 500000;")
    assert view.read_file("big.txt", offset=499_999) == "line 499999\nline 500000\n"
    assert view.read_file("big.txt", offset=250_001, limit=1).startswith("line 250001\n\n[lines 250001–250001 of")
    with pytest.raises(FileAccessError, match="offset 500001 is past the end \\(500000 lines\\)"):
        view.read_file("big.txt", offset=500_001)


def test_a_last_line_without_a_newline_is_counted_and_shown(tree: Path, workspace: FolderWorkspace) -> None:
    (workspace.root / "tail.txt").write_bytes(b"one\ntwo\r\nthree")
    view = FileView(tree, workspace=lambda: workspace)
    assert view.read_file("tail.txt") == "one\ntwo\nthree"
    assert view.read_file("tail.txt", offset=3) == "three"
    assert view.read_file("tail.txt", limit=2) == "one\ntwo\n\n[lines 1–2 of 3; call read_file with offset=3 for more]"


def test_a_big_folder_lists_its_first_entries_folders_first_and_says_how_many_and_how_to_list_them_all(
    tree: Path, workspace: FolderWorkspace
) -> None:
    # Before: 501 entries were asked for in the session's order and sorted, so a folder of 3,000 files and a
    # subfolder showed some 500 files and not the subfolder, and the note pointed at search_tools (tools, not files).
    folder = workspace.root / "d"
    (folder / "sub").mkdir(parents=True)
    for i in range(3000):
        (folder / f"f{i}.txt").write_text("q", encoding="utf-8")
    lines = FileView(tree, workspace=lambda: workspace).list_files("d").splitlines()
    shown = sorted(f"f{i}.txt" for i in range(3000))[: MAX_ENTRIES - 1]
    assert lines[:-1] == ["sub/", *(f"{name}  (1 B)" for name in shown)]
    assert lines[-1] == (
        "[... the first 500 of 3,001 entries (folders first, then by name); list a subfolder, or list them from a "
        "script in execute_python, such as sorted(os.listdir('/workspace/d'))]"
    )
    assert "search_tools" not in lines[-1]


def test_a_big_folder_is_counted_by_the_workspace_and_only_the_entries_shown_are_asked_for(
    tree: Path, workspace: FolderWorkspace
) -> None:
    # Before: 32,768 entries were asked for, only to count them (about 2 MB from a big folder).
    folder = workspace.root / "d"
    folder.mkdir()
    for i in range(3000):
        (folder / f"f{i}.txt").write_text("q", encoding="utf-8")
    lines = FileView(tree, workspace=lambda: workspace).list_files("d").splitlines()
    assert len(lines) == MAX_ENTRIES + 1 and lines[-1].startswith("[... the first 500 of 3,000 entries")
    assert workspace.limits == [MAX_ENTRIES + 1]


@pytest.mark.parametrize("prefix", ["a", "z"])
@pytest.mark.parametrize("linked", [True, False])
def test_a_big_root_lists_the_tree_once_and_counts_it_once(
    tree: Path, workspace: FolderWorkspace, prefix: str, linked: bool
) -> None:
    # The sandbox links ``servers`` to the tree in the workspace: listed as the tree, and counted once, whether the
    # link sorts among the entries asked for (z0.., after it) or not (a0.., before it), and when it is not there.
    if linked:
        (workspace.root / TREE_DIR).symlink_to(tree / TREE_DIR)
    for i in range(700):
        (workspace.root / f"{prefix}{i}").write_text("q", encoding="utf-8")
    lines = FileView(tree, workspace=lambda: workspace).list_files("").splitlines()
    files = sorted([(f"{prefix}{i}", 1) for i in range(700)] + [("notes.txt", 71)])
    assert lines[:-1] == ["servers/", "skills/", *(f"{n}  ({size} B)" for n, size in files)][:MAX_ENTRIES]
    said = 703  # servers, skills, notes.txt and the 700
    if prefix == "a" and not linked:  # not listed, and might be among the rest: taken as there (the sandbox links it)
        said -= 1
    assert lines[-1].startswith(f"[... the first 500 of {said:,} entries"), lines[-1]
    assert workspace.limits == [MAX_ENTRIES + 1]


def run_the_note(note: str, workspace: Path) -> str:
    """Run the script a cut line's note gives, with ``/workspace`` as the test's workspace folder."""
    script = note.split(" at a time: ", 1)[1].removesuffix("]\n").replace("'/workspace/", f"'{workspace}/")
    output: list[str] = []
    names: dict[str, object] = {"print": output.append}
    exec(script, names)  # the model would run it with execute_python
    names["f"].close()  # type: ignore[attr-defined]  # the script's file (the sandbox's worker would keep it)
    return "".join(output)


def test_a_line_longer_than_the_line_cap_shows_its_start_and_a_script_that_reads_the_rest(
    tree: Path, workspace: FolderWorkspace
) -> None:
    # Before: a 100,000-character line showed 60,000 characters, then "call read_file with offset=2", and the
    # other 40,000 could not be read.
    one = "".join(chr(ord("a") + i % 26) for i in range(100_000))
    (workspace.root / "one.txt").write_text(one, encoding="utf-8")
    view = FileView(tree, workspace=lambda: workspace)
    text = view.read_file("one.txt")
    start, note = text.split("\n", 1)
    assert start == one[:MAX_LINE_CHARS] and MAX_LINE_CHARS == 20_000
    assert note.startswith("[... line 1 is cut at 20,000 of its 100,000 characters; read the rest from a script")
    assert run_the_note(note, workspace.root) == one[20_000:40_000]
    assert view.read_file("one.txt", offset=1, limit=1) == text


def test_a_long_line_among_others_is_cut_alone_and_the_lines_after_it_are_shown(
    tree: Path, workspace: FolderWorkspace
) -> None:
    long = "é" * 30_000 + "\x1b[2Kend"
    (workspace.root / "mixed.txt").write_text(f"one\ntwo\n{long}\nfour\n", encoding="utf-8")
    text = FileView(tree, workspace=lambda: workspace).read_file("mixed.txt")
    first, note, after = text.split("\n", 2)[2].split("\n", 2)
    assert text.startswith("one\ntwo\n") and first == "é" * 20_000 and after == "four\n"
    assert note.startswith("[... line 3 is cut at 20,000 of its 30,007 characters;")
    assert run_the_note(note + "\n", workspace.root) == long[20_000:40_000] + "\n"


def test_an_offset_or_a_limit_below_1_is_refused(tree: Path, workspace: FolderWorkspace) -> None:
    # Before: both were read as 1, although the tool's schema says their minimum is 1.
    view = FileView(tree, workspace=lambda: workspace)
    with pytest.raises(ValueError, match=r"^offset must be at least 1 \(the first line is line 1\), got 0$"):
        view.read_file("notes.txt", offset=0)
    with pytest.raises(ValueError, match=r"^limit must be at least 1 \(a number of lines\), got -3$"):
        view.read_file("notes.txt", limit=-3)


def run_the_script(text: str, workspace: Path) -> str:
    """Run the script a note past the bytes read_file reads gives, with ``/workspace`` as the test's folder."""
    script = text.split("from a script in execute_python: ", 1)[1].removesuffix("]")
    output: list[str] = []
    names: dict[str, object] = {"print": lambda *a, end="\n": output.append("".join(a) + end)}
    exec(script.replace("'/workspace/", f"'{workspace}/"), names)  # the model would run it with execute_python
    names["f"].close()  # type: ignore[attr-defined]
    return "".join(output)


def test_a_file_past_the_bytes_read_says_its_lines_are_of_its_start_and_how_to_read_on(
    tree: Path, workspace: FolderWorkspace
) -> None:
    # Before: a 12 MB file of 1,000,000 lines read as "of 699051" lines, its last line cut in two ("row 0699"), the
    # last note said "call read_file with offset=699052", and that offset was "past the end (699051 lines)".
    (workspace.root / "huge.txt").write_bytes(b"".join(b"row %07d\n" % i for i in range(1_000_000)))
    view = FileView(tree, workspace=lambda: workspace)
    assert view.read_file("huge.txt", limit=2) == (
        "row 0000000\nrow 0000001\n\n[lines 1–2 of the 699050 in the file's first 8.0 MB (all read_file reads); "
        "call read_file with offset=3 for more]"
    )
    last = view.read_file("huge.txt", offset=699_049, limit=5)
    assert last.startswith("row 0699048\nrow 0699049\n\n[lines 699049–699050: the last of the file's first 8.0 MB")
    assert run_the_script(last, workspace.root) == "row 0699050\nrow 0699051\nrow 0699052\nrow 0699053\nrow 0699054\n"
    with pytest.raises(FileAccessError) as past:
        view.read_file("huge.txt", offset=900_000, limit=2)
    assert str(past.value).startswith(
        "huge.txt: offset 900000 is past the 699,050 lines of the file's first 8.0 MB, which is all read_file reads; "
        "read lines 900,000 on from a script in execute_python: "
    )
    assert run_the_script(str(past.value), workspace.root) == "row 0899999\nrow 0900000\n"


def test_a_workspace_path_the_sandbox_refuses_is_said_in_its_words_once(tree: Path, workspace: FolderWorkspace) -> None:
    # Before: "missing.txt: workspace.read failed in the sandbox: missing.txt: No such file or directory".
    view = FileView(tree, workspace=lambda: workspace)
    refusals = {}
    reads = {"/workspace/missing.txt": view.read_file, "skills": view.read_file, "nope": view.list_files}
    for path, read in [*reads.items(), ("notes.txt", view.list_files), ("skills/a/b.py", view.read_file)]:
        with pytest.raises(FileAccessError) as refused:
            read(path)
        refusals[path] = str(refused.value)
    assert refusals == {
        "/workspace/missing.txt": "missing.txt: No such file or directory",
        "skills": "skills: not a regular file",
        "nope": "'nope': No such file or directory",
        "notes.txt": "notes.txt: not a folder (use read_file)",
        "skills/a/b.py": "skills/a/b.py: 'skills/a': No such file or directory",
    }


def test_listing_a_workspace_file_says_to_read_it_as_the_tree_does(tree: Path, workspace: FolderWorkspace) -> None:
    # Before: "'notes.txt': Not a directory", where the tree's file says "not a folder (use read_file)".
    view = FileView(tree, workspace=lambda: workspace)
    (workspace.root / "skills" / "empty.py").write_text("", encoding="utf-8")
    said = {}
    for path in ("notes.txt", "/workspace/skills/empty.py", "notes.txt/more", "servers/INDEX.md"):
        with pytest.raises(FileAccessError) as refused:
            view.list_files(path)
        said[path] = str(refused.value)
    assert said == {
        "notes.txt": "notes.txt: not a folder (use read_file)",
        "/workspace/skills/empty.py": "skills/empty.py: not a folder (use read_file)",
        "notes.txt/more": "'notes.txt/more': Not a directory",
        "servers/INDEX.md": "servers/INDEX.md: not a folder (use read_file)",
    }
