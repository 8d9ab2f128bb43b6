"""`generator.generate.generate` (the Python API behind ``tooltree generate-tree``) refuses what the CLI refuses, and
wrong argument types by name, before any server starts or any file is written.

Before: ``generate(config, Path("/"))`` wrote a tree into ``/``; ``Path("~/x")`` made a folder named ``~`` in the
working folder; a str ``out`` failed with ``AttributeError: 'str' object has no attribute 'exists'``; ``only="crm"``
was taken letter by letter ("no snapshot for server 'c'"); a config file's name failed with an ``AttributeError``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from generator.generate import generate
from tool_tree.config import load_config
from tool_tree.tree import TreeError


@pytest.fixture
def snapshots(tmp_path: Path) -> Path:
    """Two servers' stored tools/list results, enough to generate a tree offline."""
    folder = tmp_path / "snaps"
    folder.mkdir()
    for server, tool in {"calendar": "move_event", "mail": "send_email"}.items():
        snap = {
            "server": server,
            "info": {},
            "tools": [{"name": tool, "description": f"Does {tool}.", "inputSchema": {"type": "object"}}],
        }
        (folder / f"{server}.json").write_text(json.dumps(snap), encoding="utf-8")
    return folder


def test_out_given_as_a_str_is_taken_as_a_path(tmp_path: Path, snapshots: Path) -> None:
    out = tmp_path / "tree"
    result = generate(None, str(out), snapshots=snapshots, embeddings="off")
    assert result.out == out and result.report is not None
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["servers"][0]["name"] == "calendar"
    assert (out / "servers" / "mail" / "send_email.py").is_file()


@pytest.mark.parametrize("out", ["/", "//", "/tmp/..", Path("/")])
def test_an_out_that_is_the_root_of_the_file_system_is_refused(snapshots: Path, out: str | Path) -> None:
    # ``check``: the old code, which took "/", compares rather than writing a tree there.
    with pytest.raises(TreeError) as info:
        generate(None, out, snapshots=snapshots, check=True, embeddings="off")
    assert str(info.value) == f"out: {out} is the root of the file system; give the tree a folder of its own"


@pytest.mark.parametrize("out", ["~/tree", "~", "~someone/tree", Path("~/tree")])
def test_an_out_starting_with_a_tilde_is_refused_saying_to_expand_it_and_makes_no_folder_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshots: Path, out: str | Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TreeError) as info:
        generate(None, out, snapshots=snapshots, embeddings="off")
    folder = str(out).split("/")[0]
    assert str(info.value) == (
        f"out: {out} starts with `~`, which a path does not expand, so it would make a folder named {folder!r} here; "
        f"expand it first (Path({str(out)!r}).expanduser()) or give the full path"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snaps"]


def test_an_existing_folder_whose_name_starts_with_a_tilde_is_taken_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshots: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "~tree").mkdir()  # made on purpose: as the CLI does, it is used
    generate(None, Path("~tree"), snapshots=snapshots, embeddings="off")
    assert (tmp_path / "~tree" / "manifest.json").is_file()


def test_an_empty_out_is_refused_rather_than_taken_as_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshots: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TreeError, match="out: the path is empty; name the tree's folder"):
        generate(None, "", snapshots=snapshots, embeddings="off")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snaps"]


@pytest.mark.parametrize("out", [None, 3, b"/tmp/tree"])
def test_an_out_that_is_not_a_path_is_a_type_error(snapshots: Path, out: object) -> None:
    with pytest.raises(TypeError, match=rf"out: expected a path \(str or Path\), got {type(out).__name__} "):
        generate(None, out, snapshots=snapshots, embeddings="off")  # type: ignore[arg-type]


def test_only_given_a_single_name_as_a_str_is_a_type_error_saying_to_write_a_list(
    tmp_path: Path, snapshots: Path
) -> None:
    with pytest.raises(TypeError) as info:
        generate(None, tmp_path / "tree", only="calendar", snapshots=snapshots, embeddings="off")
    assert str(info.value) == "only: expected a sequence of server names, got the string 'calendar': write ['calendar']"
    assert not (tmp_path / "tree").exists()


def test_only_holding_something_other_than_names_is_a_type_error(tmp_path: Path, snapshots: Path) -> None:
    with pytest.raises(TypeError, match=r"only: expected a sequence of server names \(str\), got list"):
        generate(None, tmp_path / "tree", only=[Path("calendar")], snapshots=snapshots)  # type: ignore[list-item]


@pytest.mark.parametrize("config", ["tooltree.yaml", Path("tooltree.yaml"), {"servers": {}}])
def test_a_config_that_is_not_a_config_is_a_type_error_saying_to_load_it(
    tmp_path: Path, snapshots: Path, config: object
) -> None:
    with pytest.raises(TypeError) as info:
        generate(config, tmp_path / "tree", snapshots=snapshots, embeddings="off")  # type: ignore[arg-type]
    assert str(info.value).startswith(
        f"config: expected a Config or None (load_config(path) reads a tooltree.yaml), got {type(config).__name__} "
    )
    assert not (tmp_path / "tree").exists()


def test_a_loaded_config_and_a_tuple_of_names_still_generate(tmp_path: Path, snapshots: Path) -> None:
    config_file = tmp_path / "tooltree.yaml"
    config_file.write_text("servers:\n  calendar:\n    command: unused\n  mail:\n    command: unused\n", "utf-8")
    out = tmp_path / "tree"
    generate(load_config(config_file), out, only=("mail",), snapshots=snapshots, embeddings="off")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in manifest["servers"]] == ["mail"]


def test_snapshots_given_as_a_str_is_taken_as_a_path(tmp_path: Path, snapshots: Path) -> None:
    # Before: AttributeError: 'str' object has no attribute 'is_dir'.
    out = tmp_path / "tree"
    generate(None, out, snapshots=str(snapshots), embeddings="off")
    assert (out / "servers" / "mail" / "send_email.py").is_file()


@pytest.mark.parametrize("snaps", [3, b"snaps"])
def test_snapshots_that_is_not_a_path_is_a_type_error(tmp_path: Path, snaps: object) -> None:
    with pytest.raises(TypeError, match=r"^snapshots: expected a path \(str or Path\) or None, got "):
        generate(None, tmp_path / "tree", snapshots=snaps)  # type: ignore[arg-type]
    assert not (tmp_path / "tree").exists()


@pytest.mark.parametrize(
    ("jobs", "error", "said"),
    [
        ("2", TypeError, "jobs: expected a whole number of servers starting at once, or None, got '2'"),
        (True, TypeError, "jobs: expected a whole number of servers starting at once, or None, got True"),
        (0, ValueError, "jobs: expected at least 1, got 0"),
    ],
)
def test_a_wrong_jobs_is_refused_by_name_before_any_server_starts(
    tmp_path: Path, jobs: object, error: type[Exception], said: str
) -> None:
    # Before: "'<' not supported between instances of 'str' and 'int'", and "the start limit must be at least 1".
    config_file = tmp_path / "tooltree.yaml"
    config_file.write_text(f"servers:\n  s:\n    command: {tmp_path / 'never-started'}\n", "utf-8")
    with pytest.raises(error) as info:
        generate(load_config(config_file), tmp_path / "tree", jobs=jobs)  # type: ignore[arg-type]
    assert str(info.value) == said
    assert not (tmp_path / "tree").exists()


def test_generate_inside_a_running_event_loop_says_to_run_it_in_a_thread(tmp_path: Path, snapshots: Path) -> None:
    # Before: anyio's "Already running asyncio in this thread", naming neither generate nor what to do.
    config_file = tmp_path / "tooltree.yaml"
    config_file.write_text(f"servers:\n  s:\n    command: {tmp_path / 'never-started'}\n", "utf-8")
    config = load_config(config_file)

    async def main() -> tuple[str, bool]:
        with pytest.raises(RuntimeError) as info:
            generate(config, tmp_path / "tree")
        offline = generate(None, tmp_path / "offline", snapshots=snapshots, embeddings="off")  # no loop of its own
        return str(info.value), offline.report is not None

    said, offline_written = asyncio.run(main())
    assert said.startswith("generate() runs its own event loop to list the servers, and one is running on this ")
    assert "await asyncio.to_thread(generate, config, out, ...)" in said
    assert offline_written and not (tmp_path / "tree").exists()


class Refused(Exception):
    """What a caller's callback raises."""


@pytest.mark.parametrize("callback", ["on_server", "on_server_start"])
def test_a_callback_that_raises_while_servers_are_listed_raises_its_own_error_and_writes_nothing(
    tmp_path: Path, callback: str
) -> None:
    # Before: "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)", the caller's error two groups down.
    from tests.support import raw_server_config

    config = load_config(raw_server_config(tmp_path, {"pages": [[{"name": "t", "inputSchema": {"type": "object"}}]]}))

    def refuse(_: object) -> None:
        raise Refused("the caller's callback failed")

    with pytest.raises(Refused, match=r"^the caller's callback failed$"):
        generate(config, tmp_path / "tree", embeddings="off", **{callback: refuse})  # type: ignore[arg-type]
    assert not (tmp_path / "tree").exists()
