"""A script's typo gets Python 3.12's "Did you mean: 'x'?" in the sandbox, whatever its interpreter.

Before: the sandbox's Python 3.11 `traceback` module, with which the worker formats a script's error, adds no
suggestion (only the interpreter's own hook did), so ``crm.serach_records`` said "module 'servers.crm' has no attribute
'serach_records'" alone, and the model read the server's README to find the name it had mistyped.

Real parts: a tree generated from the raw test server, a real container, `tooltree exec`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox import DockerBackend, Sandbox, SandboxConfig
from tests.docker_cli import EngineWithCLI
from tests.support import raw_server_config
from tooltree_cli.main import main

pytestmark = pytest.mark.docker

SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query"],
}
TOOLS = [
    {"name": name, "inputSchema": SEARCH if name == "search_records" else {"type": "object"}}
    for name in ("search_records", "get_record", "update_record")
]

CASES = [
    ("leads = []\nprint(len(leedz))", "NameError: name 'leedz' is not defined. Did you mean: 'leads'?"),
    ("print(json.dumps(1))", "NameError: name 'json' is not defined. Did you forget to import 'json'?"),
    (
        "from servers import crm\ncrm.serach_records(query='acme')",
        "AttributeError: module 'servers.crm' has no attribute 'serach_records'. Did you mean: 'search_records'?",
    ),
    (
        "from servers.crm import serach_records",
        "ImportError: cannot import name 'serach_records' from 'servers.crm' (/workspace/servers/crm/__init__.py). "
        "Did you mean: 'search_records'?",
    ),
    (
        "from servers.crm import nonexistent",
        "ImportError: cannot import name 'nonexistent' from 'servers.crm' (/workspace/servers/crm/__init__.py). "
        "The tools of servers.crm are listed in servers/crm/README.md",
    ),
    ("import servers.crmm", "ModuleNotFoundError: No module named 'servers.crmm'. Did you mean: 'servers.crm'?"),
    (
        "from servers import crmm",
        "ImportError: cannot import name 'crmm' from 'servers' (/workspace/servers/__init__.py). Did you mean: 'crm'?",
    ),
    ("rows = []\nrows.apend(1)", "AttributeError: 'list' object has no attribute 'apend'. Did you mean: 'append'?"),
    (
        "class Lead:\n    limit = 5\n    def top(self):\n        return limit\nLead().top()",
        "NameError: name 'limit' is not defined. Did you mean: 'self.limit'?",
    ),
    ("raise AttributeError('no such thing')", "AttributeError: no such thing"),
    (
        "rows = get_record()",
        "NameError: name 'get_record' is not defined. "
        "Did you forget to import it (from servers.crm import get_record)?",
    ),
]


@pytest.fixture(scope="module")
def crm_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated tree whose server is named crm (the raw server's, renamed in its config)."""
    folder = tmp_path_factory.mktemp("suggest")
    config, tree = raw_server_config(folder, {"pages": [TOOLS]}), folder / "tree"
    config.write_text(config.read_text(encoding="utf-8").replace("\n  raw:\n", "\n  crm:\n"), encoding="utf-8")
    assert main(["generate-tree", "--config", str(config), "--out", str(tree)]) == 0
    assert (tree / "servers" / "crm" / "search_records.py").is_file()
    return tree


def test_a_scripts_typo_gets_the_name_it_meant_in_its_error_and_traceback(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, crm_tree: Path
) -> None:
    backend = DockerBackend(test_config, tree=crm_tree, docker=docker_engine)
    backend.prepare()
    with Sandbox(backend) as sb:
        for code, error in CASES:
            result = sb.execute(code)
            assert result.error == error, code
            assert result.traceback is not None
            assert result.traceback.endswith(error + "\n"), result.traceback


def test_exec_names_the_tool_a_misspelled_stub_meant(
    docker_engine: EngineWithCLI, crm_tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = crm_tree.parent / "tooltree.yaml"
    code = "from servers import crm\nprint(crm.get_recrod(query='acme'))"
    assert main(["exec", "-c", code, "--config", str(config), "--tree", str(crm_tree), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    said = "AttributeError: module 'servers.crm' has no attribute 'get_recrod'. Did you mean: 'get_record'?"
    assert printed["error"] == said
    assert printed["traceback"].endswith(said + "\n")
    # The traceback ends at the script's line (before: under it, the package's `raise AttributeError(...)` in
    # servers/crm/__init__.py, a frame of its __getattr__).
    assert "__init__.py" not in printed["traceback"] and "line 2, in <module>" in printed["traceback"]


SIGNATURE = "The stub, servers/crm/search_records.py: search_records(*, query: str, limit: int | NotGiven = NOT_GIVEN)"
STUB_CALLS = [
    (
        "from servers.crm import search_records\nsearch_records(querry='acme')",
        f"TypeError: search_records() got an unexpected keyword argument 'querry'. Did you mean: 'query'? {SIGNATURE}",
    ),
    (
        "from servers import crm\ncrm.search_records(limit=5)",
        f"TypeError: search_records() missing 1 required keyword-only argument: 'query'. {SIGNATURE}",
    ),
    (
        "from servers.crm import search_records\nsearch_records('acme', 5)",
        "TypeError: search_records() takes 0 positional arguments but 2 were given. Pass each argument by its name. "
        + SIGNATURE,
    ),
    (  # a function of the script's own of the stub's name is not the stub
        "def search_records(text):\n    pass\nsearch_records(query='acme')",
        "TypeError: search_records() got an unexpected keyword argument 'query'",
    ),
]


def test_a_wrong_call_of_a_stub_names_the_stub_its_file_and_its_parameters_types(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, crm_tree: Path
) -> None:
    # Before: 'search_records() got an unexpected keyword argument 'querry'' alone: Python refuses the call before
    # the stub's body runs, so the traceback ends at the script's line and names neither the stub nor its file.
    backend = DockerBackend(test_config, tree=crm_tree, docker=docker_engine)
    backend.prepare()
    with Sandbox(backend) as sb:
        for code, error in STUB_CALLS:
            result = sb.execute(code)
            assert result.error == error, code
            assert result.traceback is not None and result.traceback.endswith(error + "\n"), result.traceback
            assert not result.tool_calls


def test_an_awaited_stub_says_stubs_are_synchronous_and_that_its_call_ran(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, crm_tree: Path
) -> None:
    # Before: 'object ToolResult can't be used in 'await' expression' alone: the model was not told that the tool had
    # run, and ran it again (a mail sent twice) once it called the stub without await.
    backend = DockerBackend(test_config, tree=crm_tree, docker=docker_engine)
    backend.prepare()
    calls: list[str] = []

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(f"{server}.{name}")
        return {"content": [{"type": "text", "text": "[]"}]}

    with Sandbox(backend, tools=tool) as sb:
        result = sb.execute("from servers.crm import search_records\nrows = await search_records(query='acme')")
    assert result.error == (
        "TypeError: object ToolResult can't be used in 'await' expression. Stubs are synchronous: call them without "
        "await (the call ran: what was awaited is its result)"
    )
    assert calls == ["crm.search_records"]


def test_stub_calls_given_to_asyncio_gather_say_stubs_are_synchronous_and_that_the_calls_ran(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, crm_tree: Path
) -> None:
    # Before: 'TypeError: unhashable type: 'list'' alone, at a dataclass's __hash__: gather hashes what it is given,
    # and a ToolResult holds lists; nothing said the two calls had run, nor how to run calls at once.
    backend = DockerBackend(test_config, tree=crm_tree, docker=docker_engine)
    backend.prepare()
    calls: list[str] = []

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments["query"])
        return {"content": [{"type": "text", "text": "[]"}]}

    code = (
        "import asyncio\nfrom servers.crm import search_records\n"
        "a, b = await asyncio.gather(search_records(query='acme'), search_records(query='globex'))"
    )
    with Sandbox(backend, tools=tool) as sb:
        result = sb.execute(code)
    assert result.error == (
        "TypeError: unhashable type: 'list'. Stubs are synchronous: call them without await or asyncio, and several at "
        "once with parallel(lambda: ..., lambda: ...) (the calls ran: asyncio was given their results)"
    )
    assert calls == ["acme", "globex"]


def test_a_stub_call_given_to_asyncio_run_says_stubs_are_synchronous_and_that_the_call_ran(
    docker_engine: EngineWithCLI, test_config: SandboxConfig, crm_tree: Path
) -> None:
    # Before: 'ValueError: a coroutine was expected, got ToolResult(...)' alone: nothing said that the call had run,
    # nor that a stub is called without asyncio.
    backend = DockerBackend(test_config, tree=crm_tree, docker=docker_engine)
    backend.prepare()
    calls: list[str] = []

    def tool(server: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(arguments["query"])
        return {"content": [{"type": "text", "text": "[]"}]}

    code = "import asyncio\nfrom servers.crm import search_records\nrows = asyncio.run(search_records(query='acme'))"
    with Sandbox(backend, tools=tool) as sb:
        result = sb.execute(code)
        other = sb.execute("raise ValueError('a coroutine was expected, got ToolResult()')")  # a script's own
    assert result.error is not None and result.error.startswith("ValueError: a coroutine was expected, got ToolResult(")
    assert result.error.endswith(
        "). Stubs are synchronous: call them without await or asyncio (the call ran: asyncio was given its result)"
    ), result.error
    assert calls == ["acme"]
    assert other.error == "ValueError: a coroutine was expected, got ToolResult()"
