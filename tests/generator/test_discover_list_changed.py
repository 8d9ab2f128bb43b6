"""`discover_one` and a server that says its tools changed while they were listed (a real SDK server, over stdio).

Before, ``notifications/tools/list_changed`` was ignored: a server whose tools changed during ``tools/list`` gave
the tree the tools it had before the change. Now the listing is done again, a bounded number of times
(`MAX_RELISTS`); a server still changing after that gets its last listing and a warning naming it.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from generator.discover import MAX_RELISTS, discover_one
from tests.support import REPO
from tool_tree.config import ServerConfig
from tooltree_cli.main import main

CHANGING = REPO / "tests" / "servers" / "changing_server.py"


def changing(changes: int) -> ServerConfig:
    """A server whose first ``changes`` listings each change its one tool, ``tool_v<N>``, and say so."""
    return ServerConfig(name="shifty", command=sys.executable, args=(str(CHANGING), str(changes)), timeout=30)


@pytest.mark.anyio
async def test_a_server_whose_tools_change_while_listed_is_listed_again_and_its_new_tools_kept() -> None:
    result = await discover_one(changing(1))
    assert result.error is None
    assert [t["name"] for t in result.tools] == ["tool_v1"]  # before: tool_v0, the tool it had no more
    assert result.warning is None


@pytest.mark.anyio
async def test_a_server_that_settles_within_the_relists_gets_no_warning() -> None:
    result = await discover_one(changing(MAX_RELISTS))
    assert [t["name"] for t in result.tools] == [f"tool_v{MAX_RELISTS}"]
    assert result.warning is None


@pytest.mark.anyio
async def test_a_server_that_keeps_changing_is_listed_a_bounded_number_of_times_and_named_in_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="generator.discover")
    result = await discover_one(changing(1000))
    assert result.error is None
    # Listed 1 + MAX_RELISTS times: each listing answers the tools it found, then moves on one version.
    assert [t["name"] for t in result.tools] == [f"tool_v{MAX_RELISTS}"]
    assert result.warning is not None and "server 'shifty'" in result.warning
    assert f"during each of {MAX_RELISTS + 1} listings in a row" in result.warning
    assert [r.getMessage() for r in caplog.records if r.name == "generator.discover"] == [result.warning]


@pytest.mark.anyio
async def test_a_server_that_does_not_change_keeps_its_first_listing() -> None:
    result = await discover_one(changing(0))
    assert [t["name"] for t in result.tools] == ["tool_v0"] and result.warning is None


def test_generate_tree_says_which_server_kept_changing_in_its_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(
        f"servers:\n  shifty:\n    command: {json.dumps(sys.executable)}\n"
        f"    args: [{json.dumps(str(CHANGING))}, '1000']\n",
        encoding="utf-8",
    )
    out = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [w for w in report["warnings"] if "server 'shifty'" in w] == [
        f"server 'shifty' said its tools changed during each of {MAX_RELISTS + 1} listings in a row; the last listing "
        "is used, and may be out of date (generate again once it settles)"
    ]
    assert (out / "servers" / "shifty" / f"tool_v{MAX_RELISTS}.py").is_file()
