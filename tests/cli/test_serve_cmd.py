"""`tooltree serve`: what is refused before anything starts, and the tree it brings up to date first."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, TEST_OWNER, sample_config_yaml
from tool_tree.config import load_config
from tool_tree.tree import Manifest
from tooltree_cli.main import main
from tooltree_cli.serve_cmd import Refresh, _regenerate


def test_a_non_loopback_host_needs_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--http", "--host", "0.0.0.0", "--no-regenerate"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0 is not loopback; add --allow-remote" in err


@pytest.mark.parametrize(("token", "said"), [("s3cret-token-0123456789\n", "a space at character 24 of 24"),
                                             ("s3cret token", "a space at character 7 of 12"),
                                             ("s3cret\x7f", "a control character at character 7 of 7"),
                                             ("s3crét", "a non-ASCII character at character 5 of 6")])  # fmt: skip
def test_a_token_no_client_can_send_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, token: str, said: str
) -> None:
    # Before: served, and every client sending the token (its header's value without the line break) got 401.
    monkeypatch.setenv("TOOLTREE_SERVE_TOKEN", token)
    assert main(["serve", "--http", "--port", "0", "--no-regenerate", "--tree", str(tmp_path / "tree")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tooltree: error: $TOOLTREE_SERVE_TOKEN has {said}, which a client cannot send")
    assert token.strip() not in err and "openssl rand -hex 16" in err


def test_an_unknown_embeddings_setting_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: served, and every client's search_tools failed on it.
    monkeypatch.setenv("TOOLTREE_SEARCH_EMBEDDINGS", "bogus")
    assert main(["serve", "--no-regenerate", "--tree", str(tmp_path / "tree")]) == 2
    assert capsys.readouterr().err == (
        "tooltree: error: TOOLTREE_SEARCH_EMBEDDINGS=bogus: expected 1 (on), 0 (off) or auto\n"
    )


@pytest.mark.parametrize("token", ["t", "s3cret-token-01"])
def test_a_token_shorter_than_16_characters_is_refused_saying_how_to_make_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    # Before: served behind a token of one character, which whoever reaches the port guesses at the first tries.
    monkeypatch.setenv("TOOLTREE_SERVE_TOKEN", token)
    assert main(["serve", "--http", "--port", "0", "--no-regenerate", "--tree", str(tmp_path / "tree")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tooltree: error: $TOOLTREE_SERVE_TOKEN has {len(token)} character")
    assert "give at least 16, such as `python -c 'import secrets; print(secrets.token_urlsafe(32))'` prints" in err
    assert "s3cret" not in err  # the token is a secret


def test_a_token_of_16_characters_is_taken() -> None:
    from agent.serve.http import token_problem

    assert token_problem("s3cret-token-012") is None


def test_help_says_what_allow_remote_exposes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "run code in the sandbox and call every tool of every configured server" in text


def test_a_busy_port_is_one_line_and_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["serve", "--http", "--port", str(port), "--no-regenerate", "--tree", str(tmp_path / "tree")])
    assert code == 2
    assert capsys.readouterr().err == (
        f"tooltree: error: cannot listen on 127.0.0.1:{port}: address already in use; "
        "choose another --port (0 picks a free one)\n"
    )


def test_an_address_of_another_machine_is_one_line_and_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--http", "--host", "192.0.2.1", "--allow-remote", "--port", "0", "--no-regenerate"]
    assert main([*argv, "--tree", str(tmp_path / "tree")]) == 2
    assert capsys.readouterr().err == "tooltree: error: cannot listen on 192.0.2.1:0: cannot assign requested address\n"


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("99999", "argument --port: 99999 is out of range: give 1 to 65535 (or 0 to pick a free port)"),
        ("-1", "argument --port: -1 is out of range"),
        ("http", "argument --port: not a port number: 'http'"),
    ],
)
def test_a_port_out_of_range_is_refused_when_the_arguments_are_parsed(
    port: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--http", "--no-regenerate", f"--port={port}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _crm_tree(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    """A config of the crm sample server (and ``extra``, appended) and a tree generated from it."""
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm") + extra, encoding="utf-8")
    tree = tmp_path / "tree"
    assert main(["generate-tree", "--config", str(config), "--out", str(tree), "--embeddings", "off"]) == 0
    return config, tree


def _billing_fails(tmp_path: Path) -> Path:
    """A config of the crm sample server and ``billing``, which exits at start-up saying why on stderr."""
    missing = json.dumps("import sys; sys.stderr.write('starting\\n'); import tooltree_no_such_module")
    billing = f"  billing:\n    command: {json.dumps(sys.executable)}\n    args: [-c, {missing}]\n"
    config_file = tmp_path / "tooltree.yaml"
    config_file.write_text(sample_config_yaml("crm") + billing, encoding="utf-8")
    return config_file


def test_a_refresh_with_failed_servers_says_which_and_why_not_up_to_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, tree = _crm_tree(tmp_path)
    capsys.readouterr()
    assert _regenerate(load_config(_billing_fails(tmp_path)), tree, background=True) == (0, None)
    err = capsys.readouterr().err
    assert (
        "tooltree serve: billing failed to list its tools (the server exited during start-up, with exit status 1); "
        "its tools are not in "
        "the tree; the last lines of its stderr:\n"
    ) in err
    assert "\n    ModuleNotFoundError: No module named 'tooltree_no_such_module'\n" in err
    assert f"tooltree serve: {tree} is not up to date: 1 of 2 server(s) failed (billing; see above); nothing changed " \
        "for the others\n" in err  # fmt: skip
    assert "is up to date" not in err
    assert (tree / "servers" / "crm" / "list_leads.py").is_file()


def test_a_tree_generated_without_a_server_that_failed_is_said_to_be_generated_not_out_of_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "<tree> is not up to date: 1 of 2 server(s) failed (billing; see above); 9 written, 0 deleted for the
    # others", of a tree that did not exist a moment before.
    tree = tmp_path / "tree"
    code, read = _regenerate(load_config(_billing_fails(tmp_path)), tree)
    assert code == 0 and read is not None
    err = capsys.readouterr().err
    assert f"tooltree serve: generating {tree} from 2 server(s) …\n" in err
    written = len([p for p in tree.rglob("*") if p.is_file()])
    assert f"tooltree serve: generated {tree} without the 1 of 2 server(s) that failed (billing; see above): " \
        f"{written} file(s) written\n" in err  # fmt: skip
    assert "up to date" not in err


def test_a_refresh_that_changes_nothing_says_so_and_reloads_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "sessions from now on get the refreshed tree's instructions" after a refresh that wrote nothing.
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp_path / "tree"
    code, read = _regenerate(load_config(config), tree)
    assert code == 0 and read is not None
    assert f"tooltree serve: generated {tree} (" in capsys.readouterr().err
    refresh, reloaded = Refresh(load_config(config), tree), []
    refresh.start(lambda _read: reloaded.append(True))
    refresh.thread.join(timeout=60)  # the refresh ends on its own
    err = capsys.readouterr().err
    assert f"tooltree serve: {tree} is up to date (nothing changed)\n" in err
    assert "sessions from now on" not in err and reloaded == []

    (tree / "servers" / "crm" / "list_leads.py").unlink()
    refresh = Refresh(load_config(config), tree)
    refresh.start(lambda _read: reloaded.append(True))
    refresh.thread.join(timeout=60)  # the refresh ends on its own
    err = capsys.readouterr().err
    assert f"tooltree serve: {tree} is up to date (1 written, 0 deleted)\n" in err
    assert "tooltree serve: sessions from now on get the refreshed tree's instructions\n" in err and reloaded == [True]


def test_a_refresh_that_fails_unexpectedly_logs_its_traceback_for_debug(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: stderr said "refreshing … failed: TypeError: …" alone, and the traceback was lost, even under --debug.
    import tooltree_cli.serve_regenerate as serve_regenerate

    def broken(*_args: object, **_kwargs: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(serve_regenerate, "_regenerate", broken)
    caplog.set_level(logging.DEBUG, logger="tooltree_cli.serve_regenerate")
    refresh = Refresh(load_config(_failing(tmp_path)), tmp_path / "tree")
    refresh.start(lambda _read: None)
    refresh.thread.join(timeout=60)
    assert f"refreshing {tmp_path / 'tree'} failed: TypeError: a bug" in capsys.readouterr().err
    (record,) = [r for r in caplog.records if r.name == "tooltree_cli.serve_regenerate"]
    assert record.exc_info is not None and "in broken" in caplog.text


def _failing(tmp_path: Path) -> Path:
    """A config of one server, ``billing``, that exits at start-up saying why on stderr."""
    script = json.dumps("import sys; sys.stderr.write('billing: no licence key\\n'); sys.exit(3)")
    config = tmp_path / "failing.yaml"
    config.write_text(f"servers:\n  billing:\n    command: {json.dumps(sys.executable)}\n    args: [-c, {script}]\n",
                      encoding="utf-8")  # fmt: skip
    return config


def test_serve_on_a_missing_tree_whose_servers_all_fail_exits_3_with_their_errors_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: it wrote a tree of 0 tools, served it and exited 0; later runs served that tree at once.
    tree = tmp_path / "tree"
    assert main(["serve", "--config", str(_failing(tmp_path)), "--tree", str(tree)]) == 3
    err = capsys.readouterr().err
    assert (
        "tooltree serve: billing failed to list its tools (the server exited during start-up, with exit status 3); "
        "its tools are not in "
        "the tree; the last lines of its stderr:\n    billing: no licence key\n"
    ) in err
    assert err.endswith(
        f"tooltree: error: could not generate {tree}: every server failed (see above); nothing was written or served\n"
    )
    assert not tree.exists()


def test_regenerate_first_when_every_server_fails_exits_3_and_leaves_the_tree_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "tree"
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    tools = [{"name": "charge", "description": "Charge a card.", "inputSchema": {"type": "object"}}]
    (snaps / "billing.json").write_text(json.dumps({"server": "billing", "tools": tools}), encoding="utf-8")
    assert main(["generate-tree", "--from-snapshot", str(snaps), "--out", str(tree), "--embeddings", "off"]) == 0
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["serve", "--config", str(_failing(tmp_path)), "--tree", str(tree), "--regenerate-first"]) == 3
    err = capsys.readouterr().err
    assert (
        "tooltree serve: billing failed to list its tools (the server exited during start-up, with exit status 3); "
        "its stubs are kept;" in err
    )
    assert err.endswith(
        f"tooltree: error: could not bring {tree} up to date: every server failed (see above); it is left as it was\n"
    )
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before
    # In the background, serving goes on with the tree as it was, and says so.
    assert _regenerate(load_config(_failing(tmp_path)), tree, background=True) == (3, None)
    assert f"tooltree serve: {tree} is not up to date: every server failed (see above); it is served as it was" in (
        capsys.readouterr().err
    )


def test_no_regenerate_with_regenerate_first_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    # Before: accepted, and --no-regenerate won without a word.
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--no-regenerate", "--regenerate-first"])
    assert exit_info.value.code == 2
    assert "argument --regenerate-first: not allowed with argument --no-regenerate" in capsys.readouterr().err


def test_no_regenerate_without_a_tree_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--no-regenerate", "--tree", str(tmp_path / "none")]) == 2
    assert "manifest" in capsys.readouterr().err


def test_a_passthrough_tool_that_is_not_in_the_tree_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, tree = _crm_tree(tmp_path)
    capsys.readouterr()
    argv = ["serve", "--config", str(config), "--tree", str(tree), "--no-regenerate", "--passthrough", "crm.nope"]
    assert main(argv) == 2
    assert "passthrough tool 'crm.nope' is not in the tree" in capsys.readouterr().err


def test_a_passthrough_tool_of_the_config_that_is_not_in_the_tree_names_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "passthrough tool 'crm.nope' is not in the tree" without saying where it was written. (A pinned tool the
    # tree lacks is a warning, and serve goes on: tests/serve/test_pinned_missing.py.)
    section, setting, what = "serve:\n  passthrough: [crm.nope]\n", "serve.passthrough", "passthrough"
    config, tree = _crm_tree(tmp_path, section)
    text = sample_config_yaml("crm")
    capsys.readouterr()
    assert main(["serve", "--config", str(config), "--tree", str(tree), "--no-regenerate"]) == 2
    line = text.count("\n") + 2  # the key's line, under its section's
    expected = f"{config}:{line}: {setting}: {what} tool 'crm.nope' is not in the tree: its server listed no such tool"
    said = capsys.readouterr().err.strip()
    assert said.startswith(f"tooltree: error: {expected}") and said.endswith("`tooltree serve --regenerate-first`)")


def test_a_passthrough_tool_not_in_the_tree_names_the_config_serve_reads_in_the_command_to_regenerate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: "(`tooltree generate-tree --config …/tooltree.yaml --out …`)", the file the tree was generated from, where
    # a pinned tool the tree lacks, in the same serve, named the file serve reads (`--config serve.yaml`).
    _, tree = _crm_tree(tmp_path)
    serve_config = tmp_path / "serve.yaml"
    serve_config.write_text(sample_config_yaml("crm") + "serve:\n  passthrough: [crm.nope]\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["serve", "--config", str(serve_config), "--tree", str(tree), "--no-regenerate"]) == 2
    said = capsys.readouterr().err.strip()
    assert (
        f"(`tooltree generate-tree --config {serve_config} --out {tree}`, or `tooltree serve --regenerate-first`)"
        in said
    )


@pytest.mark.docker
def test_serve_generates_a_missing_tree_then_ends_when_stdin_closes(docker_engine: object, tmp_path: Path) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    tree = tmp_path / "tree"
    argv = [sys.executable, "-m", "tooltree_cli.main", "serve", "--config", str(config), "--tree", str(tree)]
    env = {"TOOLTREE_SANDBOX_OWNER": TEST_OWNER, "PATH": "/usr/local/bin:/usr/bin:/bin"}
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout is the MCP channel: nothing but MCP goes there
    assert (tree / "servers" / "crm" / "list_leads.py").is_file()
    assert "written" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--timeout", "nan"], "argument --timeout: expected a positive number of seconds, got 'nan'"),
        (["--idle-timeout", "0"], "argument --idle-timeout: expected a positive number of seconds, got '0'"),
        (["--warm", "-1"], "argument --warm: expected at least 0, got -1"),
        # Before: "tooltree: error: timeout: expected at most 604800 seconds (a week), got 1000000000.0", no option.
        (["--timeout", "1e9"], "argument --timeout: expected at most 604800 seconds (a week), got '1e9'"),
        (["--warm", "1000"], "argument --warm: expected at most 16 sandboxes (each is a started container), got 1000"),
    ],
)
def test_bad_numbers_are_refused_when_the_arguments_are_parsed(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--no-regenerate", *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_an_audit_path_that_is_a_folder_or_a_workspace_that_is_a_file_is_one_line_and_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    assert main(["serve", "--no-regenerate", "--audit", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"tooltree: error: --audit: {tmp_path} is a folder, not a file\n"
    assert main(["serve", "--no-regenerate", "--workspace", str(notes)]) == 2
    assert capsys.readouterr().err == f"tooltree: error: --workspace: {notes} is a file, not a folder\n"
    assert notes.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("below_a_file", [False, True])
def test_a_tree_that_cannot_be_a_folder_is_one_line_and_a_usage_error_before_any_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], below_a_file: bool
) -> None:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine", encoding="utf-8")
    tree = notes / "tree" if below_a_file else notes
    assert main(["serve", "--config", str(config), "--tree", str(tree)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("tooltree: error: --tree: ")
    assert f"{notes} is a file, not a folder" in err[0]
    assert notes.read_text(encoding="utf-8") == "mine"


def test_help_says_an_existing_tree_is_refreshed_in_the_background_and_gives_the_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agent.serve.settings import DEFAULT_IDLE_TIMEOUT, DEFAULT_WARM

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")
    assert "an existing one is served at once and brought up to date from the servers in the background" in text
    assert "3 when the tree could not be generated or every server failed" in text
    assert "regenerated from the servers first when it is missing or stale" not in text
    assert f"(default: serve.idle_timeout in the config, or {DEFAULT_IDLE_TIMEOUT:g})" in text
    assert f"(default: serve.warm in the config, or {DEFAULT_WARM}; 0: none)" in text
    assert "(default: sandbox.timeout in the config, or 30)" in text


def test_a_config_listing_serve_itself_through_a_wrapper_stops_at_the_first_level(tmp_path: Path) -> None:
    # Found by an audit: an entry `sh -c "exec tooltree serve --config .mcp.json …"` (or `uv run tooltree serve`) is
    # not recognised as tooltree by its command; each serve started the next, without end, and they outlived the
    # client. Every stdio server tooltree starts gets TOOLTREE_UPSTREAM; a serve started so refuses to run.
    config = tmp_path / "tooltree.yaml"
    nested = f"exec {sys.executable} -m tooltree_cli.main serve --config {config} --tree {tmp_path / 'tree'}"
    config.write_text(
        sample_config_yaml("crm") + f"  myself:\n    command: /bin/sh\n    args: [-c, {json.dumps(nested)}]\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "tooltree_cli.main", "generate-tree", "--config", str(config), "--out",
         str(tmp_path / "tree"), "--embeddings", "off"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # one server failed, the other was generated
    assert "tooltree: error: tooltree serve was started by tooltree as one of its MCP servers" in done.stderr
    assert (tmp_path / "tree" / "servers" / "crm").is_dir() and not (tmp_path / "tree" / "servers" / "myself").exists()


def test_a_refresh_that_writes_only_the_search_index_does_not_have_the_sessions_take_the_tree_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: its "changed" had serve tell each session with a sandbox that the tree was regenerated and to reconnect
    # for a tool added since, though no stub had changed (an index missing or stale is read anew by itself).
    from tooltree_cli.common import load
    from tooltree_cli.serve_cmd import _regenerate

    config, tree = _crm_tree(tmp_path)
    (tree / "search_index.json").unlink()
    assert _regenerate(load(str(config)), tree, background=True) == (0, None)
    assert (tree / "search_index.json").is_file()
    assert "is up to date (1 written, 0 deleted)" in capsys.readouterr().err
    (tree / "servers" / "crm" / "list_leads.py").unlink()
    code, read = _regenerate(load(str(config)), tree, background=True)
    assert code == 0 and read is not None  # a stub written: they do


def test_a_refresh_from_another_config_naming_the_same_servers_writes_nothing_and_reloads_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `tooltree serve --config serve.yaml` over a tree generated from tooltree.yaml. Before: "is up to date (2 written,
    # 0 deleted)", the manifest's recorded config and the search index rewritten, and each session's next
    # execute_python told its handshake's instructions were of the tree before, though no tool changed.
    from tooltree_cli.common import load
    from tooltree_cli.serve_cmd import _regenerate

    config, tree = _crm_tree(tmp_path)
    capsys.readouterr()
    serve = tmp_path / "serve.yaml"
    serve.write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    assert _regenerate(load(str(serve)), tree, background=True) == (0, None)
    assert f"tooltree serve: {tree} is up to date (nothing changed)\n" in capsys.readouterr().err


def test_a_refresh_that_rewrites_the_manifest_for_its_config_alone_does_not_have_the_sessions_take_the_tree_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The file the tree was generated from is gone: the manifest names the one serve runs with now, and that is all
    # that changed. Before: the sessions were told the tree was regenerated.
    from tooltree_cli.common import load
    from tooltree_cli.serve_cmd import _regenerate

    config, tree = _crm_tree(tmp_path)
    serve = tmp_path / "serve.yaml"
    serve.write_text(config.read_text(encoding="utf-8"), encoding="utf-8")
    config.unlink()
    capsys.readouterr()
    assert _regenerate(load(str(serve)), tree, background=True) == (0, None)
    assert f"tooltree serve: {tree} is up to date (2 written, 0 deleted)\n" in capsys.readouterr().err
    assert Manifest.load(tree).config == "../serve.yaml"
