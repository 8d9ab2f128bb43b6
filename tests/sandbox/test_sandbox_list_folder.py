"""`Sandbox.list_folder` in a real container: the first entries of a folder and how many it holds, in one answer
the size of the entries asked for; and the model's ``list_files`` (`agent.files.FileView`) over it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.files import MAX_ENTRIES, FileView
from sandbox import DockerBackend, Sandbox
from sandbox.errors import SessionError

pytestmark = pytest.mark.docker

FILES = 5000
MAKE = f"import os\nos.makedirs('big/sub')\nfor i in range({FILES}):\n    open(f'big/f{{i}}.txt', 'w').write('q')\n"
SMALL_REPLY = 64 * 1024
"""Bytes of a listing's answer that hold `MAX_ENTRIES` entries of short names with room to spare (each ~45)."""


class Answers:
    """The ``workspace.list`` requests one session's channel carried: each one's limit and its answer's JSON size."""

    def __init__(self, sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
        channel = sb._require_channel()  # the real channel: its answers are observed, not replaced
        self.seen: list[tuple[int, int]] = []
        request = channel.request

        def observed(method: str, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
            answer = request(method, params, **kwargs)
            if method == "workspace.list":
                self.seen.append((params["limit"], len(json.dumps(answer, separators=(",", ":")))))
            return answer

        monkeypatch.setattr(channel, "request", observed)


@pytest.fixture(scope="module")
def big(backend: DockerBackend) -> Iterator[Sandbox]:
    """One session whose workspace has ``big/``: a subfolder and `FILES` files."""
    with Sandbox(backend) as sb:
        made = sb.execute(MAKE)
        assert made.ok, made.error
        yield sb


def test_list_folder_gives_the_first_entries_and_counts_the_rest(big: Sandbox) -> None:
    # Before: list_files gave the entries only; a caller counting them asked for 32,768 (2 MB from a big folder).
    listing = big.list_folder("big", limit=3)
    assert listing.total == FILES + 1
    assert [(e["name"], e["type"], e["size"]) for e in listing.entries] == [
        ("sub", "dir", listing.entries[0]["size"]),
        ("f0.txt", "file", 1),
        ("f1.txt", "file", 1),
    ]
    entries, total = big.list_folder("big", limit=3)  # a pair, as the sandbox's own listdir gives
    assert (entries, total) == (listing.entries, listing.total)
    assert big.list_files("big", limit=3) == listing.entries  # the old method, as it was
    assert big.list_folder("big/sub").total == 0


def test_paths_written_with_dots_doubled_or_trailing_slashes_name_the_same_entries(big: Sandbox) -> None:
    # Before: "refused path '.'", and so for './a', 'a//b' and 'servers/' (which then lacked the tree link's advice).
    assert big.list_folder(".").total == big.list_folder("").total == big.list_folder("/workspace/").total
    assert big.list_folder("./big/").total == big.list_folder("big").total == FILES + 1
    assert big.list_folder("big//sub/").total == 0
    assert big.read_file("./big//f1.txt") == big.read_file("/workspace//big/./f1.txt") == b"q"
    with pytest.raises(SessionError, match=r"^list_folder\('servers'\): /workspace/servers is the sandbox's"):
        big.list_folder("servers/")
    for outside in ("/etc/hostname", "../etc/hostname", "big/../../etc/hostname"):
        with pytest.raises(SessionError, match="refused path"):
            big.read_file(outside)  # still refused, as before


def test_a_path_through_the_tree_link_says_to_read_the_tree_on_the_host_or_from_a_script(
    big: Sandbox, sample_tree: Path
) -> None:
    # Before: "workspace.list failed in the sandbox: 'servers': Not a directory", though the workspace lists
    # `servers` (a link) among its entries: nothing said that the functions never follow it, nor what to do.
    assert {"name": "servers", "type": "symlink", "size": 26} in big.list_folder("").entries
    cases = [
        (lambda: big.list_folder("servers"), "list_folder('servers')", "list", "servers"),
        (lambda: big.list_files("/workspace/servers/crm"), "list_folder('servers/crm')", "list", "servers/crm"),
        (lambda: big.read_file("servers/INDEX.md"), "read_file('servers/INDEX.md')", "read", "servers/INDEX.md"),
    ]
    for call, named, verb, relative in cases:
        with pytest.raises(SessionError) as caught:
            call()
        said = str(caught.value)
        assert said.startswith(
            f"{named}: /workspace/servers is the sandbox's read-only link to the tree (/opt/tooltree/tree/servers), "
            f"and {named.split('(')[0]} reads the workspace alone, never through a link: {verb} "
            f"{sample_tree / relative} on the host, or from a script: execute("
        ), said
        assert "(the sandbox said: " in said
    listed = big.execute("import os; print(sorted(os.listdir('servers')))")  # what the error says to run
    assert listed.ok and "INDEX.md" in listed.stdout
    with pytest.raises(SessionError, match=r"^workspace\.list failed in the sandbox: 'nope': No such file"):
        big.list_folder("nope")  # another folder's error is the sandbox's, as before


def test_the_models_listing_of_a_big_folder_moves_only_the_entries_it_shows(
    big: Sandbox, sample_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: FileView asked for 32,768 entries to count them: 5,001 came back (~230 KB) to show 500.
    answers = Answers(big, monkeypatch)
    lines = FileView(sample_tree, workspace=lambda: big).list_files("big").splitlines()
    names = sorted(f"f{i}.txt" for i in range(FILES))[: MAX_ENTRIES - 1]
    assert lines == [
        "sub/",
        *(f"{name}  (1 B)" for name in names),
        f"[... the first 500 of {FILES + 1:,} entries (folders first, then by name); list a subfolder, or list them "
        "from a script in execute_python, such as sorted(os.listdir('/workspace/big'))]",
    ]
    ((limit, size),) = answers.seen
    assert limit == MAX_ENTRIES + 1 and size < SMALL_REPLY
    whole = big.list_folder("big", limit=FILES + 1)  # what the old request carried
    assert len(whole.entries) == FILES + 1 and answers.seen[-1][1] > 3 * SMALL_REPLY


def test_the_models_listing_of_a_big_root_shows_the_tree_once_and_counts_the_workspace(
    backend: DockerBackend, sample_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workspace's own ``servers`` (the link to the tree) is listed as the tree, once, and counted once, when it
    # is among the entries asked for (a0..a5999 sort before it) and when it is not (z0..z5999 sort after it).
    for prefix in ("a", "z"):
        with Sandbox(backend) as sb:
            made = sb.execute(f"for i in range(6000):\n    open(f'{prefix}{{i}}', 'w').write('q')")
            assert made.ok, made.error
            # The shown order, from a script: folders (the tree's link too) first, then by name; and the count.
            script = (
                "import os\nkey = lambda e: (not (e.is_dir(follow_symlinks=False) or e.name == 'servers'), e.name)\n"
                "entries = sorted(os.scandir('/workspace'), key=key)\nprint(len(entries))\n"
                f"for e in entries[:{MAX_ENTRIES}]:\n"
                "    print(e.name + '/' if not key(e)[0] else f'{e.name}  ({os.lstat(e.path).st_size} B)')\n"
            )
            printed = sb.execute(script)
            assert printed.ok and not printed.stdout_truncated, printed.error
            count, *expected = printed.stdout.splitlines()
            answers = Answers(sb, monkeypatch)
            lines = FileView(sample_tree, workspace=lambda sb=sb: sb).list_files("/workspace").splitlines()
        assert lines[:-1] == expected, prefix
        assert lines[-1].startswith(f"[... the first 500 of {int(count):,} entries"), prefix
        assert [limit for limit, _ in answers.seen] == [MAX_ENTRIES + 1] and answers.seen[0][1] < SMALL_REPLY
