"""`tooltree_cli.logs`: the log records of every command reach stderr cleaned (a server's escape sequences in a
tool's name or a schema's ``$ref`` neutralised, no line of its own forged), and the SDK's traceback for each
notification it cannot read becomes one line, then at most one a minute with a count.

The commands run as real processes (their stderr is what a terminal, or the MCP client running `tooltree serve`,
gets) against a real hostile server (tests/servers/hostile_text_server.py) and, for `tooltree agent`, the fake
Messages API with the real ``anthropic`` SDK (direct mode: no container needed).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.testing import FakeMessagesAPI, reply, tool_use
from agent.toolsets.direct import DirectToolset
from tests.support import hostile_text_config
from tooltree_cli.logs import RECORD_CHARS, REPEAT_SECONDS, CleanHandler, install
from tooltree_cli.main import main

REPO = Path(__file__).resolve().parents[2]
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
"""What must not reach the terminal: controls (but tab and line feed), C1, bidi overrides, tag characters."""
RUN_WAIT = 120


def tooltree(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tooltree ARGS`` as a process of its own; its stdout and stderr."""
    argv = [sys.executable, "-m", "tooltree_cli.main", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=RUN_WAIT, cwd=REPO, env=env, check=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("logs")
    config, out = hostile_text_config(folder), folder / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "off"]) == 0
    return out


def test_a_flood_of_notifications_the_sdk_cannot_read_logs_one_line_without_a_traceback(tmp_path: Path) -> None:
    # Before: a 20-line traceback for each of the 300 notifications (460 KB of stderr; without end, 150 KB a second).
    config = hostile_text_config(tmp_path, "300")
    done = tooltree("generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--embeddings", "off")
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "Failed to validate notification" in line]
    assert line == (
        "warning: Failed to validate notification: notifications/progress [ValidationError: 3 validation errors for "
        f"ProgressNotification] (more like it are counted, and shown at most once in {REPEAT_SECONDS:.0f} s)"
    )
    assert "Traceback" not in done.stderr and len(done.stderr) < 5_000


def test_warnings_naming_a_servers_tool_and_ref_reach_stderr_cleaned_on_lines_of_their_own(tree: Path) -> None:
    # Before: Python's handler of last resort wrote them raw: the OSC 52 clipboard write, the window title, the
    # cleared screen and a carriage return that rewrote the line ("forged") reached the terminal.
    names = {entry.tool: name for name, entry in DirectToolset(tree).names.items()}
    evil = next(name for tool, name in names.items() if tool.startswith("evil"))
    with FakeMessagesAPI() as api:
        api.add(reply(tool_use(evil, {"x": "aa"}), tool_use(names["badref"], {"x": 1})), reply("Done."))
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.base_url}
        config = tree.parent / "tooltree.yaml"
        done = tooltree("agent", "Run them", "--config", str(config), "--tree", str(tree), "--mode", "direct", env=env)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert UNSAFE.search(err) is None, repr(UNSAFE.search(err))
    evil_shown = "hostile.evil]52;c;ZWNobyBwd25lZAo=]0;PWNED[2J[31mREDevil2K\n    [2Kforgedname"
    assert f"\nwarning: not checking pattern '(a)\\\\1' of {evil_shown} on the host: RE2 refuses it" in err
    ref_shown = "http://e.example/]52;c;ZWNobyBwd25lZAo=]0;PWNED[2J[31mREDevil2K\n    [2Kforged\n"
    assert f"\nwarning: not validating hostile.badref on the host: Unresolvable: {ref_shown}" in err
    assert not any(line.startswith(("[2K", "forged")) for line in err.splitlines())  # the server's CR: indented


def test_a_warning_read_from_another_clients_config_file_starts_warning_as_the_commands_own_do(
    tmp_path: Path,
) -> None:
    # Before: ".mcp.json:1: mcpServers.docs.arsg: not a key tooltree reads; ignored (did you mean 'args'?)", bare,
    # where generate-tree's own warnings start "warning:".
    server = {"command": sys.executable, "args": [str(REPO / "examples/sample_servers/docs.py")], "arsg": []}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"docs": server}}), encoding="utf-8")
    done = tooltree("generate-tree", "--config", str(tmp_path / ".mcp.json"), "--out", str(tmp_path / "tree"),
                    "--embeddings", "off")  # fmt: skip
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "arsg" in line]
    assert warned == [
        f"warning: {tmp_path / '.mcp.json'}:1: mcpServers.docs.arsg: not a key tooltree reads; ignored (did you mean "
        "'args'?)"
    ]


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A logger of its own whose only handler is a `CleanHandler` on a clock the test moves (``logger.now``)."""
    now = [1000.0]
    log = logging.getLogger(f"test-logs-{id(now)}")
    log.propagate = False
    handler = CleanHandler(clock=lambda: now[0])
    log.addHandler(handler)
    log.now = now  # type: ignore[attr-defined]
    yield log
    log.removeHandler(handler)


def invalid(log: logging.Logger) -> None:
    try:
        json.loads("{")
    except ValueError:
        log.warning("Failed to validate notification: %s", "notifications/progress", exc_info=True)


def test_a_repeated_sdk_record_is_shown_at_most_once_a_minute_with_how_many_were_dropped(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(1000):
        invalid(logger)
    logger.now[0] += REPEAT_SECONDS - 1  # type: ignore[attr-defined]
    invalid(logger)
    logger.now[0] += 1  # type: ignore[attr-defined]
    invalid(logger)
    assert capsys.readouterr().err.splitlines() == [
        "warning: Failed to validate notification: notifications/progress [JSONDecodeError: Expecting property name "
        f"enclosed in double quotes: line 1 column 2 (char 1)] (more like it are counted, and shown at most once in "
        f"{REPEAT_SECONDS:.0f} s)",
        "warning: Failed to validate notification: notifications/progress [JSONDecodeError: Expecting property name "
        f"enclosed in double quotes: line 1 column 2 (char 1)] (1,000 more like it dropped in the last "
        f"{REPEAT_SECONDS:.0f} s)",
    ]
    logger.warning("Failed to validate notification: %s", "notifications/message")  # another kind: shown
    assert "notifications/message (more like it are counted" in capsys.readouterr().err


def test_other_records_keep_their_traceback_with_escapes_dropped_and_lines_indented(
    logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        try:
            raise RuntimeError("bad \x1b]0;title\x07\x9b2Jthing\u202e\nforged line")
        except RuntimeError:
            logger.exception("notification callback for %s raised", "notifications/\x1b[2Jx")
    err = capsys.readouterr().err
    assert err.count("Traceback (most recent call last):") == 3  # not thinned: an important error each time
    assert UNSAFE.search(err) is None
    assert "notification callback for notifications/[2Jx raised\n    Traceback (most recent call last):\n" in err
    assert "\n    RuntimeError: bad ]0;title2Jthing\n    forged line\n" in err
    assert all(line.startswith(("notification callback", "    ")) for line in err.splitlines())


def test_a_huge_record_is_cut_in_its_middle(logger: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    message = "warning: not validating x on the host: Unresolvable: " + "a" * 5_000_000 + "END"
    logger.warning("%s", message.removeprefix("warning: "))
    head, middle, tail = capsys.readouterr().err.splitlines()
    assert head == message[: RECORD_CHARS // 2]
    assert middle == f"    [… {len(message) - RECORD_CHARS:,} characters left out …]"
    assert tail == "    " + message[-RECORD_CHARS // 2 :] and tail.endswith("aaaEND")


def test_install_puts_the_clean_handler_where_pythons_last_resort_was_once() -> None:
    before = logging.lastResort
    try:
        install()
        handler = logging.lastResort
        assert isinstance(handler, CleanHandler) and handler.level == logging.WARNING
        install()
        assert logging.lastResort is handler
    finally:
        logging.lastResort = before


def test_the_handler_writes_to_stderr_as_it_is_when_the_record_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    handler, stream = CleanHandler(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    handler.handle(logging.makeLogRecord({"msg": "a \x1b[31mred\x1b[0m warning", "levelno": logging.WARNING}))
    assert stream.getvalue() == "warning: a [31mred[0m warning\n"
