"""The README's snippets work as written, and its options, defaults, limits, exit codes and files are the code's."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import TEST_OWNER, sample_config_yaml
from tool_tree.config import parse_config
from tooltree_cli.common import EXIT_UNEXPECTED
from tooltree_cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_first_screen_names_the_two_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:20])
    assert "make demo" in first_screen and "make test" in first_screen


def test_the_yaml_config_snippet_is_a_valid_config() -> None:
    (snippet,) = blocks("yaml")
    config = parse_config(snippet, environ={"DRIVE_TOKEN": "t0ken"})
    assert [s.name for s in config.servers] == ["crm", "drive"]
    assert config.servers[1].headers == {"Authorization": "Bearer t0ken"}


def test_the_warning_the_readme_quotes_of_its_config_is_what_generate_tree_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the README said every warning names the file and line; one of what a server listed names the server.
    (quoted,) = re.findall(r"`(warning: crm: [^`]+)`", README)
    (snippet,) = blocks("yaml")
    config = parse_config(snippet, environ={"DRIVE_TOKEN": "t0ken"})
    (crm,) = [s for s in config.servers if s.name == "crm"]
    sample = sample_config_yaml("crm") + f"    exclude: {json.dumps(list(crm.exclude))}\n"
    (tmp_path / "tooltree.yaml").write_text(sample, encoding="utf-8")
    argv = ["generate-tree", "--config", str(tmp_path / "tooltree.yaml"), "--out", str(tmp_path / "tree")]
    assert main([*argv, "--embeddings", "off"]) == 0
    assert f"{quoted}\n" in capsys.readouterr().err


@pytest.fixture
def project(tmp_path: Path) -> Path:
    config = tmp_path / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm"), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tmp_path / "tree"), "--json"]) == 0
    return tmp_path


@pytest.mark.docker
def test_the_python_snippets_run(docker_engine: object, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script, api, _ = blocks("python")
    (project / "script.py").write_text(script, encoding="utf-8")
    monkeypatch.setenv("TOOLTREE_SANDBOX_OWNER", TEST_OWNER)
    monkeypatch.chdir(project)
    with (project / "tooltree.yaml").open("a", encoding="utf-8") as f:
        f.write("sandbox:\n  timeout: 17\npool:\n  start_jobs: 1\n")  # the snippet must honour both
    assert main(["exec", "script.py", "--json"]) == 0
    # The API snippet, in a fresh interpreter started in the project folder. Before, it ran every sandbox with
    # the default limits, whatever the file's `sandbox:` section said.
    limits = "SandboxConfig.from_config(config)"
    assert limits in api, "the API snippet takes its sandbox limits from the config"
    api = api.replace(limits, f"SandboxConfig.from_config(config, owner={TEST_OWNER!r})")
    last = "        print(result.stdout, result.tool_calls)\n"
    assert api.endswith(last)
    api += "        print('limits:', sandbox.config.timeout, servers.pool.start_jobs)\n"
    done = subprocess.run(
        [sys.executable, "-c", api],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"id"') >= 3 and "list_leads" in done.stdout
    assert done.stdout.endswith("limits: 17.0 1\n")


def test_the_claude_desktop_block_is_an_mcp_servers_config_that_starts_serve(tmp_path: Path) -> None:
    (snippet,) = blocks("json")
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(snippet, encoding="utf-8")
    from tool_tree.config import ServerConfig, load_config, starts_tooltree_serve

    entry = json.loads(snippet)["mcpServers"]["tooltree"]
    assert starts_tooltree_serve(ServerConfig(name="tooltree", command=entry["command"], args=tuple(entry["args"])))
    assert entry["args"][1:3] == ["--config", "/path/to/tooltree.yaml"]
    assert load_config(path).servers == ()  # read as tooltree's own config, it lists tooltree itself: left out


def test_the_claude_code_line_adds_the_serve_command() -> None:
    line = next(x for b in blocks("bash") for x in b.splitlines() if x.startswith("claude mcp add"))
    assert line.startswith("claude mcp add tooltree -- /path/to/tooltree/.venv/bin/tooltree serve --config ")


@pytest.mark.docker
def test_the_python_client_snippet_runs_against_tooltree_serve(
    docker_engine: object, project: Path, owner: str
) -> None:
    *_, client = blocks("python")
    # The snippet starts `tooltree` from PATH; its sandboxes carry this test's owner label (`owner` removes what is
    # left after it). The SDK's client kills serve 4 s after it closes stdin: on a loaded machine a warm container,
    # which ends on its own once serve is gone, was still there when the run's leak check looked, failing the run.
    client = client.replace('"tree"])', f'"tree"], env={{"TOOLTREE_SANDBOX_OWNER": {owner!r}, "PATH": PATH}})')
    client = f"PATH = {os.pathsep.join([str(Path(sys.executable).parent), os.environ.get('PATH', '')])!r}\n" + client
    done = subprocess.run([sys.executable, "-c", client], cwd=project, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    names, count, *ledger = done.stdout.splitlines()
    assert names == "['list_files', 'read_file', 'search_tools', 'execute_python']" and count == "10000 leads"
    assert any("crm.list_leads ok" in line for line in ledger)


# --- claims about the command line and the defaults, checked against the code -------------------------------------

FOREIGN_OPTIONS = {"--no-deps", "--require-hashes", "--cli", "--header", "--method", "--test-runtimes"}
"""Options the README shows for other programs (pip, the MCP inspector, `.ci/docker-setup.sh`)."""


def flat(text: str) -> str:
    return " ".join(text.split())


def code_spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", README)


def all_parsers() -> list[argparse.ArgumentParser]:
    found, todo = [], [build_parser()]
    while todo:
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def tooltree_command_lines() -> list[str]:
    """Every `tooltree ...` command the README shows: in bash blocks (continuations joined), in code spans, and the
    arguments of the Claude Desktop config."""
    lines = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value before the command
                words.pop(0)
            if words[:1] == ["tooltree"]:
                lines.append(shlex.join(words))
            elif "--" in words and words[words.index("--") + 1 : words.index("--") + 2] == ["tooltree"]:
                lines.append(shlex.join(words[words.index("--") + 1 :]))  # claude mcp add tooltree -- tooltree ...
    for span in code_spans():
        command = span.split(" -- ", 1)[-1]  # claude mcp add tooltree -- tooltree ...
        if command.startswith("tooltree ") and "--" in command:
            lines.append(command)
    (desktop,) = blocks("json")
    lines.append(shlex.join(["tooltree", *json.loads(desktop)["mcpServers"]["tooltree"]["args"]]))
    return lines


def test_every_tooltree_command_line_in_the_readme_parses(capsys: pytest.CaptureFixture[str]) -> None:
    lines = tooltree_command_lines()
    assert len(lines) >= 15
    for line in lines:
        try:
            build_parser().parse_args(shlex.split(line)[1:])
        except SystemExit:
            pytest.fail(f"the README's `{line}` does not parse: {capsys.readouterr().err}")


def test_every_option_the_readme_names_is_an_option_of_tooltree() -> None:
    known = {s for parser in all_parsers() for action in parser._actions for s in action.option_strings}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", README)) - FOREIGN_OPTIONS
    assert named - known == set()
    assert "--test-runtimes)" in (REPO / ".ci" / "docker-setup.sh").read_text(encoding="utf-8")


def test_every_commands_config_option_says_it_takes_a_clients_file_as_the_readme_does() -> None:
    # Before: exec, agent and serve said "tooltree.yaml with the servers", though the README points --config at a
    # client's file for every command (`claude mcp add tooltree -- tooltree serve --config .mcp.json`) and they read it.
    assert "point `--config` at your client's file" in README
    helps = {
        parser.prog: action.help
        for parser in all_parsers()
        for action in parser._actions
        if "--config" in action.option_strings and parser.prog != "tooltree image build"  # its sandbox: alone
    }
    assert set(helps) == {f"tooltree {c}" for c in ("generate-tree", "exec", "agent", "serve")}
    for prog, text in helps.items():
        assert text is not None and text.startswith("tooltree.yaml, or a client's own file (`mcpServers` JSON"), prog


def test_the_make_targets_the_readme_names_exist() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.M))
    named = set(re.findall(r"(?<![\w-])make ([a-z][\w-]*)", " ".join(code_spans() + blocks("bash"))))
    assert {"demo", "test"} <= named
    assert named - targets == set()


@pytest.mark.parametrize("doc", ["README.md", "SECURITY.md"])
def test_every_link_to_a_section_names_a_heading_of_its_page(doc: str) -> None:
    text = (REPO / doc).read_text(encoding="utf-8")
    # GitHub's anchors: the heading in lower case, punctuation but hyphens dropped, each space a hyphen.
    headings = re.findall(r"^#+ (.*)$", text, flags=re.M)
    anchors = {re.sub(r"[^\w -]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and set(links) - anchors == set()


def test_the_commands_the_readme_names_exist() -> None:
    commands = {parser.prog.split()[1] for parser in all_parsers() if parser.prog.count(" ") == 1}
    shown = " ".join(code_spans() + blocks("bash"))
    named = set(re.findall(r"(?<![\w/-])tooltree ([a-z][a-z-]+)", shown))
    assert {"generate-tree", "search", "exec", "image", "sandbox", "agent", "serve"} <= named
    assert named <= commands, named - commands


def exit_codes(command: str) -> dict[int, str]:
    """The codes the README gives `command`, in order: a list under its heading "Exit codes of `exec`", one code a
    bullet, or a sentence ("Exit codes of `serve`: 0 ..., 2 ....")."""
    listed = re.findall(rf"^#+ Exit codes of `{command}`\n\n((?:- .*\n(?:  .*\n)*)+)", README, flags=re.M)
    if listed:
        (bullets,) = listed
        return {int(n): flat(meaning) for n, meaning in re.findall(r"^- (\d+) (.*(?:\n  .*)*)", bullets, flags=re.M)}
    (listed,) = re.findall(rf"Exit codes of `{command}`: (.*?)\.", flat(README))
    return {int(n): meaning for n, meaning in re.findall(r"(\d+) ([^,]+)", listed)}


def test_the_documented_exit_codes_are_the_commands_own() -> None:
    from tooltree_cli import agent_cmd, exec_cmd, generate_cmd, serve_cmd
    from tooltree_cli.signals import EXIT_HUNG_UP, EXIT_TERMINATED

    assert list(exit_codes("generate-tree")) == [
        generate_cmd.EXIT_OK, generate_cmd.EXIT_DRIFT, generate_cmd.EXIT_CONFIG, generate_cmd.EXIT_SERVERS,
        generate_cmd.EXIT_INTERRUPTED, generate_cmd.EXIT_TERMINATED, EXIT_HUNG_UP,
    ]  # fmt: skip
    assert "--check" in exit_codes("generate-tree")[generate_cmd.EXIT_DRIFT]
    codes = exit_codes("exec")
    assert list(codes) == [
        exec_cmd.EXIT_OK, exec_cmd.EXIT_SCRIPT, exec_cmd.EXIT_USAGE, exec_cmd.EXIT_SANDBOX, 128 + signal.SIGINT,
        exec_cmd.EXIT_TERMINATED, EXIT_HUNG_UP,
    ]  # fmt: skip
    assert "workspace" in codes[exec_cmd.EXIT_SANDBOX]
    assert list(exit_codes("agent")) == [
        agent_cmd.EXIT_OK, agent_cmd.EXIT_INCOMPLETE, agent_cmd.EXIT_USAGE, agent_cmd.EXIT_API,
        agent_cmd.EXIT_SANDBOX, 128 + signal.SIGINT, EXIT_TERMINATED, EXIT_HUNG_UP,
    ]  # fmt: skip
    assert list(exit_codes("serve")) == [
        serve_cmd.EXIT_OK, serve_cmd.EXIT_USAGE, serve_cmd.EXIT_SERVERS, serve_cmd.EXIT_SANDBOX, 128 + signal.SIGINT,
        EXIT_TERMINATED, EXIT_HUNG_UP,
    ]  # fmt: skip


def test_each_commands_help_lists_the_exit_codes_the_readme_gives_it() -> None:
    helps = {parser.prog.split()[1]: flat(parser.description or "") for parser in all_parsers()[1:]}
    for command in ("generate-tree", "exec", "agent", "serve"):
        in_help = {int(n) for n in re.findall(r"(?<![\w.+])(\d+) (?:when|for|SIG)", helps[command])}
        assert in_help == {*exit_codes(command), EXIT_UNEXPECTED}, command


def test_every_config_key_is_named_in_the_readme() -> None:
    from tool_tree.config_entries import SERVER_KEYS
    from tooltree_cli.common import config_sections

    spans = " ".join(code_spans() + blocks("yaml"))
    keys = set(SERVER_KEYS) | {key for settings in config_sections().values() for key in settings}
    missing = {key for key in keys if not re.search(rf"(?<![\w.]){key}(?!\w)", spans)}
    assert missing == set()


def test_every_config_key_the_readme_writes_out_is_a_key_of_its_section() -> None:
    from tool_tree.config_entries import SERVER_KEYS
    from tooltree_cli.common import config_sections

    keys = {"servers.NAME": set(SERVER_KEYS), **{name: set(keys) for name, keys in config_sections().items()}}
    named = re.findall(rf"`({'|'.join(map(re.escape, keys))})\.([a-z_]+)`", README)
    assert len(named) >= 5
    assert [f"{section}.{key}" for section, key in named if key not in keys[section]] == []


def test_the_sandbox_keys_listed_are_the_sandbox_section() -> None:
    from sandbox.config import SETTINGS

    (paragraph,) = re.findall(r"Sandbox settings go in .*?\)\.", flat(README))
    assert set(re.findall(r"`([a-z_]+)[`:]", paragraph)) - {"sandbox"} == set(SETTINGS)


def test_the_serve_keys_listed_are_the_serve_section() -> None:
    from agent.serve.settings import SETTINGS

    # The list under the heading, to its first blank line (before: `prompts` and `resources` stood after the
    # paragraph on `pool:`, outside the list, read as part of that paragraph).
    (listed,) = re.findall(r"Settings go in `tooltree.yaml` under `serve:`:\n\n(.*?)\n\n", README, flags=re.S)
    items = re.findall(r"^- (.*?)(?=^- |\Z)", listed, flags=re.M | re.S)
    assert {key for item in items for key in re.findall(r"^`([a-z_]+)`", item)} | {
        key for item in items for key in re.findall(r"^`[a-z_]+`, `([a-z_]+)`", item)
    } == set(SETTINGS)


def test_the_config_section_table_names_every_section_and_its_module() -> None:
    from tooltree_cli.common import config_sections

    rows = re.findall(r"^\| `(\w+):` \| .*? \| `([\w/]+\.py)` \|$", README, flags=re.M)
    assert {section for section, _ in rows} == {"servers", *config_sections()}
    for section, module in rows:
        source = (REPO / module).read_text(encoding="utf-8")
        assert "SETTINGS" in source or section == "servers", module


def test_the_defaults_and_limits_the_readme_quotes_are_the_codes() -> None:
    from agent.content import MAX_RESULT_CHARS
    from agent.defaults import (
        DEFAULT_BATCH_MAX,
        DEFAULT_MAX_TOKENS,
        DEFAULT_MAX_TURNS,
        DEFAULT_MODEL,
        MAX_TOOL_USES,
        MODES,
    )
    from agent.serve.http import SSE_EVENT_LIMIT
    from agent.serve.sessions import GONE_GRACE
    from agent.serve.settings import (
        DEFAULT_IDLE_TIMEOUT,
        DEFAULT_MAX_SESSIONS,
        DEFAULT_PROGRESS_INTERVAL,
        DEFAULT_WARM,
        MAX_SESSIONS,
        MAX_WARM,
        MIN_PROGRESS_INTERVAL,
    )
    from agent.serve.stdio import MAX_MESSAGE_BYTES
    from sandbox._supervisor.limits import MAX_IMAGES
    from sandbox._supervisor.transfer import ENTRY_BYTES, MAX_ENTRIES
    from sandbox.config import SandboxConfig
    from tool_tree.config import DEFAULT_TIMEOUT
    from tool_tree.held_values import MAX_SERVE_HELD_VALUES
    from tool_tree.search import MAX_LIMIT, MIN_LIMIT
    from tool_tree.search._static import STATIC_WEIGHT

    sandbox = SandboxConfig()
    options = {a.dest: a.default for p in all_parsers() if p.prog == "tooltree serve" for a in p._actions}
    search = {a.dest: a.default for p in all_parsers() if p.prog == "tooltree search" for a in p._actions}
    text = flat(README)
    claims = [
        f"`timeout` (seconds) defaults to {DEFAULT_TIMEOUT:g}",
        f"`--limit` {MIN_LIMIT}–{MAX_LIMIT}, default {search['limit']}",
        f"added to MiniLM's with weight {STATIC_WEIGHT}",
        f"at most {MAX_ENTRIES:,} files and folders",
        f"plus {ENTRY_BYTES // 1024} KiB per file",
        f"(`workspace_size`, {sandbox.workspace_size}) plus {MAX_ENTRIES * ENTRY_BYTES // 2**20} MiB",
        f"`memory` {sandbox.memory}, `cpus` {sandbox.cpus:g}, `pids_limit` {sandbox.pids_limit}, "
        f"`nofile` {sandbox.nofile}, `tmp_size` {sandbox.tmp_size}, `timeout` {sandbox.timeout:g} s, "
        f"`output_chars` {sandbox.output_chars:,}, `workspace_size` {sandbox.workspace_size};",
        f"with at most {MAX_RESULT_CHARS:,} characters of text (head and tail, with a note) and {MAX_IMAGES} images",
        f"`mode` {MODES[0]}, `model` {DEFAULT_MODEL}, `max_turns` {DEFAULT_MAX_TURNS}, "
        f"`max_tokens` {DEFAULT_MAX_TOKENS:,},",
        f"at most `batch_max`, {DEFAULT_BATCH_MAX}, no more than {MAX_TOOL_USES})",
        f"a reply runs at most {MAX_TOOL_USES} tool calls, each invocation of a `batch_tool`",
        f"client reads none over {SSE_EVENT_LIMIT // 2**20} MiB",
        f"A client's message may be {MAX_MESSAGE_BYTES // 2**20} MiB",
        f"`idle_timeout` (seconds before an idle client's session ends; default {DEFAULT_IDLE_TIMEOUT:g})",
        f"`progress_interval` (default {DEFAULT_PROGRESS_INTERVAL:g} s, at least {MIN_PROGRESS_INTERVAL:g})",
        f"`warm` (sandboxes kept started; default {DEFAULT_WARM}, at most {MAX_WARM})",
        f"`max_sessions` (default {DEFAULT_MAX_SESSIONS}, at most {MAX_SESSIONS})",
        f"`max_listing_values` (default {MAX_SERVE_HELD_VALUES:,})",
        f"sends nothing for {GONE_GRACE:g} s ends too",
        f"`--host` (default {options['host']}), `--port` (default {options['port']}; 0 picks one)",
    ]
    assert [claim for claim in claims if claim not in text] == []


def test_the_environment_variables_the_readme_names_are_read_by_the_code() -> None:
    sources = "".join(
        path.read_text(encoding="utf-8")
        for package in ("tool_tree", "generator", "sandbox", "agent", "tooltree_cli", "bench")
        for path in (REPO / package).rglob("*.py")
    )
    named = set(re.findall(r"TOOLTREE_[A-Z_]+", README))
    assert named and {name for name in named if name not in sources} == set()


def test_the_tree_layout_lists_what_generate_tree_writes(project: Path) -> None:
    (layout,) = re.findall(r"```\n(tree/\n.*?)```", README, flags=re.S)
    listed = [line.split()[0].replace("<server>", "crm") for line in layout.splitlines()[1:] if line[2:3] != " "]
    tree = project / "tree"
    assert [path for path in listed if not (tree / path).exists()] == []
    top = {path.split("/")[0] for path in listed}
    assert {entry.name for entry in tree.iterdir()} <= top
