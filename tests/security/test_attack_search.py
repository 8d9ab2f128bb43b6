"""Search attacks from a script: the host answers every search quickly and within bounds.

A script's ``search_tools(...)`` runs on the host (``CallServer._serve_search`` → ``McpBridge.search_tools``
→ ``tool_tree.search``), so a hostile script aims at the host's CPU and memory there:

- catastrophic regexes (``.*.*.*.*§`` froze the host for 120 s under Python's ``re``, holding the
  GIL so the execution timeout could not fire): now matched by RE2 in linear time;
- 32 threads making the first hybrid search at once (each loaded the embedding model: 6 GB): now
  one load under a lock, and at most ``MAX_CONCURRENT`` searches run at once;
- a huge result (``detail='full'``, 50 hits): capped at ``MAX_RESULT_CHARS``;
- long queries in a loop (each up to 0.5 s of host CPU, charged 0.5 ms): now one search of a session at
  a time, each charged the CPU it took to the session's search budget, and refused once that is spent.

The CLI and the agent reach the same ``search_tools`` (tests/tool_tree/test_search.py covers them
without Docker).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox, SandboxConfig, calls
from sandbox.mcp_bridge import McpBridge
from tests.support import SAMPLE_SERVERS, count_model_loads, sample_config_yaml, write_tiny_bert
from tool_tree.config import ServerConfig
from tool_tree.pool import BackgroundPool
from tool_tree.search import MAX_RESULT_CHARS, SearchIndex, _render
from tool_tree.search._mode import EMBEDDINGS_ENV
from tooltree_cli.main import main

pytestmark = pytest.mark.docker

CATASTROPHIC = [".*.*.*.*§", "(.*a){12}x", "(a|aa)+$", r"(\w+\s?)*$", "(x+x+)+y", "((a{1,100}){1,100}){1,100}"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("model") / "tiny", ["rain", "weather", "lead", "record", "chart"])


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, model: Path) -> Path:
    tmp = tmp_path_factory.mktemp("search-attack")
    config = tmp / "tooltree.yaml"
    config.write_text(sample_config_yaml("crm", "media", "docs"), encoding="utf-8")
    out = tmp / "tree"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOOLTREE_EMBEDDING_MODEL", str(model))
        assert main(["generate-tree", "--config", str(config), "--out", str(out), "--embeddings", "on"]) == 0
    return out


@pytest.fixture(scope="module")
def pool() -> Iterator[BackgroundPool]:
    servers = [
        ServerConfig(name=n, command=sys.executable, args=(str(SAMPLE_SERVERS / f"{n}.py"),))
        for n in ("crm", "media", "docs")
    ]
    with BackgroundPool(servers) as bg:
        yield bg


@pytest.fixture
def session(
    docker_engine: object, test_config: SandboxConfig, tree: Path, pool: BackgroundPool, model: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Sandbox]:  # fmt: skip
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(model))
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    bridge = McpBridge(tree, pool.pool)
    with Sandbox(config=test_config, tree=tree, tools=bridge, tool_loop=pool.loop) as sandbox:
        yield sandbox


def test_catastrophic_regexes_from_a_script_are_answered_or_refused(session: Sandbox) -> None:
    code = (
        "import json\n"
        f"patterns = {CATASTROPHIC!r}\n"
        "out = {}\n"
        "for p in patterns:\n"
        "    try:\n"
        "        out[p] = search_tools(p, regex=True, detail='name')\n"
        "    except RuntimeError as e:\n"
        "        out[p] = 'refused: ' + str(e)\n"
        "print(json.dumps(out))\n"
    )
    result = session.execute(code)
    assert result.error is None, result.traceback  # under `re` the execution timed out (the host froze)
    answers = json.loads(result.stdout)
    assert set(answers) == set(CATASTROPHIC)
    for pattern, answer in answers.items():
        assert answer.startswith(("No tools matched", "refused: ")) or "." in answer.splitlines()[0], pattern
    assert answers["((a{1,100}){1,100}){1,100}"].startswith("refused: search_tools: bad regex")
    # and the session is still usable
    assert session.execute("print(1)").stdout == "1\n"


def test_concurrent_first_searches_load_the_model_once_and_run_two_at_a_time(
    session: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads = count_model_loads(monkeypatch, wait=2.0)
    active, most = [0], [0]
    lock = threading.Lock()
    real_search = SearchIndex.search

    def counting_search(self: SearchIndex, *args: Any, **kwargs: Any) -> Any:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        try:
            return real_search(self, *args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(SearchIndex, "search", counting_search)
    result = session.execute(
        "import threading\n"
        "texts = []\n"
        "def go():\n"
        "    texts.append(search_tools('is it going to rain tomorrow', detail='name'))\n"
        "threads = [threading.Thread(target=go) for _ in range(32)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print(len(texts), len(set(texts)))\n"
    )
    assert result.error is None, result.traceback
    assert result.stdout == "32 1\n"
    assert len(loads) == 1
    assert most[0] <= _render.MAX_CONCURRENT


def test_a_search_result_is_capped(session: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_render, "MAX_RESULT_CHARS", 3000)  # the sample stubs are small: make the cap bite
    result = session.execute("text = search_tools('record lead chart document', detail='full', limit=50)\nprint(text)")
    assert result.error is None, result.traceback
    assert 1000 < len(result.stdout) <= 3000 + 200
    assert "[not shown, the result is capped at 3000 characters: " in result.stdout
    assert MAX_RESULT_CHARS == 64_000


def test_a_script_looping_over_long_searches_is_refused_once_its_search_budget_is_spent(
    docker_engine: object, test_config: SandboxConfig, tree: Path, pool: BackgroundPool, model: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("TOOLTREE_EMBEDDING_MODEL", str(model))
    monkeypatch.setenv(EMBEDDINGS_ENV, "auto")
    monkeypatch.setattr(calls, "SEARCH_BURST_SECONDS", 0.0)  # the first search overdraws it, whatever it costs
    monkeypatch.setattr(calls, "SEARCH_RATE", 1e-6)
    query = ("find the leads then convert the price to euros and also email the chart. " * 20)[:1000]
    code = (
        "import json, threading\n"
        "out = []\n"
        "def go():\n"
        "    for _ in range(5):\n"
        "        try:\n"
        f"            search_tools({query!r}, detail='full', limit=50)\n"
        "            out.append('ok')\n"
        "        except RuntimeError as e:\n"
        "            out.append(str(e))\n"
        "threads = [threading.Thread(target=go) for _ in range(4)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print(json.dumps(out))\n"
    )
    with Sandbox(config=test_config, tree=tree, tools=McpBridge(tree, pool.pool), tool_loop=pool.loop) as sandbox:
        result = sandbox.execute(code)
        assert result.error is None, result.traceback
        outcomes = json.loads(result.stdout)
        assert len(outcomes) == 20 and outcomes.count("ok") == 1
        refused = [o for o in outcomes if o != "ok"]
        assert all(o.startswith("search_tools: budget exhausted: tool searches may take 0 s") for o in refused), refused
        assert sandbox.execute("print(1)").stdout == "1\n"  # the session goes on
