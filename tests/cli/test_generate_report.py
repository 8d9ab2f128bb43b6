"""What `tooltree generate-tree` says after a run (`tooltree_cli.generate_cmd.report`): what it deleted, and why a
server failed, through the real CLI with real servers (`tests/servers/raw_server.py`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import RAW_SERVER
from tooltree_cli.main import main


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"Does {name}.", "inputSchema": {"type": "object"}}


def entry(folder: Path, name: str, spec: dict[str, Any], **settings: object) -> str:
    """A ``servers:`` entry for a raw server following ``spec``."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    lines = [f"  {name}:", f"    command: {json.dumps(sys.executable)}"]
    lines.append(f"    args: [{json.dumps(str(RAW_SERVER))}, {json.dumps(str(path))}]")
    lines += [f"    {key}: {json.dumps(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def generate(config: Path, out: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", *args])
    return code, capsys.readouterr().err


def test_tools_left_out_of_a_server_are_counted_in_its_folder_and_a_server_removed_names_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    media = {"pages": [[tool("resize"), tool("crop"), tool("slow_echo"), tool("long_task")]]}
    config, out = tmp_path / "tooltree.yaml", tmp_path / "tree"
    config.write_text("servers:\n" + entry(tmp_path, "media", media) + entry(tmp_path, "docs", media), encoding="utf-8")
    assert generate(config, out, capsys)[0] == 0

    # Before: "deleted: servers/media/ (2 files)", as if the package had been removed.
    left_out = entry(tmp_path, "media", media, exclude=["slow_echo", "long_task"])
    config.write_text("servers:\n" + left_out + entry(tmp_path, "docs", media), encoding="utf-8")
    code, err = generate(config, out, capsys, "--from-snapshot")
    assert code == 0 and "\ndeleted: 2 files in servers/media/\n" in err
    assert sorted(p.name for p in (out / "servers/media").iterdir()) == [
        "README.md",
        "__init__.py",
        "crop.py",
        "resize.py",
    ]

    config.write_text("servers:\n" + entry(tmp_path, "docs", media), encoding="utf-8")
    code, err = generate(config, out, capsys, "--from-snapshot")
    assert code == 0 and "\ndeleted: servers/media/ (4 files), snapshots/media.json\n" in err
    assert not (out / "servers/media").exists()


def test_a_removed_servers_folder_that_holds_a_users_file_is_said_to_stay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "deleted: servers/media/ (4 files)", though the folder stayed, holding the user's notes.
    media = {"pages": [[tool("resize"), tool("crop")]]}
    config, out = tmp_path / "tooltree.yaml", tmp_path / "tree"
    config.write_text("servers:\n" + entry(tmp_path, "media", media) + entry(tmp_path, "docs", media), encoding="utf-8")
    assert generate(config, out, capsys)[0] == 0
    (out / "servers/media/notes.txt").write_text("mine\n", encoding="utf-8")
    (out / "servers/media/drafts").mkdir()
    (out / "servers/media/drafts/a.py").write_text("x = 1\n", encoding="utf-8")

    config.write_text("servers:\n" + entry(tmp_path, "docs", media), encoding="utf-8")
    code, err = generate(config, out, capsys, "--from-snapshot")
    said = "4 files in servers/media/ (the folder stays: it holds drafts/, notes.txt, not tooltree's)"
    assert code == 0 and f"\ndeleted: {said}, snapshots/media.json\n" in err
    assert sorted(p.name for p in (out / "servers/media").iterdir()) == ["drafts", "notes.txt"]


def test_a_server_that_never_answers_its_listing_times_out_naming_the_phase_and_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "timed out after 2 s", the same as a server that never started, and no word of the setting.
    config, out = tmp_path / "tooltree.yaml", tmp_path / "tree"
    hung = entry(tmp_path, "hanglist", {"behavior": "hang_on_list", "pages": [[tool("t1")]]}, timeout=2)
    config.write_text("servers:\n" + hung + entry(tmp_path, "fine", {"pages": [[tool("t2")]]}), encoding="utf-8")
    capsys.readouterr()
    code = main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 3
    assert {s["name"]: (s["status"], s["error"]) for s in summary["servers"]} == {
        "hanglist": ("failed", f"timed out after 2 s listing its tools (servers.hanglist.timeout in {config})"),
        "fine": ("ok", None),
    }


def test_an_exact_tool_name_of_another_clients_list_that_matches_none_is_said_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "include pattern 'get_[*]' matches no tool", a pattern the user never wrote, for includeTools ["get_*"].
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pages": [[tool("get_time"), tool("convert")]]}), encoding="utf-8")
    server = {"command": sys.executable, "args": [str(RAW_SERVER), str(spec)], "includeTools": ["get_*", "convert"]}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"clock": server}}), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--embeddings", "off"]) == 0
    err = capsys.readouterr().err
    assert (
        "warning: clock: includeTools lists exact tool names; 'get_*' matches none (use include: in tooltree.yaml "
        "for patterns)"
        in err
        and "get_[*]" not in err
    )
