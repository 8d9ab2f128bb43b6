"""Why an upstream server failed, as the user of an MCP client running `tooltree serve` finds it: in the tool result.

A Node server that cannot start prints its error above its stack frames (the official servers'
``main().catch((e) => { console.error("Fatal error in main():", e); process.exit(1); })``). `tooltree serve` is
driven over stdio by the official MCP SDK client, through a passthrough tool whose server is that Node script
(``--warm 0``: no sandbox is started), and `tooltree generate-tree` lists the same server: both say the error,
with its configured secret redacted and the frames counted, and the restarts back off in words that fit. A server
that refuses its arguments quotes them: the credentials given there (``--api-key``, ``--header "Authorization: …"``,
a URL's password) are redacted too.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tool_tree import restarts
from tool_tree.restarts import RestartBackoff
from tool_tree.stderr_log import FRAME_CHARS, StderrLog
from tooltree_cli.main import main

SLOW = REPO / "tests" / "servers" / "slow_server.py"
SECRET = "sk-node-secret-0123456789"
ERROR = "Error: the token [redacted API_TOKEN] was refused by api.example.com"
NODE_SERVER = """\
function connect() {
  throw new Error(`the token ${process.env.API_TOKEN} was refused by api.example.com`);
}
async function main() { connect(); }
main().catch((error) => { console.error("Fatal error in main():", error); process.exit(1); });
"""
NODE = shutil.which("node")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree of the server ``slow`` (the SDK's Python server of tests/servers), generated while it worked."""
    folder = tmp_path_factory.mktemp("diagnosis")
    config = folder / "working.yaml"
    config.write_text(f"servers:\n  slow:\n    command: {sys.executable}\n    args: [{SLOW}]\n", encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(folder / "tree"), "--embeddings", "off"]) == 0
    return folder / "tree"


def broken_config(folder: Path) -> Path:
    """``slow`` as a Node server that exits at start, saying why above ten stack frames."""
    assert NODE is not None, "REQUIRE_REAL_SERVERS=1 but node is not on PATH (make real-servers needs it)"
    script = folder / "server.js"
    script.write_text(NODE_SERVER, encoding="utf-8")
    config = folder / "broken.yaml"
    config.write_text(
        f"servers:\n  slow:\n    command: {NODE}\n    args: [{script}]\n    env: {{API_TOKEN: {SECRET}}}\n",
        encoding="utf-8",
    )
    return config


# Under REQUIRE_REAL_SERVERS=1 (CI, whose `make real-servers` needs Node.js) a missing node fails, never skips.
needs_node = pytest.mark.skipif(
    NODE is None and os.environ.get("REQUIRE_REAL_SERVERS") != "1", reason="node is not installed"
)


@needs_node
def test_a_passthrough_call_to_a_node_server_that_cannot_start_says_its_error_not_only_its_stack_frames(
    tree: Path, tmp_path: Path
) -> None:
    # Before: the result's 8 lines of stderr were Node's last 8 stack frames; the error that says what to fix was cut.
    import anyio
    import mcp
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    argv = ["-m", "tooltree_cli.main", "serve", "--config", str(broken_config(tmp_path)), "--tree", str(tree),
            "--no-regenerate", "--warm", "0", "--passthrough", "slow.fail"]  # fmt: skip
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(REPO))

    async def calls(errlog: Any) -> list[str]:
        texts = []
        async with mcp.Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
            for _ in range(3):  # a start, a restart at once, then one refused while its back-off runs
                result = await client.call_tool("slow__fail", {"message": "x"})
                assert result.is_error
                texts.append(result.content[0].text)  # type: ignore[union-attr]
        return texts

    with open(tmp_path / "serve.err", "w", encoding="utf-8") as errlog:
        first, second, held = anyio.run(calls, errlog)
    for text in (first, second):
        assert text.startswith("slow.fail failed (server_unavailable): server 'slow' is unavailable: the server "
                               "exited during start-up, with exit status 1; the last lines of its "
                               "stderr:\n")  # fmt: skip
        assert f"Fatal error in main(): {ERROR}\n        at connect (" in text
        assert re.search(r"\n        … \d+ more stack frames \(tooltree left them out\)$", text), text
    if "not restarted for" in held:  # within a second of the restart (a slow start: restarted, failing the same way)
        assert "it ended again soon after its restart, the last time because it failed to restart" in held
    assert ERROR in held
    log = (tmp_path / "serve.err").read_text(encoding="utf-8")
    assert SECRET not in "".join((first, second, held, log))
    # The log the client keeps says it too (before: nothing, only the model saw it), once per start tried.
    assert log.count("server 'slow' could not start: the server exited during start-up") == 2, log
    assert f"Fatal error in main(): {ERROR}" in log


@needs_node
def test_generate_tree_says_the_same_of_the_same_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = broken_config(tmp_path)
    main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "t"), "--embeddings", "off"])
    err = capsys.readouterr().err
    assert "slow: the server exited during start-up" in err
    block = err.split("--- last lines of slow's stderr ---\n", 1)[1]
    assert block.startswith(f"Fatal error in main(): {ERROR}\n    at connect (")
    assert re.search(r"\n    … \d+ more stack frames \(tooltree left them out\)\n", block) and SECRET not in err


def test_each_run_of_frames_keeps_its_first_and_other_lines_are_kept_as_they_are() -> None:
    log = StderrLog()
    python = "Traceback (most recent call last):\n  File \"s.py\", line 1, in <module>\nKeyError: 'API_KEY'\n"
    jvm = "java.lang.IllegalStateException: no token\n\tat a.B.c(B.java:10)\n\tat a.B.main(B.java:3)\n"
    long_frame = "    at " + "x" * FRAME_CHARS + ":1:2\n"
    log.feed((python + jvm + long_frame * 2 + "    at least one region is required\n").encode())
    assert log.tail().split("\n") == [
        *python.splitlines(),
        "java.lang.IllegalStateException: no token",
        "\tat a.B.c(B.java:10)",
        "\t… 1 more stack frame (tooltree left them out)",
        *long_frame.splitlines() * 2,  # too long to be a frame: not matched, kept
        "    at least one region is required",
    ]


def test_the_back_off_says_how_many_restarts_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(restarts, "monotonic", lambda: now[0])
    backoff = RestartBackoff()
    said = []
    for _ in range(2):
        backoff.failed("the server exited during start-up")
        assert backoff.refusal() is None  # restarted (at once, then once its wait has passed)
        backoff.failed("the server exited during start-up")
        refusal = backoff.refusal()
        assert refusal is not None
        said.append(refusal)
        now[0] += 60
    assert "it ended again soon after its restart, the last time because it failed to restart" in said[0]
    assert "it ended again soon after each of its last 2 restarts, the last time because" in said[1]
    assert not any("restart(s)" in r for r in said)


def test_a_server_that_refuses_its_arguments_does_not_show_the_credentials_given_in_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: `error: unrecognized arguments: --api-key sk-… --header Authorization: Bearer sk-…` as the server
    # wrote it, in generate-tree's output, serve's and exec's errors and the audit log.
    refusing = "import argparse; argparse.ArgumentParser(prog='crm-server').parse_args()"
    url = "https://user:pw-0123456789@crm.example.com/mcp?api_key=qk-0123456789&region=europe-west"
    args = ["-c", refusing, "--api-key", "sk-arg-0123456789", "--header", "Authorization: Bearer sk-hdr-0123456789",
            "--url", url]  # fmt: skip
    config = tmp_path / "args.yaml"
    config.write_text(f"servers:\n  crm:\n    command: {sys.executable}\n    args: {args!r}\n", encoding="utf-8")
    main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "t"), "--embeddings", "off"])
    err = capsys.readouterr().err
    block = err.split("--- last lines of crm's stderr ---\n", 1)[1]
    assert (
        "crm-server: error: unrecognized arguments: --api-key [redacted arg --api-key] --header Authorization: "
        "[redacted arg header Authorization] --url https://user:[redacted arg url password]@crm.example.com/mcp"
        "?api_key=[redacted arg url query api_key]&region=europe-west"
    ) in block
    assert "0123456789" not in err


def test_only_args_whose_names_say_they_hold_a_credential_are_redacted() -> None:
    from tool_tree.config import ServerConfig
    from tool_tree.redact import redact

    args = ("--token=tok-0123456789", "--key-file", "/home/me/key.pem", "--author", "someone", "--auth", "--verbose",
            "-H", "X-Api-Key:k-0123456789", "--db", "postgres://db.example.com/crm?sslmode=require")  # fmt: skip
    server = ServerConfig(name="crm", command="crm-server", args=args)
    text = " ".join(args)
    assert redact(text, server) == text.replace("tok-0123456789", "[redacted arg --token]").replace(
        "k-0123456789", "[redacted arg header X-Api-Key]"
    )
